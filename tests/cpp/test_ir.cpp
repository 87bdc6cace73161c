#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "ir_test_util.h"
#include "pypto_pro/ir/expr.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/ir/type.h"

namespace pypto_pro {
namespace {

using ir::BinaryOp;
using ir::DataType;
using test_util::AddTensorParam;
using test_util::DynamicDim;
using test_util::FixedDim;
using test_util::MakeScalarVar;
using test_util::Ref;
using test_util::StaticDim;

// Runs `fn`, which must throw a CompileDiagnostic, and returns it.
template <typename Fn>
CompileDiagnostic CatchDiagnostic(Fn&& fn) {
  try {
    fn();
  } catch (const CompileDiagnostic& d) {
    return d;
  }
  ADD_FAILURE() << "expected a CompileDiagnostic";
  return CompileDiagnostic(ErrorKind::kInternal, "<none>", {});
}

TEST(Expr, PromoteScalarOrdersInt32Int64Fp32) {
  EXPECT_EQ(ir::PromoteScalar(DataType::kInt32, DataType::kInt32), DataType::kInt32);
  EXPECT_EQ(ir::PromoteScalar(DataType::kInt32, DataType::kInt64), DataType::kInt64);
  EXPECT_EQ(ir::PromoteScalar(DataType::kInt64, DataType::kInt32), DataType::kInt64);
  EXPECT_EQ(ir::PromoteScalar(DataType::kInt64, DataType::kFP32), DataType::kFP32);
  EXPECT_EQ(ir::PromoteScalar(DataType::kFP32, DataType::kInt32), DataType::kFP32);
  // Narrow integers compute in int32, like C++ integer promotion.
  EXPECT_EQ(ir::PromoteScalar(DataType::kInt8, DataType::kInt16), DataType::kInt32);
  EXPECT_EQ(ir::PromoteScalar(DataType::kBool, DataType::kBool), DataType::kInt32);
}

TEST(Expr, BinaryResultTypes) {
  ir::Function f;
  ir::Var n32 = MakeScalarVar(f, "n32", DataType::kInt32);
  ir::Var n64 = MakeScalarVar(f, "n64", DataType::kInt64);
  ir::Var x = MakeScalarVar(f, "x", DataType::kFP32);

  EXPECT_EQ(ir::Binary(BinaryOp::kAdd, Ref(n32), ir::IntConst(1))->type.dtype, DataType::kInt32);
  EXPECT_EQ(ir::Binary(BinaryOp::kMul, Ref(n32), Ref(n64))->type.dtype, DataType::kInt64);
  EXPECT_EQ(ir::Binary(BinaryOp::kFloorDiv, Ref(n64), Ref(x))->type.dtype, DataType::kFP32);
  EXPECT_EQ(ir::Binary(BinaryOp::kMin, Ref(x), ir::IntConst(0))->type.dtype, DataType::kFP32);

  // Comparisons and logic give bool whatever their operands.
  for (BinaryOp op : {BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt, BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe,
                      BinaryOp::kAnd, BinaryOp::kOr}) {
    ir::Expr e = ir::Binary(op, Ref(x), Ref(n64));
    EXPECT_EQ(e->type.dtype, DataType::kBool) << ir::Symbol(op);
    EXPECT_TRUE(e->type.IsScalar());
  }
  EXPECT_TRUE(ir::IsComparison(BinaryOp::kGe));
  EXPECT_FALSE(ir::IsComparison(BinaryOp::kAnd));

  EXPECT_EQ(ir::Unary(ir::UnaryOp::kNeg, Ref(n64))->type.dtype, DataType::kInt64);
  EXPECT_EQ(ir::Unary(ir::UnaryOp::kNeg, ir::BoolConst(true))->type.dtype, DataType::kInt32);
  EXPECT_EQ(ir::Unary(ir::UnaryOp::kNot, Ref(x))->type.dtype, DataType::kBool);
  EXPECT_EQ(ir::Ternary(ir::BoolConst(true), Ref(n32), Ref(n64))->type.dtype, DataType::kInt64);
  EXPECT_EQ(ir::Cast(Ref(x), DataType::kInt64)->type.dtype, DataType::kInt64);
}

TEST(Expr, IntConstWidensOutOfRangeInt32) {
  EXPECT_EQ(ir::IntConst(7)->type.dtype, DataType::kInt32);
  EXPECT_EQ(ir::IntConst(std::numeric_limits<int32_t>::min())->type.dtype, DataType::kInt32);
  ir::Expr big = ir::IntConst(int64_t(1) << 40);
  EXPECT_EQ(big->type.dtype, DataType::kInt64);
  EXPECT_EQ(big->int_value, int64_t(1) << 40);
  EXPECT_EQ(ir::FloatConst(0.5)->type.dtype, DataType::kFP32);
  EXPECT_EQ(ir::BoolConst(true)->int_value, 1);
}

TEST(Expr, ScalarOperatorsRejectTensors) {
  ir::Function f;
  ir::Var x = AddTensorParam(f, "x", DataType::kFP32, {DynamicDim()});
  CompileDiagnostic d =
      CatchDiagnostic([&] { ir::Binary(BinaryOp::kAdd, Ref(x), ir::IntConst(1), Span{5, 3}); });
  EXPECT_EQ(d.kind(), ErrorKind::kType);
  EXPECT_STREQ(d.what(), "+ expects a scalar operand, got Tensor[[DYNAMIC#0], fp32]");
  EXPECT_EQ(d.span().line, 5);
  EXPECT_EQ(d.span().col, 3);

  d = CatchDiagnostic([&] { ir::Cast(ir::IntConst(1), DataType::kFP8E4M3FN, Span{6, 0}); });
  EXPECT_EQ(d.kind(), ErrorKind::kUnsupported);
  EXPECT_STREQ(d.what(), "scalar dtype fp8e4m3fn is not supported");
}

TEST(Expr, ShapeDimResolvesNegativeAxes) {
  ir::Function f;
  ir::Var x = AddTensorParam(f, "x", DataType::kFP16, {DynamicDim(), FixedDim(128), StaticDim(4)});
  ir::Expr last = ir::ShapeDim(x, -1);
  EXPECT_EQ(last->kind, ir::ExprKind::kShapeDim);
  EXPECT_EQ(last->axis, 2);
  EXPECT_EQ(last->type.dtype, DataType::kInt32);
  EXPECT_EQ(last->var, x);
  EXPECT_EQ(ir::ShapeDim(x, -3)->axis, 0);
  EXPECT_EQ(ir::ShapeDim(x, 1)->axis, 1);
}

TEST(Expr, ShapeDimOutOfRangeIsAValueError) {
  ir::Function f;
  ir::Var x = AddTensorParam(f, "x", DataType::kFP16, {DynamicDim(), DynamicDim()});
  CompileDiagnostic d = CatchDiagnostic([&] { ir::ShapeDim(x, 2, Span{9, 14}); });
  EXPECT_EQ(d.kind(), ErrorKind::kValue);
  EXPECT_STREQ(d.what(), "shape index 2 is out of range for tensor 'x' of rank 2");
  EXPECT_EQ(d.span().line, 9);

  d = CatchDiagnostic([&] { ir::ShapeDim(x, -3, Span{10, 0}); });
  EXPECT_EQ(d.kind(), ErrorKind::kValue);
  EXPECT_STREQ(d.what(), "shape index -3 is out of range for tensor 'x' of rank 2");

  ir::Var n = MakeScalarVar(f, "n");
  d = CatchDiagnostic([&] { ir::ShapeDim(n, 0, Span{11, 0}); });
  EXPECT_EQ(d.kind(), ErrorKind::kType);
  EXPECT_STREQ(d.what(), ".shape is only defined on GM tensors");
}

TEST(Expr, TupleRequiresScalars) {
  ir::Function f;
  ir::Var i = MakeScalarVar(f, "i");
  ir::Expr ok = ir::Tuple({Ref(i), ir::IntConst(0)});
  EXPECT_EQ(ok->kind, ir::ExprKind::kTuple);
  EXPECT_EQ(ok->type.kind, ir::TypeKind::kTuple);
  ASSERT_EQ(ok->operands.size(), 2u);

  ir::Var t = test_util::MakeTileVar(f, "t", test_util::MakeTileType(16, 32));
  ir::Expr nested = ir::Tuple({Ref(i)});
  CompileDiagnostic d = CatchDiagnostic([&] { ir::Tuple({Ref(i), nested}, Span{12, 20}); });
  EXPECT_EQ(d.kind(), ErrorKind::kType);
  EXPECT_STREQ(d.what(), "a list of scalars expects a scalar operand, got tuple");
  EXPECT_EQ(d.span().line, 12);

  // A list with a tile or GM tensor is a data list (auto_mutex's tiles, sync_all's workspaces): it holds
  // tiles, tensors and scalars, and the op that takes it checks the rest.
  EXPECT_EQ(ir::Tuple({Ref(t), Ref(t)})->operands.size(), 2u);
  EXPECT_EQ(ir::Tuple({Ref(t), Ref(i)})->operands.size(), 2u);
  d = CatchDiagnostic([&] { ir::Tuple({Ref(t), nested}, Span{13, 2}); });
  EXPECT_EQ(d.kind(), ErrorKind::kType);
  EXPECT_STREQ(d.what(), "a list holds tiles, GM tensors and scalars, got tuple");
  EXPECT_EQ(d.span().line, 13);
}

TEST(Function, NewVarMakesNamesUnique) {
  ir::Function f;
  ir::Var i0 = MakeScalarVar(f, "i");
  ir::Var i1 = MakeScalarVar(f, "i");
  ir::Var i2 = MakeScalarVar(f, "i");
  ir::Var j = MakeScalarVar(f, "j");
  EXPECT_EQ(i0->name, "i");
  EXPECT_EQ(i1->name, "i_1");
  EXPECT_EQ(i2->name, "i_2");
  EXPECT_EQ(j->name, "j");
  // A name the renaming already produced is itself renamed.
  EXPECT_EQ(MakeScalarVar(f, "i_1")->name, "i_1_1");
  EXPECT_EQ(i0->id, 0);
  EXPECT_EQ(i1->id, 1);
  EXPECT_EQ(j->id, 3);
  EXPECT_EQ(f.next_var_id, 5);
}

TEST(Function, NumDynamicDimsCountsOnlyDynamic) {
  ir::Function f;
  ir::Var x = AddTensorParam(f, "x", DataType::kFP32, {DynamicDim(), FixedDim(8)});
  test_util::AddScalarParam(f, "alpha", DataType::kFP32);
  ir::Var y = AddTensorParam(f, "y", DataType::kFP32, {StaticDim(16), DynamicDim(), DynamicDim()});
  EXPECT_EQ(f.NumDynamicDims(), 3);
  EXPECT_EQ(x->type.tensor->dims[0].dyn_slot, 0);
  EXPECT_EQ(y->type.tensor->dims[1].dyn_slot, 1);
  EXPECT_EQ(y->type.tensor->dims[2].dyn_slot, 2);
  EXPECT_EQ(y->type.ToString(), "Tensor[[STATIC=16, DYNAMIC#1, DYNAMIC#2], fp32]");
}

TEST(Type, TileToString) {
  ir::TileType t = test_util::MakeTileType(128, 128, DataType::kFP16);
  EXPECT_EQ(t.ToString(), "Tile[[128, 128], fp16, Vec]");
  EXPECT_EQ(t.Bytes(), 32768);
  t.valid_shape = {64, 128};
  EXPECT_EQ(t.ToString(), "Tile[[128, 128], fp16, Vec, valid=[64, 128]]");
  EXPECT_EQ(ir::Type::TileGroup(t).ToString(), "Group[Tile[[128, 128], fp16, Vec, valid=[64, 128]]]");
}

// valid_shape -1 means "set at run time (initially full)"; the Python front end sends [-1, -1] for
// every TileType without valid_shape=, so it must print like the full window.
TEST(Type, TileToStringTreatsRunTimeValidShapeAsFull) {
  ir::TileType t = test_util::MakeTileType(128, 128, DataType::kFP16);
  t.valid_shape = {-1, -1};
  EXPECT_EQ(t.ToString(), "Tile[[128, 128], fp16, Vec]");
  t.valid_shape = {-1, 64};
  EXPECT_EQ(t.ToString(), "Tile[[128, 128], fp16, Vec, valid=[-1, 64]]");
}

TEST(Printer, GoldenFunction) {
  using test_util::At;
  ir::Function f;
  f.name = "demo";
  f.source_file = "demo.py";
  ir::Var x = AddTensorParam(f, "x", DataType::kFP16, {DynamicDim(), FixedDim(128), StaticDim(256)});
  ir::Var n = test_util::AddScalarParam(f, "n", DataType::kInt32);
  ir::TileType tt = test_util::MakeTileType(16, 32, DataType::kFP16);
  ir::Var g = test_util::MakeTileGroup(f, "g", tt, 0x0, {{0}, {1}});
  auto single = std::make_shared<ir::TileGroupInfo>();
  single->tile = tt;
  single->addrs = {0x800};
  single->single_tile = true;
  ir::Var one = f.NewVar("one", ir::Type::TileGroup(tt), {}, single);
  ir::Var i = MakeScalarVar(f, "i");
  ir::Var s = MakeScalarVar(f, "s");
  ir::Var h = MakeScalarVar(f, "h", DataType::kFP32);
  ir::Var w = MakeScalarVar(f, "w", DataType::kInt64);
  ir::Var t = test_util::MakeTileVar(f, "t", tt);
  ir::Var u = test_util::MakeTileVar(f, "u", tt);
  auto bin = [](BinaryOp op, ir::Expr a, ir::Expr b) { return ir::Binary(op, std::move(a), std::move(b)); };
  auto c = [](int64_t v) { return ir::IntConst(v); };

  ir::Stmt loop_body = ir::Seq({
      ir::SelectTile(t, g, ir::SelectMode::kNext, nullptr),
      ir::Assign(s, bin(BinaryOp::kMin, bin(BinaryOp::kMul, Ref(i), c(2)), bin(BinaryOp::kSub, Ref(n), c(1)))),
      ir::If(bin(BinaryOp::kAnd, bin(BinaryOp::kGt, Ref(s), c(3)), bin(BinaryOp::kNe, Ref(n), c(0))),
             ir::Seq({ir::SelectTile(t, g, ir::SelectMode::kIndex, c(1))}), ir::Seq({ir::Continue()})),
      test_util::Op("load_tile", {Ref(t), Ref(x), ir::Tuple({Ref(i), c(0), Ref(s)})}, 10),
      ir::OpCall(ir::FindOp("adds"), {Ref(t), Ref(t), ir::FloatConst(0.5)}, {{"order", 1}}, At(11)),
      ir::While(bin(BinaryOp::kLt, Ref(s), Ref(n)),
                ir::Seq({ir::Assign(s, bin(BinaryOp::kAdd, bin(BinaryOp::kMul, Ref(s), c(2)),
                                           bin(BinaryOp::kMod, Ref(n), c(3)))),
                         ir::Break()})),
      ir::SelectTile(u, g, ir::SelectMode::kPrevious, nullptr),
      ir::SelectTile(u, g, ir::SelectMode::kCurrent, nullptr),
      ir::Assign(h, ir::Ternary(ir::Unary(ir::UnaryOp::kNot, bin(BinaryOp::kGt, Ref(s), c(3))),
                                ir::Cast(Ref(n), DataType::kFP32), ir::FloatConst(2.0))),
      ir::Assign(w, ir::Unary(ir::UnaryOp::kNeg, ir::Cast(Ref(n), DataType::kInt64))),
  });
  f.body = ir::Seq({
      ir::DeclTiles(g),
      ir::DeclTiles(one),
      ir::Section(ir::SectionKind::kVector,
                  ir::For(i, ir::BuiltinCall(ir::Builtin::kBlockIdx),
                          bin(BinaryOp::kFloorDiv, ir::ShapeDim(x, 0), c(16)),
                          ir::BuiltinCall(ir::Builtin::kBlockNum), loop_body)),
      ir::If(ir::BoolConst(false), ir::Seq({}), nullptr),
      ir::Return(),
  });

  EXPECT_EQ(ir::Print(f),
            "kernel demo(x: Tensor[[DYNAMIC#0, 128, STATIC=256], fp16], n: int32):\n"
            "  g = make_tile_group(Tile[[16, 32], fp16, Vec], addrs=[0x0, 0x400], mutex_ids=[[0], [1]], depth=2)\n"
            "  one = make_tile(Tile[[16, 32], fp16, Vec], addrs=[0x800], depth=1)\n"
            "  section vector:\n"
            "    for i in range(get_block_idx(), x.shape[0] // 16, get_block_num()):\n"
            "      t = g.next()\n"
            "      s = min(i * 2, n - 1)\n"
            "      if (s > 3) and (n != 0):\n"
            "        t = g[1]\n"
            "      else:\n"
            "        continue\n"
            "      load_tile(t, x, [i, 0, s])\n"
            "      adds(t, t, 0.5, order=1)\n"
            "      while s < n:\n"
            "        s = (s * 2) + (n % 3)\n"
            "        break\n"
            "      u = g.previous()\n"
            "      u = g.current()\n"
            "      h = (fp32(n) if not (s > 3) else 2.0)\n"
            "      w = -int64(n)\n"
            "  if False:\n"
            "    pass\n"
            "  return\n");
}

TEST(Printer, AddKernel) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  EXPECT_EQ(ir::Print(k.func),
            "kernel add_kernel(x: Tensor[[DYNAMIC#0, DYNAMIC#1], fp32], y: Tensor[[DYNAMIC#2, DYNAMIC#3], fp32], "
            "z: Tensor[[DYNAMIC#4, DYNAMIC#5], fp32]):\n"
            "  a = make_tile_group(Tile[[64, 128], fp32, Vec], addrs=[0x0, 0x8000], mutex_ids=[[0], [1]], depth=2)\n"
            "  b = make_tile_group(Tile[[64, 128], fp32, Vec], addrs=[0x10000, 0x18000], mutex_ids=[[2], [3]], "
            "depth=2)\n"
            "  c = make_tile_group(Tile[[64, 128], fp32, Vec], addrs=[0x20000, 0x28000], mutex_ids=[[30], [31]], "
            "depth=2)\n"
            "  section vector:\n"
            "    for i in range(get_block_idx(), x.shape[0] // 64, get_block_num()):\n"
            "      for j in range(0, x.shape[1] // 128, 1):\n"
            "        ta = a.next()\n"
            "        tb = b.next()\n"
            "        tc = c.next()\n"
            "        load_tile(ta, x, [i, j])\n"
            "        load_tile(tb, y, [i, j])\n"
            "        add(tc, ta, tb)\n"
            "        store_tile(z, tc, [i, j])\n");
}

TEST(Printer, Expressions) {
  EXPECT_EQ(ir::Print(ir::FloatConst(3.0)), "3.0");
  EXPECT_EQ(ir::Print(ir::FloatConst(1e-10)), "1e-10");
  EXPECT_EQ(ir::Print(ir::IntConst(-5)), "-5");
  EXPECT_EQ(ir::Print(ir::BoolConst(true)), "True");
  EXPECT_EQ(ir::Print(ir::Binary(BinaryOp::kMax, ir::IntConst(1), ir::IntConst(2))), "max(1, 2)");
  EXPECT_EQ(ir::Print(ir::Expr()), "<null>");
}

}  // namespace
}  // namespace pypto_pro
