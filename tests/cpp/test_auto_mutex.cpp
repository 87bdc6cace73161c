// The auto_mutex pass (docs/language.md#synchronisation) on golden IR: which ops it brackets, on which pipe,
// with which tiles.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro {
namespace {

using ir::MemorySpace;
using test_util::MakeTileGroup;
using test_util::MakeTileType;
using test_util::MakeTileVar;
using test_util::Op;
using test_util::Ref;

// The body after auto_mutex, printed.
std::string AfterAutoMutex(ir::Function func, bool enabled = true) {
  passes::PassContext ctx;
  ctx.auto_mutex = enabled;
  passes::AutoMutex(func, ctx);
  return ir::Print(func.body);
}

ir::Expr Zeros() { return ir::Tuple({ir::IntConst(0), ir::IntConst(0)}); }

// A cube kernel's data path: GM -> Mat -> Left/Right -> matmul -> Acc -> GM, and Acc -> Vec.
struct CubePath {
  ir::Function func;
  ir::Var a, c;
  ir::Var mat, left, right, acc, vec;
  ir::Var tm, tl, tr, ta, tv;

  CubePath() {
    func.name = "cube";
    a = test_util::AddTensorParam(func, "a", ir::DataType::kFP16, {test_util::FixedDim(16), test_util::FixedDim(16)});
    c = test_util::AddTensorParam(func, "c", ir::DataType::kFP32, {test_util::FixedDim(16), test_util::FixedDim(16)});
    mat = MakeTileGroup(func, "mat", MakeTileType(16, 16, ir::DataType::kFP16, MemorySpace::kMat), 0, {{0}, {1}});
    left = MakeTileGroup(func, "left", MakeTileType(16, 16, ir::DataType::kFP16, MemorySpace::kLeft), 0, {{2}});
    right = MakeTileGroup(func, "right", MakeTileType(16, 16, ir::DataType::kFP16, MemorySpace::kRight), 0, {{3}});
    acc = MakeTileGroup(func, "acc", MakeTileType(16, 16, ir::DataType::kFP32, MemorySpace::kAcc), 0, {{4}});
    vec = MakeTileGroup(func, "vec", MakeTileType(16, 16, ir::DataType::kFP32, MemorySpace::kVec), 0, {}, 1);
    tm = MakeTileVar(func, "tm", mat->group->tile);
    tl = MakeTileVar(func, "tl", left->group->tile);
    tr = MakeTileVar(func, "tr", right->group->tile);
    ta = MakeTileVar(func, "ta", acc->group->tile);
    tv = MakeTileVar(func, "tv", vec->group->tile);
    ir::Var k = test_util::AddScalarParam(func, "k", ir::DataType::kInt32);
    auto select = [](const ir::Var& tile, const ir::Var& group) {
      return ir::SelectTile(tile, group, ir::SelectMode::kCurrent, nullptr, test_util::At(2));
    };
    func.body = ir::Seq({
        ir::DeclTiles(mat, test_util::At(1)), ir::DeclTiles(left, test_util::At(1)),
        ir::DeclTiles(right, test_util::At(1)), ir::DeclTiles(acc, test_util::At(1)),
        ir::DeclTiles(vec, test_util::At(1)),
        // A run-time index: the tile carries the ids of whichever slot k selects.
        ir::SelectTile(tm, mat, ir::SelectMode::kIndex,
                       ir::Binary(ir::BinaryOp::kMod, Ref(k), ir::IntConst(2)), test_util::At(2)),
        select(tl, left), select(tr, right), select(ta, acc), select(tv, vec),
        Op("load", {Ref(tm), Ref(a), Zeros()}, 3),
        Op("move", {Ref(tl), Ref(tm)}, 4),
        Op("move", {Ref(tr), Ref(tm)}, 5),
        Op("matmul", {Ref(ta), Ref(tl), Ref(tr)}, 6),
        Op("store", {Ref(c), Ref(ta), Zeros()}, 7),
        Op("move", {Ref(tv), Ref(ta)}, 8),
    });
  }
};

TEST(AutoMutex, EachOpLocksItsTilesOnItsPipe) {
  CubePath k;
  const std::string after = AfterAutoMutex(k.func);
  // Moves and stores take the pipe of their data path; tv's group has no mutex ids and is left out.
  EXPECT_NE(after.find("tm = mat[k % 2]\n"
                       "tl = left.current()\n"
                       "tr = right.current()\n"
                       "ta = acc.current()\n"
                       "tv = vec.current()\n"
                       "auto_mutex_lock([tm], pipe=MTE2)\n"
                       "load(tm, a, [0, 0])\n"
                       "auto_mutex_unlock([tm], pipe=MTE2)\n"
                       "auto_mutex_lock([tl, tm], pipe=MTE1)\n"
                       "move(tl, tm)\n"
                       "auto_mutex_unlock([tl, tm], pipe=MTE1)\n"
                       "auto_mutex_lock([tr, tm], pipe=MTE1)\n"
                       "move(tr, tm)\n"
                       "auto_mutex_unlock([tr, tm], pipe=MTE1)\n"
                       "auto_mutex_lock([ta, tl, tr], pipe=M)\n"
                       "matmul(ta, tl, tr)\n"
                       "auto_mutex_unlock([ta, tl, tr], pipe=M)\n"
                       "auto_mutex_lock([ta], pipe=FIX)\n"
                       "store(c, ta, [0, 0])\n"
                       "auto_mutex_unlock([ta], pipe=FIX)\n"
                       "auto_mutex_lock([ta], pipe=FIX)\n"
                       "move(tv, ta)\n"
                       "auto_mutex_unlock([ta], pipe=FIX)\n"),
            std::string::npos)
      << after;
}

TEST(AutoMutex, OffLeavesTheKernelAlone) {
  CubePath k;
  EXPECT_EQ(AfterAutoMutex(k.func, false), ir::Print(k.func.body));
}

TEST(AutoMutex, DescriptorsUngroupedTilesAndRepeatsAreSkipped) {
  ir::Function func;
  func.name = "vec";
  ir::Var x = test_util::AddTensorParam(func, "x", ir::DataType::kFP32, {test_util::FixedDim(8), test_util::FixedDim(8)});
  ir::TileType tt = MakeTileType(8, 8);
  tt.valid_shape = {-1, -1};
  ir::Var g = MakeTileGroup(func, "g", tt, 0, {{5}});
  ir::Var plain = MakeTileGroup(func, "plain", tt, 0x100, {}, 1);
  ir::Var t = MakeTileVar(func, "t", tt), u = MakeTileVar(func, "u", tt), p = MakeTileVar(func, "p", tt);
  func.body = ir::Seq({
      ir::DeclTiles(g, test_util::At(1)), ir::DeclTiles(plain, test_util::At(1)),
      ir::SelectTile(t, g, ir::SelectMode::kCurrent, nullptr, test_util::At(2)),
      ir::SelectTile(p, plain, ir::SelectMode::kCurrent, nullptr, test_util::At(2)),
      ir::Assign(u, Ref(t), test_util::At(3)),  // a copy of a guarded tile is guarded
      Op("set_validshape", {Ref(t), ir::Tuple({ir::IntConst(4), ir::IntConst(8)})}, 4),
      Op("load", {Ref(p), Ref(x), Zeros()}, 5),
      Op("add", {Ref(u), Ref(t), Ref(t)}, 6),
      Op("add", {Ref(p), Ref(p), Ref(u)}, 7),
  });
  const std::string after = AfterAutoMutex(func);
  EXPECT_NE(after.find("set_validshape(t, [4, 8])\n"
                       "load(p, x, [0, 0])\n"
                       "auto_mutex_lock([u, t], pipe=V)\n"
                       "add(u, t, t)\n"
                       "auto_mutex_unlock([u, t], pipe=V)\n"
                       "auto_mutex_lock([u], pipe=V)\n"
                       "add(p, p, u)\n"
                       "auto_mutex_unlock([u], pipe=V)\n"),
            std::string::npos)
      << after;
}

TEST(AutoMutex, ElementReadsAreTheScalarPipes) {
  ir::Function func;
  func.name = "elements";
  ir::Var x = test_util::AddTensorParam(func, "x", ir::DataType::kFP32, {test_util::FixedDim(8), test_util::FixedDim(8)});
  ir::TileType tt = MakeTileType(8, 8);
  ir::Var g = MakeTileGroup(func, "g", tt, 0, {{5}, {6}});
  ir::Var t = MakeTileVar(func, "t", tt), u = MakeTileVar(func, "u", tt);
  ir::Var v = test_util::MakeScalarVar(func, "v", ir::DataType::kFP32);
  auto element = [&](const ir::Var& tile, int offset) { return ir::Element(tile, ir::IntConst(offset)); };
  func.body = ir::Seq({
      ir::DeclTiles(g, test_util::At(1)),
      ir::SelectTile(t, g, ir::SelectMode::kIndex, ir::IntConst(0), test_util::At(2)),
      ir::SelectTile(u, g, ir::SelectMode::kIndex, ir::IntConst(1), test_util::At(2)),
      Op("load", {Ref(t), Ref(x), Zeros()}, 3),
      ir::Assign(v, element(t, 3), test_util::At(4)),
      Op("adds", {Ref(u), Ref(t), element(t, 0)}, 5),
      Op("setval", {Ref(u), ir::IntConst(1), element(t, 2)}, 6),
  });
  const std::string after = AfterAutoMutex(func);
  EXPECT_NE(after.find("auto_mutex_lock([t], pipe=S)\n"
                       "v = getval(t, 3)\n"
                       "auto_mutex_unlock([t], pipe=S)\n"
                       "auto_mutex_lock([t], pipe=S)\n"
                       "auto_mutex_lock([u, t], pipe=V)\n"
                       "adds(u, t, getval(t, 0))\n"
                       "auto_mutex_unlock([u, t], pipe=V)\n"
                       "auto_mutex_unlock([t], pipe=S)\n"
                       "auto_mutex_lock([u, t], pipe=S)\n"
                       "setval(u, 1, getval(t, 2))\n"
                       "auto_mutex_unlock([u, t], pipe=S)\n"),
            std::string::npos)
      << after;
}

}  // namespace
}  // namespace pypto_pro
