#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/codegen/python_writer.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/jit/instance.h"
#include "pypto_pro/jit/tier0.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/runtime/stream.h"

// numeric.h's 64-byte vector types draw an ABI note without AVX-512; nothing crosses a binary here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#include "pypto_pro/numeric.h"
#pragma GCC diagnostic pop

namespace pypto_pro {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using test_util::AddKernel;
using test_util::MakeAddKernel;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The line of `text` that contains `part` (empty if none).
std::string LineWith(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (Contains(line, part)) return line;
  }
  return "";
}

// What BuildInstance generates: the pipeline, then the code generator.
// `fuse`: the fusion passes too, as a plain instance runs them (PYPTO_PRO_FUSE_ROWS=1, the default).
codegen::GeneratedSources GenerateAfterPipeline(ir::Function func, const ArchModel& arch = DefaultArch(),
                                                bool fuse = false) {
  passes::PassContext ctx;
  ctx.arch = &arch;
  ctx.fuse_rows = fuse;
  passes::RunPipeline(func, ctx);
  return codegen::Generate(func, arch);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every device call passes the source line of the statement it comes from (auto_mutex's locks that
// of the op they guard), so a fault can name the line.
TEST(Codegen, EveryOpPassesItsSourceLine) {
  AddKernel k = MakeAddKernel();
  const std::string kernel = GenerateAfterPipeline(k.func).kernel_cpp;
  std::set<int> statement_lines;
  ir::ForEachStmt(k.func.body, [&](const ir::StmtNode& s) { statement_lines.insert(s.span.line); });
  std::set<int> seen;
  const std::regex call("pto::(\\w+)\\(ctx, (\\d+),");
  for (auto it = std::sregex_iterator(kernel.begin(), kernel.end(), call); it != std::sregex_iterator(); ++it) {
    const int line = std::stoi((*it)[2]);
    EXPECT_TRUE(statement_lines.count(line)) << (*it)[0] << "\n" << kernel;
    seen.insert(line);
  }
  for (int line : {test_util::kLineLoadX, test_util::kLineLoadY, test_util::kLineAdd, test_util::kLineStore}) {
    EXPECT_TRUE(seen.count(line)) << "no call at line " << line << "\n" << kernel;
  }
}

// The parameter types of call_kernel, in order.
std::vector<std::string> LauncherParamTypes(const std::string& launcher) {
  std::string signature = LineWith(launcher, "int64_t call_kernel(");
  signature = signature.substr(signature.find("void* stream") + 12);
  std::vector<std::string> types;
  const std::regex param(", ([a-z0-9_]+\\*?) a?_?[a-z0-9_]+");
  for (auto it = std::sregex_iterator(signature.begin(), signature.end(), param); it != std::sregex_iterator(); ++it) {
    types.push_back((*it)[1]);
  }
  return types;
}

// x: [DYNAMIC, 512], alpha: fp32, z: [STATIC 256, DYNAMIC]; z[0:64, 0:128] = x[0:64, 0:128] + alpha.
ir::Function ScaleKernel() {
  ir::Function f;
  f.name = "scale";
  f.source_file = "scale.py";
  ir::Var x = test_util::AddTensorParam(f, "x", DataType::kFP32, {test_util::DynamicDim(), test_util::FixedDim(512)});
  ir::Var alpha = test_util::AddScalarParam(f, "alpha", DataType::kFP32);
  ir::Var z = test_util::AddTensorParam(f, "z", DataType::kFP32, {test_util::StaticDim(256), test_util::DynamicDim()});
  ir::TileType tt = test_util::MakeTileType(64, 128);
  ir::Var g = test_util::MakeTileGroup(f, "g", tt, 0x0, {}, 1);
  ir::Var t = test_util::MakeTileVar(f, "t", tt);
  ir::Expr origin = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  f.body = ir::Seq({ir::DeclTiles(g), ir::SelectTile(t, g, ir::SelectMode::kCurrent, nullptr),
                    test_util::Op("load_tile", {test_util::Ref(t), test_util::Ref(x), origin}, 5),
                    test_util::Op("adds", {test_util::Ref(t), test_util::Ref(t), test_util::Ref(alpha)}, 6),
                    test_util::Op("store_tile", {test_util::Ref(z), test_util::Ref(t), origin}, 7)});
  return f;
}

// A section (or loop body) that computes 3 vector ops per store or more stores through the caches
// (store_cached: its write-backs overlap the next tile's ops); a load -> op -> store stays streamed.
TEST(Codegen, StoresAfterEnoughComputeGoThroughTheCaches) {
  auto kernel = [](int extra_ops) {
    ir::Function f = ScaleKernel();
    std::vector<ir::Stmt> stmts = f.body->stmts;
    const ir::Expr t = stmts[3]->args[0];
    std::vector<ir::Stmt> section(stmts.begin() + 2, stmts.end() - 1);
    for (int i = 0; i < extra_ops; ++i) section.push_back(test_util::Op("exp", {t, t}, 6));
    section.push_back(stmts.back());
    f.body = ir::Seq({stmts[0], stmts[1], ir::Section(ir::SectionKind::kVector, ir::Seq(section))});
    return GenerateAfterPipeline(f).kernel_cpp;
  };
  EXPECT_NE(kernel(0).find("pto::store_tile(ctx, 7,"), std::string::npos) << kernel(0);
  EXPECT_NE(kernel(1).find("pto::store_tile(ctx, 7,"), std::string::npos) << kernel(1);
  EXPECT_NE(kernel(2).find("pto::store_tile_cached(ctx, 7,"), std::string::npos) << kernel(2);
}

// call_kernel takes the slots of ir/launcher_slots.h: tensors, scalars, then one int32 per DYNAMIC
// dim; the packed launcher reads the same order, and fixed and STATIC dims are compiled in.
TEST(Codegen, LauncherFollowsTheSlotOrder) {
  ir::Function f = ScaleKernel();
  EXPECT_EQ(f.NumDynamicDims(), 2);
  EXPECT_EQ(LauncherParamTypes(GenerateAfterPipeline(f).call_kernel_cpp),
            (std::vector<std::string>{"uint8_t*", "uint8_t*", "float", "int32_t", "int32_t"}));
  EXPECT_EQ(LauncherParamTypes(GenerateAfterPipeline(MakeAddKernel().func).call_kernel_cpp),
            (std::vector<std::string>{"uint8_t*", "uint8_t*", "uint8_t*", "int32_t", "int32_t", "int32_t", "int32_t",
                                      "int32_t", "int32_t"}));

  std::shared_ptr<jit::Instance> inst = test_util::Compile(f, "scale");
  ASSERT_EQ(inst->num_slots, 5);
  constexpr int rows = 64, cols = 128;  // x is 64 x 512, z is 256 x 128
  std::vector<float> x(size_t(rows) * 512), z(size_t(256) * cols, -1.0f);
  for (size_t n = 0; n < x.size(); ++n) x[n] = float(n % 97) - 48.0f;
  const float alpha = 0.25f;
  uint32_t alpha_bits;
  std::memcpy(&alpha_bits, &alpha, sizeof alpha_bits);  // fp32 scalars travel as their bits
  std::vector<uint64_t> slots = {reinterpret_cast<uint64_t>(x.data()), reinterpret_cast<uint64_t>(z.data()),
                                 alpha_bits, uint64_t(rows), uint64_t(cols)};
  runtime::Stream stream;
  jit::Launch(*inst, 1, stream.handle(), slots.data());
  stream.Synchronize();
  for (int r = 0; r < 256; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float expected = r < rows ? x[size_t(r) * 512 + size_t(c)] + alpha : -1.0f;
      ASSERT_EQ(z[size_t(r) * cols + size_t(c)], expected) << "z[" << r << ", " << c << "]";
    }
  }
}

TEST(Codegen, CubeKernelsRunOnCubeCores) {
  AddKernel k = MakeAddKernel({.name = "mm", .section = ir::SectionKind::kCube});
  ir::TileType mat = test_util::MakeTileType(64, 128, DataType::kFP32, ir::MemorySpace::kMat);
  ir::Var m = test_util::MakeTileGroup(k.func, "m", mat, 0x0, {}, 1);
  ir::Var tm = test_util::MakeTileVar(k.func, "tm", mat);
  ir::Function cube = k.With(ir::Seq(
      {ir::DeclTiles(m), k.InSection(k.Loops({ir::SelectTile(tm, m, ir::SelectMode::kCurrent, nullptr),
                                              test_util::Op("load_tile", {test_util::Ref(tm), test_util::Ref(k.x),
                                                                          test_util::Idx(k.i, k.j)},
                                                            10)}))}));
  ASSERT_EQ(ir::KernelKindOf(cube), ir::KernelKind::kCube);
  std::shared_ptr<jit::Instance> inst = test_util::Compile(cube, "mm");
  EXPECT_EQ(inst->kind, ir::KernelKind::kCube);
  if (inst->tier0) EXPECT_EQ(inst->tier0_desc.kind, uint32_t(PTO_KERNEL_CUBE));  // its first launches
  jit::WaitCompiled(*inst);
  EXPECT_EQ(inst->desc->kind, uint32_t(PTO_KERNEL_CUBE));
}

TEST(PythonWriter, KernelAsPlainPyptoProPython) {
  AddKernel k = MakeAddKernel();
  codegen::PythonKernelOptions options;
  options.header = {"header line"};
  options.decorator_args = "auto_mutex=True";
  options.function_name = "add_generated";
  const std::string text = codegen::KernelAsPython(k.func, options);
  EXPECT_TRUE(Contains(text, "# header line\n")) << text;
  EXPECT_TRUE(Contains(text, "@pl.jit(auto_mutex=True)\ndef add_generated(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], "
                             "pl.DT_FP32], ")) << text;
  EXPECT_TRUE(Contains(text, "a = pl.make_tile_group(type=pl.TileType(shape=[64, 128], dtype=pl.DT_FP32, "
                             "target_memory=pl.MemorySpace.Vec, layout=pl.ND, valid_shape=[64, 128]), addrs=[0x0, 0x8000], "
                             "mutex_ids=[[0], [1]])")) << text;
  EXPECT_TRUE(Contains(text, "    with pl.section_vector():\n")) << text;
  EXPECT_TRUE(Contains(text, "pl.add(")) << text;
  EXPECT_FALSE(Contains(text, "NotImplementedError")) << text;

  // After auto_mutex the kernel holds internal ops the language has no name for: the module says so
  // on import, with the line, instead of running without them.
  passes::PassContext ctx;
  passes::RunPipeline(k.func, ctx);
  const std::string locked = codegen::KernelAsPython(k.func, options);
  EXPECT_TRUE(Contains(locked, "raise NotImplementedError(\"this kernel cannot be written as pypto_pro Python yet: "
                               "the internal op auto_mutex_lock (add.py:")) << locked;
}

TEST(Codegen, DeviceTypes) {
  EXPECT_EQ(codegen::DeviceType(DataType::kFP16), "pto::half");
  EXPECT_EQ(codegen::DeviceType(DataType::kBF16), "pto::bfloat16");
  EXPECT_EQ(codegen::DeviceType(DataType::kFP32), "float");
  EXPECT_EQ(codegen::DeviceType(DataType::kInt64), "int64_t");
  EXPECT_THROW(codegen::DeviceType(DataType::kInt4), CompileDiagnostic);
}

// ---- End to end: IR -> compiled library -> simulated device ----

constexpr int32_t kRows = 256;
constexpr int32_t kCols = 512;

// Values whose fp32 sums are exact and differ per element.
void Fill(std::vector<float>& x, std::vector<float>& y) {
  for (size_t n = 0; n < x.size(); ++n) {
    x[n] = float(int(n % 1000) - 500) * 0.25f;
    y[n] = float(int(n % 777)) * 0.5f + 1.0f;
  }
}

TEST(EndToEnd, AddKernelCompilesLoadsAndRuns) {
  const std::shared_ptr<jit::Instance>& inst = test_util::CompiledAddKernel();
  ASSERT_NE(inst, nullptr);
  EXPECT_NE(inst->tier0, nullptr);  // its first launches need not wait for the library
  jit::WaitCompiled(*inst);
  EXPECT_TRUE(inst->compiled);
  ASSERT_NE(inst->launch, nullptr);
  ASSERT_NE(inst->desc, nullptr);
  EXPECT_EQ(inst->kernel_name, "add_kernel");
  EXPECT_STREQ(inst->desc->name, "add_kernel");
  EXPECT_STREQ(inst->desc->source_file, "add.py");
  EXPECT_STREQ(inst->desc->arch, "a5");
  EXPECT_EQ(inst->desc->kind, uint32_t(PTO_KERNEL_VECTOR));
  EXPECT_EQ(inst->kind, ir::KernelKind::kVector);
  EXPECT_EQ(inst->num_slots, 9);

  runtime::Stream stream;
  for (uint32_t block_dim : {1u, 8u}) {
    std::vector<float> x(size_t(kRows) * kCols), y(x.size()), z(x.size(), -1.0f);
    Fill(x, y);
    std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), kRows, kCols);
    int64_t seq = jit::Launch(*inst, block_dim, stream.handle(), slots.data());
    EXPECT_GT(seq, 0);
    stream.Synchronize();
    size_t wrong = 0;
    for (size_t n = 0; n < z.size(); ++n) wrong += z[n] != x[n] + y[n] ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "block_dim " << block_dim << ": z[0] = " << z[0] << ", expected " << x[0] + y[0];
  }
}

