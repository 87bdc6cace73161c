// Data movement (docs/language.md#data-movement): GM <-> tile transfers and tile -> tile moves.
#include <tuple>

#include "op_checks.h"
#include "op_tables.h"
#include "pypto_pro/ir/analysis.h"

namespace pypto_pro::ir {

namespace {

constexpr uint32_t kLoadDst = Bit(MemorySpace::kVec) | Bit(MemorySpace::kMat);
constexpr uint32_t kStoreSrc = Bit(MemorySpace::kVec) | Bit(MemorySpace::kAcc);

bool Is(const TileType& t, MemorySpace m) { return t.memory == m; }


int64_t AttrValue(const StmtNode& call, std::string_view name, int64_t fallback) {
  for (const Attr& a : call.attrs) {
    if (a.name == name) return a.value;
  }
  return fallback;
}

// The fixpipe options a statement sets: relu_pre_mode=NormalRelu, scale= (-1: not given).
bool HasRelu(const StmtNode& call) { return AttrValue(call, "relu_pre_mode", 0) > 0; }
// A compile-time scale=, or a per-channel (a Scaling tile) or run-time (a scalar) one: the op's
// operand named scale (store_fp, store_scaled, move_fp, ...).
bool HasScale(const StmtNode& call) {
  if (AttrValue(call, "scale", -1) >= 0) return true;
  for (const OperandSpec& o : call.op->operands) {
    if (o.name == "scale") return true;
  }
  return false;
}

// The dtypes the fixpipe writes an accumulator as: fp32 as fp32, fp16 or bf16 (rounded to nearest
// even), or int8 with a quantising scale=; int32 as int32, or with a dequantising scale= as fp16,
// bf16 or int8.
bool FixpipeConverts(DataType from, DataType to, bool scaled) {
  if (from == DataType::kFP32) {
    return to == DataType::kFP32 || to == DataType::kFP16 || to == DataType::kBF16 || (scaled && to == DataType::kInt8);
  }
  if (from != DataType::kInt32) return false;
  return to == DataType::kInt32 ||
         (scaled && (to == DataType::kFP16 || to == DataType::kBF16 || to == DataType::kInt8));
}

std::string FixpipeTargets(DataType from) {
  if (from == DataType::kFP32) return "fp32, fp16 or bf16 (int8 with scale=)";
  if (from == DataType::kInt32) return "int32 (fp16, bf16 or int8 with scale=)";
  return "nothing (accumulators are fp32 or int32)";
}

// relu_pre_mode= and scale= are the fixpipe's: a source outside Acc has no such stage.
void CheckFixpipeOptions(const StmtNode& call, const TileType& src, const std::string& path) {
  if (src.memory == MemorySpace::kAcc) return;
  const std::string what = CallName(call) + ": ";
  if (HasRelu(call)) {
    Fail(ErrorKind::kValue, call.span, what + "relu_pre_mode= is applied by the fixpipe, which only " + path);
  }
  if (HasScale(call)) Fail(ErrorKind::kValue, call.span, what + "scale= is applied by the fixpipe, which only " + path);
}

void CheckFixpipeDtype(const StmtNode& call, const TileType& src, DataType to, size_t to_operand) {
  if (FixpipeConverts(src.dtype, to, HasScale(call))) return;
  const bool needs_scale = FixpipeConverts(src.dtype, to, true);
  Fail(ErrorKind::kType, OperandSpan(call, to_operand),
       CallName(call) + ": an " + std::string(Name(src.dtype)) + " Acc tile " +
           (needs_scale ? "writes " + std::string(Name(to)) + " only with scale= (the fixpipe's quantisation)"
                        : "is written as " + FixpipeTargets(src.dtype) + ", not " + std::string(Name(to))));
}

// Mat -> Bias: the bias table holds fp32 (widened from fp16/bf16) or int32.
DataType BiasTableType(DataType from) {
  if (from == DataType::kFP32 || from == DataType::kFP16 || from == DataType::kBF16) return DataType::kFP32;
  return from == DataType::kInt32 ? DataType::kInt32 : DataType::kCount;
}

// Element types atomic=AtomicAdd accumulates into GM.
constexpr uint32_t kAtomicDTypes = Bit(DataType::kFP32) | Bit(DataType::kFP16) | Bit(DataType::kBF16) |
                                   Bit(DataType::kInt32) | Bit(DataType::kInt16) | Bit(DataType::kInt8);

// store / store_tile: a Vec tile has the tensor's dtype; an Acc tile goes through the fixpipe.
void CheckStore(const StmtNode& call) {
  const TileType& tile = TileOf(call, 1);
  const DataType tensor = call.args[0]->type.dtype;
  const std::string what = CallName(call) + ": ";
  CheckFixpipeOptions(call, tile, "stores from Acc tiles (a Vec tile leaves through MTE3)");
  if (Is(tile, MemorySpace::kAcc)) {
    CheckFixpipeDtype(call, tile, tensor, 0);
  } else if (tile.dtype != tensor) {
    Fail(ErrorKind::kType, OperandSpan(call, 1),
         what + "dtype mismatch: operand 'src_tile' is " + std::string(Name(tile.dtype)) + " but 'dst_tensor' is " +
             std::string(Name(tensor)));
  }
  if (AttrValue(call, "atomic", 0) > 0 && !(kAtomicDTypes & Bit(tensor))) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "atomic=AtomicAdd accumulates fp32, fp16, bf16, int32, int16 or int8 tensors, not " +
             std::string(Name(tensor)));
  }
  if (AttrValue(call, "phase", 0) > 0 && !Is(tile, MemorySpace::kAcc)) {
    Fail(ErrorKind::kValue, call.span,
         what + "phase= is the fixpipe's side of the unit-flag handshake with the cube: it applies to stores from "
                "Acc tiles only");
  }
  const int64_t order = AttrValue(call, "order", -1);
  if (order >= 0 && (order >> 8) > (order & 0xff)) {
    Fail(ErrorKind::kValue, call.span,
         what + "order= must name the axes in ascending order on a store (a transposing store is not a data path); "
                "got [" + std::to_string(order >> 8) + ", " + std::to_string(order & 0xff) + "]");
  }
  if (tile.layout == Layout::kDN && tile.Rows() > 1 && tile.Cols() > 1) {
    Fail(ErrorKind::kValue, OperandSpan(call, 1),
         what + "the DN tile '" + call.args[1]->var->name + "' " + ShapeText(tile) +
             " is column-major, and a store writes row-major tensor rows (a transposing store is not a data path)",
         "move it into an ND Vec tile first: pl.move(nd_tile, dn_tile)");
  }
}

