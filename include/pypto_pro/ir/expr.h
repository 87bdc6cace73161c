// Variables and scalar/handle expressions of the IR. Nodes are immutable and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pypto_pro/ir/type.h"
#include "pypto_pro/support/error.h"

namespace pypto_pro::ir {

// The slots of one pl.make_tile_group (pl.make_tile is a group of depth 1 without mutex ids).
struct TileGroupInfo {
  TileType tile;
  std::vector<int64_t> addrs;               // one byte address per slot
  std::vector<std::vector<int>> mutex_ids;  // per slot; empty = no mutex metadata
  int depth = 1;
  bool single_tile = false;                 // created by make_tile: printed as such
  // A cross-core buffer of the pipeline transform (make_tile_group(fwd_ids=, bwd_ids=)): per slot,
  // the cross-core event the producer sets after writing it / the consumer sets after reading it.
  // Empty: none. Only pl.jit(pipeline=...) uses them.
  std::vector<int> fwd_ids, bwd_ids;
};

struct VarNode {
  std::string name;  // unique within its function (the builder renames shadowed names)
  Type type;
  int id = 0;
  Span span;
  std::shared_ptr<const TileGroupInfo> group;  // kTileGroup vars only
};
using Var = std::shared_ptr<const VarNode>;

enum class ExprKind : uint8_t {
  kConst, kVar, kBinary, kUnary, kTernary, kCast, kBuiltin, kShapeDim, kTuple, kField,
  kElement,     // container[offset]: one element of a tile or GM tensor (pl.getval), a scalar
  kValidShape,  // tile.valid_shape[axis]
  kMakeView,    // pl.make_tensor: operands = source (a GM tensor or pointer), `axis` shape entries, then the
                // same number of strides or none (row-major); a GM view (a kTensor of TensorType::view)
  kPtrOffset,   // pl.addptr / pl.make_ptr: operands = pointer, element offset (its dtype's elements); the
                // result points there and reads as type.dtype
};

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul,
  kDiv,       // "/": true division on floats, truncating on integers (x.shape[0] / 128 is an int)
  kFloorDiv,  // "//": truncating on integers like the hardware's scalar unit, floor on floats
  kMod,       // "%": sign of the dividend on integers (hardware), fmod on floats
  kMin, kMax,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kAnd, kOr,
  // Integer bit operations (bool operands too, for & | ^). Shifts fault at run time for an amount
  // outside [0, bits of the result type); >> is arithmetic on signed values.
  kBitAnd, kBitOr, kBitXor, kShl, kShr,
};
enum class UnaryOp : uint8_t { kNeg, kNot, kBitNot };
enum class Builtin : uint8_t {
  kBlockIdx, kBlockNum, kSubblockIdx, kSubblockNum,
  // Reads of the core's special registers (RegisterRead): pl.get_spr() (AR, int64),
  // pl.get_ctrl_spr(start_bit, end_bit) (int64; operands: the two bits), pl.get_saturation_flag(mode)
  // (bool; operand: the pl.SaturationFlagMode index).
  kSpr, kCtrlSpr, kSaturationFlag,
};

const char* Symbol(BinaryOp op);  // "+", "//", "min", ...
const char* Name(Builtin builtin);  // "get_block_idx"
bool IsComparison(BinaryOp op);
bool IsBitwise(BinaryOp op);  // & | ^ << >>

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprKind kind = ExprKind::kConst;
  Type type;
  Span span;
  int64_t int_value = 0;      // kConst of integer/bool type
  double float_value = 0.0;   // kConst of float type
  Var var;                    // kVar; kShapeDim: the tensor; kField: the struct; kElement: the tile/tensor;
                              // kValidShape: the tile
  BinaryOp binary = BinaryOp::kAdd;
  UnaryOp unary = UnaryOp::kNeg;
  Builtin builtin = Builtin::kBlockIdx;
  int axis = 0;               // kShapeDim: the axis; kField: the field's index in the struct
  std::vector<Expr> operands; // kBinary: 2, kUnary/kCast: 1, kTernary: cond/then/else, kTuple: n,
                              // kField: the element index of an array field; kElement: the linear offset

  bool IsConst() const { return kind == ExprKind::kConst; }
  bool IsIntConst() const { return kind == ExprKind::kConst && !IsFloat(type.dtype); }
};

// Factories. They type-check their operands and throw CompileDiagnostic at `span` on misuse.
Expr IntConst(int64_t value, Span span = {}, DataType dtype = DataType::kInt32);
Expr FloatConst(double value, Span span = {}, DataType dtype = DataType::kFP32);
Expr BoolConst(bool value, Span span = {});
Expr VarRef(const Var& var, Span span = {});
Expr Binary(BinaryOp op, Expr lhs, Expr rhs, Span span = {});
Expr Unary(UnaryOp op, Expr operand, Span span = {});
Expr Ternary(Expr cond, Expr then_value, Expr else_value, Span span = {});
Expr Cast(Expr operand, DataType dtype, Span span = {});
Expr BuiltinCall(Builtin builtin, Span span = {});
// A read of a special register (Builtin::kSpr, kCtrlSpr, kSaturationFlag) with its compile-time
// arguments as int constants; checks them (bits 0..63, start <= end; a SaturationFlagMode index).
Expr RegisterRead(Builtin builtin, std::vector<Expr> args, Span span = {});
Expr ShapeDim(const Var& tensor, int axis, Span span = {});  // negative axis counts from the end
Expr Tuple(std::vector<Expr> items, Span span = {});
// tiling.field, or tiling.array[index] (index is null for scalar fields).  // all scalars (indices) or all tiles

Expr Field(const Var& strct, const std::string& field, Expr index, Span span = {});
// One element of a tile or GM tensor at a linear element offset; fp16/bf16 elements read as fp32.
Expr Element(const Var& container, Expr offset, Span span = {});
// The run-time valid extent of a tile along `axis` (1-D tiles: axis 0 is the columns).
Expr ValidShape(const Var& tile, int axis, Span span = {});
// pl.make_tensor(source, shape, stride, dtype): a view with its own shape and strides (in elements of
// `dtype`) over a GM pointer or tensor, in the launch buffer the source lies in. `stride` empty: the
// row-major strides of `shape`. Constant shape entries become fixed dims of the view's type.
Expr MakeView(Expr source, std::vector<Expr> shape, std::vector<Expr> stride, DataType dtype, Span span = {});
// pl.addptr(ptr, offset) (`dtype` = the pointer's) and pl.make_ptr(ptr, dtype) (offset 0).
Expr PtrOffset(Expr ptr, Expr offset, DataType dtype, Span span = {});
// The scalar dtype an element of `dtype` reads as (fp16/bf16 widen to fp32).
DataType ScalarDTypeOf(DataType dtype);

// The scalar type arithmetic on `a` and `b` produces (int32 < int64 < fp32).
DataType PromoteScalar(DataType a, DataType b);

}  // namespace pypto_pro::ir
