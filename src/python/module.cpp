#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "pypto_pro core: IR, passes, codegen, JIT driver and the simulated Ascend device.";
  pypto_pro::python::BindJit(m);  // first: registers the exception translators
  pypto_pro::python::BindIR(m);
  pypto_pro::python::BindRuntime(m);
  pypto_pro::python::BindLaunch(m);
  m.attr("LINE_FILE_SHIFT") = PTO_LINE_FILE_SHIFT;  // IR lines carry their file above these bits
}
