// Sanitizer mode (pl.jit(sanitizer=True)): the hooks an instrumented kernel.cpp calls. Codegen
// derives each op's hook from the op registry (operand access, window rule, the op's pipe): the
// hook describes the bytes every operand will touch, and the runtime checks them against their
// tensor or tile, records them for the pipe-race checks and says whether the op may run. An access
// out of bounds is reported and its op skipped, so the kernel goes on to show its other defects.
// Plain kernels never include this header: they pay nothing for it.
#pragma once

#include <exception>

#include "pypto_pro/device.h"

namespace pto::san {

inline constexpr int kRead = PTO_SAN_READ;
inline constexpr int kWrite = PTO_SAN_WRITE;

namespace detail {

inline PtoSanAccess Refused(int mode, int memory, const char* name, const char* op, const char* message) {
  PtoSanAccess a{};
  a.mode = mode;
  a.memory = memory;
  a.name = name;
  a.fault.op = op;
  a.fault.message = message;
  return a;
}

template <typename TileT>
inline const uint8_t* Bytes(const TileT& tile) {
  return reinterpret_cast<const uint8_t*>(tile.data);
}

template <typename TileT>
constexpr int64_t kRowBytes = int64_t(TileT::kCols) * int64_t(sizeof(typename TileT::Elem));

}  // namespace detail

// `size` elements of a contiguous GM tensor from linear element `offset` (pl.init_output). A run
// outside the tensor or its buffer, or of a strided view, books nothing: the op itself faults or
// writes element by element.
template <typename T, int N>
inline PtoSanAccess GmRun(const GmTensor<T, N>& gm, int mode, int64_t offset, int64_t size) {
  PtoSanAccess a{};
  a.mode = mode;
  a.memory = kDDR;
  a.name = gm.name;
  a.in_bounds = 1;
  const uint8_t* first = reinterpret_cast<const uint8_t*>(gm.data + offset);
  if (!gm.contiguous || offset < 0 || size <= 0 || offset + size > pto::detail::Elements(gm) || first < gm.lo ||
      first + size * int64_t(sizeof(T)) > gm.hi) {
    return a;  // rows = 0: nothing
  }
  a.base = first;
  a.origin = gm.lo;
  a.rows = a.runs = 1;
  a.row_stride = a.run_stride = a.width = size * int64_t(sizeof(T));
  return a;
}

// `bytes` of the block's SSBUF at `offset` (pl.ssbuf_store / ssbuf_load). A window outside the SSBUF
// books nothing: the op itself then faults, naming it.
inline PtoSanAccess Ssbuf(CoreCtx& ctx, int mode, int64_t offset, int64_t bytes, const char* name) {
  PtoSanAccess a{};
  a.mode = mode;
  a.memory = PTO_MEM_SSBUF;
  a.name = name;
  a.in_bounds = 1;
  if (offset < 0 || offset % 4 != 0 || offset + bytes > PTO_SSBUF_BYTES) return a;  // rows = 0: nothing
  a.base = ctx.ssbuf + offset;
  a.origin = ctx.ssbuf;
  a.rows = 1;
  a.row_stride = a.run_stride = a.width = bytes;
  a.runs = 1;
  return a;
}

// `rows` x `cols` elements of `tile` from (row0, col0): every op indexes tiles row-major.
template <typename TileT>
inline PtoSanAccess Rect(const TileT& tile, int mode, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                         const char* op, const char* name) {
  if (rows < 0 || cols < 0 || row0 < 0 || col0 < 0 || row0 + rows > TileT::kRows || col0 + cols > TileT::kCols) {
    PtoSanAccess a = detail::Refused(mode, TileT::kMem, name, op, "the window does not fit the tile");
    a.fault.rank = 2;
    a.fault.offsets[0] = row0;
    a.fault.offsets[1] = col0;
    a.fault.extent[0] = rows;
    a.fault.extent[1] = cols;
    a.fault.shape[0] = TileT::kRows;
    a.fault.shape[1] = TileT::kCols;
    return a;
  }
  PtoSanAccess a{};
  a.base = detail::Bytes(tile) + row0 * detail::kRowBytes<TileT> + col0 * int64_t(sizeof(typename TileT::Elem));
  a.rows = rows;
  a.row_stride = detail::kRowBytes<TileT>;
  a.runs = 1;
  a.run_stride = 0;
  a.width = cols * int64_t(sizeof(typename TileT::Elem));
  a.name = name;
  a.mode = mode;
  a.memory = TileT::kMem;
  a.in_bounds = 1;
  return a;
}

// Rect of the same tile in core `peer`'s memory (a move that crosses the cores of a mixed block);
// the issuing core's own Rect outside mixed kernels, where the move stays in its memories.
template <typename TileT>
inline PtoSanAccess PeerRect(CoreCtx& ctx, const TileT& tile, int peer, int mode, int64_t row0, int64_t col0,
                             int64_t rows, int64_t cols, const char* op, const char* name) {
  PtoSanAccess a = Rect(tile, mode, row0, col0, rows, cols, op, name);
  const typename TileT::Elem* there = PeerData(ctx, tile, peer);
  if (!a.in_bounds || !there) return a;
  a.base = reinterpret_cast<const uint8_t*>(there) + (a.base - detail::Bytes(tile));
  a.origin = ctx.api->peer_memory(&ctx, peer, TileT::kMem);
  a.peer = 1 + peer;
  return a;
}

// One element of a tile at a linear offset (pl.setval, element reads).
template <typename TileT>
inline PtoSanAccess Element(const TileT& tile, int mode, int64_t offset, const char* op, const char* name) {
  constexpr int64_t kCount = int64_t(TileT::kRows) * TileT::kCols;
  if (offset < 0 || offset >= kCount) {
    PtoSanAccess a = detail::Refused(mode, TileT::kMem, name, op, "element offset out of range");
    a.fault.rank = 1;
    a.fault.offsets[0] = offset;
    a.fault.extent[0] = 1;
    a.fault.shape[0] = kCount;
    return a;
  }
  PtoSanAccess a{};
  a.base = detail::Bytes(tile) + ElementIndex(tile, offset) * int64_t(sizeof(typename TileT::Elem));
  a.rows = a.runs = 1;
  a.width = int64_t(sizeof(typename TileT::Elem));
  a.name = name;
  a.mode = mode;
  a.memory = TileT::kMem;
  a.in_bounds = 1;
  return a;
}

namespace detail {

// An access of a GM view that leaves its launch buffer (pto::detail::InBuffer refused it).
template <typename T, int N>
inline PtoSanAccess OutsideBuffer(const GmTensor<T, N>& gm, int mode, const char* op, const int64_t* off,
                                  const int64_t* extent) {
  PtoSanAccess a = Refused(mode, kDDR, gm.name, op, "GM access outside the buffer passed for the tensor's parameter");
  a.fault.tensor = gm.name;
  a.fault.rank = N < PTO_FAULT_MAX_RANK ? N : PTO_FAULT_MAX_RANK;
  for (int i = 0; i < a.fault.rank; ++i) {
    a.fault.offsets[i] = off[i];
    a.fault.extent[i] = extent[i];
    a.fault.shape[i] = gm.shape[i];
  }
  return a;
}

}  // namespace detail

// One element of a GM tensor at a linear (row-major) offset, placed by its strides.
template <typename T, int N>
inline PtoSanAccess Element(const GmTensor<T, N>& gm, int mode, int64_t offset, const char* op, const char*) {
  const int64_t count = pto::detail::Elements(gm);
  if (offset < 0 || offset >= count) {
    PtoSanAccess a = detail::Refused(mode, kDDR, gm.name, op, "element offset out of range");
    a.fault.tensor = gm.name;
    a.fault.rank = 1;
    a.fault.offsets[0] = offset;
    a.fault.extent[0] = 1;
    a.fault.shape[0] = count;
    return a;
  }
  int64_t index[N], one[N], rest = offset, begin, end;
  for (int k = N - 1; k >= 0; --k) {
    index[k] = rest % gm.shape[k];
    rest /= gm.shape[k];
    one[k] = 1;
  }
  bool overflow;
  if (!pto::detail::InBuffer(gm, index, one, begin, end, overflow)) {
    return detail::OutsideBuffer(gm, mode, op, index, one);
  }
  PtoSanAccess a{};
  a.base = gm.lo + begin;
  a.rows = a.runs = 1;
  a.width = int64_t(sizeof(T));
  a.origin = gm.lo;
  a.name = gm.name;
  a.mode = mode;
  a.memory = kDDR;
  a.in_bounds = 1;
  return a;
}

// The GM window a load or store of `tile` at element offsets `off` moves: the tile's valid window
// laid along the tensor axes `order` picks (DecodeOrder's encoding), checked like the transfer does.
template <typename TileT, typename T, int N>
inline PtoSanAccess Gm(const GmTensor<T, N>& gm, int mode, const TileT& tile, Idx<N> off, int order, const char* op) {
  const pto::detail::Axes axes = pto::detail::DecodeOrder<N>(order);
  const int64_t rows = tile.valid_rows, cols = tile.valid_cols;
  bool ok = rows >= 0 && cols >= 0 && rows <= TileT::kRows && cols <= TileT::kCols && (axes.rows >= 0 || rows <= 1);
  int64_t linear = 0;
  for (int i = 0; i < N; ++i) {
    ok = ok && off.v[i] >= 0 && off.v[i] + pto::detail::WindowExtent<N>(axes, i, rows, cols) <= gm.shape[i];
    linear += off.v[i] * gm.stride[i];
  }
  if (!ok) {
    const bool tile_side = rows < 0 || cols < 0 || rows > TileT::kRows || cols > TileT::kCols;
    PtoSanAccess a = detail::Refused(mode, tile_side ? TileT::kMem : kDDR, gm.name, op,
                                     tile_side ? "tile valid window exceeds the tile's shape" : "GM access out of bounds");
    a.fault.tensor = gm.name;
    a.fault.rank = N < PTO_FAULT_MAX_RANK ? N : PTO_FAULT_MAX_RANK;
    for (int i = 0; i < a.fault.rank; ++i) {
      a.fault.offsets[i] = off.v[i];
      a.fault.extent[i] = pto::detail::WindowExtent<N>(axes, i, rows, cols);
      a.fault.shape[i] = gm.shape[i];
    }
    return a;
  }
  int64_t extent[N], begin, end;
  for (int i = 0; i < N; ++i) extent[i] = pto::detail::WindowExtent<N>(axes, i, rows, cols);
  bool overflow;
  if (!pto::detail::InBuffer(gm, off.v, extent, begin, end, overflow)) {
    return detail::OutsideBuffer(gm, mode, op, off.v, extent);
  }
  PtoSanAccess a{};
  a.base = reinterpret_cast<const uint8_t*>(gm.data + linear);
  a.rows = axes.rows >= 0 ? rows : 1;
  a.row_stride = axes.rows >= 0 ? gm.stride[axes.rows] * int64_t(sizeof(T)) : 0;
  a.runs = cols;
  a.run_stride = gm.stride[axes.cols] * int64_t(sizeof(T));
  a.width = int64_t(sizeof(T));
  a.origin = gm.lo;  // offsets in reports count from the launch buffer's start
  a.name = gm.name;
  a.mode = mode;
  a.memory = kDDR;
  a.in_bounds = 1;
  return a;
}

// load_tile / store_tile: tile indices times the tile's shape.
template <typename TileT, typename T, int N>
inline PtoSanAccess GmTile(const GmTensor<T, N>& gm, int mode, const TileT& tile, Idx<N> tile_idx, int order,
                           const char* op) {
  return Gm(gm, mode, tile, pto::detail::TileOffsets<TileT>(tile_idx, pto::detail::DecodeOrder<N>(order)), order,
            op);
}

// An op on `pipe` is about to touch `accesses`: false when one is out of bounds (the op is skipped).
template <int kCount>
inline bool Op(CoreCtx& ctx, int line, int pipe, const PtoSanAccess (&accesses)[kCount]) {
  return ctx.api->sanitizer->access(&ctx, line, pipe, accesses, kCount) != 0;
}

// A synchronisation event (PTO_SAN_*); always lets the op run.
inline bool Sync(CoreCtx& ctx, int line, int event, int pipe, int other, uint32_t id) {
  ctx.api->sanitizer->sync(&ctx, line, event, pipe, other, id);
  return true;
}

// auto_mutex_lock / auto_mutex_unlock: the ids the tiles carry, locked once each.
template <typename... Tiles>
inline bool AutoMutex(CoreCtx& ctx, int line, int event, int pipe, const Tiles&... tiles) {
  return Sync(ctx, line, event | PTO_SAN_AUTO_MUTEX, pipe, pipe, MutexMask(tiles...));
}

// pl.set_validshape: false (and reported) when the shape leaves the tile, which keeps its window.
template <typename TileT>
inline bool ValidShape(CoreCtx& ctx, int line, const TileT&, Idx<2> shape) {
  if (shape.v[0] >= 0 && shape.v[0] <= TileT::kRows && shape.v[1] >= 0 && shape.v[1] <= TileT::kCols) return true;
  PtoFaultDetail d{};
  d.op = "set_validshape";
  d.message = "valid shape outside the tile's shape";
  d.rank = 2;
  d.extent[0] = shape.v[0];
  d.extent[1] = shape.v[1];
  d.shape[0] = TileT::kRows;
  d.shape[1] = TileT::kCols;
  ctx.api->sanitizer->bad_shape(&ctx, line, &d);
  return false;
}

template <typename TileT>
inline bool ValidShape(CoreCtx& ctx, int line, const TileT& tile, Idx<1> shape) {
  return ValidShape(ctx, line, tile, Idx<2>{{1, shape.v[0]}});
}

// An element read in an expression (tile[i, j], pl.getval) on the scalar pipe; reads 0 when out of
// bounds.
template <typename Container>
inline auto getval(CoreCtx& ctx, int line, const Container& container, int64_t offset, const char* name) {
  using Value = decltype(pto::getval(ctx, line, container, offset));
  if (!Op(ctx, line, kPipeS, {Element(container, kRead, offset, "getval", name)})) return Value(0);
  return pto::getval(ctx, line, container, offset);
}

// A tile group's slots are placed (after InitTile): checked against the other live tiles.
template <typename TileT, int kDepth>
inline void Declare(CoreCtx& ctx, int line, const char* name, int decl, const TileT (&slots)[kDepth]) {
  uint32_t addrs[kDepth];
  for (int i = 0; i < kDepth; ++i) addrs[i] = uint32_t(detail::Bytes(slots[i]) - ctx.mem[TileT::kMem]);
  ctx.api->sanitizer->declare(&ctx, line, name, decl, TileT::kMem, addrs, kDepth,
                              uint32_t(TileT::kRows * detail::kRowBytes<TileT>));
}

// The core's program, from its first statement to its end (or to the fault that cuts it short).
// Profile mode: the work of the op that follows (docs/profiler.md).
inline void Work(CoreCtx& ctx, int line, int pipe, int op_class, int64_t units, int dtype, const char* op) {
  ctx.api->sanitizer->work(&ctx, line, pipe, op_class, units, dtype, op);
}

class CoreScope {
 public:
  CoreScope(CoreCtx& ctx, const void* args, uint32_t pipes) : ctx_(ctx), unwinding_(std::uncaught_exceptions()) {
    ctx.api->sanitizer->begin(&ctx, args, pipes);
  }
  ~CoreScope() { ctx_.api->sanitizer->end(&ctx_, std::uncaught_exceptions() == unwinding_); }
  CoreScope(const CoreScope&) = delete;
  CoreScope& operator=(const CoreScope&) = delete;

 private:
  CoreCtx& ctx_;
  int unwinding_;
};

}  // namespace pto::san
