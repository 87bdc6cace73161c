// The cube ops: their registry entries, what the verifier refuses, and the device code (pl.move,
// stores from Acc) on plain arrays against naive references; the GEMM routine: test_gemm_native.cpp.
// This file is built like kernels (-march=native) into its own test binary (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ir_test_util.h"
#include "transpose_check.h"
#include "pypto_pro/device.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/verifier.h"

namespace pypto_pro {
namespace {

using ir::DataType;
using ir::MemorySpace;
using ir::Pipe;
using test_util::At;
using test_util::Ref;

// ---------------------------------------------------------------- registry

TEST(CubeRegistry, MatmulEntries) {
  const ir::OpDef* matmul = ir::FindOp("matmul");
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(matmul->PipeFor({MemorySpace::kAcc, MemorySpace::kLeft, MemorySpace::kRight}), Pipe::kM);
  EXPECT_EQ(matmul->Signature(), "pl.matmul(dst_tile, lhs_tile, rhs_tile)");
  EXPECT_EQ(matmul->operands[0].memories, ir::Bit(MemorySpace::kAcc));
  EXPECT_EQ(matmul->operands[1].memories, ir::Bit(MemorySpace::kLeft));
  EXPECT_EQ(matmul->operands[2].memories, ir::Bit(MemorySpace::kRight));
  EXPECT_EQ(matmul->window, ir::WindowRule::kMatmul);
  ASSERT_NE(matmul->check, nullptr);
  const ir::KwargSpec* bias = matmul->FindKwarg("bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->kind, ir::AttrKind::kOperand);

  const ir::OpDef* with_bias = ir::FindOp(bias->choices.at(0));
  ASSERT_NE(with_bias, nullptr);
  EXPECT_EQ(with_bias->PublicName(), "matmul");
  EXPECT_EQ(with_bias->operands.at(3).memories, ir::Bit(MemorySpace::kBias));

  const ir::OpDef* acc = ir::FindOp("matmul_acc");
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->Signature(), "pl.matmul_acc(dst_tile, acc_tile, lhs_tile, rhs_tile)");
  EXPECT_EQ(acc->device_fn, "pto::matmul_acc");
}

TEST(CubeRegistry, MoveAndStorePipesFollowTheirPath) {
  const ir::OpDef* move = ir::FindOp("move");
  ASSERT_NE(move, nullptr);
  EXPECT_EQ(move->PipeFor({MemorySpace::kLeft, MemorySpace::kMat}), Pipe::kMTE1);
  EXPECT_EQ(move->PipeFor({MemorySpace::kRight, MemorySpace::kMat}), Pipe::kMTE1);
  EXPECT_EQ(move->PipeFor({MemorySpace::kBias, MemorySpace::kMat}), Pipe::kMTE1);
  EXPECT_EQ(move->PipeFor({MemorySpace::kVec, MemorySpace::kAcc}), Pipe::kFIX);
  EXPECT_EQ(move->PipeFor({MemorySpace::kVec, MemorySpace::kMat}), Pipe::kV);
  EXPECT_EQ(move->PipeFor({MemorySpace::kMat, MemorySpace::kVec}), Pipe::kMTE3);
  EXPECT_EQ(move->PipeFor({MemorySpace::kVec, MemorySpace::kVec}), Pipe::kV);
  EXPECT_EQ(ir::FindOp("store")->PipeFor({MemorySpace::kAcc}), Pipe::kFIX);
  EXPECT_TRUE(std::none_of(ir::PlannedOps().begin(), ir::PlannedOps().end(), [](const ir::PlannedOp& p) {
    return p.name == "move" || p.name == "matmul" || p.name == "matmul_acc";
  }));
}

// ---------------------------------------------------------------- BuildOpCall and the verifier

// A cube kernel `k(c: Tensor[[128, 128], fp32])` from test_util::TileKernel: tiles on lines 2-3,
// the section on line 4, ops on line 5; With() defaults to a cube section.
struct CubeKernel : test_util::TileKernel {
  ir::Var c;
  CubeKernel() : TileKernel("cube_kernel", "cube.py") {
    c = Tensor("c", DataType::kFP32, {test_util::FixedDim(128), test_util::FixedDim(128)});
  }
  ir::Var Tile(const std::string& name, int64_t rows, int64_t cols, DataType dtype, MemorySpace memory) {
    return MakeTile(name, rows, cols, dtype, memory);
  }
  ir::Function With(std::vector<ir::Stmt> ops, ir::SectionKind kind = ir::SectionKind::kCube) const {
    return TileKernel::With(std::move(ops), kind);
  }
};

// pl.<name>(args..., **kwargs) built the way the front end does, at line 5.
ir::Stmt Call(const std::string& name, std::vector<ir::Expr> args, std::map<std::string, ir::KwargValue> kwargs = {}) {
  return ir::BuildOpCall(name, std::move(args), kwargs, At(5, 8));
}

ir::KwargValue Operand(const ir::Var& tile) {
  ir::KwargValue v;
  v.kind = ir::KwargValue::Kind::kExpr;
  v.e = Ref(tile);
  return v;
}

void ExpectRejected(const ir::Function& func, ErrorKind kind, const std::string& message_part, int line = 5) {
  try {
    ir::Verify(func);
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), kind) << d.what();
    EXPECT_NE(std::string(d.what()).find(message_part), std::string::npos) << d.what();
    EXPECT_EQ(d.span().line, line) << d.what();
    return;
  }
  ADD_FAILURE() << "Verify accepted a kernel that should fail with: " << message_part;
}

