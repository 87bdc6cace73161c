#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/verifier.h"

namespace pypto_pro {
namespace {

using ir::DataType;
using ir::MemorySpace;
using ir::SectionKind;
using test_util::AddKernel;
using test_util::At;
using test_util::Idx;
using test_util::MakeAddKernel;
using test_util::Op;
using test_util::Ref;

// Verifies `func`, which must fail, and checks the error's kind, message and source line.
void ExpectRejected(const ir::Function& func, ErrorKind kind, const std::string& message_part, int line) {
  try {
    ir::Verify(func);
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), kind) << "kind " << ErrorKindName(d.kind()) << ": " << d.what();
    EXPECT_NE(std::string(d.what()).find(message_part), std::string::npos) << d.what();
    EXPECT_EQ(d.span().line, line) << d.what();
    return;
  }
  ADD_FAILURE() << "Verify accepted a kernel that should fail with: " << message_part;
}

// The inner statements of the add kernel with statement `index` replaced.
std::vector<ir::Stmt> ReplaceInner(const AddKernel& k, size_t index, ir::Stmt replacement) {
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.at(index) = std::move(replacement);
  return inner;
}

constexpr size_t kLoadXIndex = 3;
constexpr size_t kAddIndex = 5;

TEST(Verifier, AcceptsTheAddKernel) {
  AddKernel k = MakeAddKernel();
  EXPECT_NO_THROW(ir::Verify(k.func));
  AddKernel fp16 = MakeAddKernel({.dtype = DataType::kFP16, .rows = 128, .cols = 128});
  EXPECT_NO_THROW(ir::Verify(fp16.func));
}

TEST(Verifier, RejectsMatTileWhereVecIsRequired) {
  AddKernel k = MakeAddKernel();
  ir::TileType mat = test_util::MakeTileType(64, 128, DataType::kFP32, MemorySpace::kMat);
  ir::Var m = test_util::MakeTileGroup(k.func, "m", mat, 0x0, {}, 1, At(2));
  ir::Var tm = test_util::MakeTileVar(k.func, "tm", mat);
  std::vector<ir::Stmt> inner = ReplaceInner(k, kAddIndex, Op("add", {Ref(tm), Ref(k.ta), Ref(k.tb)}, 12));
  inner.insert(inner.begin(), ir::SelectTile(tm, m, ir::SelectMode::kCurrent, nullptr, At(9)));
  std::vector<ir::Stmt> stmts = {ir::DeclTiles(m, At(2)), k.Body(inner)};
  ExpectRejected(k.With(ir::Seq(stmts)), ErrorKind::kType,
                 "pl.add operand 'out' must be a tile in Vec memory, got Tile[[64, 128], fp32, Mat]", 12);
}

TEST(Verifier, RejectsDtypeMismatch) {
  AddKernel k = MakeAddKernel();
  ir::TileType half = test_util::MakeTileType(64, 128, DataType::kFP16);
  ir::Var h = test_util::MakeTileGroup(k.func, "h", half, 0x30000, {}, 1, At(2));
  ir::Var th = test_util::MakeTileVar(k.func, "th", half);
  std::vector<ir::Stmt> inner = ReplaceInner(k, kAddIndex, Op("add", {Ref(k.tc), Ref(k.ta), Ref(th)}, 12));
  inner.insert(inner.begin(), ir::SelectTile(th, h, ir::SelectMode::kCurrent, nullptr, At(9)));
  std::vector<ir::Stmt> stmts = {ir::DeclTiles(h, At(2)), k.Body(inner)};
  ExpectRejected(k.With(ir::Seq(stmts)), ErrorKind::kType,
                 "pl.add: dtype mismatch: operand 'rhs' is fp16 but 'out' is fp32", 12);
}

