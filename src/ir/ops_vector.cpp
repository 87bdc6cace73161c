// Compute on Vec tiles, pipe V (docs/language.md#compute). Operand names, dtypes and shape rules
// follow the public API reference of each op; where it is silent, the entry says what was chosen.
#include <initializer_list>
#include <string>
#include <tuple>

#include "op_checks.h"
#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

namespace {

constexpr uint32_t Bits(std::initializer_list<DataType> dtypes) {
  uint32_t bits = 0;
  for (DataType d : dtypes) bits |= Bit(d);
  return bits;
}

using D = DataType;
constexpr uint32_t kInts8To32 = Bits({D::kInt8, D::kInt16, D::kInt32, D::kUInt8, D::kUInt16, D::kUInt32});
constexpr uint32_t kHalfOrFloat = Bits({D::kFP16, D::kFP32});
// "b16/b32" in the docs: the 16- and 32-bit element types.
constexpr uint32_t kBits16Or32 = Bits({D::kInt16, D::kUInt16, D::kInt32, D::kUInt32, D::kFP16, D::kBF16, D::kFP32});
constexpr uint32_t kInts = kInts8To32 | Bits({D::kInt64, D::kUInt64});
constexpr uint32_t kMask = Bit(D::kUInt8);
constexpr uint32_t kIndex = Bits({D::kInt32, D::kUInt32});

OperandSpec Out(std::string_view name = "out", ShapeRole shape = ShapeRole::kSame, uint32_t dtypes = 0) {
  return {name, OperandKind::kTile, Access::kWrite, kVecOnly, dtypes, shape};
}
OperandSpec InOut(std::string_view name = "out", uint32_t dtypes = 0) {
  return {name, OperandKind::kTile, Access::kReadWrite, kVecOnly, dtypes};
}
OperandSpec In(std::string_view name, ShapeRole shape = ShapeRole::kSame, uint32_t dtypes = 0) {
  return {name, OperandKind::kTile, Access::kRead, kVecOnly, dtypes, shape};
}
OperandSpec ScalarIn(std::string_view name) { return {name, OperandKind::kScalar, Access::kRead}; }
// A scratch tile the public signature requires and no implementation touches.
OperandSpec UnusedTmp() { return In("tmp", ShapeRole::kAny, kAllSupportedDTypes); }

// fill_index writes a sequence along a row; a one-column tile has no row to write it along.
void CheckFillIndex(const StmtNode& call) {
  const TileType& out = *call.args[0]->type.tile;
  if (out.Cols() == 1) {
    Fail(ErrorKind::kType, call.args[0]->span.valid() ? call.args[0]->span : call.span,
         "pl.fill_index: the sequence runs along the first row of 'out', and " + out.ToString() +
             " has one column");
  }
  if (!call.args[1]->type.IsScalar() || IsFloat(call.args[1]->type.dtype)) {
    Fail(ErrorKind::kType, call.args[1]->span.valid() ? call.args[1]->span : call.span,
         "pl.fill_index: 'start' must be an integer");
  }
}

// fillpad: out has a pad value; NORMAL and INPLACE keep the shape, EXPAND may grow it.
void CheckFillPad(const StmtNode& call) {
  const TileType &out = *call.args[0]->type.tile, &src = *call.args[1]->type.tile;
  const std::string what = "pl.fillpad: ";
  if (out.pad == 0) {
    Fail(ErrorKind::kType, call.args[0]->span.valid() ? call.args[0]->span : call.span,
         what + "'out' fills its padding with its TileType's pad= value, and " + out.ToString() +
             " has none (give it pad=pl.TilePad.zero, max or min)");
  }
  int64_t mode = 0;
  for (const Attr& a : call.attrs) {
    if (a.name == "mode") mode = a.value;
  }
  const bool same = out.shape == src.shape;
  const bool grows = out.Rows() >= src.Rows() && out.Cols() >= src.Cols();
  if (mode == 1 ? !grows : !same) {
    Fail(ErrorKind::kType, call.span,
         what + (mode == 1 ? "mode=EXPAND needs 'out' at least as large as 'src' in both dims"
                           : std::string(mode == 0 ? "mode=NORMAL" : "mode=INPLACE") +
                                 " needs 'out' and 'src' of the same shape (EXPAND grows it)") +
             ": 'out' is " + out.ToString() + ", 'src' " + src.ToString());
  }
}

OpDef VecOp(std::string_view name, WindowRule window, std::vector<OperandSpec> operands, uint32_t dtypes,
            std::string_view device_fn, std::string_view doc) {
  return OpDef{name, Pipe::kV, PipeRule::kFixed, window, std::move(operands), true, dtypes, "", device_fn, {}, doc};
}

// A variant reached through a dispatch keyword or a scalar operand: callable only by `public_name`.
OpDef Variant(OpDef op, std::string_view public_name) {
  op.public_name = public_name;
  return op;
}

KwargSpec DimDispatch(int64_t default_value, std::string_view row_op, std::string_view col_op) {
  return KwargSpec{"dim", AttrKind::kDispatch, default_value, {row_op, col_op}};
}

std::string DtypeName(const Expr& e) { return std::string(Name(e->type.dtype)); }

// ---- element-wise ----

OpDef Elementwise(std::string_view name, std::string_view scalar_form, std::string_view device_fn,
                  std::string_view doc) {
  OpDef op = VecOp(name, WindowRule::kDestination, {Out(), In("lhs"), In("rhs")}, kNumericDTypes, device_fn, doc);
  op.scalar_form = scalar_form;
  return op;
}

OpDef ElementwiseScalar(std::string_view name, std::string_view device_fn, std::string_view doc) {
  return VecOp(name, WindowRule::kDestination, {Out(), In("lhs"), ScalarIn("scalar")}, kNumericDTypes, device_fn,
               doc);
}

OpDef Unary(std::string_view name, uint32_t dtypes, std::string_view device_fn, std::string_view doc) {
  return VecOp(name, WindowRule::kDestination, {Out(), In("src")}, dtypes, device_fn, doc);
}

void AddElementwiseOps(std::vector<OpDef>& ops) {
  OpDef maximum = Elementwise("maximum", "maxs", "pto::maximum", "out = max(lhs, rhs); dim=0/1: row/column max");
  maximum.kwargs = {DimDispatch(-1, "row_max", "col_max")};  // no dim: element-wise
  OpDef minimum = Elementwise("minimum", "mins", "pto::minimum", "out = min(lhs, rhs); dim=0/1: row/column min");
  minimum.kwargs = {DimDispatch(-1, "row_min", "col_min")};
  ops.push_back(Elementwise("add", "adds", "pto::add", "out = lhs + rhs"));
  ops.push_back(Elementwise("sub", "subs", "pto::sub", "out = lhs - rhs"));
  ops.push_back(Elementwise("mul", "muls", "pto::mul", "out = lhs * rhs"));
  ops.push_back(Elementwise("div", "divs", "pto::div", "out = lhs / rhs"));
  ops.push_back(maximum);
  ops.push_back(minimum);
  ops.push_back(ElementwiseScalar("adds", "pto::adds", "out = lhs + scalar"));
  ops.push_back(ElementwiseScalar("subs", "pto::subs", "out = lhs - scalar"));
  ops.push_back(ElementwiseScalar("muls", "pto::muls", "out = lhs * scalar"));
  ops.push_back(ElementwiseScalar("divs", "pto::divs", "out = lhs / scalar"));
  ops.push_back(ElementwiseScalar("maxs", "pto::maxs", "out = max(lhs, scalar)"));
  ops.push_back(ElementwiseScalar("mins", "pto::mins", "out = min(lhs, scalar)"));

  const uint32_t floats = kFloatDTypes;
  ops.push_back(Unary("neg", Bits({D::kInt16, D::kInt32, D::kInt64}) | floats, "pto::neg", "out = -src"));
  ops.push_back(Unary("abs", Bits({D::kInt8, D::kInt16, D::kInt32}) | kHalfOrFloat, "pto::abs", "out = |src|"));
  // exp/log/sqrt: "b16/b32" and "b8..b64" in the docs; only the float types give them a meaning.
  ops.push_back(Unary("exp", floats, "pto::exp", "out = e^src"));
  ops.push_back(Unary("log", floats, "pto::log", "out = ln(src)"));
  ops.push_back(Unary("sqrt", floats, "pto::sqrt", "out = sqrt(src)"));
  ops.push_back(Unary("rsqrt", kHalfOrFloat, "pto::rsqrt", "out = 1 / sqrt(src)"));
  ops.push_back(Unary("recip", kHalfOrFloat, "pto::recip", "out = 1 / src"));
  ops.push_back(Unary("relu", kHalfOrFloat | Bit(D::kInt32), "pto::relu", "out = max(src, 0)"));
  // The docs also allow Mat tiles; their layout belongs to the cube ops, so Vec only for now.
  ops.push_back(VecOp("expands", WindowRule::kDestination, {Out(), ScalarIn("scalar")}, kNumericDTypes,
                      "pto::expands", "every element of out = scalar"));
  // fillpad: out = src's valid window, every other element of out its TileType's pad value.
  OpDef fillpad = VecOp("fillpad", WindowRule::kFill, {Out("out", ShapeRole::kAny), In("src", ShapeRole::kAny)},
                        Bits({D::kInt8, D::kUInt8, D::kInt16, D::kUInt16, D::kInt32, D::kUInt32, D::kFP16, D::kBF16,
                              D::kFP32}),
                        "pto::fillpad",
                        "out = src's valid window, the rest of out filled with out's TileType pad value");
  fillpad.kwargs = {KwargSpec{"mode", AttrKind::kEnum, 0, {"NORMAL", "EXPAND", "INPLACE"}}};
  fillpad.check = &CheckFillPad;
  ops.push_back(fillpad);
  // fill_index (the ISA's TCI): start, start + 1, ... along the valid columns of the first row; the
  // valid rows are not consulted. 16- and 32-bit integers, wrapping.
  OpDef fill_index = VecOp("fill_index", WindowRule::kFirstRow, {Out(), ScalarIn("start")},
                           Bits({D::kInt16, D::kUInt16, D::kInt32, D::kUInt32}), "pto::fill_index",
                           "out[0, k] = start + k for the valid columns k of the first row");
  fill_index.check = &CheckFillIndex;
  ops.push_back(fill_index);
}

// ---- fused ----

void AxpyCheck(const StmtNode& s) {
  const Expr& out = s.args[0];
  const Expr& src = s.args[1];
  bool widening = src->type.dtype == D::kFP16 && out->type.dtype == D::kFP32;
  if (src->type.dtype != out->type.dtype && !widening) {
    Fail(ErrorKind::kType, s.span,
         "pl.axpy: 'src' is " + DtypeName(src) + " but 'out' is " + DtypeName(out) +
             "; they must match, or be fp16 -> fp32 (the widening form)");
  }
}

void AddFusedOps(std::vector<OpDef>& ops) {
  // add_relu / sub_relu write the intermediate sum into lhs (public docs), so lhs is written too.
  ops.push_back(VecOp("add_relu", WindowRule::kDestination, {Out(), InOut("lhs"), In("rhs")},
                      kHalfOrFloat | Bit(D::kInt32), "pto::add_relu", "lhs = lhs + rhs; out = relu(lhs)"));
  ops.push_back(VecOp("sub_relu", WindowRule::kDestination, {Out(), InOut("lhs"), In("rhs")}, kHalfOrFloat,
                      "pto::sub_relu", "lhs = lhs - rhs; out = relu(lhs)"));
  ops.push_back(VecOp("addc", WindowRule::kDestination, {Out(), In("a"), In("b"), In("c")}, kBits16Or32,
                      "pto::addc", "out = a + b + c"));
  ops.push_back(VecOp("mul_add_dst", WindowRule::kDestination, {InOut(), In("lhs"), In("rhs")},
                      kBits16Or32 | Bits({D::kInt64, D::kUInt64}), "pto::mul_add_dst", "out = lhs * rhs + out"));
  ops.push_back(VecOp("fused_mul_add", WindowRule::kDestination, {InOut(), In("lhs"), In("rhs")}, kBits16Or32,
                      "pto::fused_mul_add", "out = lhs * out + rhs"));
  ops.push_back(VecOp("fused_mul_add_relu", WindowRule::kDestination, {InOut(), In("a"), In("b")}, kBits16Or32,
                      "pto::fused_mul_add_relu", "out = relu(out * a + b)"));
  // The docs want alpha in src's dtype; kernels have no fp16 scalars, so the device rounds it to src's.
  OpDef axpy = VecOp("axpy", WindowRule::kDestination,
                     {InOut("out", kHalfOrFloat), In("src", ShapeRole::kSame, kHalfOrFloat), ScalarIn("alpha")},
                     kHalfOrFloat, "pto::axpy", "out = alpha * src + out");
  axpy.check = AxpyCheck;
  ops.push_back(axpy);
}

// ---- conversion, compare, select ----

// pl.RoundMode's members, in the order of pto::RoundMode (device_include/pypto_pro/vector_cast.h).
const std::vector<std::string_view>& RoundModes() {
  static const std::vector<std::string_view> modes = Choices(hw::kRoundModeNames);
  return modes;
}

void CastCheck(const StmtNode& s) {
  for (const Attr& attr : s.attrs) {
    if (attr.name != "mode" || RoundModes()[size_t(attr.value)] != "CAST_ODD") continue;
    const Expr& out = s.args[0];
    const Expr& src = s.args[1];
    if (src->type.dtype != D::kFP32 || out->type.dtype != D::kFP16) {
      Fail(ErrorKind::kValue, s.span,
           "pl.cast: mode=pl.RoundMode.CAST_ODD is only defined for fp32 -> fp16, not " + DtypeName(src) + " -> " +
               DtypeName(out));
    }
  }
}

void AddConversionOps(std::vector<OpDef>& ops) {
  OpDef cast = VecOp("cast", WindowRule::kDestination,
                     {Out("out", ShapeRole::kSame, kNumericDTypes), In("src", ShapeRole::kSame, kNumericDTypes)},
                     kNumericDTypes, "pto::cast", "out = src converted to out's dtype, rounded by mode");
  cast.same_dtype = false;
  cast.kwargs = {KwargSpec{"mode", AttrKind::kEnum, 1, RoundModes(), "pto::RoundMode::"}};
  cast.check = CastCheck;
  ops.push_back(cast);

  // Compares: a bit-packed UINT8 mask of lhs's shape (format in device_include/pypto_pro/vector_compare.h).
  for (auto [name, scalar_name, fn, scalar_fn, doc] :
       {std::tuple{"eq", "eq_scalar", "pto::eq", "pto::eq_scalar", "mask bit = lhs == rhs"},
        std::tuple{"ne", "ne_scalar", "pto::ne", "pto::ne_scalar", "mask bit = lhs != rhs"},
        std::tuple{"lt", "lt_scalar", "pto::lt", "pto::lt_scalar", "mask bit = lhs < rhs"},
        std::tuple{"le", "le_scalar", "pto::le", "pto::le_scalar", "mask bit = lhs <= rhs"},
        std::tuple{"gt", "gt_scalar", "pto::gt", "pto::gt_scalar", "mask bit = lhs > rhs"},
        std::tuple{"ge", "ge_scalar", "pto::ge", "pto::ge_scalar", "mask bit = lhs >= rhs"}}) {
    OpDef op = VecOp(name, WindowRule::kDestination, {Out("out", ShapeRole::kSame, kMask), In("lhs"), In("rhs")},
                     kNumericDTypes, fn, doc);
    op.scalar_form = scalar_name;
    ops.push_back(op);
    ops.push_back(Variant(VecOp(scalar_name, WindowRule::kDestination,
                                {Out("out", ShapeRole::kSame, kMask), In("lhs"), ScalarIn("rhs")}, kNumericDTypes,
                                scalar_fn, doc),
                          name));
  }

  OpDef select = VecOp("select", WindowRule::kDestination,
                       {Out(), In("mask", ShapeRole::kSame, kMask), In("lhs"), In("rhs"), UnusedTmp()},
                       kNumericDTypes, "pto::select", "out = mask ? lhs : rhs");
  select.scalar_form = "select_scalar";
  ops.push_back(select);
  ops.push_back(Variant(VecOp("select_scalar", WindowRule::kDestination,
                              {Out(), In("mask", ShapeRole::kSame, kMask), In("lhs"), ScalarIn("rhs"), UnusedTmp()},
                              kNumericDTypes & ~Bit(D::kBF16), "pto::select_scalar", "out = mask ? lhs : rhs"),
                        "select"));
}

// ---- bitwise and shifts (the destination's valid window) ----

// and_/or_ with a scalar: an integer that is a bit pattern of the element's width (signed or
// unsigned spelling: 0xF0 and -16 on an int8 tile are the same bits); a constant outside that is
// refused rather than silently cut.
void CheckBitwiseScalar(const StmtNode& call) {
  const Expr& scalar = call.args[2];
  const DataType elem = call.args[0]->type.dtype;
  const std::string what = CallName(call) + ": the scalar 'rhs'";
  if (!IsInteger(scalar->type.dtype)) {
    Fail(ErrorKind::kType, OperandSpan(call, 2),
         what + " must be an integer, got " + (scalar->type.dtype == D::kBool ? "a bool" : "an " + DtypeName(scalar) +
                                                                                      " value"));
  }
  if (!scalar->IsIntConst()) return;
  const int bits = Info(elem).bits;
  const __int128 lo = -(__int128(1) << (bits - 1)), hi = (__int128(1) << bits) - 1;
  const __int128 v = scalar->type.dtype == D::kUInt64 ? __int128(uint64_t(scalar->int_value))
                                                      : __int128(scalar->int_value);
  if (v < lo || v > hi) {
    const std::string text = v < 0 ? "-" + std::to_string(uint64_t(-v)) : std::to_string(uint64_t(v));
    Fail(ErrorKind::kValue, OperandSpan(call, 2),
         what + " = " + text + " does not fit the " + std::to_string(bits) +
             "-bit elements of 'out' (" + DtypeName(call.args[0]) + "): it must lie in [" +
             std::to_string(int64_t(lo)) + ", " + std::to_string(int64_t(hi)) + "]");
  }
}

// xor's scratch tile: the public signature has it, the A5 instruction does not use it, and the
// hardware that does may write it, so it is booked as written and its contents are not promised.
OperandSpec Scratch(std::string_view name) { return {name, OperandKind::kTile, Access::kWrite, kVecOnly, 0}; }

void AddBitwiseOps(std::vector<OpDef>& ops) {
  // and_ (public page: 8/16/32-bit integers, a tile or a scalar rhs); or_ has no page and takes the
  // same form. The scalar forms are reached through the public names only.
  for (auto [name, scalar_name, fn, scalar_fn, doc] :
       {std::tuple{"and_", "ands", "pto::and_", "pto::ands", "out = lhs & rhs (rhs a tile or a scalar)"},
        std::tuple{"or_", "ors", "pto::or_", "pto::ors", "out = lhs | rhs (rhs a tile or a scalar)"}}) {
    OpDef op = VecOp(name, WindowRule::kDestination, {Out(), In("lhs"), In("rhs")}, kInts8To32, fn, doc);
    op.scalar_form = scalar_name;
    ops.push_back(op);
    OpDef scalar = VecOp(scalar_name, WindowRule::kDestination, {Out(), In("lhs"), ScalarIn("rhs")}, kInts8To32,
                         scalar_fn, doc);
    scalar.check = &CheckBitwiseScalar;
    ops.push_back(Variant(scalar, name));
  }
  ops.push_back(VecOp("xor", WindowRule::kDestination, {Out(), In("lhs"), In("rhs"), Scratch("tmp")}, kInts8To32,
                      "pto::xor_", "out = lhs ^ rhs; tmp: scratch of out's shape and dtype, apart from the others"));
  ops.push_back(Unary("not_", kInts8To32, "pto::not_", "out = ~src"));
  // Shifts by a per-element amount in [0, bits) (public pages); an amount outside it is a fault.
  ops.push_back(VecOp("shl", WindowRule::kDestination, {Out(), In("lhs"), In("rhs")}, kInts, "pto::shl",
                      "out = lhs << rhs, bits shifted out are lost"));
  ops.push_back(VecOp("shr", WindowRule::kDestination, {Out(), In("lhs"), In("rhs")}, kInts, "pto::shr",
                      "out = lhs >> rhs: arithmetic for signed, logical for unsigned elements"));
}

// ---- add/sub + relu + cast, mul + cast: the destination's valid window ----

// The dtypes' pl names in DataType order: the choices of target_type=.
const std::vector<std::string_view>& DTypeChoices() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (uint32_t d = 0; d < uint32_t(DataType::kCount); ++d) out.push_back(hw::kDataTypes[d].pl_name);
    return out;
  }();
  return names;
}

