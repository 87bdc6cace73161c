#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro {
namespace {

using ir::BinaryOp;
using ir::DataType;
using test_util::At;
using test_util::Ref;

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

ir::Expr I(int64_t v, DataType dtype = DataType::kInt32) { return ir::IntConst(v, {}, dtype); }
ir::Expr F(double v) { return ir::FloatConst(v); }
ir::Expr Bin(BinaryOp op, ir::Expr a, ir::Expr b, Span span = {}) {
  return ir::Binary(op, std::move(a), std::move(b), span);
}

// Folds `value` as the right-hand side of an assignment and returns the folded expression.
ir::Expr Fold(ir::Expr value) {
  ir::Function f;
  ir::Var v = f.NewVar("v", ir::Type::Scalar(value->type.dtype));
  f.body = ir::Seq({ir::Assign(v, std::move(value))});
  passes::FoldConstants(f, passes::PassContext{});
  EXPECT_EQ(f.body->stmts.size(), 1u);
  return f.body->stmts.at(0)->value;
}

int64_t FoldInt(ir::Expr value, DataType expected_dtype = DataType::kInt32) {
  ir::Expr folded = Fold(std::move(value));
  EXPECT_TRUE(folded->IsIntConst()) << ir::Print(folded);
  EXPECT_EQ(folded->type.dtype, expected_dtype) << ir::Print(folded);
  return folded->int_value;
}

double FoldFloat(ir::Expr value) {
  ir::Expr folded = Fold(std::move(value));
  EXPECT_TRUE(folded->IsConst() && folded->type.dtype == DataType::kFP32) << ir::Print(folded);
  return folded->float_value;
}

TEST(FoldConstants, IntegerArithmetic) {
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMul, Bin(BinaryOp::kAdd, I(2), I(3)), I(4))), 20);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kSub, I(3), I(10))), -7);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMin, I(3), I(-4))), -4);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMax, I(3), I(-4))), 3);
  EXPECT_EQ(FoldInt(ir::Unary(ir::UnaryOp::kNeg, I(5))), -5);
  EXPECT_EQ(FoldInt(ir::Ternary(ir::BoolConst(false), I(1), I(2))), 2);
  EXPECT_EQ(FoldInt(ir::Cast(I(3), DataType::kInt64), DataType::kInt64), 3);
}

TEST(FoldConstants, IntegerDivisionTruncatesTowardZero) {
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, I(7), I(2))), 3);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, I(-7), I(2))), -3);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, I(7), I(-2))), -3);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, I(-7), I(-2))), 3);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kDiv, I(-7), I(2))), -3);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kDiv, I(9), I(3))), 3);
}

TEST(FoldConstants, ModuloTakesTheDividendsSign) {
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMod, I(7), I(3))), 1);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMod, I(-7), I(3))), -1);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMod, I(7), I(-3))), 1);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMod, I(-7), I(-3))), -1);
}

TEST(FoldConstants, Int32Wraps) {
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kAdd, I(kInt32Max), I(1))), kInt32Min);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kSub, I(kInt32Min), I(1))), kInt32Max);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMul, I(65536), I(65536))), 0);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMul, I(65536), I(32769))), -2147418112);  // 2^31 + 2^16 wrapped
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, I(kInt32Min), I(-1))), kInt32Min);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMod, I(kInt32Min), I(-1))), 0);
  EXPECT_EQ(FoldInt(ir::Unary(ir::UnaryOp::kNeg, I(kInt32Min))), kInt32Min);
  EXPECT_EQ(FoldInt(ir::Cast(I((int64_t(1) << 32) | 5, DataType::kInt64), DataType::kInt32)), 5);
  // int64 does not wrap at 32 bits.
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kAdd, I(kInt32Max, DataType::kInt64), I(1)), DataType::kInt64),
            int64_t(kInt32Max) + 1);
}

TEST(FoldConstants, Int64Wraps) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kAdd, I(kMax, DataType::kInt64), I(1)), DataType::kInt64), kMin);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kSub, I(kMin, DataType::kInt64), I(1)), DataType::kInt64), kMax);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kMul, I(kMax, DataType::kInt64), I(2)), DataType::kInt64), -2);
  EXPECT_EQ(FoldInt(ir::Unary(ir::UnaryOp::kNeg, I(kMin, DataType::kInt64)), DataType::kInt64), kMin);
}

// `v: pl.DT_INT8 = 300` casts the constant; the device stores int8_t(300) = 44.
TEST(FoldConstants, CastsToNarrowIntegersWrap) {
  EXPECT_EQ(FoldInt(ir::Cast(I(300), DataType::kInt8), DataType::kInt8), 44);
  EXPECT_EQ(FoldInt(ir::Cast(I(40000), DataType::kInt16), DataType::kInt16), -25536);
  EXPECT_EQ(FoldInt(ir::Cast(I(-1), DataType::kUInt8), DataType::kUInt8), 255);
  EXPECT_EQ(FoldInt(ir::Cast(I(-1), DataType::kUInt32), DataType::kUInt32), 4294967295);
  ir::Expr eq = Fold(Bin(BinaryOp::kEq, ir::Cast(I(300), DataType::kInt8), I(44)));
  ASSERT_TRUE(eq->IsConst());
  EXPECT_EQ(eq->int_value, 1);
}

TEST(FoldConstants, ComparisonsAndLogicGiveBool) {
  auto fold_bool = [](ir::Expr e) {
    ir::Expr folded = Fold(std::move(e));
    EXPECT_TRUE(folded->IsConst() && folded->type.dtype == DataType::kBool) << ir::Print(folded);
    return folded->int_value != 0;
  };
  EXPECT_TRUE(fold_bool(Bin(BinaryOp::kLt, I(3), I(4))));
  EXPECT_FALSE(fold_bool(Bin(BinaryOp::kGe, I(-1), I(0))));
  EXPECT_TRUE(fold_bool(Bin(BinaryOp::kGt, F(2.5), I(2))));
  EXPECT_TRUE(fold_bool(Bin(BinaryOp::kEq, F(2.0), I(2))));
  EXPECT_FALSE(fold_bool(Bin(BinaryOp::kAnd, ir::BoolConst(true), I(0))));
  EXPECT_TRUE(fold_bool(Bin(BinaryOp::kOr, I(0), F(0.5))));
  EXPECT_FALSE(fold_bool(ir::Unary(ir::UnaryOp::kNot, I(7))));
}