// A DN Vec tile with more than one row and column is column-major: the only GM view it copies as it
// is, is a column-major one (a descending order=). Any other transfer would need a transposing DMA.
bool WideDN(const TileType& t) { return t.layout == Layout::kDN && t.Rows() > 1 && t.Cols() > 1; }

void CheckLoad(const StmtNode& call) {
  const TileType& tile = TileOf(call, 0);
  const int64_t order = AttrValue(call, "order", -1);
  if (!WideDN(tile) || (order >= 0 && (order >> 8) > (order & 0xff))) return;
  Fail(ErrorKind::kValue, call.span,
       CallName(call) + ": the DN tile '" + call.args[0]->var->name + "' " + ShapeText(tile) +
           " is column-major, and only a column-major view of the tensor copies into it as it is",
       "load it with a descending order= (order=[1, 0] on a 2-D tensor: the tile's rows run along the tensor's "
       "columns), or into an ND tile");
}

bool IsPath(const TileType& src, const TileType& dst) {
  const bool to_l0 = Is(dst, MemorySpace::kLeft) || Is(dst, MemorySpace::kRight) || Is(dst, MemorySpace::kBias);
  return (Is(src, MemorySpace::kMat) && (to_l0 || Is(dst, MemorySpace::kVec) || Is(dst, MemorySpace::kScaling))) ||
         (Is(src, MemorySpace::kAcc) && Is(dst, MemorySpace::kVec)) ||
         (Is(src, MemorySpace::kVec) && (Is(dst, MemorySpace::kMat) || Is(dst, MemorySpace::kVec)));
}