TEST(Tier0, TheAddKernelIsAProgramAndAnInt8ScalarIsNot) {
  AddKernel k = MakeAddKernel();
  std::string why;
  std::unique_ptr<jit::Tier0Program> p = jit::CompileTier0(k.func, &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_EQ(p->program.num_tensors, 3);
  EXPECT_EQ(p->program.num_groups, 3);
  EXPECT_EQ(p->program.num_slots, 6);  // two slots per group
  EXPECT_EQ(p->tensors[2].dims[0], -1 - 7);  // z's rows: launcher slot 7 (x, y, z, then two dims each)
  EXPECT_EQ(p->insns.back().code, PTO_T0_END);

  ir::Var s = test_util::MakeScalarVar(k.func, "s", ir::DataType::kInt8);
  ir::Function f = k.With(ir::Seq({ir::Assign(s, ir::IntConst(1, {}, ir::DataType::kInt8)), k.func.body}));
  EXPECT_EQ(jit::CompileTier0(f, &why), nullptr);
  EXPECT_EQ(why, "a scalar of dtype int8");
}

// PYPTO_PRO_TIER0=always: every launch on the tier-0 executor, with the compiled kernel's results.
TEST(EndToEnd, Tier0LaunchesGiveTheCompiledResults) {
  ::setenv("PYPTO_PRO_TIER0", "always", 1);
  std::shared_ptr<jit::Instance> inst = test_util::Compile(MakeAddKernel().func, "add_kernel_tier0");
  ::unsetenv("PYPTO_PRO_TIER0");
  ASSERT_NE(inst->tier0, nullptr);
  runtime::Stream stream;
  for (uint32_t block_dim : {1u, 3u}) {
    constexpr int32_t rows = 130, cols = 384;  // rows 128..129 are not a whole tile: never written
    std::vector<float> x(size_t(rows) * cols), y(x.size()), z(x.size(), -1.0f);
    Fill(x, y);
    std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols);
    jit::Launch(*inst, block_dim, stream.handle(), slots.data());
    stream.Synchronize();
    for (size_t n = 0; n < z.size(); ++n) {
      ASSERT_EQ(z[n], n < size_t(128) * cols ? x[n] + y[n] : -1.0f) << "element " << n;
    }
  }
  jit::WaitCompiled(*inst);
  EXPECT_FALSE(inst->compiled);  // always: the library is built and published, launches stay on tier-0
  EXPECT_TRUE(fs::is_regular_file(inst->library));
}

