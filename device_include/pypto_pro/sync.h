// Synchronisation between the pipes of a core, and between the cores of a mixed kernel's block.
// The simulator runs each core's instructions in program order, so every pipe dependency is
// already satisfied when an instruction starts: flags, mutexes and barriers between the pipes of
// one core have nothing to wait for and cost nothing in a plain kernel. They stay in the generated
// code because they are what the hardware would execute (and what sanitizer mode checks).
// Cross-core flags do wait: the runtime suspends the core until its block's partner sets the flag.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

// Pipes as ops receive them (integers): kPipeMTE1, kPipeMTE2, ... from the one list in hw_tables.h.
#define PTO_DEVICE_PIPE_(name) kPipe##name,
enum Pipe : int { PTO_HW_PIPES(PTO_DEVICE_PIPE_) };
#undef PTO_DEVICE_PIPE_

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

// pl.system.sync_src / sync_dst: a flag from set_pipe to wait_pipe.
inline void sync_src(CoreCtx&, int, int /*set_pipe*/, int /*wait_pipe*/, int /*event_id*/) {}
inline void sync_dst(CoreCtx&, int, int /*set_pipe*/, int /*wait_pipe*/, int /*event_id*/) {}

// pl.system.mutex_lock / mutex_unlock: a buffer mutex taken and released by one pipe.
inline void mutex_lock(CoreCtx&, int, int /*pipe*/, int /*mutex_id*/) {}
inline void mutex_unlock(CoreCtx&, int, int /*pipe*/, int /*mutex_id*/) {}

// pl.system.bar_all, bar_v, bar_m, bar_mte1/2/3, bar_fix: wait until the pipe has drained.
template <int kPipe>
inline void pipe_barrier(CoreCtx&, int) {}

// pl.system.dcci: write back and invalidate the data cache. Host memory is coherent, so there is
// nothing to write back; the offset is checked against the target like an element access.
template <typename Container>
inline void dcci(CoreCtx&, int, int /*cache_line*/, int /*dst*/, const Container&) {}

template <typename T, int N>
inline void dcci_at(CoreCtx& ctx, int line, int, int, const GmTensor<T, N>& gm, Idx<N> off) {
  for (int i = 0; i < N; ++i) {
    if (off.v[i] < 0 || off.v[i] >= gm.shape[i]) {
      PtoFaultDetail d{};
      d.op = "system.dcci";
      d.message = "offset outside the tensor";
      d.tensor = gm.name;
      d.rank = N < PTO_FAULT_MAX_RANK ? N : PTO_FAULT_MAX_RANK;
      for (int k = 0; k < d.rank; ++k) {
        d.offsets[k] = off.v[k];
        d.extent[k] = 1;
        d.shape[k] = gm.shape[k];
      }
      Fault(ctx, line, d);
    }
  }
}

template <typename Container, typename Offset>
inline void dcci_at(CoreCtx& ctx, int line, int, int, const Container& target, Offset linear) {
  (void)getval(ctx, line, target, int64_t(linear));  // the bounds check of an element read
}

// pl.system.sync_all: a barrier of every block of the launch (the runtime holds them all resident).
inline void sync_all(CoreCtx& ctx, int line, int core_type, int /*mode*/) {
  ctx.api->sync_all(&ctx, line, core_type);
}

// pl.system.set_mm_layout_transform: the fixpipe's L0C read direction; the simulator's fixpipe reads
// logical rows whichever it is.
inline void set_mm_layout_transform(CoreCtx&, int, int /*enabled*/) {}

// pl.system.set_cross_core / wait_cross_core between the AIC and the AIVs of a logical block.
inline void set_cross_core(CoreCtx& ctx, int line, int pipe, int event_id, int mode) {
  ctx.api->set_cross_core(&ctx, line, pipe, event_id, mode);
}
inline void wait_cross_core(CoreCtx& ctx, int line, int pipe, int event_id, int mode) {
  ctx.api->wait_cross_core(&ctx, line, pipe, event_id, mode);
}

}  // namespace pto
