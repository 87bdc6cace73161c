// A kernel's IR as runnable pypto_pro Python: the `pipeline_generated.py` artefact of
// pl.jit(pipeline=...) (docs/jit.md#artefacts), the scheduled loop with its cross-core flags written
// out, to run as a plain kernel or to start hand edits from.
#pragma once

#include <string>
#include <vector>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::codegen {

struct PythonKernelOptions {
  std::vector<std::string> header;  // comment lines at the top of the file (without "# ")
  std::string decorator_args;       // inside @pl.jit(...): "auto_mutex=True, arch='a5'"
  std::string function_name;        // the kernel's name in the module
};

// The module text. What the language cannot spell yet (a few internal ops) makes the module raise
// NotImplementedError on import, naming the construct and its line, rather than run differently.
std::string KernelAsPython(const ir::Function& func, const PythonKernelOptions& options);

// The pl enum a keyword option's values are members of ("pl.PipeType"), or "" when its values are
// spelt as strings.
std::string PythonEnumOf(const ir::OpDef& op, const ir::KwargSpec& kwarg);

}  // namespace pypto_pro::codegen