// The offset= of a move or insert: [row, col] (a 1-D tile: [col] or [0, col]).
void CheckOffsetRank(const StmtNode& call) {
  if (call.args.size() < 3 || call.op->operands[2].kind != OperandKind::kOffsets) return;
  const size_t given = call.args[2]->operands.size();
  if (given != 2) {
    Fail(ErrorKind::kType, OperandSpan(call, 2),
         CallName(call) + ": offset needs [row, col], got " + std::to_string(given) + " entries");
  }
}

// How the shapes of a move's source and destination relate, by its MoveForm.
void CheckMoveShapes(const StmtNode& call, const TileType& dst, const TileType& src) {
  const std::string what = CallName(call) + ": ";
  const std::string shapes = "'src_tile' is " + ShapeText(src) + " and 'dst_tile' is " + ShapeText(dst);
  switch (MoveFormOf(call)) {
    case MoveForm::kInsert:
      if (!FitsInside(src, dst)) {
        Fail(ErrorKind::kType, OperandSpan(call, 1),
             what + "the inserted tile must fit inside the destination: " + shapes);
      }
      break;
    case MoveForm::kInsertTransposed:
      if (src.Cols() > dst.Rows() || src.Rows() > dst.Cols()) {
        Fail(ErrorKind::kType, OperandSpan(call, 1),
             what + "an NZ tile inserted into a ZN tile lands transposed (the same bytes), so it must fit the "
                    "destination transposed: " + shapes);
      }
      break;
    case MoveForm::kExtractTransposed:
      if (Is(src, MemorySpace::kAcc)) {
        Fail(ErrorKind::kUnsupported, call.span, what + "a transposing offset= move from Acc is not implemented yet");
      }
      break;
    case MoveForm::kExtract:
      if (!FitsInside(dst, src)) {
        Fail(ErrorKind::kType, OperandSpan(call, 0),
             what + "with offset=, the source is either at least the destination in both dims (extract; "
                    "transposed between NZ and ZN tiles) or fits inside it (insert, without fixpipe options): " +
                 shapes);
      }
      if (Is(src, MemorySpace::kAcc) && AttrValue(call, "acc_to_vec_mode", -1) >= 2) {
        Fail(ErrorKind::kUnsupported, call.span,
             what + "offset= with a dual acc_to_vec_mode (a split extract) is not implemented yet");
      }
      break;
    case MoveForm::kTranspose: break;
    case MoveForm::kCopy: {
      const bool from_mat = Is(src, MemorySpace::kMat);
      const bool to_l0 = Is(dst, MemorySpace::kLeft) || Is(dst, MemorySpace::kRight) || Is(dst, MemorySpace::kBias);
      if (from_mat && to_l0 && !Is(dst, MemorySpace::kBias) && (dst.Rows() != src.Rows() || dst.Cols() != src.Cols())) {
        Fail(ErrorKind::kType, OperandSpan(call, 0),
             what + "a move out of Mat keeps the shape (or swaps it between NZ and ZN tiles, which transposes; "
                    "offset= extracts a part): " + shapes);
      }
      break;
    }
  }
}

// UB -> L1 (Vec -> Mat) copies the source's bytes as they are: fractal blocks from an NZ tile into an NZ
// or ZN (transposed) one, rows from an ND tile into an ND one. Any other pairing would leave bytes the
// cube reads as another matrix.
void CheckL1Layouts(const StmtNode& call, const TileType& dst, const TileType& src) {
  if (!Is(src, MemorySpace::kVec) || !Is(dst, MemorySpace::kMat)) return;
  const bool fractal_dst = dst.layout == Layout::kNZ || dst.layout == Layout::kZN;
  const Layout wanted = fractal_dst ? Layout::kNZ : Layout::kND;
  if (src.layout == wanted) return;
  Fail(ErrorKind::kType, OperandSpan(call, 1),
       CallName(call) + ": UB -> L1 copies the source's bytes as they are, so a " + std::string(Name(dst.layout)) +
           " Mat tile takes an " + std::string(Name(wanted)) + " Vec source; 'src_tile' is " +
           std::string(Name(src.layout)),
       fractal_dst ? "convert it in UB first: pl.move(nz_tile, nd_tile) with nz_tile a Vec TileType(..., layout=pl.NZ)"
                   : "");
}