TEST(EndToEnd, DynamicDimsComeFromTheLaunch) {
  const std::shared_ptr<jit::Instance>& inst = test_util::CompiledAddKernel();
  runtime::Stream stream;
  // 100 x 256: one full row tile (rows 0..63) and two column tiles; rows 64..99 are never touched.
  constexpr int32_t rows = 100, cols = 256;
  std::vector<float> x(size_t(rows) * cols), y(x.size()), z(x.size(), -1.0f);
  Fill(x, y);
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols);
  jit::Launch(*inst, 4, stream.handle(), slots.data());
  stream.Synchronize();
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < cols; ++c) {
      size_t n = size_t(r) * cols + c;
      float expected = r < 64 ? x[n] + y[n] : -1.0f;
      ASSERT_EQ(z[n], expected) << "row " << r << " col " << c;
    }
  }
}

TEST(EndToEnd, InstanceDirectoryHoldsTheArtefacts) {
  const std::shared_ptr<jit::Instance>& inst = test_util::CompiledAddKernel();
  jit::WaitCompiled(*inst);  // a first launch need not wait for the library: the files are there once it is
  EXPECT_TRUE(fs::is_regular_file(inst->dir / "kernel.cpp"));
  EXPECT_TRUE(fs::is_regular_file(inst->dir / "call_kernel.cpp"));
  EXPECT_TRUE(fs::is_regular_file(inst->library));
  EXPECT_EQ(inst->library.parent_path(), fs::absolute(inst->dir));
  EXPECT_TRUE(inst->library.is_absolute());
  std::string so = inst->library.filename().string();
  EXPECT_TRUE(std::regex_match(so, std::regex("call_kernel_[0-9a-f]{12}\\.so"))) << so;

  // No temporaries left by the atomic writes, no compile.log, no IR dumps (dump_ir is off).
  for (const fs::directory_entry& e : fs::directory_iterator(inst->dir)) {
    std::string name = e.path().filename().string();
    EXPECT_FALSE(name.ends_with(".tmp")) << name;
    EXPECT_NE(name, "compile.log");
    EXPECT_FALSE(name.starts_with("ir_")) << name;
  }

  // The files are what the code generator produced for the add kernel.
  codegen::GeneratedSources src = GenerateAfterPipeline(MakeAddKernel().func, DefaultArch(), true);
  EXPECT_EQ(ReadFile(inst->dir / "kernel.cpp"), src.kernel_cpp);
  EXPECT_NE(src.kernel_cpp.find("pto::DirectRows(dr, dc, direct_in, direct_out"), std::string::npos);
  EXPECT_EQ(ReadFile(inst->dir / "call_kernel.cpp"), src.call_kernel_cpp);
}

