// Helpers that build kernel IR directly in C++, the way the Python front end does, so the
// verifier, passes, code generator and runtime can be tested without Python.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pypto_pro/ir/expr.h"
#include "pypto_pro/ir/op_registry.h"
#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/jit/instance.h"

namespace pypto_pro::test_util {

// Source lines of the add kernel as if written in add.py: the decorator-free `def` is line 1.
inline constexpr int kLineGroupA = 3;
inline constexpr int kLineGroupB = 4;
inline constexpr int kLineGroupC = 5;
inline constexpr int kLineSection = 6;
inline constexpr int kLineForI = 7;
inline constexpr int kLineForJ = 8;
inline constexpr int kLineNext = 9;
inline constexpr int kLineLoadX = 10;
inline constexpr int kLineLoadY = 11;
inline constexpr int kLineAdd = 12;
inline constexpr int kLineStore = 13;

inline Span At(int line, int col = 4) { return Span{line, col}; }

// pl.DYNAMIC: AddTensorParam gives it the next launcher slot.
inline ir::Dim DynamicDim() { return ir::Dim{ir::DimKind::kDynamic, -1, -1}; }
// pl.STATIC already bound to `value` (what specialisation does before the passes run).
inline ir::Dim StaticDim(int64_t value) { return ir::Dim{ir::DimKind::kStatic, value, -1}; }
// A literal dim in the annotation.
inline ir::Dim FixedDim(int64_t value) { return ir::Dim{ir::DimKind::kFixed, value, -1}; }

// Adds a GM tensor parameter. DYNAMIC dims are numbered in parameter order, like the bindings do.
inline ir::Var AddTensorParam(ir::Function& f, const std::string& name, ir::DataType dtype,
                              std::vector<ir::Dim> dims, Span span = At(1, 16)) {
  ir::TensorType t;
  t.dtype = dtype;
  int32_t next_slot = f.NumDynamicDims();
  for (ir::Dim& d : dims) {
    if (d.kind == ir::DimKind::kDynamic && d.dyn_slot < 0) d.dyn_slot = next_slot++;
  }
  t.dims = std::move(dims);
  ir::Var v = f.NewVar(name, ir::Type::Tensor(std::move(t)), span);
  f.params.push_back(v);
  return v;
}

inline ir::Var AddScalarParam(ir::Function& f, const std::string& name, ir::DataType dtype) {
  ir::Var v = f.NewVar(name, ir::Type::Scalar(dtype), At(1, 16));
  f.params.push_back(v);
  return v;
}

// A 2-D tile type. The valid window is given explicitly as the full shape.
inline ir::TileType MakeTileType(int64_t rows, int64_t cols, ir::DataType dtype = ir::DataType::kFP32,
                                 ir::MemorySpace memory = ir::MemorySpace::kVec) {
  ir::TileType t;
  t.dtype = dtype;
  t.shape = {rows, cols};
  t.memory = memory;
  t.valid_shape = {rows, cols};
  return t;
}

// pl.make_tile_group(type=tile, addrs=base, mutex_ids=...): slot k at base + k * tile bytes.
// `mutex_ids` has one entry per slot (may be empty: then `depth` slots without mutex ids).
inline ir::Var MakeTileGroup(ir::Function& f, const std::string& name, const ir::TileType& tile, int64_t base,
                             std::vector<std::vector<int>> mutex_ids, int depth = 0, Span span = {}) {
  auto info = std::make_shared<ir::TileGroupInfo>();
  info->tile = tile;
  info->depth = depth > 0 ? depth : int(mutex_ids.size());
  for (int k = 0; k < info->depth; ++k) info->addrs.push_back(base + k * tile.Bytes());
  info->mutex_ids = std::move(mutex_ids);
  return f.NewVar(name, ir::Type::TileGroup(tile), span, info);
}

inline ir::Var MakeTileVar(ir::Function& f, const std::string& name, const ir::TileType& tile) {
  return f.NewVar(name, ir::Type::Tile(tile));
}

inline ir::Var MakeScalarVar(ir::Function& f, const std::string& name, ir::DataType dtype = ir::DataType::kInt32) {
  return f.NewVar(name, ir::Type::Scalar(dtype));
}

// A registry op statement at `line`; operands carry no span, so errors point at the statement.
inline ir::Stmt Op(std::string_view name, std::vector<ir::Expr> args, int line) {
  const ir::OpDef* op = ir::FindOp(name);
  EXPECT_NE(op, nullptr) << "unknown op " << name;
  return ir::OpCall(op, std::move(args), {}, At(line, 16));
}

inline ir::Expr Ref(const ir::Var& v) { return ir::VarRef(v); }
inline ir::Expr Idx(const ir::Var& i, const ir::Var& j) { return ir::Tuple({Ref(i), Ref(j)}); }

// A kernel whose tiles are made one by one, for the registry and verifier tests: each Tile() is the
// current() of its own one-slot group (declared on kLineDecl, selected on kLineSelect, placed after
// the previous tile of its memory), and With(ops) puts the tiles before a section (kLineSection)
// that holds `ops`. A tile converts to its variable and to one shared reference to it.
class TileKernel {
 public:
  static constexpr int kLineDecl = 2, kLineSelect = 3, kLineSection = 4;