template <typename Fn>
std::string DiagnosticOf(Fn&& fn, ErrorKind expected_kind) {
  try {
    fn();
  } catch (const CompileDiagnostic& d) {
    EXPECT_EQ(d.kind(), expected_kind) << d.what();
    return d.what();
  }
  ADD_FAILURE() << "expected a CompileDiagnostic";
  return "";
}

TEST(CubeVerifier, AcceptsMatmulChainAndBiasFormsSelectMatmulBias) {
  CubeKernel k;
  ir::Var l = k.Tile("l", 64, 32, DataType::kBF16, MemorySpace::kLeft);
  ir::Var r = k.Tile("r", 32, 48, DataType::kBF16, MemorySpace::kRight);
  ir::Var acc = k.Tile("acc", 64, 48, DataType::kFP32, MemorySpace::kAcc);
  ir::Var bias = k.Tile("bias", 1, 48, DataType::kFP32, MemorySpace::kBias);
  ir::Stmt positional = Call("matmul", {Ref(acc), Ref(l), Ref(r), Ref(bias)});
  ir::Stmt keyword = Call("matmul", {Ref(acc), Ref(l), Ref(r)}, {{"bias", Operand(bias)}});
  ir::Stmt plain = Call("matmul", {Ref(acc), Ref(l), Ref(r)});
  EXPECT_EQ(positional->op->name, "matmul_bias");
  EXPECT_EQ(keyword->op->name, "matmul_bias");
  EXPECT_EQ(plain->op->name, "matmul");
  ir::Stmt chain = Call("matmul_acc", {Ref(acc), Ref(acc), Ref(l), Ref(r)});
  ir::Stmt store = Call("store", {Ref(k.c), Ref(acc), ir::Tuple({ir::IntConst(0), ir::IntConst(0)})});
  ir::Function f = k.With({positional, keyword, plain, chain, store});
  EXPECT_NO_THROW(ir::Verify(f));
  EXPECT_EQ(ir::KernelKindOf(f), ir::KernelKind::kCube);

  std::string twice = DiagnosticOf([&] { Call("matmul", {Ref(acc), Ref(l), Ref(r), Ref(bias)}, {{"bias", Operand(bias)}}); },
                                   ErrorKind::kType);
  EXPECT_NE(twice.find("pl.matmul() got 'bias' twice"), std::string::npos) << twice;
  // matmul_bias is reached through matmul only.
  DiagnosticOf([&] { Call("matmul_bias", {Ref(acc), Ref(l), Ref(r), Ref(bias)}); }, ErrorKind::kUndefined);
  ir::KwargValue final_phase;
  final_phase.kind = ir::KwargValue::Kind::kString;
  final_phase.s = "Final";
  // phase= is an option of both forms: the unit-flag handshake (Final = 2).
  ir::Stmt with_phase = Call("matmul", {Ref(acc), Ref(l), Ref(r)}, {{"phase", final_phase}});
  ASSERT_EQ(with_phase->attrs.size(), 1u);
  EXPECT_EQ(with_phase->attrs[0].value, 2);
}

