// The vector ops of docs/language.md#compute: registry entries and dispatch, verifier rejections, and
// the device functions of device_include/ run directly on small arrays. This file is compiled
// without -march=native, so the device code's portable paths (no AVX-512, no F16C) are under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "gemm_check.h"
#include "transpose_check.h"
#include "pypto_pro/ir/verifier.h"

#include "pypto_pro/device.h"

namespace pypto_pro {
namespace {

using ir::DataType;
using ir::KwargValue;
using ir::MemorySpace;
using test_util::At;

// ---------------------------------------------------------------------------------------------
// Registry and BuildOpCall
// ---------------------------------------------------------------------------------------------

// The vector kernel of these tests: tiles from test_util::TileKernel, ops on line kOpLine.
struct KernelBuilder : test_util::TileKernel {
  KernelBuilder() : TileKernel("vec") {}
  ir::Expr Tile(const std::string& name, int64_t rows, int64_t cols, DataType dtype = DataType::kFP32,
                MemorySpace memory = MemorySpace::kVec) {
    return MakeTile(name, rows, cols, dtype, memory);
  }
  static constexpr int kOpLine = 7;
};

KwargValue Int(int64_t v) {
  KwargValue k;
  k.kind = KwargValue::Kind::kInt;
  k.i = v;
  return k;
}

KwargValue Operand(ir::Expr e) {
  KwargValue k;
  k.kind = KwargValue::Kind::kExpr;
  k.e = std::move(e);
  return k;
}

KwargValue Str(const std::string& s) {
  KwargValue k;
  k.kind = KwargValue::Kind::kString;
  k.s = s;
  return k;
}

ir::Stmt Call(const std::string& name, std::vector<ir::Expr> args, std::map<std::string, KwargValue> kwargs = {}) {
  return ir::BuildOpCall(name, std::move(args), kwargs, At(KernelBuilder::kOpLine, 8));
}

std::vector<std::string> OperandNames(const ir::OpDef& op) {
  std::vector<std::string> names;
  for (const ir::OperandSpec& s : op.operands) names.emplace_back(s.name);
  return names;
}

TEST(VectorRegistry, EntriesFollowThePublicSignatures) {
  using Names = std::vector<std::string>;
  const std::map<std::string, Names> expected = {
      {"neg", {"out", "src"}},         {"rsqrt", {"out", "src"}},
      {"expands", {"out", "scalar"}},  {"cast", {"out", "src"}},
      {"eq", {"out", "lhs", "rhs"}},   {"select", {"out", "mask", "lhs", "rhs", "tmp"}},
      {"addc", {"out", "a", "b", "c"}}, {"mul_add_dst", {"out", "lhs", "rhs"}},
      {"fused_mul_add_relu", {"out", "a", "b"}}, {"axpy", {"out", "src", "alpha"}},
      {"row_sum", {"out", "src", "tmp"}}, {"col_max", {"out", "src", "tmp"}},
      {"sum", {"out", "src", "tmp"}},  {"argmin", {"out", "src", "tmp"}},
      {"row_expand_div", {"out", "src", "col"}}, {"col_expand_add", {"out", "src", "row"}},
      {"expand_max", {"out", "src", "scalar"}},
      {"and_", {"out", "lhs", "rhs"}},  {"or_", {"out", "lhs", "rhs"}},
      {"xor", {"out", "lhs", "rhs", "tmp"}}, {"not_", {"out", "src"}},
      {"shl", {"out", "lhs", "rhs"}},   {"shr", {"out", "lhs", "rhs"}},
      {"add_relu_cast", {"out", "lhs", "rhs"}}, {"mul_cast", {"out", "lhs", "rhs"}},
      {"partadd", {"out", "src0", "src1"}}, {"partmul", {"out", "src0", "src1"}},
      {"transpose", {"out", "src"}},
  };
  for (const auto& [name, operands] : expected) {
    const ir::OpDef* op = ir::FindOp(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(OperandNames(*op), operands) << name;
    EXPECT_EQ(op->pipe, ir::Pipe::kV) << name;
    EXPECT_TRUE(op->PublicName() == op->name) << name;
  }
  // Shape roles of the row/column ops.
  EXPECT_EQ(ir::FindOp("row_sum")->operands[0].shape, ir::ShapeRole::kColumn);
  EXPECT_EQ(ir::FindOp("row_sum")->operands[2].shape, ir::ShapeRole::kAny);
  EXPECT_EQ(ir::FindOp("row_max")->operands[2].shape, ir::ShapeRole::kSame);
  EXPECT_EQ(ir::FindOp("col_min")->operands[0].shape, ir::ShapeRole::kRow);
  EXPECT_EQ(ir::FindOp("row_expand_mul")->operands[2].shape, ir::ShapeRole::kColumn);
  EXPECT_EQ(ir::FindOp("col_expand_mul")->operands[2].shape, ir::ShapeRole::kRow);
  EXPECT_EQ(ir::FindOp("row_sum")->window, ir::WindowRule::kSource);
  // Scalar forms are reachable only through their public names.
  EXPECT_EQ(ir::FindOp("eq_scalar")->PublicName(), "eq");
  EXPECT_EQ(ir::FindOp("select_scalar")->PublicName(), "select");
  EXPECT_EQ(ir::FindOp("col_argmax")->PublicName(), "argmax");
  // add_relu writes lhs (the intermediate sum), and the accumulating ops read their destination.
  EXPECT_EQ(ir::FindOp("add_relu")->operands[1].access, ir::Access::kReadWrite);
  EXPECT_EQ(ir::FindOp("fused_mul_add")->operands[0].access, ir::Access::kReadWrite);
  // The fused casts leave their intermediate in lhs; xor's scratch is booked as written.
  EXPECT_EQ(ir::FindOp("mul_cast")->operands[1].access, ir::Access::kReadWrite);
  EXPECT_EQ(ir::FindOp("xor")->operands[3].access, ir::Access::kWrite);
  EXPECT_TRUE(ir::FindOp("sub_relu_cast")->FindKwarg("target_type")->required);
  EXPECT_EQ(ir::FindOp("ands")->PublicName(), "and_");
  EXPECT_EQ(ir::FindOp("ors")->PublicName(), "or_");
  // Partial ops read each source at its own window; transpose writes the transposed window.
  EXPECT_EQ(ir::FindOp("partmax")->window, ir::WindowRule::kPart);
  EXPECT_EQ(ir::FindOp("transpose")->window, ir::WindowRule::kTranspose);
}

TEST(Registry, NoPlannedNameIsBuilt) {
  for (const ir::PlannedOp& planned : ir::PlannedOps()) {
    const ir::OpDef* op = ir::FindOp(planned.name);
    EXPECT_TRUE(op == nullptr) << planned.name << " is both planned and in the registry";
    EXPECT_FALSE(planned.doc.empty()) << planned.name;
  }
}

TEST(VectorRegistry, NoVectorOpIsStillPlanned) {
  for (const char* name : {"neg", "exp", "cast", "eq", "select", "axpy", "row_sum", "col_min", "sum", "argmax",
                           "row_expand_add", "col_expand_min", "expand_div", "and_", "or_", "xor", "not_", "shl",
                           "shr", "add_relu_cast", "sub_relu_cast", "mul_cast", "partadd", "partmax", "partmin",
                           "partmul", "transpose"}) {
    for (const ir::PlannedOp& planned : ir::PlannedOps()) EXPECT_NE(planned.name, name);
  }
}

TEST(VectorRegistry, RoundModeChoicesMatchTheDeviceEnum) {
  const ir::KwargSpec* mode = ir::FindOp("cast")->FindKwarg("mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->kind, ir::AttrKind::kEnum);
  EXPECT_EQ(mode->cpp_prefix, "pto::RoundMode::");
  const std::vector<std::pair<std::string, pto::RoundMode>> device = {
      {"CAST_RINT", pto::RoundMode::CAST_RINT},   {"CAST_ROUND", pto::RoundMode::CAST_ROUND},
      {"CAST_FLOOR", pto::RoundMode::CAST_FLOOR}, {"CAST_CEIL", pto::RoundMode::CAST_CEIL},
      {"CAST_TRUNC", pto::RoundMode::CAST_TRUNC}, {"CAST_ODD", pto::RoundMode::CAST_ODD},
      {"CAST_NONE", pto::RoundMode::CAST_NONE}};
  ASSERT_EQ(mode->choices.size(), device.size());
  for (size_t i = 0; i < device.size(); ++i) {
    EXPECT_EQ(mode->choices[i], device[i].first);
    EXPECT_EQ(int(device[i].second), int(i)) << device[i].first;
  }
  EXPECT_EQ(mode->choices[size_t(mode->default_value)], "CAST_ROUND");
}

TEST(VectorDispatch, DimSelectsTheRowOrColumnOp) {
  KernelBuilder k;
  ir::Expr src = k.Tile("src", 8, 16), tmp = k.Tile("tmp", 8, 16);
  ir::Expr col = k.Tile("col", 8, 1), row = k.Tile("row", 1, 16), idx = k.Tile("idx", 8, 1, DataType::kInt32);
  EXPECT_EQ(Call("sum", {col, src, tmp})->op->name, "row_sum");
  EXPECT_EQ(Call("sum", {col, src, tmp}, {{"dim", Int(0)}})->op->name, "row_sum");
  EXPECT_EQ(Call("sum", {row, src, tmp}, {{"dim", Int(1)}})->op->name, "col_sum");
  EXPECT_EQ(Call("maximum", {src, src, tmp})->op->name, "maximum");
  EXPECT_EQ(Call("maximum", {src, src, ir::FloatConst(1.0)})->op->name, "maxs");
  EXPECT_EQ(Call("maximum", {col, src, tmp}, {{"dim", Int(0)}})->op->name, "row_max");
  EXPECT_EQ(Call("minimum", {row, src, tmp}, {{"dim", Int(1)}})->op->name, "col_min");
  EXPECT_EQ(Call("argmax", {idx, src, tmp})->op->name, "argmax");
  EXPECT_EQ(Call("argmin", {idx, src, tmp}, {{"dim", Int(1)}})->op->name, "col_argmin");
  EXPECT_EQ(Call("expand_max", {src, src, col})->op->name, "row_expand_max");
  EXPECT_EQ(Call("expand_div", {src, src, row}, {{"dim", Int(1)}})->op->name, "col_expand_div");
  // Operands by keyword: the called op's names (maximum's lhs/rhs, expand_*'s scalar) or the chosen op's.
  ir::Stmt by_name = Call("maximum", {col}, {{"lhs", Operand(src)}, {"rhs", Operand(tmp)}, {"dim", Int(0)}});
  EXPECT_EQ(by_name->op->name, "row_max");
  EXPECT_EQ(by_name->args[1], src);
  EXPECT_EQ(by_name->args[2], tmp);
  EXPECT_EQ(Call("expand_mul", {src, src}, {{"scalar", Operand(row)}, {"dim", Int(1)}})->args[2], row);
  ir::Stmt all_by_name =
      Call("sum", {}, {{"out", Operand(row)}, {"src", Operand(src)}, {"tmp", Operand(tmp)}, {"dim", Int(1)}});
  EXPECT_EQ(all_by_name->args[0], row);
  // The dispatch keyword is consumed: the chosen op carries no attribute for it.
  EXPECT_TRUE(Call("sum", {row, src, tmp}, {{"dim", Int(1)}})->attrs.empty());
  try {
    Call("sum", {col, src, tmp}, {{"dim", Int(2)}});
    ADD_FAILURE() << "dim=2 accepted";
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(d.what()).find("pl.sum(): dim=2 is out of range [0, 1]"), std::string::npos) << d.what();
  }
}

TEST(VectorDispatch, ScalarFormsAtAnyOperand) {
  KernelBuilder k;
  ir::Expr a = k.Tile("a", 8, 16), mask = k.Tile("mask", 8, 16, DataType::kUInt8), tmp = k.Tile("tmp", 8, 16);
  EXPECT_EQ(Call("gt", {mask, a, a})->op->name, "gt");
  EXPECT_EQ(Call("gt", {mask, a, ir::FloatConst(0.0)})->op->name, "gt_scalar");
  EXPECT_EQ(Call("select", {a, mask, a, a, tmp})->op->name, "select");
  EXPECT_EQ(Call("select", {a, mask, a, ir::FloatConst(2.0), tmp})->op->name, "select_scalar");
  EXPECT_EQ(Call("add", {a, a, ir::IntConst(3)})->op->name, "adds");
}

TEST(VectorDispatch, CastModeIsAnEnumAttribute) {
  KernelBuilder k;
  ir::Expr h = k.Tile("h", 8, 16, DataType::kFP16), f = k.Tile("f", 8, 16);
  ir::Stmt default_mode = Call("cast", {h, f});
  ASSERT_EQ(default_mode->attrs.size(), 1u);
  EXPECT_EQ(default_mode->attrs[0].name, "mode");
  EXPECT_EQ(default_mode->attrs[0].value, 1);  // CAST_ROUND
  EXPECT_EQ(Call("cast", {h, f}, {{"mode", Str("CAST_ODD")}})->attrs[0].value, 5);
  try {
    Call("cast", {h, f}, {{"mode", Str("rint")}});
    ADD_FAILURE() << "mode='rint' accepted";
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(d.what()).find("pl.cast(): mode must be one of CAST_RINT, CAST_ROUND"), std::string::npos)
        << d.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Verifier
// ---------------------------------------------------------------------------------------------

void ExpectRejected(const KernelBuilder& k, ir::Stmt op, ErrorKind kind, const std::string& message) {
  try {
    ir::Verify(k.With({op}));
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), kind) << d.what();
    EXPECT_NE(std::string(d.what()).find(message), std::string::npos) << d.what();
    EXPECT_EQ(d.span().line, KernelBuilder::kOpLine) << d.what();
    return;
  }
  ADD_FAILURE() << "accepted; expected: " << message;
}

TEST(VectorVerifier, AcceptsWellFormedCalls) {
  KernelBuilder k;
  ir::Expr src = k.Tile("src", 8, 16), tmp = k.Tile("tmp", 8, 16), col = k.Tile("col", 8, 1);
  ir::Expr row = k.Tile("row", 1, 16), h = k.Tile("h", 8, 16, DataType::kFP16);
  ir::Expr idx = k.Tile("idx", 1, 16, DataType::kUInt32), mask = k.Tile("mask", 8, 16, DataType::kUInt8);
  ir::Expr scratch = k.Tile("scratch", 2, 2, DataType::kInt8);
  EXPECT_NO_THROW(ir::Verify(k.With({
      Call("sum", {col, src, scratch}), Call("sum", {row, src, scratch}, {{"dim", Int(1)}}),
      Call("maximum", {col, src, tmp}, {{"dim", Int(0)}}), Call("argmax", {idx, src, tmp}, {{"dim", Int(1)}}),
      Call("row_expand_sub", {src, src, col}), Call("expand_mul", {src, src, row}, {{"dim", Int(1)}}),
      Call("cast", {h, src}, {{"mode", Str("CAST_ODD")}}), Call("axpy", {src, h, ir::FloatConst(0.5)}),
      Call("lt", {mask, h, ir::FloatConst(0.0)}), Call("select", {src, mask, src, tmp, scratch}),
      Call("exp", {h, h}), Call("expands", {mask, ir::IntConst(1)}),
  })));
}

TEST(VectorVerifier, RejectsReductionShapes) {
  KernelBuilder k;
  ir::Expr src = k.Tile("src", 8, 16), tmp = k.Tile("tmp", 8, 16), col = k.Tile("col", 8, 1);
  ir::Expr wide = k.Tile("wide", 8, 2), row = k.Tile("row", 1, 16), short_row = k.Tile("short_row", 1, 8);
  ExpectRejected(k, Call("row_sum", {wide, src, tmp}), ErrorKind::kType,
                 "pl.row_sum: operand 'out' must have shape [8, 1] (one value per row of 'src' Tile[[8, 16], fp32, "
                 "Vec]), got Tile[[8, 2], fp32, Vec]");
  ExpectRejected(k, Call("sum", {col, src, tmp}, {{"dim", Int(1)}}), ErrorKind::kType,
                 "pl.col_sum: operand 'out' must have shape [1, 16]");
  ExpectRejected(k, Call("col_max", {short_row, src, tmp}), ErrorKind::kType,
                 "pl.col_max: operand 'out' must have shape [1, 16]");
  ExpectRejected(k, Call("maximum", {row, src, tmp}, {{"dim", Int(0)}}), ErrorKind::kType,
                 "pl.row_max: operand 'out' must have shape [8, 1]");
  ExpectRejected(k, Call("row_min", {col, src, col}), ErrorKind::kType,
                 "pl.row_min: operand 'tmp' has shape Tile[[8, 1], fp32, Vec] but 'src' is Tile[[8, 16], fp32, Vec]");
  ExpectRejected(k, Call("row_expand_add", {src, src, row}), ErrorKind::kType,
                 "pl.row_expand_add: operand 'col' must have shape [8, 1]");
  ExpectRejected(k, Call("expand_min", {src, src, col}, {{"dim", Int(1)}}), ErrorKind::kType,
                 "pl.col_expand_min: operand 'row' must have shape [1, 16]");
  ExpectRejected(k, Call("add", {src, src, wide}), ErrorKind::kType,
                 "pl.add: operand 'rhs' has shape Tile[[8, 2], fp32, Vec] but 'out' is Tile[[8, 16], fp32, Vec]");
}

TEST(VectorVerifier, RejectsDtypes) {
  KernelBuilder k;
  ir::Expr f = k.Tile("f", 8, 16), bf = k.Tile("bf", 8, 16, DataType::kBF16), i8 = k.Tile("i8", 8, 16, DataType::kInt8);
  ir::Expr fcol = k.Tile("fcol", 8, 1), bcol = k.Tile("bcol", 8, 1, DataType::kBF16);
  ir::Expr fmask = k.Tile("fmask", 8, 16, DataType::kInt8);
  ir::Expr u8 = k.Tile("u8", 8, 16, DataType::kUInt8), i32 = k.Tile("i32", 8, 16, DataType::kInt32);
  ExpectRejected(k, Call("rsqrt", {bf, bf}), ErrorKind::kType,
                 "pl.rsqrt operand 'out' has dtype bf16, which pl.rsqrt does not support there (it takes fp16, fp32)");
  ExpectRejected(k, Call("exp", {i32, i32}), ErrorKind::kType, "pl.exp operand 'out' has dtype int32");
  ExpectRejected(k, Call("neg", {i8, i8}), ErrorKind::kType, "pl.neg operand 'out' has dtype int8");
  ExpectRejected(k, Call("sum", {bcol, bf, bf}), ErrorKind::kType, "pl.row_sum operand 'out' has dtype bf16");
  ExpectRejected(k, Call("argmax", {fcol, f, f}), ErrorKind::kType,
                 "pl.argmax operand 'out' has dtype fp32, which pl.argmax does not support there (it takes int32, "
                 "uint32)");
  ExpectRejected(k, Call("eq", {fmask, f, f}), ErrorKind::kType, "pl.eq operand 'out' has dtype int8");
  ExpectRejected(k, Call("eq", {u8, f, bf}), ErrorKind::kType,
                 "pl.eq: dtype mismatch: operand 'rhs' is bf16 but 'lhs' is fp32");
  ExpectRejected(k, Call("select", {f, f, f, f, f}), ErrorKind::kType, "pl.select operand 'mask' has dtype fp32");
  ExpectRejected(k, Call("select", {bf, u8, bf, ir::FloatConst(1.0), f}), ErrorKind::kType,
                 "pl.select operand 'out' has dtype bf16");
  ExpectRejected(k, Call("axpy", {bf, bf, ir::FloatConst(1.0)}), ErrorKind::kType,
                 "pl.axpy operand 'out' has dtype bf16");
  ir::Expr h = k.Tile("h", 8, 16, DataType::kFP16);
  ExpectRejected(k, Call("axpy", {h, f, ir::FloatConst(1.0)}), ErrorKind::kType,
                 "pl.axpy: 'src' is fp32 but 'out' is fp16; they must match, or be fp16 -> fp32");
  ExpectRejected(k, Call("cast", {bf, f}, {{"mode", Str("CAST_ODD")}}), ErrorKind::kValue,
                 "pl.cast: mode=pl.RoundMode.CAST_ODD is only defined for fp32 -> fp16, not fp32 -> bf16");
}

TEST(VectorVerifier, RejectsMemories) {
  KernelBuilder k;
  ir::Expr v = k.Tile("v", 8, 16), mat = k.Tile("mat", 8, 16, DataType::kFP32, MemorySpace::kMat);
  ExpectRejected(k, Call("exp", {v, mat}), ErrorKind::kType,
                 "pl.exp operand 'src' must be a tile in Vec memory, got Tile[[8, 16], fp32, Mat]");
}

// ---------------------------------------------------------------------------------------------
// Device functions
// ---------------------------------------------------------------------------------------------

struct DeviceFault : std::runtime_error {
  int line;
  DeviceFault(int l, const std::string& m) : std::runtime_error(m), line(l) {}
};

PtoCoreCtx& Ctx() {
  static const PtoRuntimeApi api = {PTO_ABI_VERSION, nullptr, [](PtoCoreCtx*, int32_t line, const PtoFaultDetail* d) {
                                      throw DeviceFault(line, std::string(d->op) + ": " + d->message);
                                    }};
  static PtoCoreCtx ctx = [] {
    PtoCoreCtx c{};
    c.api = &api;
    return c;
  }();
  return ctx;
}

// A tile over a caller's array with a valid window.
template <typename T, int R, int C>
pto::Tile<T, R, C, pto::kVec> TileOf(T* data, int rows = R, int cols = C) {
  return pto::Tile<T, R, C, pto::kVec>{data, rows, cols, 0};
}

uint16_t HalfBits(float f, pto::RoundMode mode) {
  pto::half out[1];
  float src[1] = {f};
  auto s = TileOf<float, 1, 1>(src);
  auto d = TileOf<pto::half, 1, 1>(out);
  pto::cast(Ctx(), 1, mode, d, s);
  return out[0].bits;
}

uint16_t Bf16Bits(float f, pto::RoundMode mode) {
  pto::bfloat16 out[1];
  float src[1] = {f};
  auto s = TileOf<float, 1, 1>(src);
  auto d = TileOf<pto::bfloat16, 1, 1>(out);
  pto::cast(Ctx(), 1, mode, d, s);
  return out[0].bits;
}

// The reference: the nonnegative finite values of a 16-bit float format, ascending, and the
// choice between the two neighbours of a value by a rounding mode (a different algorithm from the
// device's bit arithmetic).
class Narrow16Reference {
 public:
  explicit Narrow16Reference(float (*to_float)(uint16_t), uint16_t max_finite) : max_finite_(max_finite) {
    for (uint32_t b = 0; b <= max_finite; ++b) values_.push_back(to_float(uint16_t(b)));
  }

