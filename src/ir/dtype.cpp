#include "pypto_pro/ir/dtype.h"

#include <array>

namespace pypto_pro::ir {

namespace {
constexpr std::array<DataTypeInfo, size_t(DataType::kCount)> BuildInfos() {
  std::array<DataTypeInfo, size_t(DataType::kCount)> out{};
  for (size_t i = 0; i < out.size(); ++i) {
    const hw::DataTypeRow& r = hw::kDataTypes[i];
    out[i] = {r.name, r.pl_name, r.ctype, r.bits, r.is_float, r.is_signed, r.supported};
  }
  return out;
}
constexpr std::array<DataTypeInfo, size_t(DataType::kCount)> kInfos = BuildInfos();
}  // namespace

const DataTypeInfo& Info(DataType dtype) { return kInfos[size_t(dtype)]; }

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (size_t i = 0; i < kInfos.size(); ++i) {
    if (kInfos[i].name == name || kInfos[i].pl_name == name) return DataType(i);
  }
  return std::nullopt;
}

}  // namespace pypto_pro::ir