TEST(Verifier, RejectsTileAndTensorDtypeMismatch) {
  AddKernel k = MakeAddKernel();
  ir::Var w =
      test_util::AddTensorParam(k.func, "w", DataType::kInt32, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Stmt load = Op("load_tile", {Ref(k.ta), Ref(w), Idx(k.i, k.j)}, 10);
  ExpectRejected(k.With(k.Body(ReplaceInner(k, kLoadXIndex, load))), ErrorKind::kType,
                 "pl.load_tile: dtype mismatch: operand 'src_tensor' is int32 but 'dst_tile' is fp32", 10);
}

TEST(Verifier, RejectsWrongOperandCount) {
  AddKernel k = MakeAddKernel();
  ir::Function f = k.With(k.Body(ReplaceInner(k, kAddIndex, Op("add", {Ref(k.tc), Ref(k.ta)}, 12))));
  ExpectRejected(f, ErrorKind::kType, "pl.add takes 3 operands, got 2", 12);
}

TEST(Verifier, RejectsOffsetsOfWrongLength) {
  AddKernel k = MakeAddKernel();
  ir::Stmt load = Op("load_tile", {Ref(k.ta), Ref(k.x), ir::Tuple({Ref(k.i)})}, 10);
  ExpectRejected(k.With(k.Body(ReplaceInner(k, kLoadXIndex, load))), ErrorKind::kType,
                 "pl.load_tile: 'tile_idx' needs one entry per axis of tensor 'x' (2), got 1", 10);
  ir::Stmt store = Op("store_tile", {Ref(k.z), Ref(k.tc), ir::Tuple({Ref(k.i), Ref(k.j), ir::IntConst(0)})}, 13);
  ExpectRejected(k.With(k.Body(ReplaceInner(k, 6, store))), ErrorKind::kType,
                 "pl.store_tile: 'tile_idx' needs one entry per axis of tensor 'z' (2), got 3", 13);
}

TEST(Verifier, RejectsBreakOutsideALoop) {
  AddKernel k = MakeAddKernel();
  std::vector<ir::Stmt> stmts = k.Decls();
  stmts.push_back(k.InSection(ir::Seq({k.Loops(k.InnerStmts()), ir::Break(At(14, 8))})));
  ExpectRejected(k.With(ir::Seq(stmts)), ErrorKind::kSyntax, "'break' outside a loop", 14);

  // Inside a loop it is fine.
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.push_back(ir::Break(At(14, 16)));
  EXPECT_NO_THROW(ir::Verify(k.With(k.Body(inner))));
}

TEST(Verifier, RejectsMutexIdOutOfRange) {
  AddKernel k = MakeAddKernel();
  ir::TileType tt = test_util::MakeTileType(64, 128);
  ir::Var d = test_util::MakeTileGroup(k.func, "d", tt, 0x30000, {{31}, {32}}, 0, At(2));
  std::vector<ir::Stmt> stmts = {ir::DeclTiles(d, At(2)), k.Body(k.InnerStmts())};
  ExpectRejected(k.With(ir::Seq(stmts)), ErrorKind::kType, "mutex id 32 is out of range [0, 31]", 2);
}

TEST(Verifier, RejectsConstantTileIndexOutOfRange) {
  AddKernel k = MakeAddKernel();
  ir::Stmt select = ir::SelectTile(k.ta, k.a, ir::SelectMode::kIndex, ir::IntConst(2), At(9));
  ExpectRejected(k.With(k.Body(ReplaceInner(k, 0, select))), ErrorKind::kType,
                 "index 2 is out of range for tile group 'a' of depth 2", 9);
  ir::Stmt negative = ir::SelectTile(k.ta, k.a, ir::SelectMode::kIndex, ir::IntConst(-1), At(9));
  ExpectRejected(k.With(k.Body(ReplaceInner(k, 0, negative))), ErrorKind::kType,
                 "index -1 is out of range for tile group 'a' of depth 2", 9);
  ir::Stmt last = ir::SelectTile(k.ta, k.a, ir::SelectMode::kIndex, ir::IntConst(1), At(9));
  EXPECT_NO_THROW(ir::Verify(k.With(k.Body(ReplaceInner(k, 0, last)))));
}

TEST(Verifier, RejectsVecTileInCubeSection) {
  AddKernel k = MakeAddKernel({.section = SectionKind::kCube});
  // The first op in the section is the load of x.
  ExpectRejected(k.func, ErrorKind::kType, "pl.load_tile uses a Vec tile inside pl.section_cube()", 10);
}

TEST(Verifier, RejectsOpOutsideSectionsWhenTheKernelHasSections) {
  AddKernel k = MakeAddKernel();
  ir::Stmt stray = Op("store_tile", {Ref(k.z), Ref(k.tc), ir::Tuple({ir::IntConst(0), ir::IntConst(0)})}, 14);
  ir::Function f = k.With(k.Body(k.InnerStmts(), {stray}));
  ExpectRejected(f, ErrorKind::kSyntax, "pl.store_tile on a Vec tile is outside any section", 14);
  try {
    ir::Verify(f);
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.hint(), "put it inside 'with pl.section_vector():'");
  }

  // Without any section the same ops are accepted.
  std::vector<ir::Stmt> stmts = k.Decls();
  stmts.push_back(k.Loops(k.InnerStmts()));
  stmts.push_back(stray);
  EXPECT_NO_THROW(ir::Verify(k.With(ir::Seq(stmts))));
}