TEST(CubeVerifier, RejectsMatmulIntoAVecTile) {
  CubeKernel k;
  ir::Var l = k.Tile("l", 16, 16, DataType::kFP16, MemorySpace::kLeft);
  ir::Var r = k.Tile("r", 16, 16, DataType::kFP16, MemorySpace::kRight);
  ir::Var v = k.Tile("v", 16, 16, DataType::kFP32, MemorySpace::kVec);
  ExpectRejected(k.With({Call("matmul", {Ref(v), Ref(l), Ref(r)})}), ErrorKind::kType,
                 "pl.matmul operand 'dst_tile' must be a tile in Acc memory, got Tile[[16, 16], fp32, Vec]");
}

TEST(CubeVerifier, RejectsShapeMismatches) {
  CubeKernel k;
  ir::Var l = k.Tile("l", 64, 32, DataType::kFP16, MemorySpace::kLeft);
  ir::Var r = k.Tile("r", 16, 48, DataType::kFP16, MemorySpace::kRight);
  ir::Var r_ok = k.Tile("r_ok", 32, 48, DataType::kFP16, MemorySpace::kRight);
  ir::Var acc = k.Tile("acc", 64, 48, DataType::kFP32, MemorySpace::kAcc);
  ir::Var wide = k.Tile("wide", 64, 64, DataType::kFP32, MemorySpace::kAcc);
  ir::Var bias = k.Tile("bias", 1, 64, DataType::kFP32, MemorySpace::kBias);
  ExpectRejected(k.With({Call("matmul", {Ref(acc), Ref(l), Ref(r)})}), ErrorKind::kType,
                 "pl.matmul: K mismatch: 'lhs_tile' is [64, 32] (K = 32) but 'rhs_tile' is [16, 48] (K = 16)");
  ExpectRejected(k.With({Call("matmul", {Ref(wide), Ref(l), Ref(r_ok)})}), ErrorKind::kType,
                 "pl.matmul: 'dst_tile' is [64, 64] but 'lhs_tile' [64, 32] x 'rhs_tile' [32, 48] is [64, 48]");
  ExpectRejected(k.With({Call("matmul_acc", {Ref(acc), Ref(wide), Ref(l), Ref(r_ok)})}), ErrorKind::kType,
                 "pl.matmul_acc: 'acc_tile' (Tile[[64, 64], fp32, Acc]) must have the shape and dtype of 'dst_tile'");
  ExpectRejected(k.With({Call("matmul", {Ref(acc), Ref(l), Ref(r_ok), Ref(bias)})}), ErrorKind::kType,
                 "pl.matmul: the bias must be a [1, 48] fp32 tile");
}

TEST(CubeVerifier, RejectsDtypeMismatches) {
  CubeKernel k;
  ir::Var l8 = k.Tile("l8", 16, 32, DataType::kInt8, MemorySpace::kLeft);
  ir::Var r8 = k.Tile("r8", 32, 16, DataType::kInt8, MemorySpace::kRight);
  ir::Var r16 = k.Tile("r16", 32, 16, DataType::kFP16, MemorySpace::kRight);
  ir::Var acc = k.Tile("acc", 16, 16, DataType::kFP32, MemorySpace::kAcc);
  ir::Var acc_i = k.Tile("acc_i", 16, 16, DataType::kInt32, MemorySpace::kAcc);
  ir::Var l_i16 = k.Tile("l_i16", 16, 32, DataType::kInt16, MemorySpace::kLeft);
  ExpectRejected(k.With({Call("matmul", {Ref(acc), Ref(l8), Ref(r8)})}), ErrorKind::kType,
                 "pl.matmul: int8 inputs accumulate in int32, but 'dst_tile' is fp32");
  ExpectRejected(k.With({Call("matmul", {Ref(acc_i), Ref(l8), Ref(r16)})}), ErrorKind::kType,
                 "pl.matmul: 'rhs_tile' is fp16 but 'lhs_tile' is int8");
  ExpectRejected(k.With({Call("matmul", {Ref(acc_i), Ref(l_i16), Ref(r8)})}), ErrorKind::kType,
                 "pl.matmul operand 'lhs_tile' has dtype int16, which pl.matmul does not support there");
  EXPECT_NO_THROW(ir::Verify(k.With({Call("matmul", {Ref(acc_i), Ref(l8), Ref(r8)})})));
  // An int32 accumulator takes an int32 bias row, the table Mat -> Bias makes of int32 data.
  ir::Var bias_i = k.Tile("bias_i", 1, 16, DataType::kInt32, MemorySpace::kBias);
  EXPECT_NO_THROW(ir::Verify(k.With({Call("matmul", {Ref(acc_i), Ref(l8), Ref(r8)}, {{"bias", Operand(bias_i)}})})));
}