// Whether every value of `src` is exactly a value of `dst` (the pages: the rounding mode applies to
// narrowing conversions and is ignored for widening ones).
bool ExactConversion(DataType src, DataType dst) {
  if (src == dst) return true;
  const DataTypeInfo &s = Info(src), &d = Info(dst);
  if (s.is_float && d.is_float) return dst == D::kFP32;  // fp16/bf16 -> fp32
  if (s.is_float) return false;
  const int value_bits = s.bits - (s.is_signed ? 1 : 0);
  if (d.is_float) return value_bits <= (dst == D::kFP32 ? 24 : dst == D::kFP16 ? 11 : 8);  // the significand
  if (s.is_signed && !d.is_signed) return false;
  return value_bits <= d.bits - (d.is_signed ? 1 : 0);
}

void CheckBinaryCast(const StmtNode& call) {
  const std::string where = CallName(call);
  const DataType out = call.args[0]->type.dtype, lhs = call.args[1]->type.dtype;
  int64_t target = -1, mode = -1;
  for (const Attr& a : call.attrs) {
    if (a.name == "target_type") target = a.value;
    if (a.name == "mode") mode = a.value;
  }
  if (target != int64_t(out)) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         where + ": 'out' is " + std::string(Name(out)) + " but target_type=pl." +
             std::string(DTypeChoices().at(size_t(target))) + "; 'out' must have the target dtype");
  }
  const bool odd = mode >= 0 && RoundModes().at(size_t(mode)) == "CAST_ODD";
  if (odd && !(lhs == D::kFP32 && out == D::kFP16) && !ExactConversion(lhs, out)) {
    Fail(ErrorKind::kValue, call.span,
         where + ": mode=pl.RoundMode.CAST_ODD is only defined for fp32 -> fp16 (and ignored where the conversion "
                 "is exact), not " + std::string(Name(lhs)) + " -> " + std::string(Name(out)));
  }
}

