// Element data types of the tile language (docs/language.md#dtypes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "pypto_pro/hw_tables.h"

namespace pypto_pro::ir {

// Declared once in hw_tables.h (the dtype list, sizes and device types).
using hw::DataType;

struct DataTypeInfo {
  std::string_view name;     // "fp16": used in IR text, messages and artefact names
  std::string_view pl_name;  // "DT_FP16": the name in the pl namespace
  std::string_view ctype;    // device C++ storage type ("pto::half"); empty if unsupported
  int bits;
  bool is_float;
  bool is_signed;
  bool supported;  // false: named, not supported yet
};

const DataTypeInfo& Info(DataType dtype);
inline std::string_view Name(DataType dtype) { return Info(dtype).name; }
inline int Bytes(DataType dtype) { return (Info(dtype).bits + 7) / 8; }
inline bool IsFloat(DataType dtype) { return Info(dtype).is_float; }
inline bool IsInteger(DataType dtype) { return !Info(dtype).is_float && dtype != DataType::kBool; }
std::optional<DataType> DataTypeFromName(std::string_view name);  // accepts "fp16" or "DT_FP16"

}  // namespace pypto_pro::ir