// move / insert: the data paths of docs/language.md#data-movement (plus Mat -> Bias, which feeds
// matmul's bias, and Vec -> Vec), their dtype conversions, and their shapes.
void CheckMove(const StmtNode& call) {
  const TileType &dst = TileOf(call, 0), &src = TileOf(call, 1);
  const std::string what = CallName(call) + ": ";
  if (!IsPath(src, dst)) {
    Fail(ErrorKind::kType, call.span,
         what + "there is no data path from " + std::string(Name(src.memory)) + " to " +
             std::string(Name(dst.memory)) + "; moves go Mat -> Left/Right/Bias/Scaling/Vec, Acc -> Vec, Vec -> Mat/Vec");
  }
  CheckFixpipeOptions(call, src, "moves from Acc tiles (Acc -> Vec)");
  if (Is(src, MemorySpace::kAcc)) {
    CheckFixpipeDtype(call, src, dst.dtype, 0);
  } else {
    bool dtype_ok = dst.dtype == src.dtype;
    std::string allowed = std::string(Name(src.dtype));
    if (Is(dst, MemorySpace::kBias)) {
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
  }
  if (Is(dst, MemorySpace::kScaling) && (dst.Rows() != 1 || dst.Cols() % 16 != 0 || dst.Cols() > 512)) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "a Scaling tile is [1, N] with N a multiple of 16 up to 512: 'dst_tile' is " + ShapeText(dst));
  }
  if (Is(dst, MemorySpace::kBias) && dst.Rows() != 1) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         what + "the bias table holds one row: 'dst_tile' is " + ShapeText(dst));
  }
  CheckOffsetRank(call);
  CheckL1Layouts(call, dst, src);
  CheckMoveShapes(call, dst, src);
  // A per-channel or run-time scale (move_fp / move_scaled): Acc -> Vec, one AIV.
  if (HasScale(call) && AttrValue(call, "scale", -1) < 0) {
    if (!Is(src, MemorySpace::kAcc)) {
      Fail(ErrorKind::kValue, call.span, what + "scale= is applied by the fixpipe: the source must be Acc");
    }
    if (AttrValue(call, "acc_to_vec_mode", -1) >= 2) {
      Fail(ErrorKind::kValue, call.span,
           what + "a per-channel or run-time scale= takes a single-AIV acc_to_vec_mode (SingleModeVec0/1), not a "
                  "dual one (the public move page)");
    }
    const Expr& scale = call.args[2];
    if (scale->type.IsTile()) {
      const TileType& t = *scale->type.tile;
      if (HasRelu(call)) {
        Fail(ErrorKind::kValue, call.span, what + "scale=<Scaling tile> (per-channel) excludes relu_pre_mode=");
      }
      if (t.Rows() != 1 || t.Cols() % 16 != 0 || t.Cols() > 512) {
        Fail(ErrorKind::kType, OperandSpan(call, 2),
             what + "a per-channel Scaling tile is [1, N] with N a multiple of 16 up to 512, got " + ShapeText(t));
      }
    } else if (!(scale->type.dtype == DataType::kFP32 || scale->type.dtype == DataType::kInt32 ||
                 scale->type.dtype == DataType::kInt64 || scale->type.dtype == DataType::kUInt32)) {
      Fail(ErrorKind::kType, OperandSpan(call, 2),
           what + "a run-time scale= is an fp32 scalar (the factor) or an integer one (its fp32 bit pattern), not " +
               std::string(Name(scale->type.dtype)));
    }
  }
  // acc_to_vec_mode: which AIV's UB the fixpipe writes, or how it splits between both (-1: not given,
  // SingleModeVec0).
  if (AttrValue(call, "acc_to_vec_mode", -1) >= 0 && !(Is(src, MemorySpace::kAcc) && Is(dst, MemorySpace::kVec))) {
    Fail(ErrorKind::kValue, call.span, what + "acc_to_vec_mode= applies to a move from Acc to Vec only");
  }
}