OpDef BinaryCast(std::string_view name, uint32_t dtypes, std::string_view fn, std::string_view doc) {
  // lhs holds the intermediate result afterwards (public pages), so it is written too; out's dtype
  // is target_type's, checked against it.
  OpDef op = VecOp(name, WindowRule::kDestination,
                   {Out("out", ShapeRole::kSame, kNumericDTypes), InOut("lhs"), In("rhs")}, dtypes, fn, doc);
  KwargSpec target{"target_type", AttrKind::kEnum, 0, DTypeChoices()};
  target.required = true;
  op.kwargs = {target, KwargSpec{"mode", AttrKind::kEnum, 1, RoundModes(), "pto::RoundMode::"}};  // CAST_ROUND
  op.check = &CheckBinaryCast;
  return op;
}

void AddBinaryCastOps(std::vector<OpDef>& ops) {
  ops.push_back(BinaryCast("add_relu_cast", kHalfOrFloat, "pto::add_relu_cast",
                           "lhs = relu(lhs + rhs); out = lhs converted to target_type by mode"));
  ops.push_back(BinaryCast("sub_relu_cast", kHalfOrFloat, "pto::sub_relu_cast",
                           "lhs = relu(lhs - rhs); out = lhs converted to target_type by mode"));
  ops.push_back(BinaryCast("mul_cast", Bits({D::kInt16, D::kUInt16, D::kInt32, D::kUInt32, D::kInt64, D::kUInt64}) |
                                           kFloatDTypes,
                           "pto::mul_cast", "lhs = lhs * rhs; out = lhs converted to target_type by mode"));
}

