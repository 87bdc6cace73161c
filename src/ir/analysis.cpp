#include "pypto_pro/ir/analysis.h"

#include <map>
#include <set>

#include "pypto_pro/ir/visitor.h"

namespace pypto_pro::ir {

bool IsCubeMemory(MemorySpace m) { return m != MemorySpace::kVec && m != MemorySpace::kDDR; }

std::vector<MemorySpace> TileMemories(const StmtNode& s) {
  std::vector<MemorySpace> out;
  for (const Expr& arg : s.args) {
    if (arg && arg->type.IsTile()) out.push_back(arg->type.tile->memory);
  }
  return out;
}

std::vector<CoreSide> CoreSides(const StmtNode& s) {
  std::vector<MemorySpace> memories = TileMemories(s);
  if (s.op->pipe_rule == PipeRule::kByMove && memories.size() >= 2) {  // dst, src (and a Scaling tile)
    // Mat -> L0 (MTE1) and Acc -> Vec (the fixpipe) are the cube core's; Vec -> Mat (MTE3) and the
    // V-pipe paths are the vector core's.
    Pipe pipe = s.op->PipeFor(memories);
    bool cube = pipe == Pipe::kMTE1 || pipe == Pipe::kFIX;
    return {{cube, true,
             "a move from " + std::string(Name(memories[1])) + " to " + std::string(Name(memories[0])) + " (pipe " +
                 std::string(Name(pipe)) + ")"}};
  }
  std::vector<CoreSide> sides;
  for (MemorySpace m : memories) sides.push_back({IsCubeMemory(m), false, "a " + std::string(Name(m)) + " tile"});
  return sides;
}

CrossCoreWrite CrossCoreWriteOf(const StmtNode& s) {
  if (s.kind != StmtKind::kOp || s.op->pipe_rule != PipeRule::kByMove) return CrossCoreWrite::kNone;
  const std::vector<MemorySpace> m = TileMemories(s);
  if (m.size() < 2) return CrossCoreWrite::kNone;
  if (m[1] == MemorySpace::kAcc && m[0] == MemorySpace::kVec) return CrossCoreWrite::kToVectorCores;
  if (m[1] == MemorySpace::kVec && m[0] == MemorySpace::kMat) return CrossCoreWrite::kToCubeCore;
  return CrossCoreWrite::kNone;
}

bool FitsInside(const TileType& inner, const TileType& outer) {
  return inner.Rows() <= outer.Rows() && inner.Cols() <= outer.Cols();
}

bool TransposedLayouts(const TileType& a, const TileType& b) {
  return (a.layout == Layout::kNZ && b.layout == Layout::kZN) || (a.layout == Layout::kZN && b.layout == Layout::kNZ);
}

bool ReorderedBytes(const TileType& t) {
  return t.layout == Layout::kNZ || t.layout == Layout::kZN || (t.layout == Layout::kDN && t.Rows() > 1 && t.Cols() > 1);
}

bool SameView(const TileType& a, const TileType& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.layout == b.layout;
}

MoveForm MoveFormOf(const StmtNode& s) {
  const TileType &dst = *s.args.at(0)->type.tile, &src = *s.args.at(1)->type.tile;
  const bool to_l1 = src.memory == MemorySpace::kVec && dst.memory == MemorySpace::kMat;
  const MoveForm insert = to_l1 && TransposedLayouts(src, dst) ? MoveForm::kInsertTransposed : MoveForm::kInsert;
  if (s.op->name == "insert") return insert;
  if (s.args.size() == 3 && s.op->operands[2].kind == OperandKind::kOffsets) {
    // A fixpipe option keeps move's extract semantics (the public move page).
    bool fixpipe_option = false;
    for (const Attr& a : s.attrs) {
      if ((a.name == "acc_to_vec_mode" || a.name == "scale") && a.value >= 0) fixpipe_option = true;
      if (a.name == "relu_pre_mode" && a.value > 0) fixpipe_option = true;
    }
    // Into L1 between NZ and ZN tiles the shapes compare transposed (the bytes are the same).
    const bool transposed = insert == MoveForm::kInsertTransposed;
    const int64_t rows = transposed ? src.Cols() : src.Rows(), cols = transposed ? src.Rows() : src.Cols();
    const bool smaller = rows <= dst.Rows() && cols <= dst.Cols() && !(rows == dst.Rows() && cols == dst.Cols());
    if (smaller && !fixpipe_option) return insert;
    const bool transposed_fits = !FitsInside(dst, src) && TransposedLayouts(src, dst) && dst.Rows() <= src.Cols() &&
                                 dst.Cols() <= src.Rows();
    return transposed_fits ? MoveForm::kExtractTransposed : MoveForm::kExtract;
  }
  if (to_l1) return insert;  // at [0, 0]
  const bool swapped = src.Rows() == dst.Cols() && src.Cols() == dst.Rows() && src.Rows() != src.Cols();
  return swapped && TransposedLayouts(src, dst) ? MoveForm::kTranspose : MoveForm::kCopy;
}

KernelKind KernelKindOf(const Function& func) {
  bool vector = false, cube = false, any_section = false, vec_mem = false, cube_mem = false;
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind == StmtKind::kSection) {
      any_section = true;
      (s.section == SectionKind::kVector ? vector : cube) = true;
    }
    if (s.kind == StmtKind::kOp) {
      for (const CoreSide& side : CoreSides(s)) (side.cube ? cube_mem : vec_mem) = true;
    }
  });
  if (!any_section) {
    vector = vec_mem || !cube_mem;
    cube = cube_mem;
  }
  if (vector && cube) return KernelKind::kMixed;
  return cube ? KernelKind::kCube : KernelKind::kVector;
}

