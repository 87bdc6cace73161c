// Fused ops (docs/device.md#fused-ops): in a vector kernel, consecutive element-wise ops (binary,
// scalar forms, unary) and row / column broadcasts (row_expand_*, col_expand_*) on tiles of one
// float type run as one pass over their window (16 elements of every operand at a time, in
// registers) instead of one pass per op, each result rounded to the element type as the tile holds
// it. Row sums (row_sum) may join a run after its first op: they add up as the pass goes, in
// row_sum's own order, and no later op of the run reads their column. fuse_rows' strips fuse too: the pass runs after it.
//
// Every tile the ops write gets the value op by op would leave. Run-time conditions make that hold,
// and the generated code checks them before the fused pass and otherwise runs the statements as
// written: every op's destination (every sum's source) has the same valid window (each op computes
// over its destination's window, reading its sources at the same positions, a sum over its source's;
// then so does the fused pass), and every tile an op or a sum writes shares no byte with any other
// tile of the run (another variable, a broadcast operand:
// a tile is then read and written at the same element only, and element by element in program order
// is op by op). Float ops cannot fault, and scalar operands read no tile element (they are evaluated
// before the pass, in program order). Sanitizer and profile instances are never fused.
//
// An fp32 run followed by a strip store of a tile it writes (fuse_rows' store_rows and its forms)
// takes the store into its pass (EndsWithStripStore; a single op then suffices): codegen asks the
// store where the strip's rows go (<store>_target, which checks the window as the store does) and
// the pass writes them as it computes them; when the store is not to write them at this strip, it
// runs after the pass as written.
#include <set>
#include <string>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

const std::set<std::string_view> kBroadcastOps = {
    "row_expand_add", "row_expand_sub", "row_expand_mul", "row_expand_div", "row_expand_max", "row_expand_min",
    "col_expand_add", "col_expand_sub", "col_expand_mul", "col_expand_div", "col_expand_max", "col_expand_min"};

bool FloatVecTile(const TileType& t) {
  return t.shape.size() == 2 && t.memory == MemorySpace::kVec && t.pad == 0 && t.compact == 0 &&
         (t.dtype == DataType::kFP32 || t.dtype == DataType::kFP16 || t.dtype == DataType::kBF16);
}

// A run being collected: its element type, the columns of its window operands' tiles (all the same:
// the ops read their sources at their destination's row stride), the tiles it writes and those it
// reads as broadcast operands (never the same: a broadcast operand must keep its values all run long),
// and the column tiles its row sums write (no other operand of the run: a sum is whole only at the
// end of its row).
struct Run {
  std::vector<Stmt> stmts;
  DataType dtype = DataType::kFP32;
  int64_t cols = -1;
  std::set<int> written, broadcast, sums, mentioned;
};