// ---- partial ops (WindowRule::kPart) ----

void AddPartOps(std::vector<OpDef>& ops) {
  // One source's valid window must be out's, the other's may be smaller (checked at run time): both
  // valid -> combined, only one valid -> copied (public pages, the ISA's TPART*).
  const uint32_t no_64 = kInts8To32 | kFloatDTypes;
  for (auto [name, dtypes, fn, doc] :
       {std::tuple{"partadd", kNumericDTypes, "pto::partadd", "out = src0 + src1 where both valid, else the one"},
        std::tuple{"partmax", kNumericDTypes, "pto::partmax", "out = max(src0, src1) where both valid, else the one"},
        std::tuple{"partmin", kNumericDTypes, "pto::partmin", "out = min(src0, src1) where both valid, else the one"},
        std::tuple{"partmul", no_64, "pto::partmul", "out = src0 * src1 where both valid, else the one"}}) {
    ops.push_back(VecOp(name, WindowRule::kPart, {Out(), In("src0"), In("src1")}, dtypes, fn, doc));
  }
}

// ---- transpose (WindowRule::kTranspose) ----

// The public page: a 2-D Vec tile of 8/16/32-bit elements, out of the swapped shape and not src
// itself; the major dimension of both (columns row-major, rows for DN) a multiple of 32 bytes.
void CheckTranspose(const StmtNode& call) {
  const std::string where = CallName(call);
  const TileType &out = TileOf(call, 0), &src = TileOf(call, 1);
  for (size_t i = 0; i < 2; ++i) {
    const TileType& t = TileOf(call, i);
    if (t.shape.size() != 2) {
      Fail(ErrorKind::kType, OperandSpan(call, i),
           where + ": " + OperandName(call, i) + " must be a 2-D tile, got " + t.ToString());
    }
    if (t.layout != Layout::kND && t.layout != Layout::kDN) {
      Fail(ErrorKind::kType, OperandSpan(call, i),
           where + ": " + OperandName(call, i) + " must be row-major (ND) or column-major (DN), got " + t.ToString());
    }
  }
  if (out.Rows() != src.Cols() || out.Cols() != src.Rows()) {
    Fail(ErrorKind::kType, OperandSpan(call, 0),
         where + ": 'out' must have the transposed shape of 'src' " + ShapeText(src) + ", [" +
             std::to_string(src.Cols()) + ", " + std::to_string(src.Rows()) + "], got " + ShapeText(out));
  }
  for (size_t i = 0; i < 2; ++i) {
    const TileType& t = TileOf(call, i);
    const bool column_major = t.layout == Layout::kDN;
    const int64_t major = column_major ? t.Rows() : t.Cols();
    if (major * Bytes(t.dtype) % 32 != 0) {
      Fail(ErrorKind::kType, OperandSpan(call, i),
           where + ": the major dimension of " + OperandName(call, i) + " (its " +
               (column_major ? "rows" : "columns") + ", " + std::to_string(major) + " x " +
               std::to_string(Bytes(t.dtype)) + " bytes) must be a multiple of 32 bytes; " + t.ToString());
    }
  }
  if (call.args[0]->var && call.args[0]->var == call.args[1]->var) {
    Fail(ErrorKind::kValue, call.span, where + ": 'out' and 'src' are the same tile; transpose into another one");
  }
}