bool NeedsResidentBlocks(const Function& func) {
  bool found = false;
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind != StmtKind::kOp) return;
    if (s.op->name == "system.sync_all" || s.op->name == "system.sync_all_soft") found = true;
    if (!s.op->sync.CrossCore()) return;
    for (const Attr& a : s.attrs) {
      if (a.name == "sync_mode" && a.value == int64_t(hw::CrossCoreSyncMode::kINTER_BLOCK)) found = true;
    }
  });
  return found;
}

std::vector<bool> WrittenParams(const Function& func) {
  // The parameters whose buffers each GM view and pointer variable may lie in: a parameter its own,
  // a variable those of every value assigned to it (to a fixed point: loops assign after use).
  std::map<int, std::set<size_t>> roots;
  for (size_t p = 0; p < func.params.size(); ++p) roots[func.params[p]->id].insert(p);
  for (bool changed = true; changed;) {
    changed = false;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind != StmtKind::kAssign || !(s.var->type.IsTensor() || s.var->type.IsPtr())) return;
      std::set<size_t>& into = roots[s.var->id];
      const size_t before = into.size();
      ForEachExpr(s.value, [&](const ExprNode& e) {
        if (e.kind != ExprKind::kVar || !(e.var->type.IsTensor() || e.var->type.IsPtr())) return;
        auto from = roots.find(e.var->id);
        if (from != roots.end()) into.insert(from->second.begin(), from->second.end());
      });
      changed |= into.size() != before;
    });
  }
  std::vector<bool> written(func.params.size(), false);
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind != StmtKind::kOp) return;
    for (size_t i = 0; i < s.args.size() && i < s.op->operands.size(); ++i) {
      const Expr& arg = s.args[i];
      if (s.op->operands[i].access == Access::kRead || arg->kind != ExprKind::kVar || !arg->var->type.IsTensor()) {
        continue;
      }
      auto it = roots.find(arg->var->id);
      if (it == roots.end()) continue;
      for (size_t p : it->second) written[p] = true;
    }
  });
  return written;
}

bool DefaultOptions(const StmtNode& s) {
  for (const Attr& attr : s.attrs) {
    const KwargSpec* spec = s.op->FindKwarg(attr.name);
    if (!spec || attr.is_string || attr.value != spec->default_value) return false;
  }
  return true;
}

bool ReadsTileElement(const Expr& e) {
  bool reads = false;
  ForEachExpr(e, [&](const ExprNode& node) { reads = reads || node.kind == ExprKind::kElement; });
  return reads;
}

bool DeclarationsMayOverlap(const VarNode& a, const VarNode& b) {
  if (&a == &b) return true;
  const TileGroupInfo &ga = *a.group, &gb = *b.group;
  if (ga.tile.memory != gb.tile.memory) return false;
  for (int64_t x : ga.addrs) {
    for (int64_t y : gb.addrs) {
      if (x < y + gb.tile.Bytes() && y < x + ga.tile.Bytes()) return true;
    }
  }
  return false;
}

}  // namespace pypto_pro::ir
