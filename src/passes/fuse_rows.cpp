// Fused row strips (docs/device.md#fused-row-strips): a run of consecutive row-local vector ops over
// the same tiles runs as one loop over strips of a few rows, each op on the strip's subviews, so the
// strip stays in the host's L1 cache while every op of the run goes over it, instead of each op
// streaming the whole tile through the cache. Only what makes every result identical is fused:
//   - ops on the V pipe whose window is their destination's or source's (element-wise, scalar forms,
//     row reductions, row and column broadcasts), whose tile operands are 2-D Vec tiles with one row
//     of every sliced operand per row of the reference (ShapeRole kSame / kColumn), read-only
//     broadcast rows (kRow) the run never writes, or the unused tmp of the public signatures;
//   - sliced tiles are ND, or DN with one column (both store a row's elements together), and
//     come from tile declarations whose bytes do not overlap (one tile per declaration in the run);
//   - scalar operands read no tile element;
//   - loads (load / load_tile along the tensor's last two axes into such an ND tile) may head a run,
//     before its first op: a load's row r comes from one row of GM that no earlier strip wrote. Each
//     strip loads its rows, and the first strip checks the load's whole window as the load does, so a
//     load that faults faults before any op of the run, as it would unfused (a fault leaves only tiles
//     half-written, and a faulted launch's tiles are never seen).
//   - a store of a tile the run writes may end a run with one head load whose ops are all on float
//     tiles (none can fault on a later strip): store_rows stores each strip's rows as they are
//     computed when its GM window and the load's leave later strips' rows alone (apart, or the same
//     rows), else the whole window on the last strip; it checks its whole window on the first strip,
//     before it writes anything.
// Row r of every result then depends on row r of the operands only, so running the ops strip by strip
// gives each row the values op by op would. Sanitizer and profile instances are never fused: their
// hooks see each op as written.
#include <algorithm>
#include <map>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

// Bytes of the strip of all sliced tiles together: a few KiB, well inside any L1; but 4 rows at
// least, as every op of the run is a call per strip (layernorm's 6 KiB rows: 2-row strips ran 8%
// slower than 4-row ones, Intel Xeon).
constexpr int64_t kStripBytes = 16 * 1024;
constexpr int64_t kMinStripRows = 4;

// Where each tile variable's bytes come from: the declaration (tile group) it was selected from, or
// null when that is not one known declaration (a subview, a reinterpretation, two groups).
std::map<int, const VarNode*> TileOrigins(const Stmt& body) {
  std::map<int, const VarNode*> origin;
  std::set<int> unknown;
  auto note = [&](const Var& var, const VarNode* from) {
    auto [it, fresh] = origin.emplace(var->id, from);
    if (!fresh && it->second != from) unknown.insert(var->id);
  };
  ForEachStmt(body, [&](const StmtNode& s) {
    if (s.kind == StmtKind::kSelectTile && s.group) note(s.var, s.group.get());
    if ((s.kind == StmtKind::kAssign || s.kind == StmtKind::kSubview || s.kind == StmtKind::kReinterpret) && s.var &&
        s.var->type.IsTile()) {
      unknown.insert(s.var->id);
    }
  });
  for (int id : unknown) origin[id] = nullptr;
  return origin;
}

// How one operand of a row-local op takes part in a strip.
enum class Part { kSliced, kBroadcast, kUnused, kScalar, kGm };

bool Sliceable(const TileType& t) {
  return t.shape.size() == 2 && t.memory == MemorySpace::kVec && t.pad == 0 &&
         (t.layout == Layout::kND || (t.layout == Layout::kDN && t.Cols() == 1));
}

}  // namespace