void AddTransposeOps(std::vector<OpDef>& ops) {
  OpDef transpose = VecOp("transpose", WindowRule::kTranspose,
                          {Out("out", ShapeRole::kAny), In("src", ShapeRole::kAny)}, kInts8To32 | kFloatDTypes,
                          "pto::transpose", "out[j, i] = src[i, j] over src's valid window");
  transpose.check = &CheckTranspose;
  ops.push_back(transpose);
}

// ---- reductions (the source's valid window) ----

void AddReductionOps(std::vector<OpDef>& ops) {
  // dtypes per the docs of sum (dim=0 / dim=1) and of maximum/minimum's reduction form; max/min
  // want tmp like src, sum never reads it.
  const uint32_t row_sum_dtypes = Bits({D::kInt16, D::kInt32, D::kInt64, D::kUInt64, D::kFP16, D::kFP32});
  const uint32_t row_extreme_dtypes = kInts8To32 | kHalfOrFloat;
  auto reduce = [](std::string_view name, ShapeRole out, uint32_t dtypes, OperandSpec tmp, std::string_view fn,
                   std::string_view doc) {
    return VecOp(name, WindowRule::kSource, {Out("out", out), In("src"), tmp}, dtypes, fn, doc);
  };
  const ShapeRole col = ShapeRole::kColumn, row = ShapeRole::kRow;
  ops.push_back(reduce("row_sum", col, row_sum_dtypes, UnusedTmp(), "pto::row_sum", "out[r] = sum of row r"));
  ops.push_back(reduce("row_max", col, row_extreme_dtypes, In("tmp"), "pto::row_max", "out[r] = max of row r"));
  ops.push_back(reduce("row_min", col, row_extreme_dtypes, In("tmp"), "pto::row_min", "out[r] = min of row r"));
  ops.push_back(reduce("col_sum", row, kNumericDTypes, UnusedTmp(), "pto::col_sum", "out[c] = sum of column c"));
  ops.push_back(reduce("col_max", row, kNumericDTypes, In("tmp"), "pto::col_max", "out[c] = max of column c"));
  ops.push_back(reduce("col_min", row, kNumericDTypes, In("tmp"), "pto::col_min", "out[c] = min of column c"));
  OpDef sum = reduce("sum", col, row_sum_dtypes, UnusedTmp(), "pto::row_sum", "dim=0: row_sum; dim=1: col_sum");
  sum.kwargs = {DimDispatch(0, "row_sum", "col_sum")};
  ops.push_back(sum);

  // argmax/argmin: INT32/UINT32 indices; tmp like src (docs).
  const uint32_t col_arg_dtypes = kInts8To32 | kFloatDTypes;
  for (auto [name, col_name, fn, col_fn, doc] :
       {std::tuple{"argmax", "col_argmax", "pto::argmax", "pto::col_argmax", "index of the first max of each row"},
        std::tuple{"argmin", "col_argmin", "pto::argmin", "pto::col_argmin", "index of the first min of each row"}}) {
    OpDef op = VecOp(name, WindowRule::kSource, {Out("out", col, kIndex), In("src"), In("tmp")}, kHalfOrFloat, fn,
                     doc);
    op.kwargs = {DimDispatch(0, name, col_name)};
    ops.push_back(op);
    ops.push_back(Variant(VecOp(col_name, WindowRule::kSource, {Out("out", row, kIndex), In("src"), In("tmp")},
                                col_arg_dtypes, col_fn, "dim=1: the row index for each column"),
                          name));
  }
}