  uint16_t Round(float f, pto::RoundMode mode) const {
    const bool negative = std::signbit(f);
    const double a = std::fabs(double(f));
    const uint16_t sign = negative ? 0x8000 : 0;
    if (std::isinf(f)) return sign | uint16_t(max_finite_ + 1);
    auto it = std::lower_bound(values_.begin(), values_.end(), a);
    if (it != values_.end() && *it == a) return sign | uint16_t(it - values_.begin());
    uint32_t hi = uint32_t(it - values_.begin());  // max_finite + 1 is infinity
    uint32_t lo = hi - 1;
    const double lo_v = values_[lo];
    const double hi_v = hi <= max_finite_ ? values_[hi] : 2 * values_[lo] - values_[lo - 1];  // one ulp on
    bool away;
    switch (mode) {
      case pto::RoundMode::CAST_ROUND: away = a - lo_v >= hi_v - a; break;
      case pto::RoundMode::CAST_FLOOR: away = negative; break;
      case pto::RoundMode::CAST_CEIL: away = !negative; break;
      case pto::RoundMode::CAST_TRUNC: away = false; break;
      case pto::RoundMode::CAST_ODD: away = (lo & 1) == 0; break;
      default: away = a - lo_v > hi_v - a || (a - lo_v == hi_v - a && (lo & 1)); break;
    }
    uint32_t bits = away ? hi : lo;
    if (bits > max_finite_) bits = max_finite_ + 1;  // past the largest finite: infinity
    return sign | uint16_t(bits);
  }

