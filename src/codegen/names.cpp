#include "names.h"

#include <cstdio>

#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/support/text.h"

namespace pypto_pro::codegen {

using namespace ir;

std::string DeviceType(DataType dtype) {
  std::string_view ctype = Info(dtype).ctype;
  if (ctype.empty()) {
    Fail(ErrorKind::kUnsupported, {}, "dtype " + std::string(Name(dtype)) + " is not supported yet");
  }
  return std::string(ctype);
}

std::string CppIdent(const std::string& prefix, const std::string& name) {
  std::string out = prefix;
  for (unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "_x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string CString(const std::string& s) { return QuotedLiteral(s, '"'); }

std::string ScalarCType(DataType dtype) {
  if (dtype == DataType::kFP16 || dtype == DataType::kBF16) {
    Fail(ErrorKind::kUnsupported, {}, "fp16/bf16 scalars are not supported; use fp32");
  }
  return DeviceType(dtype);
}

const Var* TilingParam(const Function& func) {
  for (const Var& p : func.params) {
    if (p->type.kind == TypeKind::kStruct) return &p;
  }
  return nullptr;
}

}  // namespace pypto_pro::codegen
