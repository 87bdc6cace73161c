#include "pypto_pro/ir/dtype.h"

#include <array>

namespace pypto_pro::ir {

namespace {
constexpr std::array<DataTypeInfo, size_t(DataType::kCount)> kInfos = {{
    {"bool", "DT_BOOL", "bool", 8, false, false, true},
    {"int8", "DT_INT8", "int8_t", 8, false, true, true},
    {"int16", "DT_INT16", "int16_t", 16, false, true, true},
    {"int32", "DT_INT32", "int32_t", 32, false, true, true},
    {"int64", "DT_INT64", "int64_t", 64, false, true, true},
    {"uint8", "DT_UINT8", "uint8_t", 8, false, false, true},
    {"uint16", "DT_UINT16", "uint16_t", 16, false, false, true},
    {"uint32", "DT_UINT32", "uint32_t", 32, false, false, true},
    {"uint64", "DT_UINT64", "uint64_t", 64, false, false, true},
    {"fp16", "DT_FP16", "pto::half", 16, true, true, true},
    {"bf16", "DT_BF16", "pto::bfloat16", 16, true, true, true},
    {"fp32", "DT_FP32", "float", 32, true, true, true},
    {"int4", "DT_INT4", "", 4, false, true, false},
    {"uint4", "DT_UINT4", "", 4, false, false, false},
    {"fp8e4m3fn", "DT_FP8E4M3FN", "", 8, true, true, false},
    {"fp8e5m2", "DT_FP8E5M2", "", 8, true, true, false},
    {"fp8e8m0", "DT_FP8E8M0", "", 8, true, false, false},
    {"fp4e2m1", "DT_FP4E2M1", "", 4, true, true, false},
    {"fp4e1m2", "DT_FP4E1M2", "", 4, true, true, false},
    {"hf8", "DT_HF8", "", 8, true, true, false},
    {"hf4", "DT_HF4", "", 4, true, true, false},
}};
}  // namespace

const DataTypeInfo& Info(DataType dtype) { return kInfos[size_t(dtype)]; }

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (size_t i = 0; i < kInfos.size(); ++i) {
    if (kInfos[i].name == name || kInfos[i].pl_name == name) return DataType(i);
  }
  return std::nullopt;
}

}  // namespace pypto_pro::ir