TEST(FoldConstants, FloatArithmeticRoundsToFp32) {
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kDiv, F(1.0), F(3.0))), double(1.0f / 3.0f));
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kFloorDiv, F(7.0), I(2))), 3.0);
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kFloorDiv, F(-7.0), I(2))), -4.0);  // floor on floats
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kMod, F(-7.5), I(2))), -1.5);       // fmod
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kAdd, I(1), F(0.25))), 1.25);
  EXPECT_EQ(FoldFloat(ir::Cast(I(3), DataType::kFP32)), 3.0);
}

TEST(FoldConstants, PartiallyConstantExpressionsKeepTheirVariables) {
  ir::Function f;
  ir::Var n = test_util::MakeScalarVar(f, "n");
  ir::Expr folded = Fold(Bin(BinaryOp::kAdd, Ref(n), Bin(BinaryOp::kMul, I(2), I(3))));
  EXPECT_EQ(ir::Print(folded), "n + 6");
  EXPECT_EQ(folded->type.dtype, DataType::kInt32);
}

TEST(FoldConstants, IntegerDivisionByZeroIsAValueError) {
  for (BinaryOp op : {BinaryOp::kFloorDiv, BinaryOp::kDiv, BinaryOp::kMod}) {
    try {
      Fold(Bin(BinaryOp::kAdd, I(1), Bin(op, I(5), Bin(BinaryOp::kSub, I(2), I(2)), Span{21, 9})));
      ADD_FAILURE() << "no error for " << ir::Symbol(op);
    } catch (const CompileDiagnostic& d) {
      EXPECT_EQ(d.kind(), ErrorKind::kValue);
      EXPECT_STREQ(d.what(), "integer division by zero");
      EXPECT_EQ(d.span().line, 21);
      EXPECT_EQ(d.span().col, 9);
    }
  }
  // Float division by zero is IEEE, not an error.
  EXPECT_EQ(FoldFloat(Bin(BinaryOp::kDiv, F(1.0), F(0.0))), std::numeric_limits<double>::infinity());
}

TEST(FoldConstants, ShapeDimsOfFixedAndStaticDimsBecomeConstants) {
  ir::Function f;
  ir::Var x = test_util::AddTensorParam(
      f, "x", DataType::kFP32,
      {test_util::FixedDim(128), test_util::StaticDim(256), test_util::DynamicDim(), test_util::StaticDim(-1)});
  ir::Expr fixed = Fold(ir::ShapeDim(x, 0));
  ASSERT_TRUE(fixed->IsIntConst());
  EXPECT_EQ(fixed->int_value, 128);
  EXPECT_EQ(fixed->type.dtype, DataType::kInt32);
  EXPECT_EQ(FoldInt(ir::ShapeDim(x, 1)), 256);
  EXPECT_EQ(FoldInt(Bin(BinaryOp::kFloorDiv, ir::ShapeDim(x, 1), I(64))), 4);

  ir::Expr dynamic = Fold(ir::ShapeDim(x, 2));
  EXPECT_EQ(dynamic->kind, ir::ExprKind::kShapeDim);
  EXPECT_EQ(dynamic->axis, 2);
  EXPECT_EQ(ir::Print(Fold(Bin(BinaryOp::kFloorDiv, ir::ShapeDim(x, 2), Bin(BinaryOp::kAdd, I(60), I(4))))),
            "x.shape[2] // 64");
  // A STATIC dim that is not bound yet stays symbolic.
  EXPECT_EQ(Fold(ir::ShapeDim(x, 3))->kind, ir::ExprKind::kShapeDim);
}

// A function with scalars a, b, n and loop variable k, for the control-flow folds.
struct ScalarKernel {
  ir::Function f;
  ir::Var a, b, n, k;
  ScalarKernel() {
    f.name = "s";
    n = test_util::AddScalarParam(f, "n", DataType::kInt32);
    a = test_util::MakeScalarVar(f, "a");
    b = test_util::MakeScalarVar(f, "b");
    k = test_util::MakeScalarVar(f, "k");
  }
  ir::Stmt SetA(int64_t v) const { return ir::Assign(a, I(v)); }
  // Folds `body` and returns the printed result.
  std::string FoldPrint(ir::Stmt body) {
    f.body = std::move(body);
    passes::FoldConstants(f, passes::PassContext{});
    return ir::Print(f.body);
  }
};

TEST(FoldConstants, ConstantIfKeepsOnlyTheTakenBranch) {
  ScalarKernel s;
  ir::Stmt tail = ir::Assign(s.b, I(3));
  EXPECT_EQ(s.FoldPrint(ir::Seq({ir::If(Bin(BinaryOp::kLt, I(1), I(2)), ir::Seq({s.SetA(1)}), ir::Seq({s.SetA(2)})),
                                 tail})),
            "a = 1\nb = 3\n");
  EXPECT_EQ(s.FoldPrint(ir::Seq({ir::If(ir::BoolConst(false), ir::Seq({s.SetA(1)}), ir::Seq({s.SetA(2)})), tail})),
            "a = 2\nb = 3\n");
  EXPECT_EQ(s.FoldPrint(ir::Seq({ir::If(I(0), ir::Seq({s.SetA(1)}), nullptr), tail})), "b = 3\n");
  // A condition on a parameter stays, with its branches folded.
  EXPECT_EQ(s.FoldPrint(ir::Seq({ir::If(Bin(BinaryOp::kGt, Ref(s.n), Bin(BinaryOp::kMul, I(2), I(2))),
                                        ir::Seq({ir::Assign(s.a, Bin(BinaryOp::kAdd, I(1), I(1)))}), nullptr)})),
            "if n > 4:\n  a = 2\n");
}

