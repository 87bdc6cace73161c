// auto_mutex (LANGUAGE.md section 6): every op whose tile operands can carry TileGroup mutex ids is
// bracketed by auto_mutex_lock / auto_mutex_unlock on the op's pipe. That orders each cross-pipe
// RAW/WAR hazard on a slot (MTE2 -> V -> MTE3, MTE1 -> M -> FIX) and gives N-buffering without
// manual flags. A tile selected by a run-time cursor carries its slot's ids, so the lock takes
// "a choice over the candidates" at run time; an id shared by two operands is locked once.
#include <set>

#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

void Collect(const Stmt& s, std::vector<const StmtNode*>& out) {
  if (!s) return;
  out.push_back(s.get());
  for (const Stmt& child : s->stmts) Collect(child, out);
  Collect(s->body, out);
  Collect(s->orelse, out);
}

// Tile variables that may point at a slot with mutex ids: selected from such a group, or copied
// from such a tile (flow-insensitive, to a fixed point).
std::set<int> GuardedTiles(const Function& func) {
  std::vector<const StmtNode*> stmts;
  Collect(func.body, stmts);
  std::set<int> guarded;
  for (bool changed = true; changed;) {
    changed = false;
    for (const StmtNode* s : stmts) {
      bool guard = false;
      if (s->kind == StmtKind::kSelectTile) guard = !s->group->group->mutex_ids.empty();
      if (s->kind == StmtKind::kAssign && s->var->type.IsTile() && s->value->kind == ExprKind::kVar) {
        guard = guarded.count(s->value->var->id) > 0;
      }
      if (guard) changed |= guarded.insert(s->var->id).second;
    }
  }
  return guarded;
}

Stmt Rewrite(const Stmt& s, const std::set<int>& guarded) {
  if (!s) return s;
  // Descriptor ops (set_validshape) move no data: nothing to order.
  if (s->kind == StmtKind::kOp && !s->op->internal && s->op->window != WindowRule::kNone) {
    std::vector<Expr> tiles;
    std::set<int> seen;
    for (const Expr& arg : s->args) {
      if (arg->type.IsTile() && arg->kind == ExprKind::kVar && guarded.count(arg->var->id) &&
          seen.insert(arg->var->id).second) {
        tiles.push_back(arg);
      }
    }
    if (tiles.empty()) return s;
    Attr pipe_attr;
    pipe_attr.name = "pipe";
    pipe_attr.value = int64_t(s->op->PipeFor(TileMemories(*s)));
    std::vector<Attr> pipe = {pipe_attr};
    Stmt lock = OpCall(FindOp("auto_mutex_lock"), {Tuple(tiles, s->span)}, pipe, s->span);
    Stmt unlock = OpCall(FindOp("auto_mutex_unlock"), {Tuple(tiles, s->span)}, pipe, s->span);
    return Seq({lock, s, unlock}, s->span);
  }
  if (s->stmts.empty() && !s->body && !s->orelse) return s;
  auto node = CopyNode(s);
  std::vector<Stmt> children;
  for (const Stmt& child : s->stmts) {
    Stmt rewritten = Rewrite(child, guarded);
    if (rewritten != child && rewritten->kind == StmtKind::kSeq && child->kind == StmtKind::kOp) {
      children.insert(children.end(), rewritten->stmts.begin(), rewritten->stmts.end());
    } else {
      children.push_back(rewritten);
    }
  }
  node->stmts = std::move(children);
  node->body = Rewrite(s->body, guarded);
  node->orelse = Rewrite(s->orelse, guarded);
  return node;
}

}  // namespace

void AutoMutex(Function& func, const PassContext& ctx) {
  if (!ctx.auto_mutex) return;
  std::set<int> guarded = GuardedTiles(func);
  if (!guarded.empty()) func.body = Rewrite(func.body, guarded);
}

}  // namespace pypto_pro::passes
