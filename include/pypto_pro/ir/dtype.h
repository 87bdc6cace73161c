// Element data types of the tile language (docs/language.md#types-and-tiles).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pypto_pro::ir {

enum class DataType : uint8_t {
  kBool, kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64, kFP16, kBF16, kFP32,
  // Named but not supported yet: kernels that mention them get a clear UnsupportedFeatureError.
  kInt4, kUInt4, kFP8E4M3FN, kFP8E5M2, kFP8E8M0, kFP4E2M1, kFP4E1M2, kHF8, kHF4,
  kCount
};

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