// fp16 tiles compute in fp32 on the device (with the F16C/AVX-512 conversions of -march=native) and
// round once: the result must be the IEEE half sum, which the software conversions here compute.
TEST(EndToEnd, Fp16AddIsTheIeeeHalfSum) {
  AddKernel k = MakeAddKernel({.name = "add_fp16", .dtype = DataType::kFP16, .rows = 128, .cols = 128});
  std::shared_ptr<jit::Instance> inst = test_util::Compile(k.func, "add_fp16");
  constexpr int32_t rows = 256, cols = 256;
  std::vector<pto::half> x(size_t(rows) * cols), y(x.size()), z(x.size(), pto::half{0xffff});
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> bits(0, 0x7bff);  // finite magnitudes, subnormals included
  for (size_t n = 0; n < x.size(); ++n) {
    x[n].bits = uint16_t(bits(rng) | (rng() & 0x8000));
    y[n].bits = uint16_t(bits(rng) | (rng() & 0x8000));
  }
  runtime::Stream stream;
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols);
  jit::Launch(*inst, 4, stream.handle(), slots.data());
  stream.Synchronize();
  size_t wrong = 0, overflows = 0;
  for (size_t n = 0; n < z.size(); ++n) {
    uint16_t expected = pto::HalfFromFloat(pto::ToFloat(x[n]) + pto::ToFloat(y[n])).bits;
    wrong += z[n].bits != expected;
    overflows += (expected & 0x7fff) == 0x7c00;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(overflows, 0u);  // sums past 65504 round to inf on both sides
}