TEST(Verifier, RejectsVariableThatIsNeverAssigned) {
  AddKernel k = MakeAddKernel();
  ir::Var n = test_util::MakeScalarVar(k.func, "n");
  ir::Stmt load = Op("load_tile", {Ref(k.ta), Ref(k.x), ir::Tuple({Ref(n), Ref(k.j)})}, 10);
  ExpectRejected(k.With(k.Body(ReplaceInner(k, kLoadXIndex, load))), ErrorKind::kUndefined,
                 "variable 'n' is used but never assigned", 10);

  // Python scoping: an assignment anywhere in the function defines it.
  std::vector<ir::Stmt> inner = ReplaceInner(k, kLoadXIndex, load);
  inner.push_back(ir::Assign(n, ir::IntConst(0), At(14)));
  EXPECT_NO_THROW(ir::Verify(k.With(k.Body(inner))));
}

TEST(Verifier, RejectsTileThatIsNeverSelected) {
  AddKernel k = MakeAddKernel();
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.erase(inner.begin());  // no `ta = a.next()`
  ExpectRejected(k.With(k.Body(inner)), ErrorKind::kUndefined, "variable 'ta' is used but never assigned", 10);
}

TEST(KernelKindOf, FromSectionsOrTileMemories) {
  AddKernel vec = MakeAddKernel();
  EXPECT_EQ(ir::KernelKindOf(vec.func), ir::KernelKind::kVector);

  // No sections: Vec ops make a vector kernel, and so does a kernel without ops.
  std::vector<ir::Stmt> flat = vec.Decls();
  flat.push_back(vec.Loops(vec.InnerStmts()));
  EXPECT_EQ(ir::KernelKindOf(vec.With(ir::Seq(flat))), ir::KernelKind::kVector);
  EXPECT_EQ(ir::KernelKindOf(vec.With(ir::Seq({}))), ir::KernelKind::kVector);

  // A cube section of Mat loads is a cube kernel; both kinds of section make it mixed.
  AddKernel k = MakeAddKernel({.section = SectionKind::kCube});
  ir::TileType mat = test_util::MakeTileType(64, 128, DataType::kFP32, MemorySpace::kMat);
  ir::Var m = test_util::MakeTileGroup(k.func, "m", mat, 0x0, {}, 1, At(2));
  ir::Var tm = test_util::MakeTileVar(k.func, "tm", mat);
  std::vector<ir::Stmt> cube_inner = {ir::SelectTile(tm, m, ir::SelectMode::kCurrent, nullptr, At(9)),
                                      Op("load_tile", {Ref(tm), Ref(k.x), Idx(k.i, k.j)}, 10)};
  ir::Function cube = k.With(ir::Seq({ir::DeclTiles(m, At(2)), k.InSection(k.Loops(cube_inner))}));
  EXPECT_NO_THROW(ir::Verify(cube));
  EXPECT_EQ(ir::KernelKindOf(cube), ir::KernelKind::kCube);

  ir::Function no_section_cube = k.With(ir::Seq({ir::DeclTiles(m, At(2)), k.Loops(cube_inner)}));
  EXPECT_EQ(ir::KernelKindOf(no_section_cube), ir::KernelKind::kCube);

  ir::Function mixed = k.With(ir::Seq({ir::DeclTiles(m, At(2)), k.InSection(k.Loops(cube_inner)),
                                       ir::Section(SectionKind::kVector, ir::Seq({}), At(15))}));
  EXPECT_EQ(ir::KernelKindOf(mixed), ir::KernelKind::kMixed);
}

TEST(Verifier, TileMemoriesInOperandOrder) {
  AddKernel k = MakeAddKernel();
  ir::Stmt store = k.InnerStmts().back();
  EXPECT_EQ(ir::TileMemories(*store), std::vector<MemorySpace>{MemorySpace::kVec});
  const ir::OpDef* op = ir::FindOp("store_tile");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->PipeFor({MemorySpace::kVec}), ir::Pipe::kMTE3);
  EXPECT_EQ(op->PipeFor({MemorySpace::kAcc}), ir::Pipe::kFIX);
}

}  // namespace
}  // namespace pypto_pro
