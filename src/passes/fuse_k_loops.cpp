// K loops (docs/device.md#k-loops): the loop a cube kernel accumulates one output tile with,
//
//   for kk in pl.range(0, n):                # step 1
//       ta, tb, tl, tr = <group>.next(), ...  # tile selections
//       pl.load_tile(ta, a, [i, kk])          # loads left in GM (forward_moves' in-place loads)
//       pl.load_tile(tb, b, [kk, j])
//       pl.move(tl, ta)                       # forwarded moves
//       pl.move(tr, tb)
//       if kk == 0:
//           pl.matmul(acc, tl, tr)
//       else:
//           pl.matmul_acc(acc, acc, tl, tr)
//
// (statements in any order, the matmuls reading ta and tb in place) may run as one GEMM over the
// whole k range whose sums stay in the host's tile unit over several steps, instead of going through
// the accumulator, and its checks, between every two.
//
// The pass only marks such loops (kKLoop around the loop); the generated code decides at run time
// (pto::k_loop_matmul) and runs the loop as written unless the fused GEMM gives the steps' bits and
// nothing else in the loop could be seen: at least two steps; every window of every step in GM and
// passing its load's checks (else the loop runs and faults at its step, after the steps before it);
// tensors no buffer the launch writes overlaps; the GEMM's own conditions (gemm.h, KLoop). Then the
// selections of every step replay afterwards in order, so cursors, tile variables and the loop
// variable end as the loop leaves them. The loop's other statements are no-ops in a plain kernel
// (auto_mutex's locks; forwarded moves); the row and column indices must be variables the loop does
// not assign or constants (no evaluation that could fault); the matmuls take no options.
//
// A store of the accumulator right after the loop (pl.store_tile(c, acc, [i, j]) or pl.store, no
// options) joins it: when its window passes its checks and it would copy the sums as they are, the
// GEMM writes the finished sums to c's window as well as to acc, and the store (which would copy the
// same bytes) does not run; else it runs as written after the loop, fused or not.
#include <map>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/ir/visitor.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

bool IsVar(const Expr& e, const Var& var) { return e->kind == ExprKind::kVar && e->var->id == var->id; }

// The single op inside a wrapper's body, auto_mutex's brackets left out; null when there is not one.
const StmtNode* OnlyOp(const StmtNode& wrapper) {
  std::vector<Stmt> single{wrapper.body};
  const std::vector<Stmt>& stmts = wrapper.body->kind == StmtKind::kSeq ? wrapper.body->stmts : single;
  const StmtNode* found = nullptr;
  for (const Stmt& s : stmts) {
    if (s->kind != StmtKind::kOp) return nullptr;
    if (s->op->name.rfind("auto_mutex_", 0) == 0) continue;
    if (found) return nullptr;
    found = s.get();
  }
  return found;
}

// A branch's one statement (itself, or the one statement of a Seq), else null.
const StmtNode* Only(const Stmt& s) {
  if (s->kind != StmtKind::kSeq) return s.get();
  return s->stmts.size() == 1 ? s->stmts[0].get() : nullptr;
}

bool IsAutoMutex(const Stmt& s, const char* which) {
  return s->kind == StmtKind::kOp && s->op->name.rfind(which, 0) == 0;
}

class KLoopMarker : public IRMutator {
 protected:
  Stmt MutateStmt(const Stmt& s) override {
    Stmt mutated = IRMutator::MutateStmt(s);
    if (mutated->kind == StmtKind::kSeq) return WithStores(mutated);
    if (mutated->kind != StmtKind::kFor) return mutated;
    std::vector<Expr> operands = Fusable(*mutated);
    return operands.empty() ? mutated : ir::KLoop(mutated, std::move(operands), mutated->span);
  }