TEST(FoldConstants, EmptyConstantRangesAreRemoved) {
  ScalarKernel s;
  auto loop = [&](ir::Expr start, ir::Expr stop, ir::Expr step) {
    return ir::Seq({ir::For(s.k, std::move(start), std::move(stop), std::move(step), ir::Seq({s.SetA(1)})),
                    ir::Assign(s.b, I(3))});
  };
  EXPECT_EQ(s.FoldPrint(loop(I(5), I(5), I(1))), "b = 3\n");
  EXPECT_EQ(s.FoldPrint(loop(I(0), Bin(BinaryOp::kSub, I(2), I(4)), I(1))), "b = 3\n");
  EXPECT_EQ(s.FoldPrint(loop(I(0), I(3), I(-1))), "b = 3\n");
  EXPECT_EQ(s.FoldPrint(loop(I(3), I(0), I(-1))), "for k in range(3, 0, -1):\n  a = 1\nb = 3\n");
  EXPECT_EQ(s.FoldPrint(loop(I(0), Ref(s.n), I(1))), "for k in range(0, n, 1):\n  a = 1\nb = 3\n");
}

TEST(FoldConstants, StatementsAfterBreakContinueReturnAreRemoved) {
  ScalarKernel s;
  auto loop = [&](std::vector<ir::Stmt> body) {
    return ir::For(s.k, I(0), Ref(s.n), I(1), ir::Seq(std::move(body)));
  };
  EXPECT_EQ(s.FoldPrint(loop({s.SetA(1), ir::Break(), s.SetA(2), ir::Assign(s.b, I(3))})),
            "for k in range(0, n, 1):\n  a = 1\n  break\n");
  EXPECT_EQ(s.FoldPrint(loop({ir::Continue(), s.SetA(2)})), "for k in range(0, n, 1):\n  continue\n");
  // A constant `if` that breaks ends the block too; the break only ends its own block.
  EXPECT_EQ(s.FoldPrint(ir::Seq({loop({ir::If(ir::BoolConst(true), ir::Seq({ir::Break()}), nullptr), s.SetA(2)}),
                                 s.SetA(3), ir::Return(), s.SetA(4)})),
            "for k in range(0, n, 1):\n  break\na = 3\nreturn\n");
}

// ---- CheckMemory ----

// Runs CheckMemory on the add kernel with group `a` replaced by one of `tile` at `base`.
void CheckGroupA(const ir::TileType& tile, int64_t base, std::string_view arch, bool single = false,
                 std::vector<passes::CompileWarning>* warnings = nullptr) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  auto info = std::make_shared<ir::TileGroupInfo>(*k.a->group);
  info->tile = tile;
  info->addrs = {base};
  info->depth = 1;
  info->mutex_ids.clear();
  info->single_tile = single;
  ir::Var a = k.func.NewVar(single ? "t" : "big", ir::Type::TileGroup(tile), {}, info);
  k.func.body = ir::Seq({ir::DeclTiles(a, At(test_util::kLineGroupA)), k.func.body});
  passes::PassContext ctx;
  ctx.arch = FindArch(arch);
  ctx.warnings = warnings;
  ASSERT_NE(ctx.arch, nullptr);
  passes::CheckMemory(k.func, ctx);
}

CompileDiagnostic CheckGroupAFails(const ir::TileType& tile, int64_t base, std::string_view arch,
                                   bool single = false) {
  try {
    CheckGroupA(tile, base, arch, single);
  } catch (const CompileDiagnostic& d) {
    return d;
  }
  ADD_FAILURE() << "CheckMemory accepted a tile at " << base << " on " << arch;
  return CompileDiagnostic(ErrorKind::kInternal, "<none>", {});
}

TEST(CheckMemory, AcceptsTheAddKernelOnEveryArch) {
  for (std::string_view arch : ArchNames()) {
    test_util::AddKernel k = test_util::MakeAddKernel();
    passes::PassContext ctx;
    ctx.arch = FindArch(arch);
    // Group c ends at 0x30000 = 192 KiB: exactly the a3/a2 UB.
    EXPECT_NO_THROW(passes::CheckMemory(k.func, ctx)) << arch;
  }
}

TEST(CheckMemory, MisalignedVecAddress) {
  CompileDiagnostic d = CheckGroupAFails(test_util::MakeTileType(64, 128), 0x10, "a5");
  EXPECT_EQ(d.kind(), ErrorKind::kMemory);
  EXPECT_STREQ(d.what(),
               "slot 0 of tile group 'big' is at address 0x10, which is not 32-byte aligned as Vec memory requires");
  EXPECT_EQ(d.span().line, test_util::kLineGroupA);

  // Left tiles need 512-byte alignment: 0x100 is fine for Vec, not for Left.
  d = CheckGroupAFails(test_util::MakeTileType(16, 16, DataType::kFP16, ir::MemorySpace::kLeft), 0x100, "a5");
  EXPECT_EQ(d.kind(), ErrorKind::kMemory);
  EXPECT_NE(std::string(d.what()).find("is not 512-byte aligned as Left memory requires"), std::string::npos)
      << d.what();
  EXPECT_NO_THROW(CheckGroupA(test_util::MakeTileType(64, 128), 0x100, "a5"));
}

TEST(CheckMemory, TilePastTheUbCapacity) {
  CompileDiagnostic d = CheckGroupAFails(test_util::MakeTileType(64, 128), 0x3c000, "a5");
  EXPECT_EQ(d.kind(), ErrorKind::kMemory);
  EXPECT_STREQ(d.what(),
               "slot 0 of tile group 'big' (Tile[[64, 128], fp32, Vec], 32768 bytes at 0x3c000) ends at 0x44000, "
               "outside Vec memory (253952 bytes on a5)");
  EXPECT_EQ(d.span().line, test_util::kLineGroupA);
}

