// The cube unit: matmul on Left x Right into Acc, pipe M (docs/language.md#compute). Following the
// public API, lhs [M, K] x rhs [K, N] -> dst [M, N]; fp16/bf16/fp32 inputs accumulate in an fp32 Acc
// tile, int8 inputs in an int32 one; an optional Bias tile [1, N] of the accumulator's dtype is added to every row.
#include "op_checks.h"
#include "op_tables.h"

namespace pypto_pro::ir {

namespace {

constexpr uint32_t kMatmulInputs =
    Bit(DataType::kFP16) | Bit(DataType::kBF16) | Bit(DataType::kFP32) | Bit(DataType::kInt8);
constexpr uint32_t kAccumulators = Bit(DataType::kFP32) | Bit(DataType::kInt32);
// Where each operand of a matmul form sits; absent ones are npos.
struct MatmulLayout {
  size_t dst = 0, acc = std::string::npos, lhs = 1, rhs = 2, bias = std::string::npos;
};

void CheckMatmulOperands(const StmtNode& call, const MatmulLayout& at) {
  const std::string where = CallName(call) + ": ";
  const TileType &dst = TileOf(call, at.dst), &lhs = TileOf(call, at.lhs), &rhs = TileOf(call, at.rhs);
  if (rhs.dtype != lhs.dtype) {
    Fail(ErrorKind::kType, OperandSpan(call, at.rhs),
         where + OperandName(call, at.rhs) + " is " + std::string(Name(rhs.dtype)) + " but " +
             OperandName(call, at.lhs) + " is " + std::string(Name(lhs.dtype)) + "; both sides of a matmul share a dtype");
  }
  const DataType accumulator = lhs.dtype == DataType::kInt8 ? DataType::kInt32 : DataType::kFP32;
  if (dst.dtype != accumulator) {
    Fail(ErrorKind::kType, OperandSpan(call, at.dst),
         where + std::string(Name(lhs.dtype)) + " inputs accumulate in " + std::string(Name(accumulator)) + ", but " +
             OperandName(call, at.dst) + " is " + std::string(Name(dst.dtype)));
  }
  if (lhs.Cols() != rhs.Rows()) {
    Fail(ErrorKind::kType, OperandSpan(call, at.rhs),
         where + "K mismatch: " + OperandName(call, at.lhs) + " is " + ShapeText(lhs) + " (K = " +
             std::to_string(lhs.Cols()) + ") but " + OperandName(call, at.rhs) + " is " + ShapeText(rhs) + " (K = " +
             std::to_string(rhs.Rows()) + ")");
  }
  if (dst.Rows() != lhs.Rows() || dst.Cols() != rhs.Cols()) {
    Fail(ErrorKind::kType, OperandSpan(call, at.dst),
         where + OperandName(call, at.dst) + " is " + ShapeText(dst) + " but " + OperandName(call, at.lhs) + " " +
             ShapeText(lhs) + " x " + OperandName(call, at.rhs) + " " + ShapeText(rhs) + " is [" +
             std::to_string(lhs.Rows()) + ", " + std::to_string(rhs.Cols()) + "]");
  }
  if (at.acc != std::string::npos) {
    const TileType& acc = TileOf(call, at.acc);
    if (acc.dtype != dst.dtype || acc.Rows() != dst.Rows() || acc.Cols() != dst.Cols()) {
      Fail(ErrorKind::kType, OperandSpan(call, at.acc),
           where + OperandName(call, at.acc) + " (" + acc.ToString() + ") must have the shape and dtype of " +
               OperandName(call, at.dst) + " (" + dst.ToString() + ")");
    }
  }
  if (at.bias != std::string::npos) {
    const TileType& bias = TileOf(call, at.bias);
    if (bias.Rows() != 1 || bias.Cols() != dst.Cols() || bias.dtype != dst.dtype) {
      Fail(ErrorKind::kType, OperandSpan(call, at.bias),
           where + "the bias must be a [1, " + std::to_string(dst.Cols()) + "] " + std::string(Name(dst.dtype)) +
               " tile (one value per column of " + OperandName(call, at.dst) + "), got " + bias.ToString());
    }
  }
}

void CheckMatmul(const StmtNode& call) { CheckMatmulOperands(call, {}); }
void CheckMatmulBias(const StmtNode& call) { CheckMatmulOperands(call, {.bias = 3}); }
void CheckMatmulAcc(const StmtNode& call) { CheckMatmulOperands(call, {.acc = 1, .lhs = 2, .rhs = 3}); }

// pl.AccPhase: the cube side of the unit-flag handshake with the fixpipe (0: not given).
KwargSpec Phase() { return KwargSpec{"phase", AttrKind::kEnum, 0, {"Unspecified", "Partial", "Final"}}; }

OpDef Matmul(std::string_view name, std::vector<OperandSpec> operands, std::vector<KwargSpec> kwargs,
             std::string_view device_fn, OpCheck check, std::string_view doc) {
  OpDef op{name, Pipe::kM, PipeRule::kFixed, WindowRule::kMatmul, std::move(operands), false, kMatmulInputs, "",
           device_fn, std::move(kwargs), doc};
  op.check = check;
  return op;
}

}  // namespace

void AddCubeOps(std::vector<OpDef>& ops) {
  const OperandSpec dst{"dst_tile", OperandKind::kTile, Access::kWrite, Bit(MemorySpace::kAcc), kAccumulators};
  const OperandSpec lhs{"lhs_tile", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kLeft), kMatmulInputs};
  const OperandSpec rhs{"rhs_tile", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kRight), kMatmulInputs};
  // The bias table holds the accumulator's type: fp32, or int32 for int8 inputs (as Mat -> Bias writes it).
  const OperandSpec bias{"bias", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kBias),
                         Bit(DataType::kFP32) | Bit(DataType::kInt32)};
  const OperandSpec acc{"acc_tile", OperandKind::kTile, Access::kRead, Bit(MemorySpace::kAcc), kAccumulators};

  ops.push_back(Matmul("matmul", {dst, lhs, rhs},
                       {KwargSpec{"bias", AttrKind::kOperand, -1, {"matmul_bias"}}, Phase()}, "pto::matmul",
                       &CheckMatmul, "dst = lhs x rhs (Left x Right -> Acc)"));
  OpDef with_bias = Matmul("matmul_bias", {dst, lhs, rhs, bias}, {Phase()}, "pto::matmul_bias", &CheckMatmulBias,
                           "dst = lhs x rhs + bias, the bias row added to every row");
  with_bias.public_name = "matmul";
  ops.push_back(with_bias);
  ops.push_back(Matmul("matmul_acc", {dst, acc, lhs, rhs}, {Phase()}, "pto::matmul_acc", &CheckMatmulAcc,
                       "dst = acc + lhs x rhs"));
}

}  // namespace pypto_pro::ir