 private:
  // A K loop followed by the store of its accumulator (auto_mutex's brackets around it) takes the
  // store in: the KLoop's body becomes Seq{loop, <the store's statements>} and its operands gain the
  // tensor and the store's two indices, which must not read the loop's variable (the only variable a
  // K loop assigns besides its tile selections) nor fault: evaluated before the loop, they have the
  // values the store would see.
  static Stmt WithStores(const Stmt& seq) {
    std::vector<Stmt> out;
    bool changed = false;
    const std::vector<Stmt>& stmts = seq->stmts;
    for (size_t i = 0; i < stmts.size(); ++i) {
      out.push_back(stmts[i]);
      // a K loop that has not taken a store in yet (its body the loop alone)
      if (stmts[i]->kind != StmtKind::kKLoop || stmts[i]->body->kind != StmtKind::kFor) continue;
      size_t j = i + 1;
      while (j < stmts.size() && IsAutoMutex(stmts[j], "auto_mutex_lock")) ++j;
      if (j == stmts.size() || !StoresAcc(*stmts[i], stmts[j])) continue;
      const size_t store = j++;
      while (j < stmts.size() && IsAutoMutex(stmts[j], "auto_mutex_unlock")) ++j;
      std::vector<Stmt> body{stmts[i]->body};
      body.insert(body.end(), stmts.begin() + i + 1, stmts.begin() + j);
      std::vector<Expr> operands = stmts[i]->args;
      const Expr& index = stmts[store]->args[2];
      operands.insert(operands.end(), {stmts[store]->args[0], index->operands[0], index->operands[1]});
      out.back() = ir::KLoop(Seq(std::move(body), stmts[i]->span), std::move(operands), stmts[i]->span);
      changed = true;
      i = j - 1;
    }
    return changed ? Seq(std::move(out), seq->span) : seq;
  }

  // Whether `store` is store_tile / store of the K loop's accumulator to a 2-D tensor, without options,
  // at indices the loop leaves unchanged.
  static bool StoresAcc(const StmtNode& k_loop, const Stmt& store) {
    if (store->kind != StmtKind::kOp || (store->op->name != "store_tile" && store->op->name != "store") ||
        !DefaultOptions(*store) || !IsVar(store->args[1], k_loop.args[0]->var) ||
        store->args[0]->kind != ExprKind::kVar) {
      return false;
    }
    const Expr& index = store->args[2];
    if (index->kind != ExprKind::kTuple || index->operands.size() != 2) return false;
    for (const Expr& e : index->operands) {
      if (!Invariant(e, *k_loop.body)) return false;
    }
    return true;
  }

  // An integer index the loop leaves unchanged and that evaluates without faults: constants and
  // variables other than the loop's, with + - * (pl.store's offsets: i * 128).
  static bool Invariant(const Expr& e, const StmtNode& loop) {
    if (e->IsIntConst()) return true;
    if (e->kind == ExprKind::kVar) return !e->type.IsTile() && e->var->id != loop.var->id;
    if (e->kind != ExprKind::kBinary || IsFloat(e->type.dtype)) return false;
    const BinaryOp op = e->binary;
    return (op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul) && Invariant(e->operands[0], loop) &&
           Invariant(e->operands[1], loop);
  }