TEST(CheckMemory, UbCapacityDependsOnTheArch) {
  // 200 KiB: inside the a5's 248 KiB UB, outside the a3's 192 KiB.
  ir::TileType big = test_util::MakeTileType(200, 256);
  ASSERT_EQ(big.Bytes(), 200 * 1024);
  EXPECT_NO_THROW(CheckGroupA(big, 0, "a5", /*single=*/true));
  CompileDiagnostic d = CheckGroupAFails(big, 0, "a3", /*single=*/true);
  EXPECT_EQ(d.kind(), ErrorKind::kMemory);
  EXPECT_STREQ(d.what(),
               "tile 't' (Tile[[200, 256], fp32, Vec], 204800 bytes at 0x0) ends at 0x32000, outside Vec memory "
               "(196608 bytes on a3)");
  EXPECT_EQ(d.span().line, test_util::kLineGroupA);
}

TEST(CheckMemory, OverlappingSlotsAreWarningsAtTheLaterDeclaration) {
  // The add kernel: groups b and c (two 32 KiB slots each) at 0x10000 and 0x20000. A 32 KiB tile
  // declared first at 0x1c000 shares bytes with b's slot 1 and c's slot 0.
  std::vector<passes::CompileWarning> warnings;
  CheckGroupA(test_util::MakeTileType(64, 128), 0x1c000, "a5", /*single=*/true, &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].span.line, test_util::kLineGroupB);
  EXPECT_EQ(warnings[0].message,
            "slot 1 of tile group 'b' at [0x18000, 0x20000) of Vec overlaps tile 't' (line 3) at [0x1c000, 0x24000): "
            "they share bytes [0x1c000, 0x20000) and writing one changes the other; if the reuse is deliberate (one "
            "is no longer used when the other is), filter this warning category");
  EXPECT_EQ(warnings[1].span.line, test_util::kLineGroupC);
  EXPECT_NE(warnings[1].message.find("slot 0 of tile group 'c' at [0x20000, 0x28000)"), std::string::npos);

  // The same bytes as another tile type are one view (a row over a DN column's values): no warning;
  // the same bytes and type declared twice are not.
  warnings.clear();
  CheckGroupA(test_util::MakeTileType(128, 64), 0x18000, "a5", /*single=*/true, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0].message;
  CheckGroupA(test_util::MakeTileType(64, 128), 0x18000, "a5", /*single=*/true, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].span.line, test_util::kLineGroupB);
  // Without a warnings list the pass stays silent (and still checks the placement).
  EXPECT_NO_THROW(CheckGroupA(test_util::MakeTileType(64, 128), 0x1c000, "a5", true));
}

// ---- The pipeline ----

TEST(Pipeline, OrderAndCallbacks) {
  std::vector<std::string> expected = {"parse"};
  for (const passes::Pass& pass : passes::Pipeline()) expected.emplace_back(pass.name);
  // Folding comes first (it can remove tiles and ops), the memory check right after it.
  ASSERT_GE(expected.size(), 3u);
  EXPECT_EQ(expected[1], "fold_constants");
  EXPECT_EQ(expected[2], "check_memory");

  test_util::AddKernel k = test_util::MakeAddKernel();
  // A dead branch the callback can see disappear.
  ir::Stmt dead = ir::If(ir::BoolConst(false), ir::Seq({ir::Return(At(20))}), nullptr, At(19));
  k.func.body = ir::Seq({dead, k.func.body});
  std::vector<std::string> seen;
  std::vector<size_t> top_level;
  passes::RunPipeline(k.func, passes::PassContext{}, [&](std::string_view name, const ir::Function& f) {
    seen.emplace_back(name);
    top_level.push_back(f.body->stmts.size());
  });
  EXPECT_EQ(seen, expected);
  // parse: dead if + the body seq; from folding on: the 3 declarations and the section.
  std::vector<size_t> expected_sizes(expected.size(), 4);
  expected_sizes[0] = 2;
  EXPECT_EQ(top_level, expected_sizes);
}

TEST(Pipeline, StopsAtTheFirstError) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  std::vector<std::string> seen;
  auto record = [&](std::string_view name, const ir::Function&) { seen.emplace_back(name); };
  passes::PassContext a2;
  a2.arch = FindArch("a2");
  ASSERT_NE(a2.arch, nullptr);

  // A tile past the a2's UB: fails in check_memory, after parse and fold_constants were reported.
  ir::TileType big = test_util::MakeTileType(200, 256);
  auto info = std::make_shared<ir::TileGroupInfo>();
  info->tile = big;
  info->addrs = {0};
  info->single_tile = true;
  ir::Var t = k.func.NewVar("t", ir::Type::TileGroup(big), {}, info);
  ir::Function f = k.With(ir::Seq({ir::DeclTiles(t, At(2)), k.func.body}));
  try {
    passes::RunPipeline(f, a2, record);
    ADD_FAILURE() << "no memory error";
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), ErrorKind::kMemory);
    EXPECT_EQ(d.span().line, 2);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"parse", "fold_constants"}));

  // The verifier runs before "parse" is reported.
  seen.clear();
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.erase(inner.begin());
  ir::Function bad = k.With(k.Body(inner));
  EXPECT_THROW(passes::RunPipeline(bad, passes::PassContext{}, record), CompileDiagnostic);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace pypto_pro

