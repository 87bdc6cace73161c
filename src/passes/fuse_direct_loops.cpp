// Direct loops (docs/device.md#direct-loops): a loop `for j in pl.range(start, stop)` (step 1) whose
// body selects its tiles and makes one direct run (fuse_direct) that reads and writes tile [.., j] of
// each of its tensors (load_tile / store_tile along the tensors' last two axes, or load / store at
// [..., j * <the tile's columns>]) may run as one direct run over the iterations' windows side by
// side: a few long rows instead of many short ones, which the CPU streams from memory at its full
// bandwidth (a 128 x 128 fp16 tile's rows are 256 bytes, each at another page of a wide tensor).
//
// The pass only marks such loops (kDirectLoop around the loop); the generated code decides at run
// time and runs the loop as written unless every one of these holds, so every observable result is
// the loop's: the loop runs at least two iterations; every tile the run may use (every slot of the
// groups its tiles are selected from) has the same valid rows and all its columns valid; no
// iteration's window faults (the merged windows are checked first, without faulting: where one would
// fault, the loop runs as written and faults at that iteration, after the ones before it); no store's
// merged window shares a byte with another merged window unless it is the very same window. Then the
// run writes what the iterations would (element-wise ops over disjoint or identical windows), its
// tiles are never written (the run's tiles must all be ones no later statement reads), and the tile
// selections of every iteration replay afterwards in order, so the groups' cursors, the tile
// variables and the loop variable end as the loop leaves them. Selections that may fault (a group
// slot by a run-time index) keep a loop as written, as do offsets, scalar operands or tensors that
// change between iterations other than through the loop variable's last index, and any element read.
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

// An expression every iteration evaluates to the same value without reading memory: it names no
// loop variable and reads no element.
bool Invariant(const Expr& e, const Var& loop_var) {
  bool invariant = true;
  ForEachExpr(e, [&](const ExprNode& node) {
    invariant = invariant && node.kind != ExprKind::kElement && !(node.var && node.var->id == loop_var->id);
  });
  return invariant;
}

// A window that steps one tile along its tensor's last axis per iteration: load_tile / store_tile at
// [<invariant>..., loop_var], or load / store at [<invariant>..., loop_var * <the tile's columns>], on a
// tensor variable.
bool SteppedWindow(const StmtNode& s, const Expr& tensor, const Expr& tile, const Expr& offsets, const Var& loop_var) {
  if (tensor->kind != ExprKind::kVar || offsets->kind != ExprKind::kTuple || offsets->operands.empty()) return false;
  for (size_t i = 0; i + 1 < offsets->operands.size(); ++i) {
    if (!Invariant(offsets->operands[i], loop_var)) return false;
  }
  auto is_loop_var = [&](const Expr& e) { return e->kind == ExprKind::kVar && e->var->id == loop_var->id; };
  const Expr& last = offsets->operands.back();
  if (s.op->name == "load_tile" || s.op->name == "store_tile") return is_loop_var(last);
  if (last->kind != ExprKind::kBinary || last->binary != BinaryOp::kMul) return false;
  const Expr& l = last->operands[0];
  const Expr& r = last->operands[1];
  const int64_t cols = tile->type.tile->Cols();
  return (is_loop_var(l) && r->IsIntConst() && r->int_value == cols) ||
         (is_loop_var(r) && l->IsIntConst() && l->int_value == cols);
}

// Whether the direct run `run` of a loop over `loop_var` qualifies (see the top of the file).
bool LoopableRun(const StmtNode& run, const Var& loop_var) {
  std::set<int> unwritten;
  for (const Attr& attr : run.attrs) unwritten.insert(int(attr.value));
  std::set<int> produced;  // tiles a load or an op of the run writes
  for (const Stmt& child : run.body->stmts) {
    const StmtNode& s = *child;
    if (s.kind != StmtKind::kOp || !s.op || s.op->internal) continue;
    const std::string_view name = s.op->name;
    if (name == "load" || name == "load_tile") {
      if (!SteppedWindow(s, s.args[1], s.args[0], s.args[2], loop_var)) return false;
      produced.insert(s.args[0]->var->id);
    } else if (name == "store" || name == "store_tile") {
      if (!SteppedWindow(s, s.args[0], s.args[1], s.args[2], loop_var)) return false;
    } else {
      for (size_t i = 1; i < s.args.size(); ++i) {
        const Expr& arg = s.args[i];
        if (s.op->operands[i].kind == OperandKind::kScalar) {
          if (!Invariant(arg, loop_var)) return false;
        } else if (!produced.count(arg->var->id)) {
          return false;  // a tile read from local memory: the same tile for every iteration's window
        }
      }
      produced.insert(s.args[0]->var->id);
    }
  }
  for (int id : produced) {
    if (!unwritten.count(id)) return false;  // a later statement reads it: the run writes it
  }
  return true;
}

// A loop the generated code may run as one direct run.
bool Loopable(const StmtNode& loop) {
  if (!loop.step->IsIntConst() || loop.step->int_value != 1 || !loop.body) return false;
  std::vector<Stmt> single{loop.body};
  const std::vector<Stmt>& body = loop.body->kind == StmtKind::kSeq ? loop.body->stmts : single;
  const StmtNode* run = nullptr;
  for (const Stmt& child : body) {
    if (child->kind == StmtKind::kDirectRun && !run) {
      run = child.get();
    } else if (child->kind == StmtKind::kSelectTile) {
      if (child->mode == SelectMode::kIndex && !child->value->IsIntConst()) return false;  // may fault
    } else {
      return false;
    }
  }
  return run && LoopableRun(*run, loop.var);
}

class DirectLoopMarker : public IRMutator {
 protected:
  Stmt MutateStmt(const Stmt& s) override {
    Stmt mutated = IRMutator::MutateStmt(s);
    if (mutated->kind == StmtKind::kFor && Loopable(*mutated)) return ir::DirectLoop(mutated, mutated->span);
    return mutated;
  }
};

}  // namespace

void FuseDirectLoops(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body) return;
  DirectLoopMarker marker;
  func.body = marker.Mutate(func.body);
}

}  // namespace pypto_pro::passes