  // The loop's operands when it is a K loop (acc, A's Mat tile, A, its row index, B's Mat tile, B, its
  // column index), else none.
  static std::vector<Expr> Fusable(const StmtNode& loop) {
    const std::vector<Expr> no;
    if (!loop.start->IsIntConst() || loop.start->int_value != 0 || !loop.step->IsIntConst() ||
        loop.step->int_value != 1 || !loop.body || loop.body->kind != StmtKind::kSeq) {
      return no;
    }
    std::map<int64_t, const StmtNode*> loads;  // in-place number -> load
    std::set<int> selected;                    // tile variables the loop selects
    const StmtNode* branch = nullptr;
    int moves = 0;
    for (const Stmt& child : loop.body->stmts) {
      switch (child->kind) {
        case StmtKind::kSelectTile:
          if (child->mode != SelectMode::kNext) return no;
          selected.insert(child->var->id);
          break;
        case StmtKind::kInPlaceLoad: {
          const StmtNode* load = OnlyOp(*child);
          if (!load || load->op->name != "load_tile" || !DefaultOptions(*load)) return no;
          loads[child->attrs.at(0).value] = load;
          break;
        }
        case StmtKind::kForwardedMove:
          ++moves;
          break;
        case StmtKind::kIf:
          if (branch) return no;
          branch = child.get();
          break;
        default:
          return no;
      }
    }
    if (!branch || loads.size() != 2 || moves != 2 || !branch->orelse) return no;
    // if kk == 0: matmul(acc, l, r) else: matmul_acc(acc, acc, l, r), both reading in place.
    const Expr& cond = branch->cond;
    if (cond->kind != ExprKind::kBinary || cond->binary != BinaryOp::kEq) return no;
    const Expr& lhs = cond->operands[0];
    const Expr& rhs = cond->operands[1];
    const bool is_first = (IsVar(lhs, loop.var) && rhs->IsIntConst() && rhs->int_value == 0) ||
                          (IsVar(rhs, loop.var) && lhs->IsIntConst() && lhs->int_value == 0);
    const StmtNode* first_reads = Only(branch->body);
    const StmtNode* later_reads = Only(branch->orelse);
    if (!is_first || !first_reads || !later_reads || first_reads->kind != StmtKind::kForwardedReads ||
        later_reads->kind != StmtKind::kForwardedReads) {
      return no;
    }
    const StmtNode* first = OnlyOp(*first_reads);
    const StmtNode* later = OnlyOp(*later_reads);
    if (!first || !later || first->op->name != "matmul" || later->op->name != "matmul_acc" ||
        !DefaultOptions(*first) || !DefaultOptions(*later)) {
      return no;
    }
    const Var& acc = first->args[0]->var;
    if (!IsVar(later->args[0], acc) || !IsVar(later->args[1], acc) || selected.count(acc->id) ||
        !IsVar(later->args[2], first->args[1]->var) || !IsVar(later->args[3], first->args[2]->var)) {
      return no;
    }
    // Both matmuls read the left operand from A's load and the right one from B's, in place.
    const StmtNode* a = nullptr;
    const StmtNode* b = nullptr;
    for (const StmtNode* reads : {first_reads, later_reads}) {
      const StmtNode* mm = OnlyOp(*reads);
      const Expr& left = mm->args[mm->op->name == "matmul" ? 1 : 2];
      const Expr& right = mm->args[mm->op->name == "matmul" ? 2 : 3];
      for (size_t k = 0; k + 1 < reads->args.size(); k += 2) {
        auto load = loads.find(reads->attrs.at(k / 2).value);
        if (load == loads.end() || !IsVar(load->second->args[0], reads->args[k + 1]->var)) return no;
        if (IsVar(reads->args[k], left->var)) {
          if (a && a != load->second) return no;
          a = load->second;
        } else if (IsVar(reads->args[k], right->var)) {
          if (b && b != load->second) return no;
          b = load->second;
        }
      }
    }
    if (!a || !b || a == b) return no;
    // A at [row, kk], B at [kk, col]: 2-D tensors, row and col invariant and evaluated without faults.
    auto stepped = [&](const StmtNode& load, size_t k_axis) {
      const Expr& offsets = load.args[2];
      if (offsets->kind != ExprKind::kTuple || offsets->operands.size() != 2) return false;
      const Expr& other = offsets->operands[1 - k_axis];
      const bool invariant = other->IsIntConst() ||
                             (other->kind == ExprKind::kVar && other->var->id != loop.var->id &&
                              !selected.count(other->var->id) && !other->type.IsTile());
      return IsVar(offsets->operands[k_axis], loop.var) && invariant && load.args[1]->kind == ExprKind::kVar;
    };
    if (!stepped(*a, 1) || !stepped(*b, 0)) return no;
    // The tile unit's dtypes (fp32 has no tile-unit path: the loop would always run as written).
    const DataType dtype = a->args[0]->type.tile->dtype;
    if (dtype != DataType::kBF16 && dtype != DataType::kFP16 && dtype != DataType::kInt8) return no;
    return {first->args[0], a->args[0], a->args[1], a->args[2]->operands[0],
            b->args[0], b->args[1], b->args[2]->operands[1]};
  }
};

}  // namespace

void FuseKLoops(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body) return;
  KLoopMarker marker;
  func.body = marker.Mutate(func.body);
}

}  // namespace pypto_pro::passes