namespace pypto_pro {
namespace {

using test_util::TileKernel;

// The IR after one of the fusion passes (`fuse`: as in a plain instance; false: an instrumented one).
std::string AfterFusion(void (*pass)(ir::Function&, const passes::PassContext&), ir::Function f, bool fuse) {
  passes::PassContext ctx;
  ctx.fuse_rows = fuse;
  pass(f, ctx);
  ir::Verify(f);
  return ir::Print(f);
}

std::string Fused(ir::Function f, bool fuse = true) { return AfterFusion(&passes::FuseRows, std::move(f), fuse); }

TEST(FuseRows, ARunOfRowLocalOpsBecomesAStripLoop) {
  TileKernel k;
  auto a = k.MakeTile("a", 16, 512), b = k.MakeTile("b", 16, 512), o = k.MakeTile("o", 16, 512);
  auto col = k.MakeTile("col", 16, 1);
  ir::Function f = k.With({test_util::Op("add", {o, a, b}, 20), test_util::Op("row_sum", {col, o, a}, 21),
                           test_util::Op("row_expand_mul", {o, o, col}, 22)});
  const std::string text = Fused(f);
  // 6 KiB rows: 16 KiB strips would hold 2, and a strip has 4 rows at least.
  EXPECT_NE(text.find("for row_strip in range(0, 16, 4):"), std::string::npos) << text;
  EXPECT_NE(text.find("o_rows = o[row_strip:min(row_strip + 4, 16), 0:512]"), std::string::npos) << text;
  EXPECT_NE(text.find("add(o_rows, a_rows, b_rows)"), std::string::npos) << text;
  EXPECT_NE(text.find("row_expand_mul(o_rows, o_rows, col_rows)"), std::string::npos) << text;
  EXPECT_EQ(Fused(f, false).find("row_strip"), std::string::npos);  // instrumented instances: as written
}

TEST(FuseRows, LoadsMayHeadARun) {
  TileKernel k;
  ir::Var x = k.Tensor("x", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto a = k.MakeTile("a", 64, 128), o = k.MakeTile("o", 64, 128);
  auto col = k.MakeTile("col", 64, 1);
  ir::Expr at = ir::Tuple({ir::IntConst(1), ir::IntConst(0)});
  auto load = test_util::Op("load_tile", {a, ir::VarRef(x), at}, 20);
  ir::Function f = k.With({load, test_util::Op("row_max", {col, a, o}, 21), test_util::Op("row_expand_sub", {o, a, col}, 22)});
  const std::string text = Fused(f);
  // 1028-byte rows: 15-row strips; the load's strip form takes the whole tile and the strip's first row.
  EXPECT_NE(text.find("for row_strip in range(0, 64, 15):"), std::string::npos) << text;
  EXPECT_NE(text.find("load_tile_rows(a_rows, x, [1, 0], a, row_strip)"), std::string::npos) << text;
  EXPECT_NE(text.find("row_expand_sub(o_rows, a_rows, col_rows)"), std::string::npos) << text;
  // A load and one op: not worth strips; a load after an op of the run ends the run (loads only
  // head one), and a load along other axes (order=) is never fused.
  EXPECT_EQ(Fused(k.With({load, test_util::Op("adds", {o, a, ir::FloatConst(1)}, 21)})).find("row_strip"),
            std::string::npos);
  const std::string late = Fused(k.With({test_util::Op("adds", {o, o, ir::FloatConst(1)}, 19), load,
                                         test_util::Op("row_max", {col, a, o}, 21),
                                         test_util::Op("row_expand_sub", {o, a, col}, 22)}));
  EXPECT_NE(late.find("load_tile_rows(a_rows"), std::string::npos) << late;
  EXPECT_NE(late.find("adds(o, o, 1"), std::string::npos) << late;
  auto ordered = ir::OpCall(ir::FindOp("load_tile"), {a, ir::VarRef(x), at}, {ir::Attr{"order", 1, "", false}},
                            test_util::At(20, 16));
  EXPECT_EQ(Fused(k.With({ordered, test_util::Op("row_max", {col, a, o}, 21),
                          test_util::Op("row_expand_sub", {o, a, col}, 22)}))
                .find("load_tile_rows"),
            std::string::npos);
}

TEST(FuseRows, AStoreOfTheRunsResultMayEndARunWithOneLoad) {
  TileKernel k;
  ir::Var x = k.Tensor("x", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var y = k.Tensor("y", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto a = k.MakeTile("a", 64, 128), o = k.MakeTile("o", 64, 128), col = k.MakeTile("col", 64, 1);
  ir::Expr at = ir::Tuple({ir::IntConst(1), ir::IntConst(0)});
  auto load = test_util::Op("load_tile", {a, ir::VarRef(x), at}, 20);
  auto max = test_util::Op("row_max", {col, a, o}, 21), sub = test_util::Op("row_expand_sub", {o, a, col}, 22);
  const std::string text = Fused(k.With({load, max, sub, test_util::Op("store", {ir::VarRef(y), o, at}, 23)}));
  // The strip's rows, the whole tile, the strip's first row and the strips' rows, then the load's window.
  EXPECT_NE(text.find("      row_expand_sub(o_rows, a_rows, col_rows)\n"
                      "      store_rows_after_tile(y, o_rows, [1, 0], o, row_strip, 15, x, [1, 0], a)\n"),
            std::string::npos)
      << text;
  // A store of a tile the run does not write, one with an option, or after a run of integer tiles
  // (whose division may fault on a later strip) stays after the run.
  auto other = k.MakeTile("other", 64, 128);
  const std::string unwritten = Fused(k.With({load, max, sub, test_util::Op("store", {ir::VarRef(y), other, at}, 23)}));
  EXPECT_NE(unwritten.find("\n    store(y, other, [1, 0])"), std::string::npos) << unwritten;
  auto atomic = ir::OpCall(ir::FindOp("store"), {ir::VarRef(y), o, at}, {ir::Attr{"atomic", 1, "", false}},
                           test_util::At(23, 8));
  EXPECT_EQ(Fused(k.With({load, max, sub, atomic})).find("store_rows"), std::string::npos);
  ir::Var xi = k.Tensor("xi", ir::DataType::kInt32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var yi = k.Tensor("yi", ir::DataType::kInt32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto ai = k.MakeTile("ai", 64, 128, ir::DataType::kInt32), oi = k.MakeTile("oi", 64, 128, ir::DataType::kInt32);
  auto ci = k.MakeTile("ci", 64, 1, ir::DataType::kInt32);
  const std::string ints = Fused(k.With({test_util::Op("load_tile", {ai, ir::VarRef(xi), at}, 20),
                                         test_util::Op("row_max", {ci, ai, oi}, 21),
                                         test_util::Op("row_expand_div", {oi, ai, ci}, 22),
                                         test_util::Op("store", {ir::VarRef(yi), oi, at}, 23)}));
  EXPECT_NE(ints.find("row_strip"), std::string::npos) << ints;
  EXPECT_EQ(ints.find("store_rows"), std::string::npos) << ints;
}

TEST(FuseRows, WhatCouldChangeAResultStaysOpByOp) {
  TileKernel k;
  auto a = k.MakeTile("a", 16, 512), b = k.MakeTile("b", 16, 512), o = k.MakeTile("o", 16, 512);
  auto row = k.MakeTile("row", 1, 512), small = k.MakeTile("small", 8, 512);
  // A column reduction writes one row from every row: not row-local, so it ends the run.
  EXPECT_EQ(Fused(k.With({test_util::Op("add", {o, a, b}, 20), test_util::Op("col_sum", {row, o, a}, 21)}))
                .find("row_strip"),
            std::string::npos);
  // A broadcast row that the run writes, and tiles of different row counts, are not fused either.
  EXPECT_EQ(Fused(k.With({test_util::Op("col_expand_add", {o, a, row}, 20), test_util::Op("adds", {row, row,
                                                                                                    ir::FloatConst(1)},
                                                                                          21)}))
                .find("row_strip"),
            std::string::npos);
  EXPECT_EQ(Fused(k.With({test_util::Op("add", {o, a, b}, 20), test_util::Op("add", {small, small, small}, 21)}))
                .find("row_strip"),
            std::string::npos);
}

}  // namespace
}  // namespace pypto_pro

namespace pypto_pro {
namespace {

using test_util::Op;
using test_util::TileKernel;

std::string Direct(ir::Function f, bool fuse = true) { return AfterFusion(&passes::FuseDirect, std::move(f), fuse); }

TEST(FuseDirect, TheAddLoopBodyRunsFromGmToGmWritingNoTile) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  const std::string text = Direct(k.func);
  // Every tile of the loop body is written and read within the body: none is read afterwards.
  EXPECT_NE(text.find("direct run (tiles not written: ta, tb, tc):\n"
                      "          load_tile(ta, x, [i, j])\n"
                      "          load_tile(tb, y, [i, j])\n"
                      "          add(tc, ta, tb)\n"
                      "          store_tile(z, tc, [i, j])\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(Direct(k.func, false).find("direct run"), std::string::npos);  // instrumented instances: as written
  test_util::AddKernelSpec ints;
  ints.dtype = ir::DataType::kInt32;  // integer ops wrap and fault element by element: op by op
  EXPECT_EQ(Direct(test_util::MakeAddKernel(ints).func).find("direct run"), std::string::npos);
}

TEST(FuseDirect, TilesALaterStatementReadsAreWritten) {
  TileKernel k;
  ir::Var x = k.Tensor("x", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var z = k.Tensor("z", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto a = k.MakeTile("a", 16, 256), bias = k.MakeTile("bias", 16, 256), o = k.MakeTile("o", 16, 256);
  auto p = k.MakeTile("p", 16, 256);
  ir::Expr at = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  std::vector<ir::Stmt> run = {Op("load", {a, ir::VarRef(x), at}, 20), Op("add", {o, a, bias}, 21),
                               Op("muls", {o, o, ir::FloatConst(2)}, 22), Op("store", {ir::VarRef(z), o, at}, 23)};
  // `bias` is only read (an input from local memory), `o` is read by the op after the run.
  std::vector<ir::Stmt> body = {Op("expands", {bias, ir::FloatConst(1)}, 19)};
  body.insert(body.end(), run.begin(), run.end());
  body.push_back(Op("adds", {p, o, ir::FloatConst(1)}, 24));
  const std::string text = Direct(k.With(body));
  EXPECT_NE(text.find("direct run (tiles not written: a):\n      load(a, x, [0, 0])\n"), std::string::npos) << text;
  // Read in a nested block before that block writes it: `o` stages nothing, so it is written.
  std::vector<ir::Stmt> nested = run;
  const ir::Var i = k.func.NewVar("i", ir::Type::Scalar(ir::DataType::kInt32), test_util::At(24));
  nested.push_back(ir::For(i, ir::IntConst(0), ir::IntConst(2), ir::IntConst(1),
                           ir::Seq({Op("adds", {p, o, ir::FloatConst(1)}, 25)}), test_util::At(24)));
  const std::string loop = Direct(k.With(nested));
  EXPECT_NE(loop.find("direct run (tiles not written: a):"), std::string::npos) << loop;
  // Written again before any read: nothing of the run is read afterwards.
  std::vector<ir::Stmt> rewritten = run;
  rewritten.push_back(Op("load", {o, ir::VarRef(x), at}, 24));
  rewritten.push_back(Op("store", {ir::VarRef(z), o, at}, 25));
  const std::string dead = Direct(k.With(rewritten));
  EXPECT_NE(dead.find("direct run (tiles not written: a, o):"), std::string::npos) << dead;
}

TEST(FuseDirect, CastsJoinARunWhoseLoadsAndStoresEachHaveOneDtype) {
  TileKernel k;
  ir::Var x = k.Tensor("x", ir::DataType::kFP16, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var z = k.Tensor("z", ir::DataType::kFP16, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var w = k.Tensor("w", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto a = k.MakeTile("a", 16, 256, ir::DataType::kFP16), o = k.MakeTile("o", 16, 256, ir::DataType::kFP16);
  auto a32 = k.MakeTile("a32", 16, 256, ir::DataType::kFP32), m = k.MakeTile("m", 16, 256, ir::DataType::kFP32);
  ir::Expr at = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  std::vector<ir::Stmt> run = {Op("load", {a, ir::VarRef(x), at}, 20), Op("cast", {a32, a}, 21),
                               Op("muls", {m, a32, ir::FloatConst(2)}, 22), Op("cast", {o, m}, 23),
                               Op("store", {ir::VarRef(z), o, at}, 24)};
  const std::string text = Direct(k.With(run));
  EXPECT_NE(text.find("direct run (tiles not written: a, o, a32, m):\n      load(a, x, [0, 0])\n      cast(a32, a"),
            std::string::npos)
      << text;
  // A store of the fp32 tile too: two output dtypes, so the run ends before it and keeps writing m,
  // which is not of the stores' dtype: as written.
  std::vector<ir::Stmt> two = run;
  two.push_back(Op("store", {ir::VarRef(w), m, at}, 25));
  EXPECT_EQ(Direct(k.With(two)).find("direct run"), std::string::npos) << Direct(k.With(two));
}

TEST(FuseDirect, WhatCouldChangeAResultStaysAsWritten) {
  TileKernel k;
  ir::Var x = k.Tensor("x", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var z = k.Tensor("z", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  auto a = k.MakeTile("a", 16, 256), o = k.MakeTile("o", 16, 256);
  ir::Expr at = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  auto load = Op("load", {a, ir::VarRef(x), at}, 20);
  auto op = Op("muls", {o, a, ir::FloatConst(2)}, 21);
  auto store = Op("store", {ir::VarRef(z), o, at}, 22);
  EXPECT_NE(Direct(k.With({load, op, store})).find("direct run"), std::string::npos);
  auto none = [&](std::vector<ir::Stmt> body) {
    return Direct(k.With(std::move(body))).find("direct run") == std::string::npos;
  };
  // A loaded tile stored as is (the staged copy keeps its bits), a run without a load or a store.
  EXPECT_TRUE(none({load, Op("store", {ir::VarRef(z), a, at}, 22)}));
  EXPECT_TRUE(none({op, store}));
  EXPECT_TRUE(none({load, op}));
  // A run-time valid window (set_validshape) fuses: the run checks every tile's window when it starts.
  EXPECT_FALSE(none({Op("set_validshape", {a, ir::Tuple({ir::IntConst(8), ir::IntConst(256)})}, 19), load, op, store}));
  // Options of the transfers: along other axes, atomic adds.
  EXPECT_TRUE(none({ir::OpCall(ir::FindOp("load"), {a, ir::VarRef(x), at}, {ir::Attr{"order", 1, "", false}},
                               test_util::At(20, 16)),
                    op, store}));
  EXPECT_TRUE(none({load, op,
                    ir::OpCall(ir::FindOp("store"), {ir::VarRef(z), o, at}, {ir::Attr{"atomic", 1, "", false}},
                               test_util::At(22, 16))}));
}

// fuse_direct, then fuse_direct_loops, printed.
std::string DirectLoops(ir::Function f, bool fuse = true) {
  passes::PassContext ctx;
  ctx.fuse_rows = fuse;
  passes::FuseDirect(f, ctx);
  passes::FuseDirectLoops(f, ctx);
  ir::Verify(f);
  return ir::Print(f);
}

TEST(FuseDirectLoops, TheAddExamplesTileLoopIsMarked) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  const std::string text = DirectLoops(k.func);
  EXPECT_NE(text.find("      direct loop:\n"
                      "        for j in range(0, x.shape[1] // 128, 1):\n"
                      "          ta = a.next()\n"
                      "          tb = b.next()\n"
                      "          tc = c.next()\n"
                      "          direct run (tiles not written: ta, tb, tc):\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(DirectLoops(k.func, false).find("direct loop"), std::string::npos);  // instrumented: as written
}

TEST(FuseDirectLoops, LoopsWhoseIterationsDifferOtherwiseStayAsWritten) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  using test_util::Idx;
  using test_util::Ref;
  auto marked = [&](std::vector<ir::Stmt> inner) {
    return DirectLoops(k.With(k.Body(std::move(inner)))).find("direct loop") != std::string::npos;
  };
  std::vector<ir::Stmt> inner = k.InnerStmts();
  ASSERT_TRUE(marked(inner));
  // The loop variable in another index than the last (windows down the rows, not side by side).
  std::vector<ir::Stmt> rows = inner;
  rows[3] = Op("load_tile", {Ref(k.ta), Ref(k.x), Idx(k.j, k.i)}, test_util::kLineLoadX);
  EXPECT_FALSE(marked(rows));
  // A scalar operand that changes between iterations.
  std::vector<ir::Stmt> scalar = inner;
  scalar[5] = Op("adds", {Ref(k.tc), Ref(k.ta), ir::Cast(Ref(k.j), ir::DataType::kFP32)}, test_util::kLineAdd);
  scalar.erase(scalar.begin() + 4);  // (tb unused)
  EXPECT_FALSE(marked(scalar));
  // A statement besides the selections and the run, and a selection by a run-time slot index.
  std::vector<ir::Stmt> extra = inner;
  extra.push_back(Op("adds", {Ref(k.ta), Ref(k.ta), ir::FloatConst(1)}, test_util::kLineStore + 1));
  EXPECT_FALSE(marked(extra));
  std::vector<ir::Stmt> indexed = inner;
  indexed[0] = ir::SelectTile(k.ta, k.a, ir::SelectMode::kIndex, ir::Binary(ir::BinaryOp::kMod, Ref(k.j), ir::IntConst(2)),
                              test_util::At(test_util::kLineNext, 16));
  EXPECT_FALSE(marked(indexed));
  std::vector<ir::Stmt> constant = inner;
  constant[0] = ir::SelectTile(k.ta, k.a, ir::SelectMode::kIndex, ir::IntConst(1), test_util::At(test_util::kLineNext, 16));
  EXPECT_TRUE(marked(constant));
}

TEST(FuseDirectLoops, AStepOtherThanOneTileStaysAsWritten) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  using test_util::Ref;
  ir::Stmt loop = k.Loops(k.InnerStmts());
  const ir::StmtNode& inner_loop = *loop->body->stmts[0];
  auto stepped = ir::For(k.j, inner_loop.start, inner_loop.stop, ir::IntConst(2), inner_loop.body, inner_loop.span);
  auto outer = ir::For(k.i, loop->start, loop->stop, loop->step, ir::Seq({stepped}), loop->span);
  std::vector<ir::Stmt> stmts = k.Decls();
  stmts.push_back(k.InSection(outer));
  EXPECT_EQ(DirectLoops(k.With(ir::Seq(stmts))).find("direct loop"), std::string::npos);
  // A store by element offsets steps like store_tile at j * <the tile's 128 columns>, not at j * 64.
  auto store_at = [&](int64_t step) {
    std::vector<ir::Stmt> inner = k.InnerStmts();
    inner[6] = Op("store", {Ref(k.z), Ref(k.tc),
                            ir::Tuple({ir::Binary(ir::BinaryOp::kMul, Ref(k.i), ir::IntConst(64)),
                                       ir::Binary(ir::BinaryOp::kMul, Ref(k.j), ir::IntConst(step))})},
                  test_util::kLineStore);
    return DirectLoops(k.With(k.Body(inner)));
  };
  EXPECT_NE(store_at(128).find("direct loop"), std::string::npos) << store_at(128);
  const std::string half = store_at(64);
  EXPECT_NE(half.find("direct run"), std::string::npos) << half;
  EXPECT_EQ(half.find("direct loop"), std::string::npos) << half;
}

}  // namespace
}  // namespace pypto_pro

namespace pypto_pro {
namespace {

using test_util::Op;
using test_util::TileKernel;

std::string FusedOps(ir::Function f, bool fuse = true) { return AfterFusion(&passes::FuseOps, std::move(f), fuse); }

TEST(FuseOps, ElementwiseAndBroadcastOpsOfOneWindowBecomeOnePass) {
  TileKernel k;
  auto a = k.MakeTile("a", 16, 512), o = k.MakeTile("o", 16, 512), sq = k.MakeTile("sq", 16, 512);
  auto col = k.MakeTile("col", 16, 1), g = k.MakeTile("g", 1, 512);
  ir::Function f = k.With({Op("row_expand_sub", {o, a, col}, 20), Op("mul", {sq, o, o}, 21),
                           Op("row_sum", {col, sq, a}, 22), Op("row_expand_mul", {o, o, col}, 23),
                           Op("col_expand_mul", {o, o, g}, 24), Op("adds", {o, o, ir::FloatConst(1)}, 25)});
  const std::string text = FusedOps(f);
  EXPECT_NE(text.find("    fused ops:\n"
                      "      row_expand_sub(o, a, col)\n"
                      "      mul(sq, o, o)\n"
                      "    row_sum(col, sq, a)\n"
                      "    fused ops:\n"
                      "      row_expand_mul(o, o, col)\n"
                      "      col_expand_mul(o, o, g)\n"
                      "      adds(o, o, 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(FusedOps(f, false).find("fused ops"), std::string::npos);  // instrumented instances: as written

  // A row sum joins a run's ops (its column is whole only at the end of its row): nothing after it in
  // the run reads that column, and it names no tile the run used before.
  auto sum = k.MakeTile("sum", 16, 1);
  const std::string sums = FusedOps(k.With({Op("mul", {sq, a, a}, 20), Op("row_sum", {sum, sq, o}, 21),
                                            Op("row_expand_div", {o, a, sum}, 22), Op("exp", {o, o}, 23)}));
  EXPECT_NE(sums.find("    fused ops:\n"
                      "      mul(sq, a, a)\n"
                      "      row_sum(sum, sq, o)\n"
                      "    fused ops:\n"
                      "      row_expand_div(o, a, sum)\n"
                      "      exp(o, o)\n"),
            std::string::npos)
      << sums;
  EXPECT_EQ(FusedOps(k.With({Op("row_sum", {sum, a, o}, 20), Op("exp", {o, o}, 21)})).find("fused ops"),
            std::string::npos);  // a sum does not start a run
}

TEST(FuseOps, WhatCouldChangeAResultStaysAsWritten) {
  TileKernel k;
  auto a = k.MakeTile("a", 16, 512), o = k.MakeTile("o", 16, 512), wide = k.MakeTile("wide", 8, 1024);
  auto col = k.MakeTile("col", 16, 1), h = k.MakeTile("h", 16, 512, ir::DataType::kFP16);
  auto i = k.MakeTile("i", 16, 512, ir::DataType::kInt32);
  auto none = [&](std::vector<ir::Stmt> body) {
    return FusedOps(k.With(std::move(body))).find("fused ops") == std::string::npos;
  };
  EXPECT_FALSE(none({Op("add", {o, a, a}, 20), Op("exp", {o, o}, 21)}));
  EXPECT_TRUE(none({Op("add", {o, a, a}, 20)}));                          // one op: nothing to fuse
  EXPECT_TRUE(none({Op("add", {o, a, a}, 20), Op("exp", {h, h}, 21)}));   // two element types
  EXPECT_TRUE(none({Op("add", {i, i, i}, 20), Op("adds", {i, i, ir::IntConst(1)}, 21)}));  // integers fault, wrap
  EXPECT_TRUE(none({Op("add", {o, a, a}, 20), Op("exp", {wide, wide}, 21)}));  // other row strides
  // A broadcast operand the run writes would change under the pass.
  EXPECT_TRUE(none({Op("row_expand_mul", {o, a, col}, 20), Op("adds", {col, col, ir::FloatConst(1)}, 21)}));
  // A direct run's ops are already one pass, and its statements are what runs when it cannot go directly.
  ir::Var x = k.Tensor("x", ir::DataType::kFP32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Expr at = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  ir::Function direct = k.With({Op("load", {a, ir::VarRef(x), at}, 20), Op("add", {o, a, a}, 21),
                                Op("exp", {o, o}, 22), Op("store", {ir::VarRef(x), o, at}, 23)});
  passes::PassContext ctx;
  ctx.fuse_rows = true;
  passes::FuseDirect(direct, ctx);
  const std::string text = FusedOps(direct);
  EXPECT_NE(text.find("direct run"), std::string::npos) << text;
  EXPECT_EQ(text.find("fused ops"), std::string::npos) << text;
  // A mixed kernel: the cube core's data paths write the vector core's memory.
  ir::Function mixed = k.With({Op("add", {o, a, a}, 20), Op("exp", {o, o}, 21)});
  mixed.body = ir::Seq({mixed.body, ir::Section(ir::SectionKind::kCube, ir::Seq({}), test_util::At(30))});
  EXPECT_EQ(FusedOps(mixed).find("fused ops"), std::string::npos);
}

}  // namespace
}  // namespace pypto_pro