 private:
  std::vector<double> values_;
  uint32_t max_finite_;
};

float HalfToFloat(uint16_t b) { return pto::ToFloat(pto::half{b}); }
float Bf16ToFloat(uint16_t b) { return pto::ToFloat(pto::bfloat16{b}); }

constexpr pto::RoundMode kAllModes[] = {pto::RoundMode::CAST_RINT,  pto::RoundMode::CAST_ROUND,
                                        pto::RoundMode::CAST_FLOOR, pto::RoundMode::CAST_CEIL,
                                        pto::RoundMode::CAST_TRUNC, pto::RoundMode::CAST_NONE};

// fp32 values worth checking: a sweep over all bit patterns, and the exact midpoints between
// neighbouring values of the target format with one fp32 ulp either side.
std::vector<float> NarrowingInputs(float (*to_float)(uint16_t), uint16_t max_finite) {
  std::vector<float> in;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 40009) {
    uint32_t u = uint32_t(b);
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) in.push_back(f);
  }
  for (uint32_t b = 0; b < max_finite; b += 7) {
    float mid = float((double(to_float(uint16_t(b))) + double(to_float(uint16_t(b + 1)))) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      in.push_back(f);
      in.push_back(-f);
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, INFINITY, 3.4028235e38f, 1e-45f, 0.0f, -0.0f}) {
    in.push_back(f);
    in.push_back(-f);
  }
  return in;
}

