// Tile descriptors and single elements, on the scalar pipe S (docs/language.md#types-and-tiles).
#include "op_checks.h"
#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

namespace {

// [rows, cols], or [cols] for a 1-D tile.
void CheckValidShape(const StmtNode& call) {
  size_t rank = TileOf(call, 0).shape.size(), given = call.args[1]->operands.size();
  if (given != 2 && !(rank == 1 && given == 1)) {
    Fail(ErrorKind::kType, OperandSpan(call, 1),
         CallName(call) + ": the shape needs [rows, cols]" + (rank == 1 ? " (or [cols] for a 1-D tile)" : "") +
             ", got " + std::to_string(given) + " entries");
  }
}

// setval writes at a linear offset, which counts in the tile's byte order on the NPU (fractal order in
// an NZ/ZN tile, column-major in a DN one).
void CheckSetval(const StmtNode& call) {
  const Expr& container = call.args[0];
  if (!container->type.IsTile() || container->type.tile->ElementOffsetProblem().empty()) return;
  Fail(ErrorKind::kType, OperandSpan(call, 0),
       "pl.setval on tile '" + container->var->name + "': " + container->type.tile->ElementOffsetProblem());
}

// set_stride's constant strides: not negative (run-time ones are checked where they run).
void CheckStride(const StmtNode& call) {
  for (const Expr& e : call.args[1]->operands) {
    if (e->IsIntConst() && e->int_value < 0) {
      Fail(ErrorKind::kValue, OperandSpan(call, 1),
           CallName(call) + ": a stride is " + std::to_string(e->int_value) + "; strides must not be negative");
    }
  }
}

}  // namespace

void AddTileOps(std::vector<OpDef>& ops) {
  // Descriptor only: moves no data (auto_mutex leaves it alone). Given a TileGroup, every slot.
  OpDef valid_shape{"set_validshape", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                    {{"tile", OperandKind::kTile, Access::kWrite, kAnyTileMemory},
                     {"shape", OperandKind::kOffsets, Access::kRead}},
                    false, kAllSupportedDTypes, "", "pto::set_validshape", {},
                    "tile's valid window = shape (rows, cols), checked against the tile's shape"};
  valid_shape.check = &CheckValidShape;
  valid_shape.sync = {SyncEvent::kValidShape};
  valid_shape.per_slot = true;
  ops.push_back(valid_shape);
  OpDef setval{"setval", Pipe::kS, PipeRule::kFixed, WindowRule::kElement,
               {{"container", OperandKind::kContainer, Access::kWrite, kVecOnly},
                {"offset", OperandKind::kScalar, Access::kRead},
                {"value", OperandKind::kScalar, Access::kRead}},
               false, kNumericDTypes, "", "pto::setval", {},
               "container[offset] = value (a linear element offset into a Vec tile or GM tensor)"};
  setval.check = &CheckSetval;
  ops.push_back(setval);
  // A GM tensor's descriptor: later loads, stores and element accesses use the new strides. Moves no
  // data (the tensor is read as far as the data goes: a read-only buffer may take new strides).
  OpDef stride{"set_stride", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
               {{"tensor", OperandKind::kTensor, Access::kRead}, {"stride", OperandKind::kOffsets, Access::kRead}},
               false, kAllSupportedDTypes, "", "pto::set_stride", {},
               "tensor's strides = stride (one per axis, in elements; not negative), for its later accesses"};
  stride.check = &CheckStride;
  ops.push_back(stride);
}

}  // namespace pypto_pro::ir
