#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/jit/instance.h"
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

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + part.size())) ++n;
  return n;
}

// The line of `text` that contains `part` (empty if none).
std::string LineWith(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (Contains(line, part)) return line;
  }
  return "";
}

// What BuildInstance generates: the pipeline, then the code generator.
codegen::GeneratedSources GenerateAfterPipeline(ir::Function func, const ArchModel& arch = DefaultArch()) {
  passes::PassContext ctx;
  ctx.arch = &arch;
  passes::RunPipeline(func, ctx);
  return codegen::Generate(func, arch);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(Codegen, AddKernelSources) {
  AddKernel k = MakeAddKernel();
  codegen::GeneratedSources src = GenerateAfterPipeline(k.func);
  EXPECT_EQ(src.kind, ir::KernelKind::kVector);

  const std::string& kernel = src.kernel_cpp;
  EXPECT_TRUE(Contains(kernel, "#include \"pypto_pro/device.h\"")) << kernel;
  // Every op passes its source line, so a fault can name it.
  EXPECT_TRUE(Contains(kernel, "pto::load_tile(ctx, " + std::to_string(test_util::kLineLoadX) + ", -1, *v_ta, t_x, "))
      << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::load_tile(ctx, " + std::to_string(test_util::kLineLoadY) + ", -1, *v_tb, t_y, "))
      << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::add(ctx, " + std::to_string(test_util::kLineAdd) + ", *v_tc, *v_ta, *v_tb);"))
      << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::store_tile(ctx, " + std::to_string(test_util::kLineStore) + ", t_z, *v_tc, "))
      << kernel;
  EXPECT_TRUE(Contains(kernel, "PTO_KERNEL_VECTOR")) << kernel;
  EXPECT_TRUE(Contains(kernel, "\"add_kernel\", \"add.py\", \"a5\"")) << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::Tile<float, 64, 128, pto::kVec, pto::kND>")) << kernel;
  // Slot k of a group sits at base + k * 32 KiB; mutex id n is mask bit n.
  EXPECT_TRUE(Contains(kernel, "pto::InitTile(ctx, g_a[1], 0x8000, 64, 128, 2u);")) << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::InitTile(ctx, g_c[1], 0x28000, 64, 128, 2147483648u);")) << kernel;
  EXPECT_TRUE(Contains(kernel, "pto::MakeGm<float, 2>(args.a_x, pto::Idx<2>{{int64_t(args.dyn0), int64_t(args.dyn1)}}"))
      << kernel;
  EXPECT_TRUE(Contains(kernel, "if (ctx.core_type == PTO_CORE_AIV) {")) << kernel;

  const std::string& launcher = src.call_kernel_cpp;
  EXPECT_TRUE(Contains(launcher, "#include \"kernel.cpp\"")) << launcher;
  std::string signature = LineWith(launcher, "int64_t call_kernel(");
  EXPECT_TRUE(Contains(signature, "call_kernel(uint32_t blockDim, void* stream, uint8_t*")) << launcher;
  EXPECT_EQ(Count(signature, "uint8_t* "), 3u) << signature;
  EXPECT_EQ(Count(signature, "int32_t dyn"), 6u) << signature;
  EXPECT_TRUE(Contains(signature, "uint8_t* a_x, uint8_t* a_y, uint8_t* a_z, int32_t dyn0,")) << signature;
  EXPECT_TRUE(Contains(signature, "int32_t dyn5) {")) << signature;
  EXPECT_TRUE(Contains(launcher, "PTO_EXPORT int64_t call_kernel_packed(uint32_t blockDim, void* stream, "
                                 "const uint64_t* slots)"))
      << launcher;
  EXPECT_TRUE(Contains(launcher, "int32_t(slots[8])")) << launcher;
  EXPECT_TRUE(Contains(launcher, "pypto_kernel_desc()")) << launcher;
}

TEST(Codegen, LauncherHasOneInt32PerDynamicDimAndTypedScalars) {
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
  EXPECT_EQ(f.NumDynamicDims(), 2);

  codegen::GeneratedSources src = GenerateAfterPipeline(f);
  std::string signature = LineWith(src.call_kernel_cpp, "int64_t call_kernel(");
  EXPECT_TRUE(Contains(signature, "call_kernel(uint32_t blockDim, void* stream, uint8_t* a_x, uint8_t* a_z, "
                                  "float a_alpha, int32_t dyn0, int32_t dyn1) {"))
      << signature;
  // fp32 scalars travel as their bit pattern in the low 32 bits of a slot.
  EXPECT_TRUE(Contains(src.call_kernel_cpp, "__builtin_bit_cast(float, uint32_t(slots[2]))")) << src.call_kernel_cpp;
  // Fixed and STATIC dims are compiled in; only DYNAMIC dims come from the launcher.
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::Idx<2>{{int64_t(args.dyn0), 512}}, \"x\")")) << src.kernel_cpp;
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::Idx<2>{{256, int64_t(args.dyn1)}}, \"z\")")) << src.kernel_cpp;
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::adds(ctx, 6, *v_t, *v_t, v_alpha);")) << src.kernel_cpp;
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
  std::string code = GenerateAfterPipeline(cube).kernel_cpp;
  EXPECT_TRUE(Contains(code, "PTO_KERNEL_CUBE")) << code;
  EXPECT_TRUE(Contains(code, "if (ctx.core_type == PTO_CORE_AIC) {")) << code;
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
  ASSERT_NE(inst->launch, nullptr);
  ASSERT_NE(inst->desc, nullptr);
  EXPECT_EQ(inst->kernel_name, "add_kernel");
  EXPECT_STREQ(inst->desc->name, "add_kernel");
  EXPECT_EQ(inst->kind, ir::KernelKind::kVector);
  EXPECT_EQ(inst->num_slots, 9);

  runtime::Stream stream;
  for (uint32_t block_dim : {1u, 8u}) {
    std::vector<float> x(size_t(kRows) * kCols), y(x.size()), z(x.size(), -1.0f);
    Fill(x, y);
    std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), kRows, kCols);
    int64_t seq = inst->launch(block_dim, stream.handle(), slots.data());
    EXPECT_GT(seq, 0);
    stream.Synchronize();
    size_t wrong = 0;
    for (size_t n = 0; n < z.size(); ++n) wrong += z[n] != x[n] + y[n] ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "block_dim " << block_dim << ": z[0] = " << z[0] << ", expected " << x[0] + y[0];
  }
}