  struct Tile {
    ir::Var var;
    ir::Expr ref;
    operator const ir::Var&() const { return var; }
    operator const ir::Expr&() const { return ref; }
  };

  explicit TileKernel(const std::string& name = "kernel", const std::string& source_file = "kernel.py") {
    func.name = name;
    func.source_file = source_file;
  }

  ir::Var Tensor(const std::string& name, ir::DataType dtype, std::vector<ir::Dim> dims) {
    return AddTensorParam(func, name, dtype, std::move(dims));
  }

  Tile MakeTile(const std::string& name, int64_t rows, int64_t cols, ir::DataType dtype = ir::DataType::kFP32,
                ir::MemorySpace memory = ir::MemorySpace::kVec) {
    ir::TileType t = MakeTileType(rows, cols, dtype, memory);
    int64_t& addr = next_addr_[size_t(memory)];
    ir::Var group = MakeTileGroup(func, name + "_group", t, addr, {}, 1, At(kLineDecl));
    addr += (t.Bytes() + 511) / 512 * 512;
    ir::Var tile = MakeTileVar(func, name, t);
    stmts_.push_back(ir::DeclTiles(group, At(kLineDecl)));
    stmts_.push_back(ir::SelectTile(tile, group, ir::SelectMode::kCurrent, nullptr, At(kLineSelect)));
    return Tile{tile, ir::VarRef(tile)};
  }

  // The tiles, then `ops` inside a section of `kind`.
  ir::Function With(std::vector<ir::Stmt> ops, ir::SectionKind kind = ir::SectionKind::kVector) const {
    ir::Function out = func;
    std::vector<ir::Stmt> body = stmts_;
    body.push_back(ir::Section(kind, ir::Seq(std::move(ops)), At(kLineSection)));
    out.body = ir::Seq(std::move(body));
    return out;
  }

  ir::Function func;

 private:
  std::vector<ir::Stmt> stmts_;
  int64_t next_addr_[size_t(ir::MemorySpace::kCount)] = {};
};

// The add kernel of the README, with handles to everything a test may want to rearrange.
struct AddKernelSpec {
  std::string name = "add_kernel";
  ir::DataType dtype = ir::DataType::kFP32;
  int64_t rows = 64;
  int64_t cols = 128;
  // Added to the row-tile loop bound: 1 makes the last row tile start inside x and end past it.
  int64_t extra_row_tiles = 0;
  ir::SectionKind section = ir::SectionKind::kVector;
};

struct AddKernel {
  AddKernelSpec spec;
  ir::Function func;
  ir::Var x, y, z;     // DYNAMIC 2-D tensor parameters
  ir::Var a, b, c;     // tile groups at 0x0, 0x10000, 0x20000
  ir::Var ta, tb, tc;  // tiles selected from them
  ir::Var i, j;        // loop variables

  // The `a = make_tile_group(...)` declarations.
  std::vector<ir::Stmt> Decls() const {
    return {ir::DeclTiles(a, At(kLineGroupA)), ir::DeclTiles(b, At(kLineGroupB)), ir::DeclTiles(c, At(kLineGroupC))};
  }

  // ta, tb, tc = a.next(), b.next(), c.next(); then the two loads, the add and the store.
  std::vector<ir::Stmt> InnerStmts() const {
    return {ir::SelectTile(ta, a, ir::SelectMode::kNext, nullptr, At(kLineNext, 16)),
            ir::SelectTile(tb, b, ir::SelectMode::kNext, nullptr, At(kLineNext, 16)),
            ir::SelectTile(tc, c, ir::SelectMode::kNext, nullptr, At(kLineNext, 16)),
            Op("load_tile", {Ref(ta), Ref(x), Idx(i, j)}, kLineLoadX),
            Op("load_tile", {Ref(tb), Ref(y), Idx(i, j)}, kLineLoadY),
            Op("add", {Ref(tc), Ref(ta), Ref(tb)}, kLineAdd),
            Op("store_tile", {Ref(z), Ref(tc), Idx(i, j)}, kLineStore)};
  }

