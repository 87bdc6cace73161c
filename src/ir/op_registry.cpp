#include "pypto_pro/ir/op_registry.h"

#include <tuple>

namespace pypto_pro::ir {

namespace {

constexpr uint32_t kLoadDst = Bit(MemorySpace::kVec) | Bit(MemorySpace::kMat);
constexpr uint32_t kStoreSrc = Bit(MemorySpace::kVec) | Bit(MemorySpace::kAcc);
constexpr std::string_view kLanguageIssue = "the tile language, tier 1 (issue 4)";
constexpr std::string_view kTier2 = "the tile language, tier 2";

OpDef Transfer(std::string_view name, bool is_load, bool by_tile_index, std::string_view device_fn,
               std::string_view doc) {
  std::string_view index_name = by_tile_index ? "tile_idx" : "offsets";
  OpDef op{name, is_load ? Pipe::kMTE2 : Pipe::kMTE3, is_load ? PipeRule::kFixed : PipeRule::kBySourceTile,
           WindowRule::kTransferTile, {}, true, kAllSupportedDTypes, "", device_fn, {}, doc};
  if (is_load) {
    op.operands = {{"dst_tile", OperandKind::kTile, Access::kWrite, kLoadDst},
                   {"src_tensor", OperandKind::kTensor, Access::kRead, 0},
                   {index_name, OperandKind::kOffsets, Access::kRead, 0}};
    op.kwargs = {{"order", false, kTier2}};
  } else {
    op.operands = {{"dst_tensor", OperandKind::kTensor, Access::kWrite, 0},
                   {"src_tile", OperandKind::kTile, Access::kRead, kStoreSrc},
                   {index_name, OperandKind::kOffsets, Access::kRead, 0}};
    op.kwargs = {{"atomic", false, kTier2}, {"relu_pre_mode", false, kTier2}, {"scale", false, kTier2},
                 {"order", false, kTier2}, {"phase", false, kTier2}};
  }
  return op;
}

OpDef Elementwise(std::string_view name, std::string_view scalar_form, std::string_view device_fn,
                  std::string_view doc) {
  return OpDef{name, Pipe::kV, PipeRule::kFixed, WindowRule::kDestination,
               {{"out", OperandKind::kTile, Access::kWrite, kVecOnly},
                {"lhs", OperandKind::kTile, Access::kRead, kVecOnly},
                {"rhs", OperandKind::kTile, Access::kRead, kVecOnly}},
               true, kNumericDTypes, scalar_form, device_fn, {}, doc};
}

OpDef ElementwiseScalar(std::string_view name, std::string_view device_fn, std::string_view doc) {
  return OpDef{name, Pipe::kV, PipeRule::kFixed, WindowRule::kDestination,
               {{"out", OperandKind::kTile, Access::kWrite, kVecOnly},
                {"lhs", OperandKind::kTile, Access::kRead, kVecOnly},
                {"scalar", OperandKind::kScalar, Access::kRead, 0}},
               true, kNumericDTypes, "", device_fn, {}, doc};
}

std::vector<OpDef> BuildOps() {
  std::vector<OpDef> ops;
  ops.push_back(Transfer("load", true, false, "pto::load", "GM -> Vec/Mat at element offsets"));
  ops.push_back(Transfer("load_tile", true, true, "pto::load_tile", "GM -> Vec/Mat at tile_idx x tile shape"));
  ops.push_back(Transfer("store", false, false, "pto::store", "Vec/Acc -> GM at element offsets"));
  ops.push_back(Transfer("store_tile", false, true, "pto::store_tile", "Vec/Acc -> GM at tile_idx x tile shape"));

  ops.push_back(Elementwise("add", "adds", "pto::add", "out = lhs + rhs"));
  ops.push_back(Elementwise("sub", "subs", "pto::sub", "out = lhs - rhs"));
  ops.push_back(Elementwise("mul", "muls", "pto::mul", "out = lhs * rhs"));
  ops.push_back(Elementwise("div", "divs", "pto::div", "out = lhs / rhs"));
  ops.push_back(Elementwise("maximum", "maxs", "pto::maximum", "out = max(lhs, rhs)"));
  ops.push_back(Elementwise("minimum", "mins", "pto::minimum", "out = min(lhs, rhs)"));
  ops.push_back(ElementwiseScalar("adds", "pto::adds", "out = lhs + scalar"));
  ops.push_back(ElementwiseScalar("subs", "pto::subs", "out = lhs - scalar"));
  ops.push_back(ElementwiseScalar("muls", "pto::muls", "out = lhs * scalar"));
  ops.push_back(ElementwiseScalar("divs", "pto::divs", "out = lhs / scalar"));
  ops.push_back(ElementwiseScalar("maxs", "pto::maxs", "out = max(lhs, scalar)"));
  ops.push_back(ElementwiseScalar("mins", "pto::mins", "out = min(lhs, scalar)"));

  // auto_mutex: lock / unlock, on the pipe of the guarded op (attr "pipe"), every TileGroup mutex id
  // its tile operands carry.
  constexpr uint32_t kAnyTileMemory = (1u << uint32_t(MemorySpace::kCount)) - 2;
  for (auto [name, fn, doc] : {std::tuple{"auto_mutex_lock", "pto::auto_mutex_lock", "lock the tiles' mutex ids"},
                               std::tuple{"auto_mutex_unlock", "pto::auto_mutex_unlock", "unlock them"}}) {
    OpDef op{name, Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
             {{"tiles", OperandKind::kTiles, Access::kRead, kAnyTileMemory}},
             false, kAllSupportedDTypes, "", fn, {}, doc};
    op.internal = true;
    ops.push_back(op);
  }
  return ops;
}

}  // namespace

Pipe OpDef::PipeFor(const std::vector<MemorySpace>& tile_memories) const {
  if (pipe_rule == PipeRule::kBySourceTile) {
    for (MemorySpace m : tile_memories) {
      if (m == MemorySpace::kAcc) return Pipe::kFIX;
    }
  }
  return pipe;
}

const std::vector<OpDef>& AllOps() {
  static const std::vector<OpDef> ops = BuildOps();
  return ops;
}

const OpDef* FindOp(std::string_view name) {
  for (const OpDef& op : AllOps()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

const std::vector<PlannedOp>& PlannedOps() {
  static const std::vector<PlannedOp> planned = [] {
    std::vector<PlannedOp> out;
    for (std::string_view name :
         {"move", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "relu", "expands", "cast", "eq", "ne", "lt",
          "le", "gt", "ge", "select", "add_relu", "sub_relu", "addc", "mul_add_dst", "fused_mul_add",
          "fused_mul_add_relu", "axpy", "row_sum", "row_max", "row_min", "col_sum", "col_max", "col_min", "sum",
          "argmax", "argmin", "row_expand_add", "row_expand_sub", "row_expand_mul", "row_expand_div",
          "row_expand_max", "row_expand_min", "col_expand_add", "col_expand_sub", "col_expand_mul",
          "col_expand_div", "col_expand_max", "col_expand_min", "expand_max", "expand_min", "expand_mul",
          "expand_sub", "expand_div", "matmul", "matmul_acc", "printf", "pto_assert", "set_validshape", "getval",
          "setval", "system.sync_src", "system.sync_dst", "system.mutex_lock", "system.mutex_unlock",
          "system.bar_all", "system.set_cross_core", "system.wait_cross_core", "mutex"}) {
      out.push_back({name, kLanguageIssue});
    }
    for (std::string_view name :
         {"and_", "shl", "shr", "xor", "add_relu_cast", "sub_relu_cast", "mul_cast", "partadd", "partmax", "partmin",
          "partmul", "transpose", "trap", "system.sync_all", "make_tensor", "addptr", "make_ptr", "set_stride",
          "insert"}) {
      out.push_back({name, kTier2});
    }
    return out;
  }();
  return planned;
}

}  // namespace pypto_pro::ir
