// Forwarded moves (docs/device.md#forwarded-moves): in a cube or mixed kernel, a plain move of a Mat
// tile into a Left (Right) tile that only the matmuls right after it read is not run; those matmuls
// read the Mat tile instead. On the NPU the move is MTE1's copy into L0; here it is a 32 KiB copy the
// matmul's own read of the same values makes unnecessary.
//
// The matmul must read exactly what the move would have left, so a move M (dst L, src A) is forwarded
// only when:
// - M is a plain copy (no offset, no option) between tiles of one dtype and shape whose valid
//   windows are their whole shape for good: static types, and no statement in the kernel can change
//   them (set_validshape, handle assignments, views). M then overwrites all of L with all of A.
// - Its readers are in M's shadow: the statements after M in its block (at any depth of `if`) up to
//   the first one that may write Mat or L's memory, rebind a tile variable, leave the block early,
//   or synchronise with the other cores. So a reader sees A as M copied it, and L as M wrote it.
// - Every read of L's memory kind anywhere in the kernel is such a reader's (matmul operands of tiles
//   whose declarations nothing else mentions), so no statement can see that the L0 tiles were not
//   written. (What a later block or launch finds in local memory it did not write is unspecified,
//   as on the device.)
// - No data path from the vector cores (a Vec -> Mat move, pl.insert) writes A's declaration or bytes
//   it shares: those values come from another core, ordered by flags.
//
// A load into a Mat tile that only forwarded moves read need not write the tile either: it checks its
// window (the same faults at its line) and the matmuls read the window in GM, where it is (in place;
// the generated code loads the tile as written when the window's columns do not lie together). That
// holds when the Mat declaration shares no byte with another, every move reading its tiles is
// forwarded and lies in the shadow of a load of the same tile (up to the first statement that stores
// to GM, writes the declaration, rebinds a tile, leaves the block or synchronises with the other
// cores: so GM holds the window while the matmuls read it), and the tensor is a parameter no statement
// of the kernel writes (another block cannot change it either).
// Sanitizer and profile instances are never forwarded; PYPTO_PRO_FUSE_ROWS=0 turns the pass off.
#include <map>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

// A matmul operand read through a forwarded move: the move, and the in-place load it reads (-1: none).
struct ForwardedOperand {
  Var l0, mat;
  const StmtNode* move;
  int load;
};

bool IsMatmul(const StmtNode& s) { return s.kind == StmtKind::kOp && s.op && s.op->window == WindowRule::kMatmul; }

// Valid window = the whole shape, known at compile time.
bool WholeWindow(const TileType& t) {
  for (size_t i = 0; i < t.valid_shape.size(); ++i) {
    if (t.valid_shape[i] != -1 && t.valid_shape[i] != t.shape[i]) return false;
  }
  return true;
}

// Synchronisation within the core: flags, mutexes, barriers.
bool IntraCoreSync(const StmtNode& s) {
  switch (s.op->sync.event) {
    case SyncEvent::kFlagSet:
    case SyncEvent::kFlagWait:
    case SyncEvent::kLock:
    case SyncEvent::kUnlock:
    case SyncEvent::kAutoLock:
    case SyncEvent::kAutoUnlock:
    case SyncEvent::kBarrier: return true;
    default: return false;
  }
}

bool AnyReadsTileElement(const StmtNode& s) {
  for (const Expr& arg : s.args) {
    if (arg && ReadsTileElement(arg)) return true;
  }
  return false;
}

// Whether `s` keeps a shadow going: straight-line code (`if`s of it, scalar assignments) reading no
// tile element, whose ops are matmuls, synchronisation within the core, or ops `keeps` admits.
template <typename OpKeeps>
bool KeepsShadow(const StmtNode& s, const OpKeeps& keeps) {
  switch (s.kind) {
    case StmtKind::kSeq:
      for (const Stmt& child : s.stmts) {
        if (!KeepsShadow(*child, keeps)) return false;
      }
      return true;
    case StmtKind::kIf:
      return !ReadsTileElement(s.cond) && KeepsShadow(*s.body, keeps) && (!s.orelse || KeepsShadow(*s.orelse, keeps));
    case StmtKind::kAssign: return !s.var->type.IsTile() && !ReadsTileElement(s.value);
    case StmtKind::kOp: return !AnyReadsTileElement(s) && (IsMatmul(s) || IntraCoreSync(s) || keeps(s));
    default: return false;
  }
}

