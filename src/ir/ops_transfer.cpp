// Data movement (docs/language.md#data-movement): GM <-> tile transfers and tile -> tile moves.
#include "op_checks.h"
#include "op_tables.h"

namespace pypto_pro::ir {

namespace {

constexpr uint32_t kLoadDst = Bit(MemorySpace::kVec) | Bit(MemorySpace::kMat);
constexpr uint32_t kStoreSrc = Bit(MemorySpace::kVec) | Bit(MemorySpace::kAcc);

bool Is(const TileType& t, MemorySpace m) { return t.memory == m; }


// The dtypes the fixpipe writes an accumulator as without quantisation: fp32 as fp32, fp16 or
// bf16 (rounded to nearest even); int32 as int32. Accumulators are fp32 or int32.
bool FixpipeConverts(DataType from, DataType to) {
  if (from == DataType::kFP32) return to == DataType::kFP32 || to == DataType::kFP16 || to == DataType::kBF16;
  return from == DataType::kInt32 && to == DataType::kInt32;
}

std::string FixpipeTargets(DataType from) {
  if (from == DataType::kFP32) return "fp32, fp16 or bf16";
  if (from == DataType::kInt32) return "int32";
  return "nothing (accumulators are fp32 or int32)";
}

// Mat -> Bias: the bias table holds fp32 (widened from fp16/bf16) or int32.
DataType BiasTableType(DataType from) {
  if (from == DataType::kFP32 || from == DataType::kFP16 || from == DataType::kBF16) return DataType::kFP32;
  return from == DataType::kInt32 ? DataType::kInt32 : DataType::kCount;
}

// store / store_tile: a Vec tile has the tensor's dtype; an Acc tile goes through the fixpipe.
void CheckStore(const StmtNode& call) {
  const TileType& tile = TileOf(call, 1);
  const DataType tensor = call.args[0]->type.dtype;
  const std::string what = CallName(call) + ": ";
  if (Is(tile, MemorySpace::kAcc)) {
    if (!FixpipeConverts(tile.dtype, tensor)) {
      Fail(ErrorKind::kType, OperandSpan(call, 0),
           what + "an " + std::string(Name(tile.dtype)) + " Acc tile stores to " + FixpipeTargets(tile.dtype) +
               " tensors, not " + std::string(Name(tensor)) + " (quantising stores are not implemented yet)");
    }
  } else if (tile.dtype != tensor) {
    Fail(ErrorKind::kType, OperandSpan(call, 1),
         what + "dtype mismatch: operand 'src_tile' is " + std::string(Name(tile.dtype)) + " but 'dst_tensor' is " +
             std::string(Name(tensor)));
  }
}

// move: the data paths of docs/language.md#data-movement (plus Mat -> Bias, which feeds matmul's bias, and
// Vec -> Vec), their dtype conversions, and the shape rule of moves out of L1.
void CheckMove(const StmtNode& call) {
  const TileType &dst = TileOf(call, 0), &src = TileOf(call, 1);
  const std::string what = CallName(call) + ": ";
  const bool from_mat = Is(src, MemorySpace::kMat);
  const bool to_l0 = Is(dst, MemorySpace::kLeft) || Is(dst, MemorySpace::kRight) || Is(dst, MemorySpace::kBias);
  const bool path = (from_mat && (to_l0 || Is(dst, MemorySpace::kVec))) ||
                    (Is(src, MemorySpace::kAcc) && Is(dst, MemorySpace::kVec)) ||
                    (Is(src, MemorySpace::kVec) && (Is(dst, MemorySpace::kMat) || Is(dst, MemorySpace::kVec)));
  if (!path) {
    Fail(ErrorKind::kType, call.span,
         what + "there is no data path from " + std::string(Name(src.memory)) + " to " +
             std::string(Name(dst.memory)) + "; moves go Mat -> Left/Right/Bias/Vec, Acc -> Vec, Vec -> Mat/Vec");
  }
  bool dtype_ok = dst.dtype == src.dtype;
  std::string allowed = std::string(Name(src.dtype));
  if (Is(src, MemorySpace::kAcc)) {
    dtype_ok = FixpipeConverts(src.dtype, dst.dtype);
    allowed = FixpipeTargets(src.dtype);
  } else if (Is(dst, MemorySpace::kBias)) {
    DataType table = BiasTableType(src.dtype);
    dtype_ok = dst.dtype == table;
    allowed = table == DataType::kCount ? "nothing (the bias table takes fp32, fp16, bf16 or int32)"
                                        : std::string(Name(table));
  }
  if (!dtype_ok) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "a move from " + std::string(Name(src.dtype)) + " " + std::string(Name(src.memory)) + " to " +
             std::string(Name(dst.memory)) + " writes " + allowed + ", not " + std::string(Name(dst.dtype)));
  }
  if (Is(dst, MemorySpace::kBias) && dst.Rows() != 1) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "the bias table holds one row: 'dst_tile' is " + ShapeText(dst));
  }
  if (from_mat && to_l0 && (dst.Rows() != src.Rows() || dst.Cols() != src.Cols())) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "a move out of Mat keeps the shape: 'src_tile' is " + ShapeText(src) + " but 'dst_tile' is " +
             ShapeText(dst));
  }
  // acc_to_vec_mode: which AIV's UB the fixpipe writes, or how it splits between both (-1: not given,
  // SingleModeVec0).
  for (const Attr& a : call.attrs) {
    if (a.name != "acc_to_vec_mode" || a.value < 0) continue;
    if (!(Is(src, MemorySpace::kAcc) && Is(dst, MemorySpace::kVec))) {
      Fail(ErrorKind::kValue, call.span, what + "acc_to_vec_mode= applies to a move from Acc to Vec only");
    }
  }
}