TEST(VectorCast, Fp32ToFp16MatchesTheReferenceInEveryMode) {
  const Narrow16Reference ref(HalfToFloat, 0x7bff);
  int checked = 0;
  for (float f : NarrowingInputs(HalfToFloat, 0x7bff)) {
    for (pto::RoundMode mode : kAllModes) {
      ASSERT_EQ(HalfBits(f, mode), ref.Round(f, mode)) << "f=" << std::hexfloat << f << " mode=" << int(mode);
      ++checked;
    }
    if (!std::isinf(f)) {
      ASSERT_EQ(HalfBits(f, pto::RoundMode::CAST_ODD), ref.Round(f, pto::RoundMode::CAST_ODD)) << std::hexfloat << f;
    }
  }
  EXPECT_GT(checked, 100000);
  // Round to nearest even is also what the conversion helpers of numeric.h (and F16C) do.
  for (float f : {1.0f + std::ldexp(1.0f, -11), 3.14159f, -2.5e-6f, 70000.0f}) {
    EXPECT_EQ(HalfBits(f, pto::RoundMode::CAST_RINT), pto::HalfFromFloat(f).bits) << f;
  }
  // Hand-checked ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  const float tie = 1.0f + std::ldexp(1.0f, -11);
  EXPECT_EQ(HalfBits(tie, pto::RoundMode::CAST_RINT), 0x3c00);
  EXPECT_EQ(HalfBits(tie, pto::RoundMode::CAST_ROUND), 0x3c01);
  EXPECT_EQ(HalfBits(-tie, pto::RoundMode::CAST_FLOOR), 0xbc01);
  EXPECT_EQ(HalfBits(-tie, pto::RoundMode::CAST_CEIL), 0xbc00);
  EXPECT_EQ(HalfBits(70000.0f, pto::RoundMode::CAST_TRUNC), 0x7bff);  // saturates toward zero
  EXPECT_EQ(HalfBits(70000.0f, pto::RoundMode::CAST_ROUND), 0x7c00);
  EXPECT_EQ(HalfBits(INFINITY, pto::RoundMode::CAST_TRUNC), 0x7c00);
  EXPECT_EQ(HalfBits(NAN, pto::RoundMode::CAST_FLOOR) & 0x7e00, 0x7e00);
}