TEST(CubeVerifier, MovePathsDtypesAndCores) {
  CubeKernel k;
  ir::Var mat = k.Tile("mat", 16, 32, DataType::kFP16, MemorySpace::kMat);
  ir::Var left = k.Tile("left", 16, 32, DataType::kFP16, MemorySpace::kLeft);
  ir::Var right = k.Tile("right", 32, 16, DataType::kFP16, MemorySpace::kRight);
  ir::Var acc = k.Tile("acc", 16, 32, DataType::kFP32, MemorySpace::kAcc);
  ir::Var vec_half = k.Tile("vec_half", 16, 32, DataType::kFP16, MemorySpace::kVec);
  ir::Var vec_int = k.Tile("vec_int", 16, 32, DataType::kInt32, MemorySpace::kVec);
  ir::Var bias_mat = k.Tile("bias_mat", 1, 32, DataType::kBF16, MemorySpace::kMat);
  ir::Var bias = k.Tile("bias", 1, 32, DataType::kFP32, MemorySpace::kBias);
  EXPECT_NO_THROW(ir::Verify(k.With({Call("move", {Ref(left), Ref(mat)}), Call("move", {Ref(vec_half), Ref(acc)}),
                                     Call("move", {Ref(bias), Ref(bias_mat)})})));
  ExpectRejected(k.With({Call("move", {Ref(mat), Ref(left)})}), ErrorKind::kType,
                 "pl.move: there is no data path from Left to Mat");
  ExpectRejected(k.With({Call("move", {Ref(right), Ref(mat)})}), ErrorKind::kType,
                 "pl.move: a move out of Mat keeps the shape (or swaps it between NZ and ZN tiles, which transposes; "
                 "offset= extracts a part): 'src_tile' is [16, 32] and 'dst_tile' is [32, 16]");
  ir::Var int8_row = k.Tile("int8_row", 1, 32, DataType::kInt8, MemorySpace::kMat);
  ExpectRejected(k.With({Call("move", {Ref(bias), Ref(int8_row)})}), ErrorKind::kType,
                 "pl.move: a move from int8 Mat to Bias writes nothing (the bias table takes fp32, fp16, bf16 or "
                 "int32), not fp32");
  ir::Var tall_bias = k.Tile("tall_bias", 16, 32, DataType::kFP32, MemorySpace::kBias);
  ExpectRejected(k.With({Call("move", {Ref(tall_bias), Ref(mat)})}), ErrorKind::kType,
                 "pl.move: the bias table holds one row: 'dst_tile' is [16, 32]");
  ExpectRejected(k.With({Call("move", {Ref(vec_int), Ref(acc)})}), ErrorKind::kType,
                 "pl.move: an fp32 Acc tile is written as fp32, fp16 or bf16 (int8 with scale=), not int32");
  // Vec -> Mat is the vector core's MTE3; Acc -> Vec the cube core's fixpipe.
  ExpectRejected(k.With({Call("move", {Ref(mat), Ref(vec_half)})}), ErrorKind::kType,
                 "pl.move uses a move from Vec to Mat (pipe MTE3) inside pl.section_cube(); the move runs on the "
                 "vector core");
  ExpectRejected(k.With({Call("move", {Ref(vec_half), Ref(acc)})}, ir::SectionKind::kVector), ErrorKind::kType,
                 "pl.move uses a move from Acc to Vec (pipe FIX) inside pl.section_vector(); the move runs on the "
                 "cube core");
  ir::Function vector_side =
      k.With({Call("move", {Ref(mat), Ref(vec_half)}), Call("move", {Ref(vec_half), Ref(mat)})}, ir::SectionKind::kVector);
  EXPECT_NO_THROW(ir::Verify(vector_side));
  EXPECT_EQ(ir::KernelKindOf(vector_side), ir::KernelKind::kVector);
}