KwargSpec ReluPreMode() {
  return KwargSpec{"relu_pre_mode", AttrKind::kEnum, 0, {"NoRelu", "NormalRelu"}, false};
}

OpDef Transfer(std::string_view name, bool is_load, bool by_tile_index, std::string_view device_fn,
               std::string_view doc) {
  std::string_view index_name = by_tile_index ? "tile_idx" : "offsets";
  OpDef op{name, is_load ? Pipe::kMTE2 : Pipe::kMTE3, is_load ? PipeRule::kFixed : PipeRule::kBySourceTile,
           WindowRule::kTransferTile, {}, true, kAllSupportedDTypes, "", device_fn, {}, doc};
  auto later = [](std::string_view kwarg) { return KwargSpec{kwarg, AttrKind::kInt, 0, {}, false}; };
  if (is_load) {
    op.operands = {{"dst_tile", OperandKind::kTile, Access::kWrite, kLoadDst},
                   {"src_tensor", OperandKind::kTensor, Access::kRead},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    op.kwargs = {KwargSpec{"order", AttrKind::kAxes, -1, {}}};
  } else {
    // The tile's dtype is checked against the tensor's by CheckStore: Acc tiles convert.
    op.operands = {{"dst_tensor", OperandKind::kTensor, Access::kWrite},
                   {"src_tile", OperandKind::kTile, Access::kRead, kStoreSrc, kAllSupportedDTypes},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    op.kwargs = {KwargSpec{"atomic", AttrKind::kEnum, 0, {"AtomicNone", "AtomicAdd"}, false},
                 ReluPreMode(), later("scale"), later("order"),
                 KwargSpec{"phase", AttrKind::kEnum, 0, {"Unspecified", "Partial", "Final"}, false}};
    op.check = &CheckStore;
  }
  if (by_tile_index) op.operands[2].unit = OffsetUnit::kTiles;
  return op;
}

}  // namespace

void AddTransferOps(std::vector<OpDef>& ops) {
  ops.push_back(Transfer("load", true, false, "pto::load", "GM -> Vec/Mat at element offsets"));
  ops.push_back(Transfer("load_tile", true, true, "pto::load_tile", "GM -> Vec/Mat at tile_idx x tile shape"));
  ops.push_back(Transfer("store", false, false, "pto::store", "Vec/Acc -> GM at element offsets"));
  ops.push_back(Transfer("store_tile", false, true, "pto::store_tile", "Vec/Acc -> GM at tile_idx x tile shape"));

  // CheckMove decides which memory pairs are data paths; the pipe follows the path
  // (PipeRule::kByMove), OpDef::pipe covers the rest (Vec -> Vec).
  OpDef move{"move", Pipe::kV, PipeRule::kByMove, WindowRule::kSource,
             {{"dst_tile", OperandKind::kTile, Access::kWrite, kAnyTileMemory, kAllSupportedDTypes, ShapeRole::kAny},
              {"src_tile", OperandKind::kTile, Access::kRead, kAnyTileMemory, kAllSupportedDTypes, ShapeRole::kAny}},
             false, kAllSupportedDTypes, "", "pto::move",
             {KwargSpec{"offset", AttrKind::kInt, 0, {}, false},
              // Passed to the device as its index, -1 when not given (SingleModeVec0).
              KwargSpec{"acc_to_vec_mode", AttrKind::kEnum, -1,
                        {"SingleModeVec0", "SingleModeVec1", "DualModeSplitM", "DualModeSplitN"}, true},
              ReluPreMode(), KwargSpec{"scale", AttrKind::kInt, 0, {}, false}},
             "tile -> tile: the source's valid window, converted on the Acc -> Vec and Mat -> Bias paths"};
  move.check = &CheckMove;
  ops.push_back(move);
}

}  // namespace pypto_pro::ir