// ---- broadcasts (the destination's valid window) ----

struct BroadcastNames {
  std::string_view row_op, row_fn, row_doc, col_op, col_fn, col_doc, expand;  // expand: "" if not public
};

void AddBroadcastOps(std::vector<OpDef>& ops) {
  // No public page for row_expand_* / col_expand_*: they are expand_*(dim=0 / dim=1), whose dtypes they take.
  const uint32_t dtypes = kInts8To32 | kFloatDTypes;
  const BroadcastNames table[] = {
      {"row_expand_add", "pto::row_expand_add", "out[r, c] = src[r, c] + col[r]", "col_expand_add",
       "pto::col_expand_add", "out[r, c] = src[r, c] + row[c]", ""},
      {"row_expand_sub", "pto::row_expand_sub", "out[r, c] = src[r, c] - col[r]", "col_expand_sub",
       "pto::col_expand_sub", "out[r, c] = src[r, c] - row[c]", "expand_sub"},
      {"row_expand_mul", "pto::row_expand_mul", "out[r, c] = src[r, c] * col[r]", "col_expand_mul",
       "pto::col_expand_mul", "out[r, c] = src[r, c] * row[c]", "expand_mul"},
      {"row_expand_div", "pto::row_expand_div", "out[r, c] = src[r, c] / col[r]", "col_expand_div",
       "pto::col_expand_div", "out[r, c] = src[r, c] / row[c]", "expand_div"},
      {"row_expand_max", "pto::row_expand_max", "out[r, c] = max(src[r, c], col[r])", "col_expand_max",
       "pto::col_expand_max", "out[r, c] = max(src[r, c], row[c])", "expand_max"},
      {"row_expand_min", "pto::row_expand_min", "out[r, c] = min(src[r, c], col[r])", "col_expand_min",
       "pto::col_expand_min", "out[r, c] = min(src[r, c], row[c])", "expand_min"},
  };
  for (const BroadcastNames& n : table) {
    OpDef row_op = VecOp(n.row_op, WindowRule::kDestination, {Out(), In("src"), In("col", ShapeRole::kColumn)},
                         dtypes, n.row_fn, n.row_doc);
    ops.push_back(row_op);
    ops.push_back(VecOp(n.col_op, WindowRule::kDestination, {Out(), In("src"), In("row", ShapeRole::kRow)}, dtypes,
                        n.col_fn, n.col_doc));
    if (n.expand.empty()) continue;
    OpDef expand = row_op;
    expand.name = n.expand;
    expand.operands[2].name = "scalar";
    expand.doc = "dim=0: row_expand_* with an [R, 1] tile; dim=1: col_expand_* with a [1, C] tile";
    expand.kwargs = {DimDispatch(0, n.row_op, n.col_op)};
    ops.push_back(expand);
  }
}

}  // namespace

void AddVectorOps(std::vector<OpDef>& ops) {
  AddElementwiseOps(ops);
  AddBitwiseOps(ops);
  AddFusedOps(ops);
  AddConversionOps(ops);
  AddBinaryCastOps(ops);
  AddPartOps(ops);
  AddTransposeOps(ops);
  AddReductionOps(ops);
  AddBroadcastOps(ops);
}

}  // namespace pypto_pro::ir