TEST(CubeVerifier, StoresFromAccConvertOnlyLikeTheFixpipe) {
  CubeKernel k;
  ir::Var acc = k.Tile("acc", 16, 16, DataType::kFP32, MemorySpace::kAcc);
  ir::Var acc_i = k.Tile("acc_i", 16, 16, DataType::kInt32, MemorySpace::kAcc);
  ir::Var h = test_util::AddTensorParam(k.func, "h", DataType::kFP16, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Var b = test_util::AddTensorParam(k.func, "b", DataType::kBF16, {test_util::DynamicDim(), test_util::DynamicDim()});
  ir::Expr origin = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  EXPECT_NO_THROW(ir::Verify(k.With({Call("store", {Ref(h), Ref(acc), origin}), Call("store_tile", {Ref(b), Ref(acc), origin})})));
  ExpectRejected(k.With({Call("store", {Ref(h), Ref(acc_i), origin})}), ErrorKind::kType,
                 "pl.store: an int32 Acc tile writes fp16 only with scale= (the fixpipe's quantisation)");
}

// ---------------------------------------------------------------- device ops on tiles

struct Faulted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void ThrowFault(PtoCoreCtx*, int32_t, const PtoFaultDetail* detail) { throw Faulted(detail->message); }

// A core context whose arenas are host vectors; faults throw Faulted.
struct TestCore {
  PtoRuntimeApi api{PTO_ABI_VERSION, nullptr, &ThrowFault};
  std::vector<uint8_t> memory[PTO_MEM_COUNT];
  pto::CoreCtx ctx{};
  TestCore() {
    ctx.api = &api;
    ctx.core_type = PTO_CORE_AIC;
    for (int m = 0; m < PTO_MEM_COUNT; ++m) {
      memory[m].assign(256 * 1024, 0);
      ctx.mem[m] = memory[m].data();
      ctx.mem_size[m] = uint32_t(memory[m].size());
    }
  }
  template <typename TileT>
  TileT Make(uint32_t addr, int32_t rows = TileT::kRows, int32_t cols = TileT::kCols) {
    TileT t;
    pto::InitTile(ctx, t, addr, rows, cols, 0u);
    return t;
  }
};

TEST(CubeDevice, MatmulUsesTheLeftWindowForMAndKAndTheRightForN) {
  TestCore core;
  using Left = pto::Tile<pto::half, 16, 32, pto::kLeft>;
  using Right = pto::Tile<pto::half, 32, 48, pto::kRight>;
  using Acc = pto::Tile<float, 16, 48, pto::kAcc>;
  Left l = core.Make<Left>(0, 5, 7);
  Right r = core.Make<Right>(0, 32, 9);  // its valid rows are not consulted: K comes from the left tile
  Acc acc = core.Make<Acc>(0);
  for (int i = 0; i < 16 * 32; ++i) l.data[i] = pto::HalfFromFloat(float(i % 5) - 2.0f);
  for (int i = 0; i < 32 * 48; ++i) r.data[i] = pto::HalfFromFloat(float(i % 7) - 3.0f);
  for (int i = 0; i < 16 * 48; ++i) acc.data[i] = -1.0f;
  pto::matmul(core.ctx, 1, 0, acc, l, r);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 48; ++j) {
      float want = -1.0f;
      if (i < 5 && j < 9) {
        want = 0;
        for (int p = 0; p < 7; ++p) want += pto::ToFloat(l.data[i * 32 + p]) * pto::ToFloat(r.data[p * 48 + j]);
      }
      ASSERT_EQ(acc.data[i * 48 + j], want) << i << ", " << j;
    }
  }
  Left empty = core.Make<Left>(0, 0, 7);
  EXPECT_THROW(pto::matmul(core.ctx, 1, 0, acc, empty, r), Faulted);
}