TEST(VectorCast, Fp32ToBf16MatchesTheReferenceInEveryMode) {
  const Narrow16Reference ref(Bf16ToFloat, 0x7f7f);
  for (float f : NarrowingInputs(Bf16ToFloat, 0x7f7f)) {
    for (pto::RoundMode mode : kAllModes) {
      ASSERT_EQ(Bf16Bits(f, mode), ref.Round(f, mode)) << "f=" << std::hexfloat << f << " mode=" << int(mode);
    }
  }
  EXPECT_EQ(Bf16Bits(NAN, pto::RoundMode::CAST_TRUNC) & 0x7fc0, 0x7fc0);
}

TEST(VectorCast, OddRoundingOnlyForFp32ToFp16) {
  float src[4] = {1, 2, 3, 4};
  pto::bfloat16 out[4];
  auto s = TileOf<float, 1, 4>(src);
  auto d = TileOf<pto::bfloat16, 1, 4>(out);
  EXPECT_THROW(pto::cast(Ctx(), 9, pto::RoundMode::CAST_ODD, d, s), DeviceFault);
}

template <typename TD, typename TS>
std::vector<TD> CastAll(const std::vector<TS>& in, pto::RoundMode mode) {
  std::vector<TS> src = in;
  std::vector<TD> dst(in.size());
  pto::Tile<TS, 1, 64, pto::kVec> s{src.data(), 1, int32_t(in.size()), 0};
  pto::Tile<TD, 1, 64, pto::kVec> d{dst.data(), 1, int32_t(in.size()), 0};
  pto::cast(Ctx(), 1, mode, d, s);
  return dst;
}