KwargSpec ReluPreMode() {
  return KwargSpec{"relu_pre_mode", AttrKind::kEnum, 0, {"NoRelu", "NormalRelu"}};
}
// The fixpipe's per-tensor quantisation factor (-1: none); `tile_form` / `runtime_form`: the ops a
// Scaling tile / a run-time scalar selects.
KwargSpec Scale(std::string_view tile_form = {}, std::string_view runtime_form = {}) {
  KwargSpec k{"scale", AttrKind::kFloat, -1, {}};
  if (!tile_form.empty()) k.choices = {tile_form, runtime_form};
  return k;
}

OpDef Transfer(std::string_view name, bool is_load, bool by_tile_index, std::string_view device_fn,
               std::string_view doc) {
  std::string_view index_name = by_tile_index ? "tile_idx" : "offsets";
  OpDef op{name, is_load ? Pipe::kMTE2 : Pipe::kMTE3, is_load ? PipeRule::kFixed : PipeRule::kBySourceTile,
           WindowRule::kTransferTile, {}, true, kAllSupportedDTypes, "", device_fn, {}, doc};
  if (is_load) {
    op.operands = {{"dst_tile", OperandKind::kTile, Access::kWrite, kLoadDst},
                   {"src_tensor", OperandKind::kTensor, Access::kRead},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    op.kwargs = {KwargSpec{"order", AttrKind::kAxes, -1, {}}};
    op.check = &CheckLoad;
  } else {
    // The tile's dtype is checked against the tensor's by CheckStore: Acc tiles convert.
    op.operands = {{"dst_tensor", OperandKind::kTensor, Access::kWrite},
                   {"src_tile", OperandKind::kTile, Access::kRead, kStoreSrc, kAllSupportedDTypes},
                   {index_name, OperandKind::kOffsets, Access::kRead}};
    const bool elements = std::string(name) == "store";
    op.kwargs = {ReluPreMode(), Scale(elements ? "store_fp" : "store_tile_fp", elements ? "store_scaled" : "store_tile_scaled"),
                 KwargSpec{"order", AttrKind::kAxes, -1, {}},
                 KwargSpec{"atomic", AttrKind::kEnum, 0, {"AtomicNone", "AtomicAdd"}},
                 KwargSpec{"phase", AttrKind::kEnum, 0, {"Unspecified", "Partial", "Final"}}};
    op.check = &CheckStore;
  }
  if (by_tile_index) op.operands[2].unit = OffsetUnit::kTiles;
  return op;
}

// store(..., scale=<Scaling tile>): the per-channel fixpipe path. Exclusive with relu_pre_mode= and
// phase= (the public store page); the tile holds one int64 per column, its low 32 bits an fp32 factor.
void CheckStoreFp(const StmtNode& call) {
  const TileType& tile = TileOf(call, 1);
  const std::string what = CallName(call) + ": ";
  if (!Is(tile, MemorySpace::kAcc)) {
    Fail(ErrorKind::kValue, call.span, what + "a per-channel scale= is applied by the fixpipe: the source must be Acc");
  }
  if (HasRelu(call) || AttrValue(call, "phase", 0) > 0) {
    Fail(ErrorKind::kValue, call.span,
         what + "scale=<Scaling tile> (per-channel) excludes relu_pre_mode= and phase= on the fixpipe");
  }
  const TileType& scaling = TileOf(call, 3);
  if (scaling.Rows() != 1 || scaling.Cols() % 16 != 0 || scaling.Cols() > 512) {
    Fail(ErrorKind::kType, OperandSpan(call, 3),
         what + "a per-channel Scaling tile is [1, N] with N a multiple of 16 up to 512, got " + ShapeText(scaling));
  }
  CheckStore(call);
}

// store(..., scale=<run-time scalar>): an fp32 scalar is the factor, an integer one its fp32 bit
// pattern (the public store page).
void CheckStoreScaled(const StmtNode& call) {
  const DataType t = call.args[3]->type.dtype;
  if (!(t == DataType::kFP32 || t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kUInt32)) {
    Fail(ErrorKind::kType, OperandSpan(call, 3),
         CallName(call) + ": a run-time scale= is an fp32 scalar (the factor) or an integer one (its fp32 bit "
                          "pattern), not " + std::string(Name(t)));
  }
  CheckStore(call);
}

OpDef RuntimeScaledStore(OpDef store, std::string_view name, std::string_view device_fn) {
  store.name = name;
  store.public_name = name == "store_scaled" ? "store" : "store_tile";
  store.device_fn = device_fn;
  store.operands.push_back({"scale", OperandKind::kScalar, Access::kRead});
  std::vector<KwargSpec> kwargs;
  for (const KwargSpec& k : store.kwargs) {
    if (k.name != "scale") kwargs.push_back(k);
  }
  store.kwargs = kwargs;
  store.check = &CheckStoreScaled;
  store.doc = "store through the fixpipe with a run-time per-tensor scale";
  return store;
}

OpDef PerChannelStore(OpDef store, std::string_view name, std::string_view device_fn) {
  store.name = name;
  store.public_name = name == "store_fp" ? "store" : "store_tile";
  store.device_fn = device_fn;
  store.operands.push_back({"scale", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kScaling),
                            Bit(DataType::kInt64)});
  std::vector<KwargSpec> kwargs;
  for (const KwargSpec& k : store.kwargs) {
    if (k.name != "scale") kwargs.push_back(k);
  }
  store.kwargs = kwargs;
  store.check = &CheckStoreFp;
  store.doc = "store from Acc through the fixpipe's per-channel scale: column c times the Scaling tile's factor c";
  return store;
}

}  // namespace