  // for i in range(get_block_idx(), x.shape[0] // R [+ extra], get_block_num()):
  //   for j in range(0, x.shape[1] // C, 1): <inner>
  ir::Stmt Loops(std::vector<ir::Stmt> inner) const {
    ir::Expr rows_stop = ir::Binary(ir::BinaryOp::kFloorDiv, ir::ShapeDim(x, 0), ir::IntConst(spec.rows));
    if (spec.extra_row_tiles != 0) {
      rows_stop = ir::Binary(ir::BinaryOp::kAdd, rows_stop, ir::IntConst(spec.extra_row_tiles));
    }
    ir::Stmt inner_loop =
        ir::For(j, ir::IntConst(0), ir::Binary(ir::BinaryOp::kFloorDiv, ir::ShapeDim(x, 1), ir::IntConst(spec.cols)),
                ir::IntConst(1), ir::Seq(std::move(inner)), At(kLineForJ, 12));
    return ir::For(i, ir::BuiltinCall(ir::Builtin::kBlockIdx), rows_stop, ir::BuiltinCall(ir::Builtin::kBlockNum),
                   ir::Seq({inner_loop}), At(kLineForI, 8));
  }

  ir::Stmt InSection(ir::Stmt body) const { return ir::Section(spec.section, std::move(body), At(kLineSection)); }

  // Declarations, then the section holding the loops around `inner`, then `after` (outside it).
  ir::Stmt Body(std::vector<ir::Stmt> inner, std::vector<ir::Stmt> after = {}) const {
    std::vector<ir::Stmt> stmts = Decls();
    stmts.push_back(InSection(Loops(std::move(inner))));
    for (ir::Stmt& s : after) stmts.push_back(std::move(s));
    return ir::Seq(std::move(stmts));
  }

  // A copy of the function with `body`.
  ir::Function With(ir::Stmt body) const {
    ir::Function out = func;
    out.body = std::move(body);
    return out;
  }
};

// Parameters and variables of the add kernel; func.body is the kernel of the README.
inline AddKernel MakeAddKernel(const AddKernelSpec& spec = {}) {
  AddKernel k;
  k.spec = spec;
  k.func.name = spec.name;
  k.func.source_file = "add.py";
  k.x = AddTensorParam(k.func, "x", spec.dtype, {DynamicDim(), DynamicDim()});
  k.y = AddTensorParam(k.func, "y", spec.dtype, {DynamicDim(), DynamicDim()});
  k.z = AddTensorParam(k.func, "z", spec.dtype, {DynamicDim(), DynamicDim()});
  ir::TileType tt = MakeTileType(spec.rows, spec.cols, spec.dtype);
  k.a = MakeTileGroup(k.func, "a", tt, 0x0, {{0}, {1}}, 0, At(kLineGroupA));
  k.b = MakeTileGroup(k.func, "b", tt, 0x10000, {{2}, {3}}, 0, At(kLineGroupB));
  k.c = MakeTileGroup(k.func, "c", tt, 0x20000, {{30}, {31}}, 0, At(kLineGroupC));
  k.i = MakeScalarVar(k.func, "i");
  k.j = MakeScalarVar(k.func, "j");
  k.ta = MakeTileVar(k.func, "ta", tt);
  k.tb = MakeTileVar(k.func, "tb", tt);
  k.tc = MakeTileVar(k.func, "tc", tt);
  k.func.body = k.Body(k.InnerStmts());
  return k;
}

// A fresh directory under the gtest temp dir, removed when the test process exits. Loaded
// libraries stay mapped after their file is gone, so removing it early is harmless.
inline std::filesystem::path FreshTempDir(const std::string& tag) {
  struct Root {
    std::filesystem::path path =
        std::filesystem::path(::testing::TempDir()) / ("pypto_pro_gtest_" + std::to_string(::getpid()));
    ~Root() {
      jit::WaitForBackgroundCompiles();  // libraries compiling after their first launches write here
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Root root;
  static std::atomic<int> counter{0};
  std::filesystem::path dir = root.path / (tag + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  return dir;
}

// Compiles a kernel into a fresh instance directory (arch a5).
inline std::shared_ptr<jit::Instance> Compile(const ir::Function& func, const std::string& tag) {
  jit::CompileOptions options;
  options.instance_dir = FreshTempDir(tag);
  return jit::BuildInstance(func, options);
}

// The fp32 add kernel (64x128 tiles), compiled once per test process.
inline const std::shared_ptr<jit::Instance>& CompiledAddKernel() {
  static const std::shared_ptr<jit::Instance> inst = Compile(MakeAddKernel().func, "add_kernel");
  return inst;
}

// The launcher slots of the add kernel: x, y, z, then the rows and cols of each.
inline std::vector<uint64_t> AddKernelSlots(const void* x, const void* y, void* z, int32_t rows, int32_t cols) {
  auto dim = [](int32_t v) { return uint64_t(uint32_t(v)); };
  return {reinterpret_cast<uint64_t>(x), reinterpret_cast<uint64_t>(y), reinterpret_cast<uint64_t>(z),
          dim(rows), dim(cols), dim(rows), dim(cols), dim(rows), dim(cols)};
}

}  // namespace pypto_pro::test_util