bool RowLocalOp(const OpDef& op) {
  if (op.internal || (op.window != WindowRule::kDestination && op.window != WindowRule::kSource)) return false;
  if (op.call_form != CallForm::kOperands || op.per_slot || op.pipe_rule != PipeRule::kFixed || op.pipe != Pipe::kV) {
    return false;
  }
  for (const OperandSpec& spec : op.operands) {
    if (spec.kind == OperandKind::kScalar) continue;
    if (spec.kind != OperandKind::kTile) return false;
    if (spec.shape == ShapeRole::kRow && spec.access != Access::kRead) return false;
    if (spec.shape == ShapeRole::kAny && (spec.name != "tmp" || spec.access != Access::kRead)) return false;
  }
  return true;
}

namespace {

// The parts of `s`'s operands, or false when `s` is not a row-local op on tiles strips can slice.
bool RowLocalParts(const StmtNode& s, std::vector<Part>& parts) {
  if (s.kind != StmtKind::kOp || !s.op || !RowLocalOp(*s.op)) return false;
  const OpDef& op = *s.op;
  parts.clear();
  for (size_t i = 0; i < s.args.size(); ++i) {
    const OperandSpec& spec = op.operands[i];
    const Expr& arg = s.args[i];
    if (spec.kind == OperandKind::kScalar) {
      if (ReadsTileElement(arg)) return false;
      parts.push_back(Part::kScalar);
      continue;
    }
    if (spec.kind != OperandKind::kTile || !arg || arg->kind != ExprKind::kVar || !arg->type.IsTile()) return false;
    const TileType& t = *arg->type.tile;
    switch (spec.shape) {
      case ShapeRole::kSame:
      case ShapeRole::kColumn:
        if (!Sliceable(t)) return false;
        parts.push_back(Part::kSliced);
        break;
      case ShapeRole::kRow: parts.push_back(Part::kBroadcast); break;  // read-only (RowLocalOp)
      case ShapeRole::kAny: parts.push_back(Part::kUnused); break;      // UnusedTmp(): never touched
    }
  }
  return true;
}

// A load a run may start with: GM -> an ND Vec tile strips can slice, along the last two axes of a
// tensor of rank 2 or more, at offsets that read no tile element (the run's ops may write them).
bool HeadLoadParts(const StmtNode& s, std::vector<Part>& parts) {
  if (s.kind != StmtKind::kOp || !s.op || (s.op->name != "load" && s.op->name != "load_tile")) return false;
  for (const Attr& attr : s.attrs) {
    if (attr.name == "order" && attr.value != -1) return false;
  }
  const Expr &tile = s.args[0], &tensor = s.args[1], &offsets = s.args[2];
  if (!tile || tile->kind != ExprKind::kVar || !tile->type.IsTile()) return false;
  const TileType& t = *tile->type.tile;
  if (!Sliceable(t) || t.layout != Layout::kND || !tensor->type.tensor || tensor->type.tensor->dims.size() < 2) {
    return false;
  }
  if (ReadsTileElement(tensor) || ReadsTileElement(offsets)) return false;
  parts = {Part::kSliced, Part::kGm, Part::kGm};
  return true;
}

// A store a run with one head load may end with: a tile of the run that the run writes, to GM along
// the last two axes of a tensor of its dtype, without the fixpipe's or atomic options.
bool TailStore(const StmtNode& s) {
  if (s.kind != StmtKind::kOp || !s.op || (s.op->name != "store" && s.op->name != "store_tile")) return false;
  for (const Attr& attr : s.attrs) {
    const bool plain = attr.name == "order" || attr.name == "scale" ? attr.value == -1 : attr.value == 0;
    if (!plain) return false;
  }
  const Expr &tensor = s.args[0], &tile = s.args[1], &offsets = s.args[2];
  if (!tile || tile->kind != ExprKind::kVar || !tile->type.IsTile()) return false;
  const TileType& t = *tile->type.tile;
  return Sliceable(t) && t.layout == Layout::kND && tensor->type.tensor && tensor->type.tensor->dims.size() >= 2 &&
         tensor->type.dtype == t.dtype && !ReadsTileElement(tensor) && !ReadsTileElement(offsets);
}

bool IsFloatTile(const Var& var) {
  const DataType d = var->type.tile->dtype;
  return d == DataType::kFP32 || d == DataType::kFP16 || d == DataType::kBF16;
}

// A run being collected: its ops and the tiles they slice.
struct Run {
  std::vector<Stmt> ops;
  int op_count = 0;                  // ops besides the head loads
  int64_t rows = -1;                 // rows of every sliced tile
  std::map<int, Var> sliced;         // by var id
  std::set<int> broadcast, written;  // var ids
  std::vector<const VarNode*> origins;  // of the sliced tiles, one each

