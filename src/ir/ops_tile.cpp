// Tile descriptors and single elements, on the scalar pipe S (LANGUAGE.md section 3).
#include "op_tables.h"

namespace pypto_pro::ir {

void AddTileOps(std::vector<OpDef>& ops) {
  // Descriptor only: moves no data (auto_mutex leaves it alone).
  ops.push_back(OpDef{"set_validshape", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                      {{"tile", OperandKind::kTile, Access::kWrite, kAnyTileMemory},
                       {"shape", OperandKind::kOffsets, Access::kRead}},
                      false, kAllSupportedDTypes, "", "pto::set_validshape", {},
                      "tile's valid window = shape (rows, cols), checked against the tile's shape"});
  ops.push_back(OpDef{"setval", Pipe::kS, PipeRule::kFixed, WindowRule::kElement,
                      {{"container", OperandKind::kContainer, Access::kWrite, kVecOnly},
                       {"offset", OperandKind::kScalar, Access::kRead},
                       {"value", OperandKind::kScalar, Access::kRead}},
                      false, kNumericDTypes, "", "pto::setval", {},
                      "container[offset] = value (a linear element offset into a Vec tile or GM tensor)"});
}

}  // namespace pypto_pro::ir