TEST(CubeDevice, MoveAccToVecRoundsToNearestEven) {
  TestCore core;
  using Acc = pto::Tile<float, 4, 16, pto::kAcc>;
  using VecHalf = pto::Tile<pto::half, 4, 16, pto::kVec>;
  using VecBf16 = pto::Tile<pto::bfloat16, 4, 16, pto::kVec>;
  Acc acc = core.Make<Acc>(0, 3, 16);
  VecHalf vh = core.Make<VecHalf>(0);
  VecBf16 vb = core.Make<VecBf16>(0x1000);
  for (int i = 0; i < 64; ++i) acc.data[i] = 1.0f + float(i) * std::ldexp(1.0f, -12) - 70000.0f * (i == 5);
  for (int i = 0; i < 64; ++i) vh.data[i] = pto::HalfFromFloat(9.0f);
  pto::move(core.ctx, 1, -1, 0, -1, vh, acc);
  pto::move(core.ctx, 1, -1, 0, -1, vb, acc);
  for (int i = 0; i < 64; ++i) {
    if (i < 48) {
      EXPECT_EQ(vh.data[i].bits, pto::HalfFromFloat(acc.data[i]).bits) << i;
      EXPECT_EQ(vb.data[i].bits, pto::Bf16FromFloat(acc.data[i]).bits) << i;
    } else {
      EXPECT_EQ(pto::ToFloat(vh.data[i]), 9.0f) << "row 3 is outside the source window";
    }
  }
  EXPECT_EQ(vh.data[2].bits, 0x3c00);  // 1 + 2^-11: a tie, to even
  EXPECT_EQ(vh.data[6].bits, 0x3c02);  // 1 + 3 * 2^-11: a tie, to even (up)
  EXPECT_EQ(vh.data[5].bits, 0xfc00);  // beyond fp16: -inf

  using Int = pto::Tile<int32_t, 4, 16, pto::kAcc>;
  using VecInt = pto::Tile<int32_t, 4, 16, pto::kVec>;
  Int ai = core.Make<Int>(0x4000, 2, 5);
  VecInt vi = core.Make<VecInt>(0x2000);
  for (int i = 0; i < 64; ++i) ai.data[i] = i * 1000003;
  pto::move(core.ctx, 1, -1, 0, -1, vi, ai);
  EXPECT_EQ(vi.data[16 + 4], 20 * 1000003);
  EXPECT_EQ(vi.data[16 + 5], 0);
}

TEST(CubeDevice, MoveIntoTheBiasTableWidensAndOversizedWindowsFault) {
  TestCore core;
  using MatRow = pto::Tile<pto::bfloat16, 1, 32, pto::kMat>;
  using Bias = pto::Tile<float, 1, 32, pto::kBias>;
  MatRow row = core.Make<MatRow>(0);
  Bias bias = core.Make<Bias>(0);
  for (int j = 0; j < 32; ++j) row.data[j] = pto::Bf16FromFloat(float(j) * 0.37f - 3.0f);
  pto::move(core.ctx, 1, -1, 0, -1, bias, row);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(bias.data[j], pto::ToFloat(row.data[j])) << j;

  using Small = pto::Tile<float, 8, 16, pto::kVec>;
  using Big = pto::Tile<float, 16, 16, pto::kMat>;
  Big big = core.Make<Big>(0x1000, 12, 16);
  Small small = core.Make<Small>(0);
  EXPECT_THROW(pto::move(core.ctx, 1, -1, 0, -1, small, big), Faulted);  // 12 rows do not fit 8
}

TEST(CubeDevice, StoreFromAccConvertsToTheTensorDtype) {
  TestCore core;
  using Acc = pto::Tile<float, 2, 20, pto::kAcc>;
  Acc acc = core.Make<Acc>(0, 2, 19);
  for (int i = 0; i < 40; ++i) acc.data[i] = float(i) / 3.0f;
  std::vector<pto::half> out(3 * 24, pto::HalfFromFloat(-1.0f));
  auto gm = pto::MakeGm<pto::half, 2>(reinterpret_cast<uint8_t*>(out.data()), pto::Idx<2>{{3, 24}}, "out");
  pto::store(core.ctx, 1, 0, -1, -1, 0, 0, gm, acc, pto::Idx<2>{{1, 2}});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 24; ++j) {
      bool inside = i >= 1 && j >= 2 && j < 21;
      float want = inside ? pto::ToFloat(pto::HalfFromFloat(acc.data[(i - 1) * 20 + j - 2])) : -1.0f;
      EXPECT_EQ(pto::ToFloat(out[size_t(i) * 24 + j]), want) << i << ", " << j;
    }
  }
  EXPECT_THROW(pto::store(core.ctx, 1, 0, -1, -1, 0, 0, gm, acc, pto::Idx<2>{{2, 2}}), Faulted);  // rows 2..3 of 3
}

