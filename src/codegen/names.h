// What the generated sources call things, shared by the kernel body writer (codegen.cpp), the
// launcher writer and the sanitizer instrumentation: identifiers, string literals, C++ types.
#pragma once

#include <string>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::codegen {

// `prefix` + `name` as a C++ identifier: characters outside [A-Za-z0-9_] become _xHH.
std::string CppIdent(const std::string& prefix, const std::string& name);
// `s` as a C/C++ string literal (quotes, backslashes and non-printable bytes escaped).
std::string CString(const std::string& s);
// The C++ type of a scalar variable or parameter (fp16/bf16 scalars are refused).
std::string ScalarCType(ir::DataType dtype);
// A parameter's field in KernelArgs and its argument of call_kernel.
inline std::string FieldName(const ir::Var& param) { return CppIdent("a_", param->name); }
// A pl.Ptr parameter's buffer size (bytes) in KernelArgs and call_kernel: a prefix of its own, so no
// parameter's field can meet it.
inline std::string BytesFieldName(const ir::Var& param) { return CppIdent("n_", param->name); }
// The TilingData parameter, or nullptr.
const ir::Var* TilingParam(const ir::Function& func);

}  // namespace pypto_pro::codegen
