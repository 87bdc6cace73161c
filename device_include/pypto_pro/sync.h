// Synchronisation between the pipes of a core. The simulator runs each core's instructions in
// program order, so every pipe dependency is already satisfied when an instruction starts: the
// operations below have nothing to wait for and cost nothing in a plain kernel. They stay in the
// generated code because they are what the hardware would execute (and what sanitizer mode checks).
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

// Pipes, numbered like ir::Pipe (ops receive them as integers).
enum Pipe : int { kPipeMTE1 = 0, kPipeMTE2, kPipeMTE3, kPipeM, kPipeV, kPipeS, kPipeFIX, kPipeALL };

// The union of the TileGroup mutex ids the tiles carry: each id is locked once per op.
template <typename... Tiles>
inline uint32_t MutexMask(const Tiles&... tiles) {
  return (0u | ... | tiles.mutex_mask);
}

// auto_mutex: lock the tiles' ids on `pipe` before the guarded op...
template <typename... Tiles>
inline void auto_mutex_lock(CoreCtx&, int, int /*pipe*/, const Tiles&... tiles) {
  (void)MutexMask(tiles...);
}

// ...and release them after it.
template <typename... Tiles>
inline void auto_mutex_unlock(CoreCtx&, int, int /*pipe*/, const Tiles&... tiles) {
  (void)MutexMask(tiles...);
}

}  // namespace pto