// init_output(tensor, offset, size, value): constant operands are checked here, the rest at run time.
void CheckInitOutput(const StmtNode& call) {
  const std::string where = "pl.init_output";
  const Expr &tensor = call.args[0], &offset = call.args[1], &size = call.args[2], &value = call.args[3];
  const DataType dtype = tensor->type.tensor->dtype;
  auto at = [&](const Expr& e) { return e->span.valid() ? e->span : call.span; };
  for (const Expr* e : {&offset, &size}) {
    if (IsFloat((*e)->type.dtype) || (*e)->type.dtype == DataType::kBool) {
      Fail(ErrorKind::kType, at(*e), where + ": " + (e == &offset ? "offset" : "size") + " is an element count, an "
                                         "integer; got " + (*e)->type.ToString());
    }
  }
  if (offset->IsIntConst() && offset->int_value < 0) {
    Fail(ErrorKind::kValue, at(offset), where + ": offset must be >= 0, got " + std::to_string(offset->int_value));
  }
  if (size->IsIntConst() && size->int_value <= 0) {
    Fail(ErrorKind::kValue, at(size), where + ": size must be positive, got " + std::to_string(size->int_value));
  }
  if (offset->IsIntConst() && size->IsIntConst()) {
    int64_t count = 1;
    bool known = true;
    for (const Dim& d : tensor->type.tensor->dims) {
      known &= d.IsConstant() && d.kind != DimKind::kDynamic;
      count *= d.value;
    }
    if (known && offset->int_value + size->int_value > count) {
      Fail(ErrorKind::kValue, call.span,
           where + ": offset " + std::to_string(offset->int_value) + " + size " + std::to_string(size->int_value) +
               " leaves tensor '" + tensor->var->name + "' of " + std::to_string(count) + " elements");
    }
  }
  if (!IsFloat(dtype) && IsFloat(value->type.dtype)) {
    Fail(ErrorKind::kType, at(value), where + ": value is a float but tensor '" + tensor->var->name + "' holds " +
                                          std::string(Name(dtype)));
  }
  const int bits = Info(dtype).bits;
  const bool is_signed = Info(dtype).is_signed;
  const __int128 lo = is_signed ? -(__int128(1) << (bits - 1)) : 0;
  const __int128 hi = is_signed ? (__int128(1) << (bits - 1)) - 1 : (__int128(1) << bits) - 1;
  if (value->IsIntConst() && !IsFloat(dtype) && (value->int_value < lo || value->int_value > hi)) {
    Fail(ErrorKind::kValue, at(value), where + ": value " + std::to_string(value->int_value) + " does not fit " +
                                           std::string(Name(dtype)));
  }
}