  void Clear() { *this = Run{}; }
};

class RowFuser : public IRMutator {
 public:
  RowFuser(Function& func, std::map<int, const VarNode*> origins) : func_(func), origins_(std::move(origins)) {}

 protected:
  Stmt MutateStmt(const Stmt& s) override {
    if (s->kind == StmtKind::kDirectRun) return s;  // its statements are what runs when it cannot go directly
    Stmt mutated = IRMutator::MutateStmt(s);
    if (mutated->kind != StmtKind::kSeq) return mutated;
    std::vector<Stmt> out;
    Run run;
    auto flush = [&]() {
      // Two ops at least: a load and one op over a strip measured no faster than over the tile
      // (an add of two loads ran 10% slower on fp16), the strips pay off from a second pass over them.
      if (run.op_count >= 2) {
        if (Stmt fused = Fuse(run)) {
          out.push_back(fused);
          run.Clear();
          return;
        }
      }
      out.insert(out.end(), run.ops.begin(), run.ops.end());
      run.Clear();
    };
    for (const Stmt& child : mutated->stmts) {
      if (EndsWithStore(run, *child)) {
        run.ops.push_back(child);
        flush();
        continue;
      }
      std::vector<Part> parts;
      const bool load = HeadLoadParts(*child, parts);
      if (!load && !RowLocalParts(*child, parts)) {
        flush();
        out.push_back(child);
        continue;
      }
      if ((load && run.op_count > 0) || !Joins(run, *child, parts)) {  // loads only head a run
        flush();
        if (!Joins(run, *child, parts)) {  // it cannot start a run either
          out.push_back(child);
          continue;
        }
      }
      run.ops.push_back(child);
      run.op_count += load ? 0 : 1;
    }
    flush();
    if (out.size() == mutated->stmts.size() &&
        std::equal(out.begin(), out.end(), mutated->stmts.begin())) {
      return mutated;
    }
    auto node = CopyNode(mutated);
    node->stmts = std::move(out);
    return node;
  }

 private:
  // Adds `s`'s tiles to `run` if it may join it (the run is left unchanged otherwise).
  bool Joins(Run& run, const StmtNode& s, const std::vector<Part>& parts) {
    Run next = run;
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (parts[i] == Part::kScalar || parts[i] == Part::kUnused || parts[i] == Part::kGm) continue;
      const Var& var = s.args[i]->var;
      const bool writes = s.op->operands[i].access != Access::kRead;
      if (parts[i] == Part::kBroadcast) {
        if (next.sliced.count(var->id) || next.written.count(var->id)) return false;
        next.broadcast.insert(var->id);
        continue;
      }
      if (next.broadcast.count(var->id)) return false;
      if (writes) next.written.insert(var->id);
      const int64_t rows = var->type.tile->Rows();
      if (next.rows >= 0 && rows != next.rows) return false;
      next.rows = rows;
      if (next.sliced.count(var->id)) continue;
      // A new tile of the run: from a known declaration none of the others' bytes overlap.
      auto origin = origins_.find(var->id);
      if (origin == origins_.end() || !origin->second) return false;
      for (const VarNode* other : next.origins) {
        if (DeclarationsMayOverlap(*origin->second, *other)) return false;
      }
      next.origins.push_back(origin->second);
      next.sliced.emplace(var->id, var);
    }
    // A broadcast row written by the run (as a sliced tile) would change under the strips.
    for (int id : next.broadcast) {
      if (next.written.count(id)) return false;
    }
    run = std::move(next);
    return true;
  }

