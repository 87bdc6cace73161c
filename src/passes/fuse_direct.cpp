// Direct runs (docs/device.md#direct-runs): in a vector kernel, a straight-line run of loads, then
// element-wise ops and casts, then stores of the ops' results, over float tiles of one shape (the
// loads of one dtype, the stores of one, pl.cast between them),
// runs from GM through registers to GM in one pass over the window (16 elements of every operand at
// a time), instead of staging every tile in local memory. The window is the tiles' valid window,
// which the generated code requires to be the same for every tile of the run (set_validshape may
// have changed them) before it goes directly. The run's tiles that no later
// statement can read are not written at all; the others get their values as op by op would.
//
// Which tiles need not be written: those of a "staging" declaration, whose tiles are only read in
// the straight-line block that wrote them. Precisely, a declaration stages when its bytes overlap no
// other declaration's, its tiles are used by loads, element-wise ops and stores only (no subview,
// copy, element access, reinterpretation, set_validshape...), and every read of one of its tiles
// follows, in the same block, a write of that tile (each write covers the whole tile: full windows
// only) with no write of another tile of the declaration between. Then what a run leaves in such a
// tile is read only by later statements of the same block before the declaration is written again;
// a run whose tiles no such statement reads need not write them. (What a later block or launch
// finds in local memory it did not write is unspecified, as on the device.)
//
// The run keeps every other observable result: the loads' and stores' window checks run first in
// program order (the same faults, lines and messages; a fault leaves only tiles half-written, and
// a faulted launch's tiles are never seen), scalar operands are evaluated between them in program
// order, each op's result is rounded to the element type as the tile would hold it, and when at run
// time a store's GM window shares a byte with another window of the run (or a window's columns are
// not contiguous) the statements run op by op as written. Sanitizer and profile instances are never
// fused.
#include <algorithm>
#include <map>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/op_lists.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

bool IsLoad(const StmtNode& s) {
  return s.kind == StmtKind::kOp && s.op && (s.op->name == "load" || s.op->name == "load_tile");
}
bool IsStore(const StmtNode& s) {
  return s.kind == StmtKind::kOp && s.op && (s.op->name == "store" || s.op->name == "store_tile");
}
bool IsCast(const StmtNode& s) { return s.kind == StmtKind::kOp && s.op && s.op->name == "cast"; }
bool IsElementwise(const StmtNode& s) {
  return s.kind == StmtKind::kOp && s.op && ElementwiseOp(s.op->name);
}

// A tile a direct run computes on: 1-D or 2-D ND Vec, float-like, no pad, no static partial valid
// window (a run-time one is checked when the run starts).
bool DirectTile(const TileType& t) {
  if ((t.shape.size() != 1 && t.shape.size() != 2) || t.memory != MemorySpace::kVec || t.layout != Layout::kND || t.pad != 0 ||
      t.compact != 0) {
    return false;
  }
  if (t.dtype != DataType::kFP32 && t.dtype != DataType::kFP16 && t.dtype != DataType::kBF16) return false;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.valid_shape.size() != t.shape.size() || (t.valid_shape[i] != -1 && t.valid_shape[i] != t.shape[i])) {
      return false;
    }
  }
  return true;
}

// The tile operands of an op statement: which it reads and which it writes (a tile both read and
// written is in both).
struct TileAccess {
  std::vector<Var> reads, writes;
};
TileAccess AccessOf(const StmtNode& s) {
  TileAccess access;
  for (size_t i = 0; i < s.args.size() && i < s.op->operands.size(); ++i) {
    const Expr& arg = s.args[i];
    if (!arg || arg->kind != ExprKind::kVar || !arg->type.IsTile()) continue;
    const Access a = s.op->operands[i].access;
    if (a != Access::kWrite) access.reads.push_back(arg->var);
    if (a != Access::kRead) access.writes.push_back(arg->var);
  }
  return access;
}

// Whether a statement (with everything nested in it) mentions one of `vars`.
bool Mentions(const Stmt& s, const std::set<int>& vars) {
  bool found = false;
  auto expr = [&](const Expr& e) {
    ForEachExpr(e, [&](const ExprNode& node) { found = found || (node.var && vars.count(node.var->id)); });
  };
  ForEachStmt(s, [&](const StmtNode& t) {
    if (t.var && vars.count(t.var->id)) found = true;
    expr(t.value);
    expr(t.start);
    expr(t.stop);
    expr(t.step);
    expr(t.cond);
    for (const Expr& arg : t.args) expr(arg);
  });
  return found;
}