void AddTransferOps(std::vector<OpDef>& ops) {
  // init_output: the NPU expands the value in a UB buffer of its own (pipe V) and stores it (MTE3); the
  // GM write is the MTE3 part, the one other cores and pipes see.
  OpDef init{"init_output", Pipe::kMTE3, PipeRule::kFixed, WindowRule::kGmRun,
             {{"tensor", OperandKind::kTensor, Access::kWrite},
              {"offset", OperandKind::kScalar, Access::kRead},
              {"size", OperandKind::kScalar, Access::kRead},
              {"value", OperandKind::kScalar, Access::kRead}},
             false, kAllSupportedDTypes & ~Bit(DataType::kBool), "", "pto::init_output", {},
             "set `size` elements of a GM tensor from element `offset` (row-major) to a scalar value"};
  init.check = &CheckInitOutput;
  ops.push_back(init);
  ops.push_back(Transfer("load", true, false, "pto::load", "GM -> Vec/Mat at element offsets"));
  ops.push_back(Transfer("load_tile", true, true, "pto::load_tile", "GM -> Vec/Mat at tile_idx x tile shape"));
  ops.push_back(Transfer("store", false, false, "pto::store", "Vec/Acc -> GM at element offsets"));
  ops.push_back(Transfer("store_tile", false, true, "pto::store_tile", "Vec/Acc -> GM at tile_idx x tile shape"));
  const OpDef store = ops[ops.size() - 2], store_tile = ops[ops.size() - 1];
  // fuse_rows' form of a load at the head of a fused run: the rows of one strip (the strip's subview)
  // from the rows of the tile's window that the strip covers. The whole tile and the strip's first row
  // follow; the whole window is checked, as the load checks it, on the first strip.
  for (const OpDef& load : {ops[ops.size() - 4], ops[ops.size() - 3]}) {
    OpDef rows = load;
    rows.name = load.name == "load" ? "load_rows" : "load_tile_rows";
    rows.public_name = load.name;
    rows.device_fn = load.name == "load" ? "pto::load_rows" : "pto::load_tile_rows";
    rows.internal = true;
    rows.operands.push_back({"whole_tile", OperandKind::kTile, Access::kRead, kLoadDst});
    rows.operands.push_back({"strip_row", OperandKind::kScalar, Access::kRead});
    rows.doc = "the rows of one strip of a fused run's load (fuse_rows)";
    ops.push_back(rows);
  }
  // fuse_rows' form of a store at the tail of a fused run with one head load: the rows of one strip,
  // stored as the strip is computed when the store's GM window and the load's allow it (else the
  // whole window on the last strip). The whole tile, the strip's first row and the strips' rows, then
  // the head load's tensor, offsets and whole tile follow (data_movement.h, StoreRows).
  struct StoreRowsName {
    const OpDef& base;
    bool after_tile;
    std::string_view name, device_fn;
  };
  for (const StoreRowsName& n : {StoreRowsName{store, false, "store_rows", "pto::store_rows"},
                                 StoreRowsName{store, true, "store_rows_after_tile", "pto::store_rows_after_tile"},
                                 StoreRowsName{store_tile, false, "store_tile_rows", "pto::store_tile_rows"},
                                 StoreRowsName{store_tile, true, "store_tile_rows_after_tile",
                                               "pto::store_tile_rows_after_tile"}}) {
    {
      const OpDef& base = n.base;
      const bool after_tile = n.after_tile;
      OpDef rows = base;
      rows.name = n.name;
      rows.public_name = base.name;
      rows.device_fn = n.device_fn;
      rows.internal = true;
      rows.kwargs.clear();  // Vec -> GM: no fixpipe, no atomics, the last two axes
      rows.operands.push_back({"whole_tile", OperandKind::kTile, Access::kRead, kStoreSrc});
      rows.operands.push_back({"strip_row", OperandKind::kScalar, Access::kRead});
      rows.operands.push_back({"strip_rows", OperandKind::kScalar, Access::kRead});
      // The load's own dtype, which may differ from the store's.
      rows.operands.push_back({"load_tensor", OperandKind::kTensor, Access::kRead, 0, kAllSupportedDTypes});
      rows.operands.push_back({after_tile ? "load_tile_idx" : "load_offsets", OperandKind::kOffsets, Access::kRead});
      rows.operands.push_back({"load_tile", OperandKind::kTile, Access::kRead, kLoadDst, kAllSupportedDTypes});
      if (after_tile) rows.operands.back().unit = OffsetUnit::kTiles;
      rows.doc = "the rows of one strip of a fused run's store (fuse_rows)";
      ops.push_back(rows);
    }
  }
  ops.push_back(PerChannelStore(store, "store_fp", "pto::store_fp"));
  ops.push_back(PerChannelStore(store_tile, "store_tile_fp", "pto::store_tile_fp"));
  ops.push_back(RuntimeScaledStore(store, "store_scaled", "pto::store_scaled"));
  ops.push_back(RuntimeScaledStore(store_tile, "store_tile_scaled", "pto::store_tile_scaled"));

  // CheckMove decides which memory pairs are data paths; the pipe follows the path
  // (PipeRule::kByMove), OpDef::pipe covers the rest (Vec -> Vec). offset= selects move_offset.
  const OperandSpec dst{"dst_tile", OperandKind::kTile, Access::kWrite, kAnyTileMemory, kAllSupportedDTypes,
                        ShapeRole::kAny};
  const OperandSpec src{"src_tile", OperandKind::kTile, Access::kRead, kAnyTileMemory, kAllSupportedDTypes,
                        ShapeRole::kAny};
  const OperandSpec offset{"offset", OperandKind::kOffsets, Access::kRead};
  // acc_to_vec_mode is passed to the device as its index, -1 when not given (SingleModeVec0).
  const KwargSpec acc_to_vec{"acc_to_vec_mode", AttrKind::kEnum, -1,
                             {"SingleModeVec0", "SingleModeVec1", "DualModeSplitM", "DualModeSplitN"}};
  OpDef move{"move", Pipe::kV, PipeRule::kByMove, WindowRule::kMove, {dst, src}, false, kAllSupportedDTypes, "",
             "pto::move",
             {KwargSpec{"offset", AttrKind::kOperand, -1, {"move_offset"}}, acc_to_vec, ReluPreMode(),
              Scale("move_fp", "move_scaled")},
             "tile -> tile: the source's valid window (transposed between NZ and ZN tiles of swapped shapes), "
             "converted on the Acc -> Vec and Mat -> Bias paths"};
  move.check = &CheckMove;
  ops.push_back(move);
  OpDef at = move;
  at.name = "move_offset";
  at.public_name = "move";
  at.operands = {dst, src, offset};
  at.kwargs = {acc_to_vec, ReluPreMode(), Scale()};
  at.device_fn = "pto::move_offset";
  // scale= a Scaling tile (per-channel) or a run-time scalar: the fixpipe's other factors.
  for (auto [name, fn, spec] :
       {std::tuple{"move_fp", "pto::move_fp",
                   OperandSpec{"scale", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kScaling),
                               Bit(DataType::kInt64), ShapeRole::kAny}},
        std::tuple{"move_scaled", "pto::move_scaled", OperandSpec{"scale", OperandKind::kScalar, Access::kRead}}}) {
    OpDef scaled = move;
    scaled.name = name;
    scaled.public_name = "move";
    scaled.operands = {dst, src, spec};
    scaled.kwargs = {acc_to_vec, ReluPreMode()};
    scaled.device_fn = fn;
    scaled.doc = "Acc -> Vec through the fixpipe with a per-channel or run-time scale";
    ops.push_back(scaled);
  }
  at.doc = "move(dst, src, offset): a part of a larger source at offset (extract), or a smaller source into the "
           "destination at offset (insert)";
  ops.push_back(at);
  OpDef insert{"insert", Pipe::kMTE3, PipeRule::kByMove, WindowRule::kMove,
               {{"dst_tile", OperandKind::kTile, Access::kWrite, Bit(MemorySpace::kMat), kAllSupportedDTypes,
                 ShapeRole::kAny},
                {"src_tile", OperandKind::kTile, Access::kRead, kVecOnly, kAllSupportedDTypes, ShapeRole::kAny},
                offset},
               false, kAllSupportedDTypes, "", "pto::insert", {},
               "Vec -> Mat (MTE3): the source's valid window written into the destination at offset [row, col]"};
  insert.check = &CheckMove;
  ops.push_back(insert);
}

}  // namespace pypto_pro::ir