// Whether `s` continues `run` (then `run` takes its type, columns and tiles; not its statement).
bool Joins(Run& run, const StmtNode& s) {
  if (s.kind != StmtKind::kOp || !s.op || !s.attrs.empty()) return false;
  const std::string_view name = s.op->name;
  const bool broadcast_op = kBroadcastOps.count(name) > 0;
  const bool row_sum = name == "row_sum";
  if (!broadcast_op && !row_sum && !ElementwiseOp(name)) return false;
  if (row_sum && run.stmts.empty()) return false;  // a sum joins a run's ops; it does not start one
  Run next = run;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const Expr& arg = s.args[i];
    if (arg && arg->kind == ExprKind::kVar && next.sums.count(arg->var->id)) return false;  // a sum read
  }
  if (row_sum) {  // row_sum(out, src, tmp): out an [R, 1] column tile no other op of the run names
    const Expr& out = s.args[0];
    const Expr& src = s.args[1];
    if (!out || out->kind != ExprKind::kVar || !out->type.IsTile() || !src || src->kind != ExprKind::kVar ||
        !src->type.IsTile()) {
      return false;
    }
    const TileType& o = *out->type.tile;
    const TileType& t = *src->type.tile;
    if (!FloatVecTile(o) || !FloatVecTile(t) || o.dtype != next.dtype || t.dtype != next.dtype ||
        t.layout != Layout::kND || t.Cols() != next.cols || next.mentioned.count(out->var->id)) {
      return false;
    }
    next.sums.insert(out->var->id);
    next.mentioned.insert(out->var->id);
    next.mentioned.insert(src->var->id);
    next.stmts = std::move(run.stmts);
    run = std::move(next);
    return true;
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    const Expr& arg = s.args[i];
    if (s.op->operands[i].kind == OperandKind::kScalar) {
      if (ReadsTileElement(arg)) return false;
      continue;
    }
    if (!arg || arg->kind != ExprKind::kVar || !arg->type.IsTile()) return false;
    const TileType& t = *arg->type.tile;
    if (!FloatVecTile(t) || (next.cols >= 0 && t.dtype != next.dtype)) return false;
    next.dtype = t.dtype;
    if (broadcast_op && i == 2) {  // the [R, 1] column or [1, C] row: any such tile
      next.broadcast.insert(arg->var->id);
      continue;
    }
    if (t.layout != Layout::kND || (next.cols >= 0 && t.Cols() != next.cols)) return false;
    next.cols = t.Cols();
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (s.args[i] && s.args[i]->kind == ExprKind::kVar) next.mentioned.insert(s.args[i]->var->id);
  }
  next.written.insert(s.args[0]->var->id);
  for (int id : next.written) {
    if (next.broadcast.count(id)) return false;
  }
  next.stmts = std::move(run.stmts);
  run = std::move(next);
  return true;
}

// Whether `s` is a strip store (fuse_rows' store_rows and its forms) of an fp32 tile `run` writes, to
// an fp32 tensor: it may end the run, the fused pass storing the strip's rows as it computes them
// (when the store would store them now; else the store runs after the pass as written).
bool EndsWithStripStore(const Run& run, const StmtNode& s) {
  static const std::set<std::string_view> kStripStores = {"store_rows", "store_tile_rows", "store_rows_after_tile",
                                                          "store_tile_rows_after_tile"};
  if (run.stmts.empty() || s.kind != StmtKind::kOp || !s.op || !kStripStores.count(s.op->name)) return false;
  const Expr& dst = s.args[0];
  const Expr& tile = s.args[1];
  return run.dtype == DataType::kFP32 && dst && dst->type.IsTensor() && dst->type.tensor->dtype == DataType::kFP32 &&
         tile && tile->kind == ExprKind::kVar && run.written.count(tile->var->id) > 0;
}

class OpFuser : public IRMutator {
 protected:
  Stmt MutateStmt(const Stmt& s) override {
    if (s->kind == StmtKind::kDirectRun) return s;  // already one pass; its statements are its fallback
    Stmt mutated = IRMutator::MutateStmt(s);
    if (mutated->kind != StmtKind::kSeq) return mutated;
    std::vector<Stmt> out;
    bool changed = false;
    Run run;
    auto flush = [&] {
      if (run.stmts.size() >= 2) {
        out.push_back(FusedOps(Seq(run.stmts, run.stmts.front()->span), run.stmts.front()->span));
        changed = true;
      } else {
        out.insert(out.end(), run.stmts.begin(), run.stmts.end());
      }
      run = Run{};
    };
    for (const Stmt& child : mutated->stmts) {
      if (!Joins(run, *child)) {
        if (EndsWithStripStore(run, *child)) {  // one op and the store are worth a pass too
          run.stmts.push_back(child);
          flush();
          continue;
        }
        flush();
        if (!Joins(run, *child)) {
          out.push_back(child);
          continue;
        }
      }
      run.stmts.push_back(child);
    }
    flush();
    if (!changed) return mutated;
    auto node = CopyNode(mutated);
    node->stmts = std::move(out);
    return node;
  }
};

}  // namespace

void FuseOps(Function& func, const PassContext& ctx) {
  if (!ctx.fuse_rows || !func.body || !FusionEligible(func)) return;
  OpFuser fuser;
  func.body = fuser.Mutate(func.body);
}

}  // namespace pypto_pro::passes
