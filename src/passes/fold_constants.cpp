// Specialise and fold: STATIC and fixed dims become constants, constant arithmetic is evaluated,
// constant conditions select their branch (how TilingKey/datatype branches vanish), empty constant
// loops and code after break/continue/return are removed.
#include <cmath>
#include <limits>

#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/float_env.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

bool Truthy(const Expr& c) { return IsFloat(c->type.dtype) ? c->float_value != 0.0 : c->int_value != 0; }
double AsDouble(const Expr& c) { return IsFloat(c->type.dtype) ? c->float_value : double(c->int_value); }

// Wraps an integer result to the width and signedness of `dtype`, as the device's scalar unit would.
int64_t Wrap(int64_t v, DataType dtype) {
  int bits = Info(dtype).bits;
  if (dtype == DataType::kBool) return v != 0;
  if (bits >= 64) return v;
  uint64_t mask = (uint64_t(1) << bits) - 1, u = uint64_t(v) & mask;
  if (Info(dtype).is_signed && (u >> (bits - 1))) u |= ~mask;  // sign-extend
  return int64_t(u);
}

// Two's-complement arithmetic without signed overflow (undefined behaviour in C++).
int64_t AddWrap(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t SubWrap(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }

Expr FoldBinary(const ExprNode& e, const Expr& a, const Expr& b) {
  DataType dt = e.type.dtype;
  bool float_math = IsFloat(a->type.dtype) || IsFloat(b->type.dtype);
  if (IsComparison(e.binary) || e.binary == BinaryOp::kAnd || e.binary == BinaryOp::kOr) {
    bool r = false;
    if (e.binary == BinaryOp::kAnd) return BoolConst(Truthy(a) && Truthy(b), e.span);
    if (e.binary == BinaryOp::kOr) return BoolConst(Truthy(a) || Truthy(b), e.span);
    if (float_math) {
      double x = AsDouble(a), y = AsDouble(b);
      switch (e.binary) {
        case BinaryOp::kEq: r = x == y; break;
        case BinaryOp::kNe: r = x != y; break;
        case BinaryOp::kLt: r = x < y; break;
        case BinaryOp::kLe: r = x <= y; break;
        case BinaryOp::kGt: r = x > y; break;
        default: r = x >= y; break;
      }
    } else {
      int64_t x = a->int_value, y = b->int_value;
      switch (e.binary) {
        case BinaryOp::kEq: r = x == y; break;
        case BinaryOp::kNe: r = x != y; break;
        case BinaryOp::kLt: r = x < y; break;
        case BinaryOp::kLe: r = x <= y; break;
        case BinaryOp::kGt: r = x > y; break;
        default: r = x >= y; break;
      }
    }
    return BoolConst(r, e.span);
  }
  if (float_math) {
    // fp32 scalar arithmetic: round each result to float like the device does.
    float x = float(AsDouble(a)), y = float(AsDouble(b)), r = 0;
    switch (e.binary) {
      case BinaryOp::kAdd: r = x + y; break;
      case BinaryOp::kSub: r = x - y; break;
      case BinaryOp::kMul: r = x * y; break;
      case BinaryOp::kDiv: r = x / y; break;
      case BinaryOp::kFloorDiv: r = std::floor(x / y); break;
      case BinaryOp::kMod: r = std::fmod(x, y); break;
      case BinaryOp::kMin: r = std::fmin(x, y); break;
      case BinaryOp::kMax: r = std::fmax(x, y); break;
      default: return nullptr;
    }
    return FloatConst(r, e.span, dt);
  }
  int64_t x = a->int_value, y = b->int_value;
  if (dt == DataType::kBool) {  // & | ^ of two bools
    switch (e.binary) {
      case BinaryOp::kBitAnd: return BoolConst((x & y) != 0, e.span);
      case BinaryOp::kBitOr: return BoolConst((x | y) != 0, e.span);
      case BinaryOp::kBitXor: return BoolConst((x ^ y) != 0, e.span);
      default: return nullptr;
    }
  }
  switch (e.binary) {
    case BinaryOp::kBitAnd: return IntConst(Wrap(x & y, dt), e.span, dt);
    case BinaryOp::kBitOr: return IntConst(Wrap(x | y, dt), e.span, dt);
    case BinaryOp::kBitXor: return IntConst(Wrap(x ^ y, dt), e.span, dt);
    case BinaryOp::kShl:
    case BinaryOp::kShr: {
      const int bits = Info(dt).bits;
      if (y < 0 || y >= bits) {
        Fail(ErrorKind::kValue, e.span,
             "shift amount " + std::to_string(y) + " is outside [0, " + std::to_string(bits) + ") for a " +
                 std::string(Name(dt)) + " value");
      }
      const int64_t v = Wrap(x, dt);
      if (e.binary == BinaryOp::kShl) return IntConst(Wrap(int64_t(uint64_t(v) << y), dt), e.span, dt);
      return IntConst(v >> y, e.span, dt);  // arithmetic: the dtypes here are signed
    }
    default: break;
  }
  switch (e.binary) {
    case BinaryOp::kAdd: return IntConst(Wrap(AddWrap(x, y), dt), e.span, dt);
    case BinaryOp::kSub: return IntConst(Wrap(SubWrap(x, y), dt), e.span, dt);
    case BinaryOp::kMul: return IntConst(Wrap(int64_t(uint64_t(x) * uint64_t(y)), dt), e.span, dt);
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod:
      if (y == 0) Fail(ErrorKind::kValue, e.span, "integer division by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return nullptr;  // left to the device's wrap
      return IntConst(Wrap(e.binary == BinaryOp::kMod ? x % y : x / y, dt), e.span, dt);
    case BinaryOp::kMin: return IntConst(std::min(x, y), e.span, dt);
    case BinaryOp::kMax: return IntConst(std::max(x, y), e.span, dt);
    default: return nullptr;
  }
}

// Folds bottom-up: the default recursion rebuilds what changed; these overrides evaluate.
class Folder : public IRMutator {
 protected:
  Expr MutateExpr(const Expr& e) override {
    switch (e->kind) {
      case ExprKind::kConst:
      case ExprKind::kVar:
      case ExprKind::kBuiltin: return e;
      case ExprKind::kShapeDim: {
        const Dim& dim = e->var->type.tensor->dims[e->axis];
        return dim.IsConstant() && dim.kind != DimKind::kDynamic ? IntConst(dim.value, e->span) : e;
      }
      default: break;
    }
    Expr rebuilt = IRMutator::MutateExpr(e);
    const std::vector<Expr>& ops = rebuilt->operands;
    if (e->kind == ExprKind::kTernary && ops[0]->IsConst()) {
      const Expr& chosen = Truthy(ops[0]) ? ops[1] : ops[2];
      return chosen->type.dtype == e->type.dtype ? chosen : Mutate(Cast(chosen, e->type.dtype, e->span));
    }
    bool all_const = !ops.empty();
    for (const Expr& op : ops) all_const &= op->IsConst();
    if (!all_const) return rebuilt;
    Expr folded;
    if (e->kind == ExprKind::kBinary) folded = FoldBinary(*e, ops[0], ops[1]);
    if (e->kind == ExprKind::kUnary) {
      if (e->unary == UnaryOp::kNot) folded = BoolConst(!Truthy(ops[0]), e->span);
      else if (e->unary == UnaryOp::kBitNot) folded = IntConst(Wrap(~ops[0]->int_value, e->type.dtype), e->span, e->type.dtype);
      else if (IsFloat(e->type.dtype)) folded = FloatConst(-ops[0]->float_value, e->span, e->type.dtype);
      else folded = IntConst(Wrap(SubWrap(0, ops[0]->int_value), e->type.dtype), e->span, e->type.dtype);
    }
    if (e->kind == ExprKind::kCast) {
      DataType to = e->type.dtype;
      if (to == DataType::kBool) folded = BoolConst(Truthy(ops[0]), e->span);
      else if (IsFloat(to) && to == DataType::kFP32) folded = FloatConst(float(AsDouble(ops[0])), e->span, to);
      else if (IsInteger(to) && !IsFloat(ops[0]->type.dtype)) folded = IntConst(Wrap(ops[0]->int_value, to), e->span, to);
    }
    return folded ? folded : rebuilt;
  }

  Stmt MutateStmt(const Stmt& s) override {
    switch (s->kind) {
      case StmtKind::kSeq: return FoldSeq(*s);
      case StmtKind::kIf: {
        Expr cond = Mutate(s->cond);
        if (cond->IsConst()) return Mutate(Truthy(cond) ? s->body : s->orelse);  // null when no branch is left
        break;
      }
      case StmtKind::kWhile: {
        Expr cond = Mutate(s->cond);
        if (cond->IsConst() && !Truthy(cond)) return nullptr;
        break;
      }
      case StmtKind::kFor: {
        Expr start = Mutate(s->start), stop = Mutate(s->stop), step = Mutate(s->step);
        if (start->IsConst() && stop->IsConst() && step->IsConst() && step->int_value != 0) {
          int64_t first = start->int_value, end = stop->int_value, by = step->int_value;
          if ((by > 0 && first >= end) || (by < 0 && first <= end)) return nullptr;
        }
        break;
      }
      default: break;
    }
    return IRMutator::MutateStmt(s);
  }

 private:
  // Always a sequence (possibly empty), flat, and cut after a break/continue/return: the rest is
  // unreachable.
  Stmt FoldSeq(const StmtNode& seq) {
    std::vector<Stmt> out;
    for (const Stmt& child : seq.stmts) {
      Stmt folded = Mutate(child);
      if (!folded) continue;
      if (folded->kind == StmtKind::kSeq) {
        out.insert(out.end(), folded->stmts.begin(), folded->stmts.end());
      } else {
        out.push_back(folded);
      }
      if (!out.empty() && EndsFlow(out.back())) break;
    }
    return Seq(std::move(out), seq.span);
  }

  static bool EndsFlow(const Stmt& s) {
    return s && (s->kind == StmtKind::kBreak || s->kind == StmtKind::kContinue || s->kind == StmtKind::kReturn);
  }
};

}  // namespace

void FoldConstants(ir::Function& func, const PassContext&) {
  const DeviceFloatEnvironment ieee;  // fp32 constants fold as the device computes them
  Stmt body = Folder().Mutate(func.body);
  func.body = body ? body : Seq({});
}

}  // namespace pypto_pro::passes