// The plan: which moves are forwarded, which matmuls read through them, which loads stay in GM.
class Forwarding {
 public:
  explicit Forwarding(const Function& func) : written_(WrittenParams(func)) {
    std::set<const StmtNode*> seen;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind == StmtKind::kDeclTiles) decls_.insert(s.var.get());
      if (s.kind == StmtKind::kSelectTile) origins_[s.var->id].insert(s.group.get());
      if (s.kind == StmtKind::kReinterpret) unknown_writes_ = true;  // its views may reach past their declaration
      // The plan names statements by node: one node in two places of the tree would be two statements.
      if (!seen.insert(&s).second) unknown_writes_ = true;
    });
    if (unknown_writes_) return;
    // The Mat tiles something other than a load writes: the vector cores' data paths into L1 (a Vec ->
    // Mat move, pl.insert). Their values come from another core, ordered by flags: they keep their copies.
    std::vector<const VarNode*> written_otherwise;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind != StmtKind::kOp || !s.op || s.op->name == "load" || s.op->name == "load_tile") return;
      auto written = [&](const Expr& tile) {
        if (!tile->type.IsTile() || tile->type.tile->memory != MemorySpace::kMat) return;
        const VarNode* d = tile->kind == ExprKind::kVar ? DeclOf(tile->var) : nullptr;
        if (d) written_otherwise.push_back(d);
        else unknown_writes_ = true;
      };
      for (size_t i = 0; i < s.args.size() && i < s.op->operands.size(); ++i) {
        if (s.op->operands[i].access == Access::kRead) continue;
        written(s.args[i]);
        if (s.args[i]->kind == ExprKind::kTuple) {  // workspaces
          for (const Expr& item : s.args[i]->operands) written(item);
        }
      }
    });
    if (unknown_writes_) return;
    for (const VarNode* d : decls_) {
      const MemorySpace m = d->group->tile.memory;
      if (m != MemorySpace::kMat && m != MemorySpace::kLeft && m != MemorySpace::kRight) continue;
      bool apart = true;
      for (const VarNode* w : written_otherwise) apart = apart && !DeclarationsMayOverlap(*d, *w);
      if (apart && WholeWindow(d->group->tile) && OnlyPlainUses(func, *d)) clean_.insert(d);
    }
    for (MemorySpace x : {MemorySpace::kLeft, MemorySpace::kRight}) Plan(func, x);
    for (const VarNode* d : clean_) {
      if (d->group->tile.memory == MemorySpace::kMat) PlanLoads(func, *d);
    }
    NumberLoads(func);
  }

  bool Forwarded(const StmtNode* move) const { return moves_.count(move) > 0; }
  // The operands a matmul reads through forwarded moves (null if none).
  const std::vector<ForwardedOperand>* ReadsOf(const StmtNode* matmul) const {
    auto it = reads_.find(matmul);
    return it == reads_.end() ? nullptr : &it->second;
  }
  // The number of a load the matmuls read in place (-1: not one).
  int InPlaceLoad(const StmtNode* load) const {
    auto it = in_place_.find(load);
    return it == in_place_.end() ? -1 : it->second;
  }

 private:
  const VarNode* DeclOf(const Var& var) const {
    auto it = origins_.find(var->id);
    return it == origins_.end() || it->second.size() != 1 ? nullptr : *it->second.begin();
  }

  // The declaration's tiles appear only where their windows stay whole and their values are followed:
  // selected from it, loaded, moved from or into, matmul operands (no views, handle copies, element
  // accesses or descriptor ops).
  bool OnlyPlainUses(const Function& func, const VarNode& decl) const {
    std::set<int> vars = {decl.id};
    for (const auto& [id, from] : origins_) {
      if (from.count(&decl)) vars.insert(id);
    }
    bool plain = true;
    auto mentions = [&](const Expr& e) {
      bool found = false;
      ForEachExpr(e, [&](const ExprNode& node) { found = found || (node.var && vars.count(node.var->id)); });
      return found;
    };
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (!plain || s.kind == StmtKind::kDeclTiles) return;
      if (s.kind == StmtKind::kSelectTile) {
        if (s.group.get() != &decl && vars.count(s.var->id)) plain = false;  // (one origin: DeclOf)
        if (s.value && mentions(s.value)) plain = false;
        return;
      }
      const bool load = s.kind == StmtKind::kOp && (s.op->name == "load" || s.op->name == "load_tile");
      const bool move = s.kind == StmtKind::kOp && s.op->name == "move";
      for (size_t i = 0; i < s.args.size(); ++i) {
        const Expr& arg = s.args[i];
        if (!arg || !mentions(arg)) continue;
        const bool tile_operand = arg->kind == ExprKind::kVar && arg->type.IsTile();
        const bool allowed = tile_operand && ((load && i == 0) || (move && i < 2) || IsMatmul(s));
        if (!allowed) plain = false;
      }
      for (const Expr* e : {&s.value, &s.start, &s.stop, &s.step, &s.cond}) {
        if (*e && mentions(*e)) plain = false;
      }
      if (s.var && vars.count(s.var->id)) plain = false;
    });
    return plain;
  }

  bool Clean(const Var& var) const {
    const VarNode* d = DeclOf(var);
    return d && clean_.count(d);
  }

  // A plain whole-tile copy from a Mat tile into an `x` tile.
  bool Candidate(const StmtNode& s, MemorySpace x) const {
    if (s.kind != StmtKind::kOp || s.op->name != "move" || s.args.size() != 2) return false;
    const Expr &dst = s.args[0], &src = s.args[1];
    if (dst->kind != ExprKind::kVar || src->kind != ExprKind::kVar) return false;
    const TileType &d = *dst->type.tile, &a = *src->type.tile;
    if (d.memory != x || a.memory != MemorySpace::kMat || d.dtype != a.dtype || d.shape != a.shape) return false;
    return MoveFormOf(s) == MoveForm::kCopy && DefaultOptions(s) && Clean(dst->var) && Clean(src->var);
  }

  // Whether `s` keeps an `x` move's shadow going: writes neither Mat nor `x`, rebinds no tile, stays
  // in the block, does not wait for the other cores.
  static bool InShadow(const StmtNode& s, MemorySpace x) {
    return KeepsShadow(s, [x](const StmtNode& op) {
      if (op.op->name != "move") return false;
      const MemorySpace to = op.args[0]->type.tile->memory;
      return to != x && to != MemorySpace::kMat && CrossCoreWriteOf(op) == CrossCoreWrite::kNone;
    });
  }

  // The matmuls in `s` reading `dst` as their `x` operand.
  static void ReadersIn(const Stmt& s, MemorySpace x, const Var& dst, std::vector<const StmtNode*>& out) {
    ForEachStmt(s, [&](const StmtNode& t) {
      if (!IsMatmul(t)) return;
      for (const Expr& arg : t.args) {
        if (arg->kind == ExprKind::kVar && arg->type.IsTile() && arg->type.tile->memory == x &&
            arg->var->id == dst->id) {
          out.push_back(&t);
          return;
        }
      }
    });
  }

  // Forwards the `x` moves of every block if every read of an `x` tile is a reader in a shadow.
  void Plan(const Function& func, MemorySpace x) {
    std::map<const StmtNode*, std::vector<ForwardedOperand>> reads;
    std::set<const StmtNode*> moves;
    ForEachStmt(func.body, [&](const StmtNode& block) {
      if (block.kind != StmtKind::kSeq) return;
      for (size_t i = 0; i < block.stmts.size(); ++i) {
        const StmtNode& m = *block.stmts[i];
        if (!Candidate(m, x)) continue;
        std::vector<const StmtNode*> readers;
        for (size_t j = i + 1; j < block.stmts.size() && InShadow(*block.stmts[j], x); ++j) {
          ReadersIn(block.stmts[j], x, m.args[0]->var, readers);
        }
        if (readers.empty()) continue;
        moves.insert(&m);
        for (const StmtNode* r : readers) reads[r].push_back({m.args[0]->var, m.args[1]->var, &m, -1});
      }
    });
    if (!OnlyForwardedReads(func, x, reads)) return;
    moves_.insert(moves.begin(), moves.end());
    for (auto& [r, pairs] : reads) {
      auto& mine = reads_[r];
      mine.insert(mine.end(), pairs.begin(), pairs.end());
    }
  }

  // Whether `x` memory is read only by the planned readers: every mention of an `x` tile (or of a
  // declaration of them) anywhere is a selection, a move's destination or a forwarded matmul operand.
  static bool OnlyForwardedReads(const Function& func, MemorySpace x,
                                 const std::map<const StmtNode*, std::vector<ForwardedOperand>>& reads) {
    auto in_x = [&](const VarNode* v) {
      return v && ((v->type.IsTile() && v->type.tile->memory == x) || (v->group && v->group->tile.memory == x));
    };
    auto mentions_x = [&](const Expr& e) {
      bool found = false;
      ForEachExpr(e, [&](const ExprNode& node) { found = found || in_x(node.var.get()); });
      return found;
    };
    bool only = true;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind == StmtKind::kDeclTiles || s.kind == StmtKind::kSelectTile) {
        only = only && !mentions_x(s.value);
        return;
      }
      if (in_x(s.var.get())) only = false;  // a handle copy, a view, a reinterpretation
      for (const Expr* e : {&s.value, &s.start, &s.stop, &s.step, &s.cond}) only = only && !mentions_x(*e);
      for (size_t i = 0; i < s.args.size(); ++i) {
        const Expr& arg = s.args[i];
        if (!mentions_x(arg)) continue;
        const bool tile = arg->kind == ExprKind::kVar && arg->type.IsTile();
        if (tile && s.kind == StmtKind::kOp && s.op->name == "move" && i == 0) continue;  // written
        bool covered = false;
        auto it = reads.find(&s);
        if (tile && it != reads.end()) {
          for (const ForwardedOperand& f : it->second) covered = covered || f.l0->id == arg->var->id;
        }
        only = only && covered;
      }
    });
    return only;
  }

  // A plain load of a whole tile from a parameter no statement writes.
  bool PlainLoad(const Function& func, const StmtNode& s) const {
    if (s.kind != StmtKind::kOp || (s.op->name != "load" && s.op->name != "load_tile") || s.args.size() != 3 ||
        !DefaultOptions(s)) {
      return false;
    }
    const Expr& tensor = s.args[1];
    if (tensor->kind != ExprKind::kVar || !tensor->type.IsTensor() || tensor->type.dtype != s.args[0]->type.dtype ||
        ReadsTileElement(s.args[2])) {
      return false;
    }
    for (size_t p = 0; p < func.params.size(); ++p) {
      if (func.params[p]->id == tensor->var->id) return !written_[p];
    }
    return false;
  }

  // Whether `s` keeps a load's shadow going (see the top of the file): `decl` is the loaded tile's.
  bool InLoadShadow(const StmtNode& s, const VarNode& decl) const {
    return KeepsShadow(s, [&](const StmtNode& op) {
      if (op.op->name == "move") {
        return op.args[0]->type.tile->memory != MemorySpace::kMat && CrossCoreWriteOf(op) == CrossCoreWrite::kNone;
      }
      if (op.op->name != "load" && op.op->name != "load_tile") return false;
      const VarNode* other = op.args[0]->kind == ExprKind::kVar ? DeclOf(op.args[0]->var) : nullptr;  // into another
      return other && op.args[0]->type.tile->memory == MemorySpace::kMat && !DeclarationsMayOverlap(*other, decl);
    });
  }

  // The loads into `decl`'s tiles go in place if every move reading them is forwarded and in the
  // shadow of a plain load of its tile.
  void PlanLoads(const Function& func, const VarNode& decl) {
    for (const VarNode* other : decls_) {
      if (other != &decl && DeclarationsMayOverlap(*other, decl)) return;
    }
    auto of_decl = [&](const Expr& e) { return e->kind == ExprKind::kVar && DeclOf(e->var) == &decl; };
    std::set<const StmtNode*> reading;  // the moves reading the declaration's tiles
    bool all_forwarded = true;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind != StmtKind::kOp || s.op->name != "move" || !of_decl(s.args[1])) return;
      reading.insert(&s);
      all_forwarded = all_forwarded && moves_.count(&s);
    });
    if (!all_forwarded || reading.empty()) return;
    std::map<const StmtNode*, const StmtNode*> load_of;  // move -> the load whose value it reads
    ForEachStmt(func.body, [&](const StmtNode& block) {
      if (block.kind != StmtKind::kSeq) return;
      for (size_t i = 0; i < block.stmts.size(); ++i) {
        const StmtNode& load = *block.stmts[i];
        if (!PlainLoad(func, load) || !of_decl(load.args[0])) continue;
        for (size_t j = i + 1; j < block.stmts.size() && InLoadShadow(*block.stmts[j], decl); ++j) {
          const StmtNode* s = block.stmts[j].get();
          if (reading.count(s) && s->args[1]->var->id == load.args[0]->var->id) load_of[s] = &load;
        }
      }
    });
    if (load_of.size() == reading.size()) load_of_.insert(load_of.begin(), load_of.end());
  }

  // Numbers the in-place loads in program order and tells their matmuls.
  void NumberLoads(const Function& func) {
    std::set<const StmtNode*> loads;
    for (const auto& [move, load] : load_of_) loads.insert(load);
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (loads.count(&s)) in_place_.emplace(&s, int(in_place_.size()));
    });
    for (auto& [matmul, operands] : reads_) {
      for (ForwardedOperand& f : operands) {
        auto it = load_of_.find(f.move);
        if (it != load_of_.end()) f.load = in_place_.at(it->second);
      }
    }
  }

  std::set<const VarNode*> decls_, clean_;
  std::map<int, std::set<const VarNode*>> origins_;
  // A Mat write (or view) the pass cannot place, or a statement node shared by two places of the tree:
  // nothing is forwarded.
  bool unknown_writes_ = false;
  std::vector<bool> written_;
  std::set<const StmtNode*> moves_;
  std::map<const StmtNode*, std::vector<ForwardedOperand>> reads_;
  std::map<const StmtNode*, const StmtNode*> load_of_;  // forwarded move -> the in-place load it reads
  std::map<const StmtNode*, int> in_place_;             // in-place load -> its number
};

class Rewriter : public IRMutator {
 public:
  explicit Rewriter(const Forwarding& plan) : plan_(plan) {}

 protected:
  Stmt MutateStmt(const Stmt& s) override {
    if (plan_.Forwarded(s.get())) return ForwardedMove(s, s->span);
    if (const auto* operands = plan_.ReadsOf(s.get())) {
      std::vector<ForwardedRead> reads;
      for (const ForwardedOperand& f : *operands) reads.push_back({f.l0, f.mat, f.load});
      return ForwardedReads(s, reads, s->span);
    }
    if (const int load = plan_.InPlaceLoad(s.get()); load >= 0) return InPlaceLoad(s, load, s->span);
    return IRMutator::MutateStmt(s);
  }
  Expr MutateExpr(const Expr& e) override { return e; }

 private:
  const Forwarding& plan_;
};

}  // namespace

void ForwardMoves(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body || KernelKindOf(func) == KernelKind::kVector) return;
  const Forwarding plan(func);
  func.body = Rewriter(plan).Mutate(func.body);
}

}  // namespace pypto_pro::passes