// -float('inf') is the usual start of a running maximum; 1e39 or a folded 1.0 / 0.0 give inf too.
TEST(Codegen, NonFiniteFloatConstantsAreValidCpp) {
  AddKernel k = MakeAddKernel({.name = "max_inf"});
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.at(5) = test_util::Op("maxs", {test_util::Ref(k.tc), test_util::Ref(k.ta), ir::FloatConst(-INFINITY)},
                              test_util::kLineAdd);
  ir::Function f = k.With(k.Body(inner));
  std::shared_ptr<jit::Instance> inst = test_util::Compile(f, "max_inf");
  std::vector<float> x(size_t(kRows) * kCols), y(x.size()), z(x.size(), 0.0f);
  Fill(x, y);
  runtime::Stream stream;
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), kRows, kCols);
  jit::Launch(*inst, 8, stream.handle(), slots.data());
  stream.Synchronize();
  EXPECT_EQ(z, x);  // max(x, -inf) == x
}

// Group `a` keeps its cursor in cur_a; a group the user named `a_cursor` must not clash with it.
TEST(Codegen, GroupNamesDoNotCollideWithCursors) {
  AddKernel k = MakeAddKernel({.name = "cursor_names"});
  ir::TileType tt = test_util::MakeTileType(64, 128);
  ir::Var extra = test_util::MakeTileGroup(k.func, "a_cursor", tt, 0x30000, {}, 1, test_util::At(2));
  ir::Var te = test_util::MakeTileVar(k.func, "te", tt);
  ir::Stmt select = ir::SelectTile(te, extra, ir::SelectMode::kCurrent, nullptr, test_util::At(9));
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.insert(inner.begin(), select);
  ir::Function f = k.With(ir::Seq({ir::DeclTiles(extra, test_util::At(2)), k.Body(inner)}));
  EXPECT_NO_THROW(test_util::Compile(f, "cursor_names"));  // a clash would not compile
}

TEST(EndToEnd, CompileErrorsComeBeforeTheCompiler) {
  // A verifier error: nothing is compiled and no library appears.
  AddKernel k = MakeAddKernel();
  std::vector<ir::Stmt> inner = k.InnerStmts();
  inner.erase(inner.begin());
  jit::CompileOptions options;
  options.instance_dir = test_util::FreshTempDir("bad_kernel");
  EXPECT_THROW(jit::BuildInstance(k.With(k.Body(inner)), options), CompileDiagnostic);
  for (const fs::directory_entry& e : fs::directory_iterator(options.instance_dir)) {
    ADD_FAILURE() << "unexpected file " << e.path();
  }

  options.arch = "a9";
  try {
    jit::BuildInstance(k.func, options);
    ADD_FAILURE() << "unknown arch accepted";
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), ErrorKind::kValue);
    EXPECT_TRUE(Contains(d.what(), "unknown arch 'a9'")) << d.what();
  }
}

}  // namespace
}  // namespace pypto_pro