TEST(VectorCast, FloatToIntRoundsThenSaturates) {
  const std::vector<float> in = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.7f, -2.7f, NAN, 3e9f, -3e9f, 1e20f};
  using M = pto::RoundMode;
  EXPECT_EQ((CastAll<int32_t>(in, M::CAST_RINT)),
            (std::vector<int32_t>{-2, -2, 0, 0, 2, 2, 3, -3, 0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ((CastAll<int32_t>(in, M::CAST_ROUND)),
            (std::vector<int32_t>{-3, -2, -1, 1, 2, 3, 3, -3, 0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ((CastAll<int32_t>(in, M::CAST_FLOOR)),
            (std::vector<int32_t>{-3, -2, -1, 0, 1, 2, 2, -3, 0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ((CastAll<int32_t>(in, M::CAST_CEIL)),
            (std::vector<int32_t>{-2, -1, 0, 1, 2, 3, 3, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ((CastAll<int32_t>(in, M::CAST_TRUNC)),
            (std::vector<int32_t>{-2, -1, 0, 0, 1, 2, 2, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ((CastAll<uint8_t>(in, M::CAST_TRUNC)), (std::vector<uint8_t>{0, 0, 0, 0, 1, 2, 2, 0, 0, 255, 0, 255}));
  EXPECT_EQ((CastAll<int8_t>(std::vector<float>{127.4f, 127.6f, -128.6f, 300.0f}, M::CAST_RINT)),
            (std::vector<int8_t>{127, 127, -128, 127}));
  EXPECT_EQ((CastAll<int64_t>(std::vector<float>{9.3e18f, -9.3e18f, 1.5e18f}, M::CAST_TRUNC)),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, int64_t(1.5e18f)}));
  EXPECT_EQ((CastAll<uint64_t>(std::vector<float>{1.8e19f, 2e19f, -1.0f}, M::CAST_TRUNC)),
            (std::vector<uint64_t>{uint64_t(1.8e19f), UINT64_MAX, 0}));
}

// int -> float through the rounding of wide integers: the reference picks between the fp32
// neighbours with exact integer arithmetic.
TEST(VectorCast, WideIntegersToFloatRoundByMode) {
  std::vector<int64_t> in = {(1 << 24) + 1, (1 << 24) + 3, -((1 << 24) + 1), INT64_MAX, INT64_MIN,
                             (int64_t(1) << 40) + (int64_t(1) << 16), 123456789012345LL, -987654321LL, 7, -7};
  for (pto::RoundMode mode : kAllModes) {
    std::vector<float> out = CastAll<float>(in, mode);
    for (size_t i = 0; i < in.size(); ++i) {
      const __int128 v = in[i];
      float near = float(in[i]);  // round to nearest even
      float lo = __int128(near) <= v ? near : std::nextafter(near, -INFINITY);
      float hi = __int128(lo) == v ? lo : std::nextafter(lo, INFINITY);
      __int128 dlo = v - __int128(lo), dhi = __int128(hi) - v;
      float expect;
      switch (mode) {
        case pto::RoundMode::CAST_ROUND: expect = dlo < dhi ? lo : dhi < dlo ? hi : (v < 0 ? lo : hi); break;
        case pto::RoundMode::CAST_FLOOR: expect = lo; break;
        case pto::RoundMode::CAST_CEIL: expect = hi; break;
        case pto::RoundMode::CAST_TRUNC: expect = v < 0 ? hi : lo; break;
        default: expect = near; break;
      }
      EXPECT_EQ(out[i], expect) << "v=" << in[i] << " mode=" << int(mode);
    }
  }
  // bf16 from int32 is rounded once: 2^25 + 2^17 + 1 is just above a tie and goes up.
  std::vector<pto::bfloat16> b =
      CastAll<pto::bfloat16>(std::vector<int32_t>{(1 << 25) + (1 << 17) + 1, (1 << 25) + (1 << 17)},
                             pto::RoundMode::CAST_RINT);
  EXPECT_EQ(pto::ToFloat(b[0]), float((1 << 25) + (1 << 18)));
  EXPECT_EQ(pto::ToFloat(b[1]), float(1 << 25));
  // fp16 from integers past its range: infinity, or the largest finite value toward zero.
  std::vector<pto::half> h = CastAll<pto::half>(std::vector<int32_t>{70000, -70000, 65504}, pto::RoundMode::CAST_TRUNC);
  EXPECT_EQ(h[0].bits, 0x7bff);
  EXPECT_EQ(h[1].bits, 0xfbff);
  EXPECT_EQ(h[2].bits, 0x7bff);
  EXPECT_EQ((CastAll<pto::half>(std::vector<int32_t>{70000}, pto::RoundMode::CAST_RINT)[0].bits), 0x7c00);
}

TEST(VectorCast, IntToIntWraps) {
  EXPECT_EQ((CastAll<int8_t>(std::vector<int32_t>{127, 128, 255, 256, -129}, pto::RoundMode::CAST_ROUND)),
            (std::vector<int8_t>{127, -128, -1, 0, 127}));
  EXPECT_EQ((CastAll<uint16_t>(std::vector<int64_t>{-1, 65536, 70000}, pto::RoundMode::CAST_NONE)),
            (std::vector<uint16_t>{65535, 0, 4464}));
}

// ---- math ----

double UlpError(float r, double ref) {
  if (std::isnan(ref)) return std::isnan(r) ? 0 : 1e9;
  if (std::isinf(ref) || std::isinf(r)) return float(ref) == r ? 0 : 1e9;
  float fr = float(ref);
  double ulp = std::fabs(double(std::nextafter(fr, INFINITY)) - double(fr));
  if (ulp == 0 || std::isinf(ulp)) ulp = std::ldexp(1.0, -149);
  return std::fabs(double(r) - ref) / ulp;
}

TEST(VectorMath, ExpLogSqrtWithinAnUlpAndAHalf) {
  double worst_exp = 0, worst_log = 0, worst_sqrt = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 65537 * 3) {
    uint32_t u = uint32_t(b);
    float x;
    std::memcpy(&x, &u, 4);
    pto::f32x16 v = pto::Splat(x);
    worst_exp = std::max(worst_exp, UlpError(pto::Exp16(v)[0], std::exp(double(x))));
    worst_log = std::max(worst_log, UlpError(pto::Log16(v)[15], std::log(double(x))));
    worst_sqrt = std::max(worst_sqrt, UlpError(pto::Sqrt16(v)[7], std::sqrt(double(x))));
  }
  EXPECT_LT(worst_exp, 1.5);
  EXPECT_LT(worst_log, 1.5);
  EXPECT_LE(worst_sqrt, 0.5);
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.8f, -104.0f, -87.4f, 1e-45f, -1.0f}) {
    EXPECT_LT(UlpError(pto::Exp16(pto::Splat(x))[0], std::exp(double(x))), 1.5) << x;
    EXPECT_LT(UlpError(pto::Log16(pto::Splat(x))[0], std::log(double(x))), 1.5) << x;
  }
}

TEST(VectorMath, RoundingHelpersMatchCmath) {
  pto::f32x16 x;
  const float values[16] = {-4.5f, -3.5f, -2.5f, -1.5f, -0.5f, -0.0f, 0.5f, 1.5f,
                            2.5f,  0.49999997f, 8388609.0f, -8388609.5f, 1e30f, -1e-30f, 2.7f, -2.7f};
  std::memcpy(&x, values, sizeof values);
  pto::f32x16 rint = pto::Rint16(x), floor = pto::Floor16(x), ceil = pto::Ceil16(x), trunc = pto::Trunc16(x),
              away = pto::RoundAway16(x);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(rint[i], std::rint(values[i])) << values[i];
    EXPECT_EQ(std::signbit(rint[i]), std::signbit(std::rint(values[i]))) << values[i];
    EXPECT_EQ(floor[i], std::floor(values[i])) << values[i];
    EXPECT_EQ(ceil[i], std::ceil(values[i])) << values[i];
    EXPECT_EQ(trunc[i], std::trunc(values[i])) << values[i];
    EXPECT_EQ(away[i], std::round(values[i])) << values[i];
  }
}

// ---- element-wise, compare, select ----

TEST(VectorDevice, UnaryAndFusedOpsOnAWindow) {
  // 2 x 20 tile, window 2 x 17: the last three columns of each row stay untouched.
  float a[40], b[40], out[40];
  for (int i = 0; i < 40; ++i) {
    a[i] = float(i % 7) - 3.0f;
    b[i] = 0.5f * float(i % 5);
    out[i] = 100.0f;
  }
  auto ta = TileOf<float, 2, 20>(a, 2, 17), tb = TileOf<float, 2, 20>(b, 2, 17), to = TileOf<float, 2, 20>(out, 2, 17);
  pto::relu(Ctx(), 1, to, ta);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(out[i], i % 20 < 17 ? std::max(a[i], 0.0f) : 100.0f) << i;
  pto::add_relu(Ctx(), 1, to, ta, tb);  // a := a + b, out := relu(a)
  for (int i = 0; i < 40; ++i) {
    float sum = float(i % 7) - 3.0f + (i % 20 < 17 ? b[i] : 0.0f);
    EXPECT_EQ(a[i], sum) << i;
    EXPECT_EQ(out[i], i % 20 < 17 ? std::max(sum, 0.0f) : 100.0f) << i;
  }
  float before[40];
  std::memcpy(before, out, sizeof out);
  pto::fused_mul_add_relu(Ctx(), 1, to, ta, tb);  // out := relu(out * a + b)
  for (int i = 0; i < 40; ++i) EXPECT_EQ(out[i], i % 20 < 17 ? std::max(before[i] * a[i] + b[i], 0.0f) : 100.0f) << i;
  pto::expands(Ctx(), 1, tb, 2);
  EXPECT_EQ(b[0], 2.0f);
  EXPECT_EQ(b[17], 0.5f * float(17 % 5));
}

TEST(VectorDevice, HalfFusedOpsRoundEveryStep) {
  // out = lhs * out + rhs in fp16: (1.5 + 2^-10)^2 = 2.25 + 1.5 * 2^-9 + 2^-20 rounds to 2.25 + 2^-8
  // before the add, so the result is 2^-8 (unrounded it would be about 0.00293).
  pto::half lhs[16], out[16], rhs[16];
  for (int i = 0; i < 16; ++i) {
    lhs[i] = out[i] = pto::HalfFromFloat(1.5f + std::ldexp(1.0f, -10));
    rhs[i] = pto::HalfFromFloat(-2.25f);
  }
  auto tl = TileOf<pto::half, 1, 16>(lhs), to = TileOf<pto::half, 1, 16>(out), tr = TileOf<pto::half, 1, 16>(rhs);
  pto::fused_mul_add(Ctx(), 1, to, tl, tr);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(pto::ToFloat(out[i]), std::ldexp(1.0f, -8)) << i;
}

TEST(VectorDevice, CompareWritesRowPackedBitsAndSelectReadsThem) {
  // 3 x 20 fp32 operands, window 3 x 13: two mask bytes per row; the rest of the row is untouched.
  float a[60], b[60], out[60];
  uint8_t mask[60];
  std::memset(mask, 0xee, sizeof mask);
  for (int i = 0; i < 60; ++i) {
    a[i] = float(i % 9);
    b[i] = 4.0f;
    out[i] = -1.0f;
  }
  auto ta = TileOf<float, 3, 20>(a, 3, 13), tb = TileOf<float, 3, 20>(b, 3, 13), to = TileOf<float, 3, 20>(out, 3, 13);
  auto tm = TileOf<uint8_t, 3, 20>(mask, 3, 13);
  pto::gt(Ctx(), 1, tm, ta, tb);
  for (int r = 0; r < 3; ++r) {
    uint32_t expect = 0;
    for (int c = 0; c < 13; ++c) expect |= uint32_t(a[r * 20 + c] > 4.0f) << c;
    EXPECT_EQ(mask[r * 20], expect & 0xff) << r;
    EXPECT_EQ(mask[r * 20 + 1], expect >> 8) << r;
    EXPECT_EQ(mask[r * 20 + 2], 0xee) << r;
  }
  pto::select_scalar(Ctx(), 1, to, tm, ta, 0.25f, tb);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(out[i], i % 20 >= 13 ? -1.0f : a[i] > 4.0f ? a[i] : 0.25f) << i;
  pto::le_scalar(Ctx(), 1, tm, ta, 2);  // row 0 holds 0 1 2 3 4 5 6 7 | 8 0 1 2 3
  EXPECT_EQ(mask[0], 0b00000111);
  EXPECT_EQ(mask[1], 0b00001110);
}

// ---- reductions and broadcasts ----

TEST(VectorDevice, RowAndColumnReductionsUseTheSourceWindow) {
  float src[4 * 6], col[4] = {-9, -9, -9, -9}, row[6] = {-9, -9, -9, -9, -9, -9};
  for (int i = 0; i < 24; ++i) src[i] = float((i * 5) % 11) - 5.0f;
  auto ts = TileOf<float, 4, 6>(src, 3, 5);
  pto::Tile<float, 4, 1, pto::kVec, pto::kDN> tc{col, 4, 1, 0};
  auto tr = TileOf<float, 1, 6>(row);
  pto::row_sum(Ctx(), 1, tc, ts, ts);
  for (int r = 0; r < 3; ++r) {
    float s = 0;
    for (int c = 0; c < 5; ++c) s += src[r * 6 + c];
    EXPECT_EQ(col[r], s) << r;
  }
  EXPECT_EQ(col[3], -9.0f);
  pto::col_max(Ctx(), 1, tr, ts, ts);
  for (int c = 0; c < 5; ++c) EXPECT_EQ(row[c], std::max({src[c], src[6 + c], src[12 + c]})) << c;
  EXPECT_EQ(row[5], -9.0f);
  int32_t idx[6] = {};
  auto ti = TileOf<int32_t, 1, 6>(idx);
  pto::col_argmin(Ctx(), 1, ti, ts, ts);
  for (int c = 0; c < 5; ++c) {
    int best = 0;
    for (int r = 1; r < 3; ++r) best = src[r * 6 + c] < src[best * 6 + c] ? r : best;
    EXPECT_EQ(idx[c], best) << c;
  }
}

TEST(VectorDevice, IntegerSumsWrapAndArgmaxTakesTheFirst) {
  int8_t src[2 * 40];
  for (int i = 0; i < 80; ++i) src[i] = int8_t(100);
  int8_t sums[40];
  auto ts = TileOf<int8_t, 2, 40>(src);
  auto tr = TileOf<int8_t, 1, 40>(sums);
  pto::col_sum(Ctx(), 1, tr, ts, ts);
  EXPECT_EQ(sums[0], int8_t(200 - 256));
  pto::half h[2 * 16];
  for (int i = 0; i < 32; ++i) h[i] = pto::HalfFromFloat(float(i % 3));
  uint32_t arg[2];
  auto th = TileOf<pto::half, 2, 16>(h);
  pto::Tile<uint32_t, 2, 1, pto::kVec> ta{arg, 2, 1, 0};
  pto::argmax(Ctx(), 1, ta, th, th);
  EXPECT_EQ(arg[0], 2u);  // row 0 holds 0 1 2 0 1 2 ...: the first 2 is at column 2
  EXPECT_EQ(arg[1], 1u);  // row 1 holds 1 2 0 1 2 0 ...
}

TEST(VectorDevice, BroadcastsAndIntegerDivisionByZeroFaults) {
  int32_t src[3 * 4], out[3 * 4], col[3] = {1, 2, 3}, row[4] = {1, -1, 2, 0};
  for (int i = 0; i < 12; ++i) src[i] = 12 * (i + 1);
  auto ts = TileOf<int32_t, 3, 4>(src), to = TileOf<int32_t, 3, 4>(out);
  pto::Tile<int32_t, 3, 1, pto::kVec, pto::kDN> tc{col, 3, 1, 0};
  auto tr = TileOf<int32_t, 1, 4>(row);
  pto::row_expand_div(Ctx(), 1, to, ts, tc);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], src[i] / col[i / 4]) << i;
  pto::col_expand_sub(Ctx(), 1, to, ts, tr);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], src[i] - row[i % 4]) << i;
  try {
    pto::col_expand_div(Ctx(), 42, to, ts, tr);
    ADD_FAILURE() << "no fault";
  } catch (const DeviceFault& f) {
    EXPECT_EQ(f.line, 42);
    EXPECT_STREQ(f.what(), "col_expand_div: integer division by zero in a tile");
  }
  col[1] = 0;
  EXPECT_THROW(pto::row_expand_div(Ctx(), 1, to, ts, tc), DeviceFault);
  // A window that leaves the zero out divides fine.
  pto::Tile<int32_t, 3, 4, pto::kVec> narrow{out, 3, 3, 0};
  EXPECT_NO_THROW(pto::col_expand_div(Ctx(), 1, narrow, ts, tr));
}

// The vector form of a row sum's final reduction adds the same pairs in the same order as the
// scalar tree it replaced: bit for bit, infinities and NaNs included.
TEST(VectorDevice, SumLanesIsTheScalarTreeBitForBit) {
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  const float specials[] = {0.0f, -0.0f, __builtin_inff(), -__builtin_inff(), __builtin_nanf(""), 1e38f, -1e-45f};
  for (int t = 0; t < 200000; ++t) {
    pto::f32x16 v;
    for (int l = 0; l < 16; ++l) {
      const uint32_t r = next();
      float x = float(int32_t(r >> 8)) * (t % 3 == 0 ? 1e-30f : t % 3 == 1 ? 1.0f : 1e30f);
      if (r % 61 == 0) x = specials[r % 7];
      v[l] = x;
    }
    const float fast = pto::detail::SumLanes(v);
    const float tree = pto::detail::ReduceLanes(v, [](float a, float b) { return a + b; });
    uint32_t a, b;
    std::memcpy(&a, &fast, 4);
    std::memcpy(&b, &tree, 4);
    ASSERT_TRUE(a == b || (fast != fast && tree != tree)) << "case " << t << ": " << fast << " vs " << tree;
  }
}

// A GM load prefetches the window its own statement reads next: one step along its walk once it has
// one (a matmul's B tiles walk down the columns), else the next window along the rows.
TEST(GmLoads, EachLoadStatementPrefetchesAlongItsOwnWalk) {
  using pto::detail::PredictNextWindow;
  PtoCoreCtx ctx{};
  static float data[64 * 64];
  EXPECT_EQ(PredictNextWindow(ctx, 10, data, 16), data + 16);                // no history: along the rows
  EXPECT_EQ(PredictNextWindow(ctx, 10, data + 16 * 64, 16), data + 32 * 64);  // down 16 rows, and again
  EXPECT_EQ(PredictNextWindow(ctx, 11, data + 5, 16), data + 21);            // another statement: its own
  EXPECT_EQ(PredictNextWindow(ctx, 10, data + 32 * 64, 16), data + 48 * 64);
  EXPECT_EQ(PredictNextWindow(ctx, 10, data + 32 * 64, 16), data + 32 * 64 + 16);  // in place: along the rows
  EXPECT_EQ(PredictNextWindow(ctx, 10 + PTO_LOAD_HISTORY, data, 16), data + 16);  // its slot's line differs
}

// Stores into a large tensor stream around the caches unless the launch found its buffer untouched
// (MarkFresh asks the runtime, for buffers large enough to stream to only).
TEST(GmStores, FreshLargeBuffersAreStoredThroughTheCaches) {
  static int asked = 0;
  static int32_t answer = 0;
  static const PtoRuntimeApi api = [] {
    PtoRuntimeApi a{};
    a.abi_version = PTO_ABI_VERSION;
    a.fresh_memory = [](PtoCoreCtx*, const void*, int64_t bytes) {
      ++asked;
      EXPECT_EQ(bytes, int64_t(1024) * 1024 * 4);
      return answer;
    };
    return a;
  }();
  PtoCoreCtx ctx{};
  ctx.api = &api;
  static uint8_t fake[1];  // never dereferenced: only its bounds are
  const auto big = pto::MakeGm<float, 2>(fake, pto::Idx<2>{{1024, 1024}}, "y");
  const auto small = pto::MakeGm<float, 2>(fake, pto::Idx<2>{{1023, 1024}}, "y");
  EXPECT_TRUE(pto::detail::StreamsStores(big, 1024));
  answer = 1;
  const auto fresh = pto::detail::MarkFresh(ctx, big);
  EXPECT_TRUE(fresh.fresh);
  EXPECT_FALSE(pto::detail::StreamsStores(fresh, 1024));
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(pto::detail::MarkFresh(ctx, small).fresh);  // below kStreamingStoreBytes: not asked
  EXPECT_EQ(asked, 1);
  answer = 0;
  EXPECT_TRUE(pto::detail::StreamsStores(pto::detail::MarkFresh(ctx, big), 1024));
  EXPECT_EQ(asked, 2);
  // A view of a fresh tensor keeps the mark.
  const auto view = pto::MakeView<float, 1>(ctx, 1, fresh, pto::Idx<1>{{1024 * 1024}}, false, pto::Idx<1>{{1}},
                                               "flat");
  EXPECT_TRUE(view.fresh);
}

TEST(Transpose2D, MatchesAnElementwiseTransposePortably) { test_util::ExpectTransposesMatchElementwise(); }

// The GEMM's fp32 paths, which hosts without the bf16 / int8 dot products (or AMX) run; the native
// binary (test_cube_ops.cpp) runs the same checks on this host's own paths.
TEST(PortableGemm, Fp16AndFp32MatchNaive) {
  test_util::ExpectMatchesNaiveOnEveryShape<pto::half, float>(test_util::InitKind::kZero, 1);
  test_util::ExpectMatchesNaiveOnEveryShape<float, float>(test_util::InitKind::kBias, 3);
}
TEST(PortableGemm, Bf16MatchesNaive) {
  test_util::ExpectMatchesNaiveOnEveryShape<pto::bfloat16, float>(test_util::InitKind::kMatrixInPlace, 6);
}
TEST(PortableGemm, Int8IsExactInInt32) {
  test_util::ExpectMatchesNaiveOnEveryShape<int8_t, int32_t>(test_util::InitKind::kMatrixInPlace, 7);
  test_util::ExpectInt8SumsExactAndWrapping();
}
TEST(PortableGemm, EmptyKGivesTheInit) { test_util::ExpectEmptyKGivesTheInit(); }
TEST(PortableGemm, Fp16ProductsAreExact) { test_util::ExpectFp16ProductsExact(); }
TEST(PortableGemm, RandomScaledMatmulsStayWithinTheirBound) {
  test_util::ExpectRandomScaledGemms<pto::bfloat16, float>(21, 40);
  test_util::ExpectRandomScaledGemms<pto::half, float>(22, 40);
  test_util::ExpectRandomScaledGemms<float, float>(23, 20);
  test_util::ExpectRandomScaledGemms<int8_t, int32_t>(24, 20);
}
TEST(PortableGemm, Fp32PriorSubnormalsAreKept) { test_util::ExpectFp32PriorKeptExactly(); }
TEST(PortableGemm, Bf16SubnormalsGiveIeeeResults) {
  for (const char* where : {"a", "b", "product"}) test_util::ExpectBf16SubnormalsKept(64, 64, 64, where);
}
TEST(PortableGemm, Fp16InfinityAndNanPropagate) { test_util::ExpectFp16InfinityAndNanPropagate(48, 40); }

}  // namespace
}  // namespace pypto_pro