TEST(EndToEnd, DynamicDimsComeFromTheLaunch) {
  const std::shared_ptr<jit::Instance>& inst = test_util::CompiledAddKernel();
  runtime::Stream stream;
  // 100 x 256: one full row tile (rows 0..63) and two column tiles; rows 64..99 are never touched.
  constexpr int32_t rows = 100, cols = 256;
  std::vector<float> x(size_t(rows) * cols), y(x.size()), z(x.size(), -1.0f);
  Fill(x, y);
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols);
  inst->launch(4, stream.handle(), slots.data());
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
  codegen::GeneratedSources src = GenerateAfterPipeline(MakeAddKernel().func);
  EXPECT_EQ(ReadFile(inst->dir / "kernel.cpp"), src.kernel_cpp);
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
  inst->launch(4, stream.handle(), slots.data());
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
  std::string line = LineWith(GenerateAfterPipeline(f).kernel_cpp, "pto::maxs(");
  EXPECT_TRUE(Contains(line, "(-__builtin_inff())")) << line;
  std::shared_ptr<jit::Instance> inst = test_util::Compile(f, "max_inf");
  std::vector<float> x(size_t(kRows) * kCols), y(x.size()), z(x.size(), 0.0f);
  Fill(x, y);
  runtime::Stream stream;
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), kRows, kCols);
  inst->launch(8, stream.handle(), slots.data());
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
  std::string kernel = GenerateAfterPipeline(f).kernel_cpp;
  EXPECT_TRUE(Contains(kernel, " g_a_cursor[1];") && Contains(kernel, "int32_t cur_a = 0;")) << kernel;
  EXPECT_NO_THROW(test_util::Compile(f, "cursor_names"));
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