TEST(CubeDevice, MovesTransposeExtractAndInsert) {
  TestCore core;
  using MatNZ = pto::Tile<pto::half, 4, 8, pto::kMat, pto::kNZ>;
  using RightZN = pto::Tile<pto::half, 8, 4, pto::kRight, pto::kZN>;
  MatNZ k = core.Make<MatNZ>(0, 3, 8);
  RightZN kt = core.Make<RightZN>(0);
  for (int i = 0; i < 32; ++i) k.data[i] = pto::HalfFromFloat(float(i));
  for (int i = 0; i < 32; ++i) kt.data[i] = pto::HalfFromFloat(-1.0f);
  pto::move(core.ctx, 1, -1, 0, -1, kt, k);  // NZ [4, 8] -> ZN [8, 4]: the window transposed
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(pto::ToFloat(kt.data[r * 4 + c]), c < 3 ? float(c * 8 + r) : -1.0f) << r << ", " << c;
    }
  }

  using Wide = pto::Tile<float, 4, 16, pto::kVec>;
  using Part = pto::Tile<float, 2, 4, pto::kVec>;
  Wide wide = core.Make<Wide>(0x100);
  Part part = core.Make<Part>(0x400);
  for (int i = 0; i < 64; ++i) wide.data[i] = float(i);
  pto::move_offset(core.ctx, 1, -1, 0, -1, part, wide, pto::Idx<2>{{2, 12}});  // extract rows 2..3, cols 12..15
  EXPECT_EQ(part.data[0], 44.0f);
  EXPECT_EQ(part.data[7], 63.0f);
  EXPECT_THROW(pto::move_offset(core.ctx, 1, -1, 0, -1, part, wide, pto::Idx<2>{{3, 0}}), Faulted);
  wide.valid_cols = 14;  // the extract must lie inside the source's valid window
  EXPECT_THROW(pto::move_offset(core.ctx, 1, -1, 0, -1, part, wide, pto::Idx<2>{{0, 12}}), Faulted);

  part.valid_rows = 1;  // insert: the source's window, at the offset
  pto::move_offset(core.ctx, 1, -1, 0, -1, wide, part, pto::Idx<2>{{3, 1}});
  EXPECT_EQ(wide.data[3 * 16 + 1], 44.0f);
  EXPECT_EQ(wide.data[3 * 16 + 4], 47.0f);
  EXPECT_EQ(wide.data[3 * 16 + 5], 53.0f);  // outside the inserted window: untouched
  EXPECT_THROW(pto::move_offset(core.ctx, 1, -1, 0, -1, wide, part, pto::Idx<2>{{0, 13}}), Faulted);
}

TEST(CubeDevice, FixpipeAppliesReluScaleAndSaturatingQuantisation) {
  const pto::Fixpipe quant = pto::MakeFixpipe(0, pto::FloatBits(0.5f));
  EXPECT_EQ((pto::detail::FixpipeElem<int8_t>(5.0f, quant)), 2);     // 2.5 -> 2: to even
  EXPECT_EQ((pto::detail::FixpipeElem<int8_t>(7.0f, quant)), 4);     // 3.5 -> 4
  EXPECT_EQ((pto::detail::FixpipeElem<int8_t>(1000.0f, quant)), 127);
  EXPECT_EQ((pto::detail::FixpipeElem<int8_t>(-1000.0f, quant)), -128);
  EXPECT_EQ((pto::detail::FixpipeElem<int8_t>(__builtin_nanf(""), quant)), 0);
  const pto::Fixpipe relu = pto::MakeFixpipe(1, -1);
  EXPECT_EQ((pto::detail::FixpipeElem<int32_t>(-7, relu)), 0);
  EXPECT_EQ((pto::detail::FixpipeElem<int32_t>(7, relu)), 7);
  EXPECT_EQ((pto::detail::FixpipeElem<float>(-1.5f, relu)), 0.0f);
  const pto::Fixpipe deq = pto::MakeFixpipe(0, pto::FloatBits(0.25f));
  EXPECT_EQ(pto::ToFloat(pto::detail::FixpipeElem<pto::half>(int32_t(-6), deq)), -1.5f);
  EXPECT_TRUE(pto::MakeFixpipe(0, -1).Plain());
}

TEST(CubeDevice, AtomicAddIsIndivisibleAcrossThreads) {
  pto::half h = pto::HalfFromFloat(0.0f);
  float f = 0.0f;
  int32_t n = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        pto::detail::AtomicAdd(&h, pto::HalfFromFloat(1.0f));
        pto::detail::AtomicAdd(&f, 0.5f);
        pto::detail::AtomicAdd(&n, int32_t(3));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pto::ToFloat(h), 2000.0f);  // exact in fp16 (integers up to 2048)
  EXPECT_EQ(f, 1000.0f);
  EXPECT_EQ(n, 6000);
}

TEST(Transpose2D, MatchesAnElementwiseTransposeWithTheHostsVectorUnit) { test_util::ExpectTransposesMatchElementwise(); }

}  // namespace
}  // namespace pypto_pro
