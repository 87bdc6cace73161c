#include "names.h"

#include <cstdio>

#include "pypto_pro/codegen/codegen.h"

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

std::string CString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

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
