// Synchronisation between pipes and cores, and debugging (LANGUAGE.md sections 5 and 6).
#include "op_tables.h"

namespace pypto_pro::ir {

void AddSyncOps(std::vector<OpDef>& ops) {
  // auto_mutex: lock / unlock, on the pipe of the guarded op, every TileGroup mutex id its tile
  // operands carry.
  const std::vector<std::string_view> pipes = {"MTE1", "MTE2", "MTE3", "M", "V", "S", "FIX", "ALL"};
  for (auto [name, fn, doc] : {std::tuple{"auto_mutex_lock", "pto::auto_mutex_lock", "lock the tiles' mutex ids"},
                               std::tuple{"auto_mutex_unlock", "pto::auto_mutex_unlock", "unlock them"}}) {
    OpDef op{name, Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
             {{"tiles", OperandKind::kTiles, Access::kRead, kAnyTileMemory}},
             false, kAllSupportedDTypes, "", fn, {KwargSpec{"pipe", AttrKind::kEnum, 0, pipes, true, {}, "pto::kPipe"}}, doc};
    op.internal = true;
    ops.push_back(op);
  }
}

}  // namespace pypto_pro::ir