  // Whether `s` may end `run` as its tail store (TailStore): the run has one head load and ops on
  // float tiles only (they cannot fault, so a strip's rows may reach GM before the next strip's ops
  // run), and it writes the stored tile.
  static bool EndsWithStore(const Run& run, const StmtNode& s) {
    const size_t loads = run.ops.size() - size_t(run.op_count);
    if (run.op_count < 2 || loads != 1 || !TailStore(s) || !run.written.count(s.args[1]->var->id)) return false;
    for (const auto& [id, var] : run.sliced) {
      if (!IsFloatTile(var)) return false;
    }
    return true;
  }

  // for strip in range(0, rows, step): each sliced tile's subview of the strip, then the ops on them.
  Stmt Fuse(const Run& run) {
    int64_t row_bytes = 0;
    for (const auto& [id, var] : run.sliced) row_bytes += var->type.tile->Cols() * Bytes(var->type.tile->dtype);
    const int64_t step = std::max<int64_t>(kMinStripRows, kStripBytes / std::max<int64_t>(row_bytes, 1));
    if (step >= run.rows) return nullptr;  // one strip: nothing to gain
    const Span at = run.ops.front()->span;
    const Var strip = func_.NewVar("row_strip", Type::Scalar(DataType::kInt32), at);
    std::vector<Stmt> body;
    std::map<int, Var> view_of;
    const Expr end = Binary(BinaryOp::kMin, Binary(BinaryOp::kAdd, VarRef(strip, at), IntConst(step, at), at),
                            IntConst(run.rows, at), at);
    for (const auto& [id, var] : run.sliced) {
      TileType view_type = *var->type.tile;
      view_type.valid_shape.assign(view_type.shape.size(), -1);
      const Var view = func_.NewVar(var->name + "_rows", Type::Tile(view_type), at);
      body.push_back(Subview(view, VarRef(var, at),
                             {VarRef(strip, at), end, IntConst(0, at), IntConst(var->type.tile->Cols(), at)}, at));
      view_of[id] = view;
    }
    const StmtNode* head_load = run.ops.front().get();  // loads head a run: with a tail store, its one load
    for (const Stmt& op : run.ops) {
      if (op == run.ops.back() && TailStore(*op)) {  // store_rows: the strip's rows, then what decides when
        auto node = CopyNode(op);
        const bool tiles = op->op->name == "store_tile", after_tile = head_load->op->name == "load_tile";
        node->op = FindOp(tiles ? (after_tile ? "store_tile_rows_after_tile" : "store_tile_rows")
                                : (after_tile ? "store_rows_after_tile" : "store_rows"));
        node->attrs.clear();
        node->args[1] = VarRef(view_of.at(op->args[1]->var->id), op->args[1]->span);
        node->args.insert(node->args.end(), {op->args[1], VarRef(strip, at), IntConst(step, at), head_load->args[1],
                                             head_load->args[2], head_load->args[0]});
        body.push_back(node);
        continue;
      }
      std::vector<Part> parts;
      const bool load = HeadLoadParts(*op, parts);
      if (!load) RowLocalParts(*op, parts);
      auto node = CopyNode(op);
      for (size_t i = 0; i < node->args.size(); ++i) {
        Expr& arg = node->args[i];
        if (parts[i] == Part::kSliced) arg = VarRef(view_of.at(arg->var->id), arg->span);
      }
      if (load) {  // the strip's rows of the load: the whole tile and the strip's first row follow
        node->op = FindOp(op->op->name == "load" ? "load_rows" : "load_tile_rows");
        node->args.push_back(op->args[0]);
        node->args.push_back(VarRef(strip, at));
      }
      body.push_back(node);
    }
    return For(strip, IntConst(0, at), IntConst(run.rows, at), IntConst(step, at), Seq(std::move(body), at), at);
  }

  Function& func_;
  std::map<int, const VarNode*> origins_;
};

}  // namespace

void FuseRows(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body) return;
  RowFuser fuser(func, TileOrigins(func.body));
  func.body = fuser.Mutate(func.body);
}

}  // namespace pypto_pro::passes
