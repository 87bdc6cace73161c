// GM <-> tile transfers (LANGUAGE.md section 4).
#include "op_tables.h"

namespace pypto_pro::ir {

namespace {

constexpr uint32_t kLoadDst = Bit(MemorySpace::kVec) | Bit(MemorySpace::kMat);
constexpr uint32_t kStoreSrc = Bit(MemorySpace::kVec) | Bit(MemorySpace::kAcc);
constexpr std::string_view kTier2 = "the tile language, tier 2";

OpDef Transfer(std::string_view name, bool is_load, bool by_tile_index, std::string_view device_fn,
               std::string_view doc) {
  std::string_view index_name = by_tile_index ? "tile_idx" : "offsets";
  OpDef op{name, is_load ? Pipe::kMTE2 : Pipe::kMTE3, is_load ? PipeRule::kFixed : PipeRule::kBySourceTile,
           WindowRule::kTransferTile, {}, true, kAllSupportedDTypes, "", device_fn, {}, doc};
  auto later = [](std::string_view kwarg) { return KwargSpec{kwarg, AttrKind::kInt, 0, {}, false, kTier2}; };
  if (is_load) {
    op.operands = {{"dst_tile", OperandKind::kTile, Access::kWrite, kLoadDst},
                   {"src_tensor", OperandKind::kTensor, Access::kRead},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    op.kwargs = {later("order")};
  } else {
    op.operands = {{"dst_tensor", OperandKind::kTensor, Access::kWrite},
                   {"src_tile", OperandKind::kTile, Access::kRead, kStoreSrc},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    op.kwargs = {KwargSpec{"atomic", AttrKind::kEnum, 0, {"AtomicNone", "AtomicAdd"}, false, kTier2},
                 later("relu_pre_mode"), later("scale"), later("order"), later("phase")};
  }
  return op;
}

}  // namespace

void AddTransferOps(std::vector<OpDef>& ops) {
  ops.push_back(Transfer("load", true, false, "pto::load", "GM -> Vec/Mat at element offsets"));
  ops.push_back(Transfer("load_tile", true, true, "pto::load_tile", "GM -> Vec/Mat at tile_idx x tile shape"));
  ops.push_back(Transfer("store", false, false, "pto::store", "Vec/Acc -> GM at element offsets"));
  ops.push_back(Transfer("store_tile", false, true, "pto::store_tile", "Vec/Acc -> GM at tile_idx x tile shape"));
}

}  // namespace pypto_pro::ir