// What the pass knows of a function's tiles: the declaration each tile variable is selected from, the
// staging declarations (see the top of the file), and the declarations whose windows stay full.
class Staging {
 public:
  explicit Staging(const Function& func) {
    std::vector<const VarNode*> decls;
    std::map<int, std::set<const VarNode*>> origins;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind == StmtKind::kDeclTiles) decls.push_back(s.var.get());
      if (s.kind == StmtKind::kSelectTile) origins[s.var->id].insert(s.group.get());
    });
    for (const VarNode* d : decls) {
      if (!DirectTile(d->group->tile)) continue;
      bool alone = true;
      for (const VarNode* other : decls) alone = alone && (other == d || !DeclarationsMayOverlap(*d, *other));
      if (alone) staging_.insert(d);
    }
    for (const auto& [id, from] : origins) {
      if (from.size() != 1) {  // one variable over two declarations: neither is followed
        for (const VarNode* d : from) staging_.erase(d);
        continue;
      }
      decl_of_[id] = *from.begin();
    }
    for (const auto& [id, d] : decl_of_) vars_of_[d].insert(id);
    Block(func.body);
  }

  // The declaration a tile variable is selected from (null if not exactly one).
  const VarNode* DeclOf(const Var& var) const {
    auto it = decl_of_.find(var->id);
    return it == decl_of_.end() ? nullptr : it->second;
  }
  bool Stages(const VarNode* decl) const { return decl && staging_.count(decl); }

  // Whether the value `var` holds after statement `at` of `block` may be read: a statement after it
  // reads `var` before anything writes a tile of its declaration.
  bool ReadAfter(const std::vector<Stmt>& block, size_t at, const Var& var) const {
    const VarNode* decl = DeclOf(var);
    if (!Stages(decl)) return true;
    const std::set<int>& vars = vars_of_.at(decl);
    for (size_t i = at + 1; i < block.size(); ++i) {
      const StmtNode& s = *block[i];
      if (s.kind == StmtKind::kOp && s.op && Followed(s)) {
        const TileAccess access = AccessOf(s);
        for (const Var& r : access.reads) {
          if (r->id == var->id) return true;
        }
        for (const Var& w : access.writes) {
          if (vars.count(w->id)) return false;
        }
        continue;
      }
      if (s.kind == StmtKind::kSelectTile || s.kind == StmtKind::kDeclTiles) continue;
      if (Mentions(block[i], vars)) return false;  // nested: its reads are covered inside, a write ends the value
    }
    return false;
  }

 private:
  // The ops whose tile accesses the analysis follows.
  static bool Followed(const StmtNode& s) { return IsLoad(s) || IsStore(s) || IsElementwise(s) || IsCast(s); }

  std::set<int> StagingVarsOf(const Stmt& s) const {
    std::set<int> vars;
    for (const auto& [decl, ids] : vars_of_) {
      if (staging_.count(decl) && Mentions(s, ids)) vars.insert(ids.begin(), ids.end());
    }
    return vars;
  }

  void Drop(const VarNode* decl) { staging_.erase(decl); }

  // Checks one straight-line block: every read of a staging tile follows a write of it in the block
  // with no write of another tile of its declaration between.
  void Block(const Stmt& stmt) {
    if (!stmt) return;
    std::vector<Stmt> single{stmt};
    const std::vector<Stmt>& block = stmt->kind == StmtKind::kSeq ? stmt->stmts : single;
    std::set<int> written;  // tiles holding a value written in this block
    for (const Stmt& child : block) {
      const StmtNode& s = *child;
      if (s.kind == StmtKind::kDeclTiles) continue;
      if (s.kind == StmtKind::kSelectTile) {
        written.erase(s.var->id);
        if (s.value && ReadsTileElement(s.value)) DropMentioned(child);
        continue;
      }
      if (s.kind == StmtKind::kOp && s.op && Followed(s)) {
        const TileAccess access = AccessOf(s);
        for (const Var& r : access.reads) {
          const VarNode* decl = DeclOf(r);
          if (decl && !written.count(r->id)) Drop(decl);
        }
        for (const Var& w : access.writes) {
          const VarNode* decl = DeclOf(w);
          if (!decl) continue;
          for (int id : vars_of_.at(decl)) written.erase(id);
          written.insert(w->id);
        }
        // Tiles named anywhere else in the statement (offsets, scalars) are not followed.
        for (size_t i = 0; i < s.args.size(); ++i) {
          if (!(s.args[i]->kind == ExprKind::kVar && s.args[i]->type.IsTile()) && ReadsTileElement(s.args[i])) {
            DropMentioned(child);
          }
        }
        continue;
      }
      const bool compound = s.kind == StmtKind::kFor || s.kind == StmtKind::kWhile || s.kind == StmtKind::kIf ||
                            s.kind == StmtKind::kSection || s.kind == StmtKind::kStage || s.kind == StmtKind::kSeq;
      if (!compound) {
        DropMentioned(child);  // an op the analysis does not follow, an assignment, a subview...
        continue;
      }
      // A nested block: checked on its own; whatever it writes ends the values of this block's tiles.
      for (const Expr* e : {&s.start, &s.stop, &s.step, &s.cond}) {
        if (*e && ReadsTileElement(*e)) DropMentioned(child);
      }
      for (int id : StagingVarsOf(child)) written.erase(id);
      if (s.kind == StmtKind::kSeq) {
        Block(child);
      } else {
        Block(s.body);
        Block(s.orelse);
      }
    }
  }

  // Every declaration with a tile the statement mentions stops staging.
  void DropMentioned(const Stmt& s) {
    for (auto it = staging_.begin(); it != staging_.end();) {
      auto vars = vars_of_.find(*it);
      if (vars != vars_of_.end() && Mentions(s, vars->second)) {
        it = staging_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::set<const VarNode*> staging_;
  std::map<int, const VarNode*> decl_of_;
  std::map<const VarNode*, std::set<int>> vars_of_;
};

// A run being collected: loads, then element-wise ops and casts, then stores. Its tiles have one shape
// (`type`'s); its loads one float dtype and its stores one (casts between them).
struct Run {
  std::vector<Stmt> stmts;
  int loads = 0, ops = 0, stores = 0;
  const TileType* type = nullptr;
  DataType load_dtype = DataType::kFP32, store_dtype = DataType::kFP32;
  std::map<int, Var> tiles;        // every tile of the run, by id
  std::set<int> loaded, computed;  // tiles a load / an op of the run writes
};

class DirectFuser : public IRMutator {
 public:
  explicit DirectFuser(const Staging& staging) : staging_(staging) {}

 protected:
  Stmt MutateStmt(const Stmt& s) override {
    Stmt mutated = IRMutator::MutateStmt(s);
    if (mutated->kind != StmtKind::kSeq) return mutated;
    const std::vector<Stmt>& block = mutated->stmts;
    std::vector<Stmt> out;
    bool changed = false;
    Run run;
    auto flush = [&](size_t end) {  // the run ends before block[end]
      if (run.loads > 0 && run.ops > 0 && run.stores > 0) {
        std::vector<Var> unwritten;
        bool written_as_outputs = true;  // the computed tiles it writes are output windows: the stores' dtype
        for (const auto& [id, var] : run.tiles) {
          if (!run.loaded.count(id) && !run.computed.count(id)) continue;
          if (!staging_.ReadAfter(block, end - 1, var)) {
            unwritten.push_back(var);
          } else if (!run.loaded.count(id) && var->type.dtype != run.store_dtype) {
            written_as_outputs = false;
          }
        }
        if (written_as_outputs) {
          out.push_back(DirectRun(Seq(run.stmts, run.stmts.front()->span), unwritten, run.stmts.front()->span));
          changed = true;
        } else {
          out.insert(out.end(), run.stmts.begin(), run.stmts.end());
        }
      } else {
        out.insert(out.end(), run.stmts.begin(), run.stmts.end());
      }
      run = Run{};
    };
    for (size_t i = 0; i < block.size(); ++i) {
      const Stmt& child = block[i];
      if (Joins(run, *child)) {
        run.stmts.push_back(child);
        continue;
      }
      flush(i);
      if (Joins(run, *child)) {
        run.stmts.push_back(child);
      } else {
        out.push_back(child);
        run = Run{};
      }
    }
    flush(block.size());
    if (!changed) return mutated;
    auto node = CopyNode(mutated);
    node->stmts = std::move(out);
    return node;
  }

 private:
  // A tile operand of the run: the run's type, from one declaration that overlaps no other tile's of
  // the run (one tile per declaration).
  bool AddTile(Run& run, const Expr& arg) const {
    if (!arg || arg->kind != ExprKind::kVar || !arg->type.IsTile()) return false;
    const TileType& t = *arg->type.tile;
    if (!DirectTile(t)) return false;
    if (run.type) {  // the run's shape, any float dtype
      TileType same = t;
      same.dtype = run.type->dtype;
      if (!(same == *run.type)) return false;
    }
    if (run.tiles.count(arg->var->id)) return true;
    const VarNode* decl = staging_.DeclOf(arg->var);
    if (!decl) return false;
    for (const auto& [id, var] : run.tiles) {
      const VarNode* other = staging_.DeclOf(var);
      if (DeclarationsMayOverlap(*other, *decl)) return false;  // (the same declaration too)
    }
    run.type = &t;
    run.tiles.emplace(arg->var->id, arg->var);
    return true;
  }

  // A GM operand: a tensor of its tile's dtype (a 1-D one: its windows are one row); the tensor and
  // offsets read no tile.
  static bool GmOperand(const Expr& tile, const Expr& tensor, const Expr& offsets) {
    if (!tensor->type.IsTensor() || tensor->type.tensor->dims.empty()) return false;
    if (tensor->type.tensor->dtype != tile->type.dtype) return false;
    return !ReadsTileElement(tensor) && !ReadsTileElement(offsets);
  }

  // Adds `s` to `run` if it continues it (the run is left unchanged otherwise).
  bool Joins(Run& run, const StmtNode& s) const {
    if (s.kind != StmtKind::kOp || !s.op || (!IsCast(s) && !DefaultOptions(s))) return false;
    Run next = run;
    if (IsLoad(s)) {
      if (run.ops > 0 || run.stores > 0) return false;
      const Expr& tile = s.args[0];
      if (!AddTile(next, tile) || next.loaded.count(tile->var->id) || !GmOperand(tile, s.args[1], s.args[2])) {
        return false;
      }
      if (run.loads > 0 && tile->type.dtype != run.load_dtype) return false;  // one input window type
      next.load_dtype = tile->type.dtype;
      next.loaded.insert(tile->var->id);
      ++next.loads;
    } else if (IsElementwise(s) || IsCast(s)) {
      if (run.loads == 0 || run.stores > 0 || (!IsCast(s) && !s.attrs.empty())) return false;
      for (size_t i = 0; i < s.args.size(); ++i) {
        if (s.op->operands[i].kind == OperandKind::kScalar) {
          if (ReadsTileElement(s.args[i])) return false;
        } else if (!AddTile(next, s.args[i])) {
          return false;
        } else if (i > 0 && !next.loaded.count(s.args[i]->var->id) && !next.computed.count(s.args[i]->var->id) &&
                   (IsCast(s) || s.args[i]->type.dtype != next.load_dtype)) {
          return false;  // a tile read from local memory is an input window: the loads' dtype
        }
      }
      next.computed.insert(s.args[0]->var->id);
      ++next.ops;
    } else if (IsStore(s)) {
      // A store of an op's result (a loaded tile stored as is keeps its bits: the staged copy does that).
      const Expr& tile = s.args[1];
      if (run.ops == 0 || !AddTile(next, tile) || !next.computed.count(tile->var->id) ||
          !GmOperand(tile, s.args[0], s.args[2])) {
        return false;
      }
      if (run.stores > 0 && tile->type.dtype != run.store_dtype) return false;  // one output window type
      next.store_dtype = tile->type.dtype;
      ++next.stores;
    } else {
      return false;
    }
    run = std::move(next);
    return true;
  }

  const Staging& staging_;
};

}  // namespace

bool ElementwiseOp(std::string_view name) {
#define PTO_DIRECT_NAME_(name, functor) #name,
  static const std::set<std::string_view> ops = {
      PTO_BINARY_OPS(PTO_DIRECT_NAME_) PTO_SCALAR_OPS(PTO_DIRECT_NAME_) PTO_UNARY_OPS(PTO_DIRECT_NAME_)};
#undef PTO_DIRECT_NAME_
  return ops.count(name) > 0;
}

bool FusionEligible(const Function& func) {
  bool eligible = true;
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind == StmtKind::kSection && s.section != SectionKind::kVector) eligible = false;
    if (s.kind == StmtKind::kReinterpret) eligible = false;
  });
  return eligible;
}

void FuseDirect(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body || !FusionEligible(func)) return;
  const Staging staging(func);
  DirectFuser fuser(staging);
  func.body = fuser.Mutate(func.body);
}

}  // namespace pypto_pro::passes
