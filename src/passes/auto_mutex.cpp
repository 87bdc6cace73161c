// auto_mutex (docs/language.md#synchronisation): every op whose tile operands can carry TileGroup mutex ids is
// bracketed by auto_mutex_lock / auto_mutex_unlock on the op's pipe. That orders each cross-pipe
// RAW/WAR hazard on a slot (MTE2 -> V -> MTE3, MTE1 -> M -> FIX) and gives N-buffering without
// manual flags. A tile selected by a run-time cursor carries its slot's ids, so the lock takes
// "a choice over the candidates" at run time; an id shared by two operands is locked once.
// Element reads (pl.getval, tile[i, j]) in an op's operands or an assignment are the scalar pipe's:
// they are bracketed on S. Those in conditions and loop bounds are left to the user (a lock cannot
// bracket a condition evaluated again on every iteration).
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

// Tile variables that may point at a slot with mutex ids: selected from such a group, or copied
// from such a tile (flow-insensitive, to a fixed point).
std::set<int> GuardedTiles(const Function& func) {
  std::vector<const StmtNode*> stmts;
  ForEachStmt(func.body, [&](const StmtNode& s) { stmts.push_back(&s); });
  std::set<int> guarded;
  for (bool changed = true; changed;) {
    changed = false;
    for (const StmtNode* s : stmts) {
      bool guard = false;
      if (s->kind == StmtKind::kSelectTile) guard = !s->group->group->mutex_ids.empty();
      if ((s->kind == StmtKind::kAssign || s->kind == StmtKind::kSubview || s->kind == StmtKind::kReinterpret) &&
          s->var->type.IsTile() &&
          s->value->kind == ExprKind::kVar) {
        guard = guarded.count(s->value->var->id) > 0;
      }
      if (guard) changed |= guarded.insert(s->var->id).second;
    }
  }
  return guarded;
}

// Tiles collected once each, in order of first use.
struct TileList {
  std::vector<Expr> tiles;
  std::set<int> seen;
  void Add(const Var& var, Span span) {
    if (seen.insert(var->id).second) tiles.push_back(VarRef(var, span));
  }
};

// Guarded tiles whose elements `e` reads (pl.getval, tile[i, j]): the scalar pipe reads them.
void ElementReads(const Expr& e, const std::set<int>& guarded, TileList& out) {
  if (!e) return;
  if (e->kind == ExprKind::kElement && e->var->type.IsTile() && guarded.count(e->var->id)) out.Add(e->var, e->span);
  for (const Expr& operand : e->operands) ElementReads(operand, guarded, out);
}

// lock(tiles) on `pipe`, then `s` (its statements, when it is already bracketed), then unlock.
Stmt Bracket(const Stmt& s, const std::vector<Expr>& tiles, Pipe pipe) {
  Attr pipe_attr;
  pipe_attr.name = "pipe";
  pipe_attr.value = int64_t(pipe);
  std::vector<Stmt> stmts = {OpCall(FindOp("auto_mutex_lock"), {Tuple(tiles, s->span)}, {pipe_attr}, s->span)};
  if (s->kind == StmtKind::kSeq) stmts.insert(stmts.end(), s->stmts.begin(), s->stmts.end());
  else stmts.push_back(s);
  stmts.push_back(OpCall(FindOp("auto_mutex_unlock"), {Tuple(tiles, s->span)}, {pipe_attr}, s->span));
  return Seq(std::move(stmts), s->span);
}

// An op on its pipe with the guarded tiles among its operands (descriptor ops such as
// set_validshape move no data: nothing to order), inside the scalar pipe's lock of the guarded
// tiles its scalar operands read elements of. An assignment reading tile elements: the latter only.
Stmt Guard(const Stmt& s, const std::set<int>& guarded) {
  TileList own, reads;
  Pipe pipe = Pipe::kS;
  if (s->kind == StmtKind::kOp) {
    if (s->op->window != WindowRule::kNone) {
      // With phase= the unit flag orders the cube and the fixpipe on the Acc tile: no lock for it, as
      // on the hardware (docs/language.md#the-unit-flag).
      bool phase = false;
      for (const Attr& a : s->attrs) phase = phase || (a.name == "phase" && a.value > 0);
      for (const Expr& arg : s->args) {
        if (phase && arg->type.IsTile() && arg->type.tile->memory == MemorySpace::kAcc) continue;
        if (arg->type.IsTile() && arg->kind == ExprKind::kVar && guarded.count(arg->var->id)) own.Add(arg->var, arg->span);
      }
      pipe = s->op->PipeFor(TileMemories(*s));
    }
    for (const Expr& arg : s->args) ElementReads(arg, guarded, reads);
  } else {
    ElementReads(s->value, guarded, reads);
  }
  if (pipe == Pipe::kS) {  // one lock on the scalar pipe covers both
    for (const Expr& tile : reads.tiles) own.Add(tile->var, tile->span);
    reads = TileList{};
  }
  Stmt out = own.tiles.empty() ? s : Bracket(s, own.tiles, pipe);
  return reads.tiles.empty() ? out : Bracket(out, reads.tiles, Pipe::kS);
}

// Guards every user op and assignment; the default recursion rebuilds the statements around them.
class Rewriter : public IRMutator {
 public:
  explicit Rewriter(const std::set<int>& guarded) : guarded_(guarded) {}

 protected:
  Stmt MutateStmt(const Stmt& s) override {
    if ((s->kind == StmtKind::kOp && !s->op->internal) || s->kind == StmtKind::kAssign) return Guard(s, guarded_);
    return IRMutator::MutateStmt(s);
  }
  Expr MutateExpr(const Expr& e) override { return e; }  // expressions stay as they are

 private:
  const std::set<int>& guarded_;
};

}  // namespace

void AutoMutex(Function& func, const PassContext& ctx) {
  if (!ctx.auto_mutex) return;
  std::set<int> guarded = GuardedTiles(func);
  if (!guarded.empty()) func.body = Rewriter(guarded).Mutate(func.body);
}

}  // namespace pypto_pro::passes
