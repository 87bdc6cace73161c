// Shared declarations of the pybind11 module pypto_pro._C.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/runtime/stream.h"

namespace pypto_pro::python {

namespace py = pybind11;

// A runtime stream as Python sees it. Keeps the Python tensors of queued launches alive until the
// stream has run them (users may pass temporaries); released with the GIL held.
class PyStream {
 public:
  PyStream();                                  // a new stream
  explicit PyStream(runtime::Stream* shared);  // wraps the default stream
  ~PyStream();

  runtime::Stream& stream() { return *stream_; }
  // Holds `objects` until launch `seq` completes. Must hold the GIL.
  void KeepAlive(uint64_t seq, PyObject* const* objects, size_t count);
  // Releases what completed launches held. Must hold the GIL.
  void Retire();
  // Waits (GIL released; Ctrl-C interrupts it) and raises KernelFault for a fault since the last
  // synchronisation; `timeout` < 0 waits as long as it takes.
  void Synchronize(double timeout);
  // Retire() on every live stream (after pypto_pro.runtime.synchronize()). Must hold the GIL.
  static void RetireAll();

 private:
  std::unique_ptr<runtime::Stream> owned_;
  runtime::Stream* stream_;
  // (launch seq, object) from in_flight_head_ on, oldest first; guarded by the GIL.
  std::vector<std::pair<uint64_t, PyObject*>> in_flight_;
  size_t in_flight_head_ = 0;
};

// A parsed kernel as Python holds it (pypto_pro._C.ir.Function).
struct PyFunction {
  std::shared_ptr<ir::Function> func;
};

// What a wait of the calling thread can be interrupted by: Ctrl-C on Python's main thread (other
// threads never see signals). Takes the GIL itself; leaves the Python error set when it fires.
runtime::WaitOptions PythonWaitOptions(double timeout);
// Turns runtime::WaitInterrupted into the Python error the interrupt check left set. Holds the GIL.
[[noreturn]] void RaiseInterrupted();

// The stream launches use when none is given.
PyStream& DefaultPyStream();
// The stream of kernel[None, n] on this thread: set by pypto_pro.runtime.stream(s), else the default.
PyStream& CurrentPyStream();

void BindIR(py::module_& m);
void BindJit(py::module_& m);
void BindRuntime(py::module_& m);
void BindLaunch(py::module_& m);

}  // namespace pypto_pro::python
