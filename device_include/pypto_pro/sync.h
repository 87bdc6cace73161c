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
// SOFT mode is called with its workspaces (sync_all_soft), so this is the hardware barrier.
inline void sync_all(CoreCtx& ctx, int line, int core_type, int /*mode*/) {
  ctx.api->sync_all(&ctx, line, core_type, 0, 0);
}

namespace detail {

// What sync_all's workspaces list holds, sorted by kind (the verifier allowed one of each).
struct SyncAllWorkspaces {
  const int32_t* gm = nullptr;
  int64_t gm_elements = 0;
  const char* gm_name = nullptr;
  int64_t ub_bytes = -1;
  int64_t used_cores = 0;
};
template <typename T, int N>
inline void Collect(SyncAllWorkspaces& w, const GmTensor<T, N>& t) {
  w.gm = reinterpret_cast<const int32_t*>(t.data);
  w.gm_name = t.name;
  // The words read from its first element on: those of a row-major view that lie in its buffer.
  const int64_t in_buffer = (t.hi - reinterpret_cast<const uint8_t*>(t.data)) / int64_t(sizeof(T));
  w.gm_elements = !t.contiguous ? 0 : Elements(t) < in_buffer ? Elements(t) : in_buffer;
}
template <typename T, int R, int C, int M, int L, int P>
inline void Collect(SyncAllWorkspaces& w, const Tile<T, R, C, M, L, P>&) {
  if (M == kVec) w.ub_bytes = int64_t(R) * C * int64_t(sizeof(T));  // an L1 tile's 32 bytes are checked at compile time
}
inline void Collect(SyncAllWorkspaces& w, int64_t used_cores) { w.used_cores = used_cores; }

[[noreturn]] inline void WorkspaceFault(CoreCtx& ctx, int line, const char* message, const char* tensor,
                                        int64_t offset, int64_t extent, int64_t size) {
  PtoFaultDetail d{};
  d.op = "system.sync_all";
  d.message = message;
  d.tensor = tensor;
  d.rank = 1;
  d.offsets[0] = offset;
  d.extent[0] = extent;
  d.shape[0] = size;
  Fault(ctx, line, d);
}

}  // namespace detail

// pl.system.sync_all(workspaces, mode=SOFT): the barrier through a GM workspace shared by the
// participating cores (used_cores of core_type, 0: all of them) and a local UB / L1 tile. Its
// semantics are the hardware barrier's; the workspaces are checked as the NPU needs them: 32 bytes of
// GM and of UB per participant, and the GM words all zero (zeroed before the first launch and never
// used for data; the simulated protocol leaves them untouched). HARD mode takes an empty list.
template <typename... Ws>
inline void sync_all_soft(CoreCtx& ctx, int line, int core_type, int mode, const Ws&... workspaces) {
  if (mode == 0) return sync_all(ctx, line, core_type, mode);
  detail::SyncAllWorkspaces w;
  (detail::Collect(w, workspaces), ...);
  // The cores of core_type in this launch: AIVs (both of a mixed block), AICs, or both.
  const int64_t launched = core_type == 0 ? int64_t(ctx.block_num) * ctx.subblock_num
                                          : core_type == 1 ? int64_t(ctx.block_num) : 3 * int64_t(ctx.block_num);
  if (w.used_cores < 0 || w.used_cores > launched) {
    detail::WorkspaceFault(ctx, line, "used_cores of a SOFT sync_all is outside [0, the launch's cores of core_type]",
                           nullptr, w.used_cores, 1, launched);
  }
  const int64_t cores = w.used_cores > 0 ? w.used_cores : launched;
  const int64_t words = 8 * cores;  // 32 bytes per participating core
  if (w.gm_elements < words) {
    detail::WorkspaceFault(ctx, line, "the GM workspace of a SOFT sync_all needs 32 bytes per participating core",
                           w.gm_name, 0, words, w.gm_elements);
  }
  if (w.ub_bytes >= 0 && w.ub_bytes < 4 * words) {
    detail::WorkspaceFault(ctx, line, "the UB workspace tile of a SOFT sync_all needs 32 bytes per participating core",
                           nullptr, 0, 4 * words, w.ub_bytes / 4);
  }
  for (int64_t i = 0; i < words; ++i) {
    if (w.gm[i] != 0) {
      detail::WorkspaceFault(ctx, line,
                             "the GM workspace of a SOFT sync_all must hold zeros (zero it before the kernel first runs "
                             "and use it for nothing else)",
                             w.gm_name, i, 1, w.gm_elements);
    }
  }
  ctx.api->sync_all(&ctx, line, core_type, 1, w.used_cores);
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
