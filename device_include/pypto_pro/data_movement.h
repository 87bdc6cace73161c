// GM <-> tile transfers (pl.load / load_tile on MTE2, pl.store / store_tile on MTE3 or FIX).
// The tile's valid window moves; every transfer is bounds-checked against the tensor first, so an
// out-of-bounds access is a kernel fault that corrupts nothing. A store from an Acc tile goes
// through the fixpipe, which writes an fp32 accumulator as fp32, fp16 or bf16 (nearest even).
#pragma once

#include "pypto_pro/fixpipe.h"
#include "pypto_pro/tile.h"

namespace pto {

// The GM rows a fused pass (FusedRows, direct_run.h) also writes its stored tile to: row r at
// at + r * stride (at null: none), streamed (around the caches) where a row is 64-byte aligned.
template <typename T>
struct FusedGm {
  T* at = nullptr;
  int64_t stride = 0;
  bool stream = false;
};

namespace detail {

// Which tensor axes a tile's rows and columns run along: load's order= ([rows, cols]); by default
// the last two (rows = -1: a 1-D tensor, the tile has one row). A descending pair transposes.
struct Axes {
  int rows;
  int cols;
};

template <int N>
constexpr Axes DecodeOrder(int order) {
  return order < 0 ? Axes{N - 2, N - 1} : Axes{order >> 8, order & 0xff};
}

template <int N>
inline int64_t WindowExtent(const Axes& axes, int axis, int64_t rows, int64_t cols) {
  return axis == axes.cols ? cols : (axis == axes.rows ? rows : 1);
}

// A tile as the transfers see it at run time (so that one compiled routine serves every shape): its
// elements, its shape (a row's elements lie together: the row stride is `cols`), its valid window
// and its pad value (TileType(pad=); 0: none).
template <typename E>
struct TileRef {
  E* data;
  int64_t rows, cols;
  int64_t valid_rows, valid_cols;
  int pad;
};

template <typename TileT>
inline TileRef<typename TileT::Elem> RefOf(const TileT& tile) {
  return {tile.data, TileT::kRows, TileT::kCols, tile.valid_rows, tile.valid_cols, TileT::kPad};
}

// Whether a rows x cols valid window of a tile_rows x tile_cols tile at `off` lies in the tensor's shape.
template <typename T, int N>
inline bool WindowInside(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols, const GmTensor<T, N>& gm,
                         const Idx<N>& off, Axes axes) {
  bool ok = rows >= 0 && cols >= 0 && rows <= tile_rows && cols <= tile_cols;
  for (int i = 0; i < N; ++i) {
    int64_t extent = WindowExtent<N>(axes, i, rows, cols);
    ok = ok && off.v[i] >= 0 && off.v[i] + extent <= gm.shape[i];
  }
  if (axes.rows < 0) ok = ok && rows <= 1;
  return ok;
}

// The window's first element, once the window passed load's / store's checks (else their fault).
template <typename T, int N>
inline T* CheckedWindowOf(CoreCtx& ctx, int line, const char* op, int64_t rows, int64_t cols, int64_t tile_rows,
                          int64_t tile_cols, const GmTensor<T, N>& gm, const Idx<N>& off, Axes axes) {
  const bool ok = WindowInside(rows, cols, tile_rows, tile_cols, gm, off, axes);
  if (__builtin_expect(!ok, 0)) {
    PtoFaultDetail d{};
    d.op = op;
    d.message = rows > tile_rows || cols > tile_cols || rows < 0 || cols < 0
                    ? "tile valid window exceeds the tile's shape"
                    : "GM access out of bounds";
    d.tensor = gm.name;
    d.rank = N;
    for (int i = 0; i < N && i < PTO_FAULT_MAX_RANK; ++i) {
      d.offsets[i] = off.v[i];
      d.extent[i] = WindowExtent<N>(axes, i, rows, cols);
      d.shape[i] = gm.shape[i];
    }
    Fault(ctx, line, d);
  }
  // Inside the shape, the window must also lie in the tensor's launch buffer (a view may describe
  // more than its buffer holds).
  int64_t extent[N];
  for (int i = 0; i < N; ++i) extent[i] = WindowExtent<N>(axes, i, rows, cols);
  CheckBuffer(ctx, line, op, gm, off.v, extent);
  return ElementAt(gm, off.v);
}

// Whether load's / store's checks of the window pass (CheckedWindowOf without its faults).
template <typename T, int N>
inline bool WindowPasses(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols, const GmTensor<T, N>& gm,
                         const Idx<N>& off, Axes axes) {
  if (!WindowInside(rows, cols, tile_rows, tile_cols, gm, off, axes)) return false;
  int64_t extent[N], begin, end;
  bool overflow;
  for (int i = 0; i < N; ++i) extent[i] = WindowExtent<N>(axes, i, rows, cols);
  return InBuffer(gm, off.v, extent, begin, end, overflow);
}

template <typename TileT, typename T, int N>
inline T* CheckedWindow(CoreCtx& ctx, int line, const char* op, const TileT& tile, const GmTensor<T, N>& gm,
                        const Idx<N>& off, Axes axes = DecodeOrder<N>(-1)) {
  return CheckedWindowOf(ctx, line, op, tile.valid_rows, tile.valid_cols, TileT::kRows, TileT::kCols, gm, off, axes);
}

// Stores from Acc convert like the fixpipe; every other transfer keeps the dtype.
template <typename TileT, typename T>
constexpr bool kStorable = __is_same(typename TileT::Elem, T) ||
                           (TileT::kMem == kAcc && (__is_same(typename TileT::Elem, float) ||
                                                    __is_same(typename TileT::Elem, int32_t)));

// load_tile / store_tile: tile indices times the tile's shape along the axes it spans.
template <int N>
inline Idx<N> TileOffsetsOf(const Idx<N>& tile_idx, int64_t tile_rows, int64_t tile_cols, Axes axes) {
  Idx<N> off = tile_idx;
  off.v[axes.cols] *= tile_cols;
  if (axes.rows >= 0) off.v[axes.rows] *= tile_rows;
  return off;
}

template <typename TileT, int N>
inline Idx<N> TileOffsets(const Idx<N>& tile_idx, Axes axes = DecodeOrder<N>(-1)) {
  return TileOffsetsOf(tile_idx, TileT::kRows, TileT::kCols, axes);
}

// Copy2D with a dtype conversion: fp32 <-> fp16/bf16 rounds to nearest even, 16 lanes at a time.
template <typename TD, typename TS>
inline void ConvertCopy2D(TD* dst, int64_t dst_stride, const TS* src, int64_t src_stride, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    TD* d = dst + r * dst_stride;
    const TS* s = src + r * src_stride;
    const int64_t vectors = cols / 16 * 16;
    for (int64_t c = 0; c < vectors; c += 16) Store16(d + c, Load16(s + c));
    for (int64_t c = vectors; c < cols; ++c) d[c] = FromFloat<TD>(ToFloat(s[c]));
  }
}

template <typename T>
inline void Copy2D(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if (cols == dst_stride && cols == src_stride) {
    __builtin_memcpy(dst, src, size_t(rows * cols) * sizeof(T));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) __builtin_memcpy(dst + r * dst_stride, src + r * src_stride, size_t(cols) * sizeof(T));
}

// A row-strided window of GM: copy it and prefetch the window at `next` (same row stride), the one
// this load statement will probably read next (PredictNextWindow). Many short strided rows defeat
// the CPU's stream prefetchers (the NPU's DMA engines do not care), so without this a tile loop runs
// at a fraction of memory bandwidth.
template <typename T>
inline void CopyFromGm(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows, int64_t cols,
                       const T* next) {
  if (rows <= 0 || cols <= 0) return;
  if (cols == dst_stride && cols == src_stride) {
    __builtin_memcpy(dst, src, size_t(rows * cols) * sizeof(T));
    return;
  }
  const int64_t bytes = cols * int64_t(sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const char* ahead = reinterpret_cast<const char*>(next + r * src_stride);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(ahead + b, 0, 1);  // into L2: measured best
    __builtin_memcpy(dst + r * dst_stride, src + r * src_stride, size_t(bytes));
  }
}

// Where the window a load statement reads next probably starts: one step further along its own
// walk (the step between its last two windows, from ctx's history), or, on its first load, the
// next window along the rows (what a kernel walking tiles along a row reads next). A matmul's B
// tiles walk down the columns: prefetching to the right fetched a tile read much later.
template <typename T>
inline const T* PredictNextWindow(CoreCtx& ctx, int line, const T* from, int64_t cols) {
  const int slot = (line < 0 ? -line : line) % PTO_LOAD_HISTORY;
  const T* last = static_cast<const T*>(ctx.load_from[slot]);
  const bool known = ctx.load_line[slot] == line && last != nullptr && last != from;
  ctx.load_line[slot] = line;
  ctx.load_from[slot] = from;
  // (integer arithmetic: the prediction may point outside every allocation; it is only prefetched)
  return known ? reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(from) * 2 - reinterpret_cast<uintptr_t>(last))
               : from + cols;
}

// out[c, r] = in[r, c] for one 16 x 16 block of 2- or 4-byte elements, in registers: each round
// swaps the off-diagonal s x s sub-blocks of every 2s x 2s block (s = 8, 4, 2, 1) with one
// two-vector shuffle per row (vpermt2w / vpermt2d with AVX-512).
template <int kBytes>
struct TransposeLanes;
template <>
struct TransposeLanes<2> {
  typedef uint16_t Row __attribute__((vector_size(32)));
};
template <>
struct TransposeLanes<4> {
  typedef uint32_t Row __attribute__((vector_size(64)));
};

template <typename T>
inline void TransposeBlock16(T* out, int64_t out_stride, const T* in, int64_t in_stride) {
  typedef typename TransposeLanes<int(sizeof(T))>::Row Row;
  Row r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) __builtin_memcpy(&r[i], in + i * in_stride, sizeof(Row));
#define PTO_UNPAREN_(...) __VA_ARGS__
#define PTO_TRANSPOSE_ROUND_(S, LO, HI)                                              \
  {                                                                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; ++i) {                          \
      if (i & S) continue;                                                           \
      const Row a = r[i], b = r[i + S];                                              \
      r[i] = __builtin_shufflevector(a, b, PTO_UNPAREN_ LO);                         \
      r[i + S] = __builtin_shufflevector(a, b, PTO_UNPAREN_ HI);                     \
    }                                                                                \
  }
  // lo[j] = j's bit S clear ? a[j] : b[j - S];  hi[j] = j's bit S clear ? a[j + S] : b[j]  (b = 16 + ...)
  PTO_TRANSPOSE_ROUND_(8, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                       (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
  PTO_TRANSPOSE_ROUND_(4, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                       (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
  PTO_TRANSPOSE_ROUND_(2, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                       (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
  PTO_TRANSPOSE_ROUND_(1, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                       (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
#undef PTO_TRANSPOSE_ROUND_
#undef PTO_UNPAREN_
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) __builtin_memcpy(out + i * out_stride, &r[i], sizeof(Row));
}

// out[c, r] = in[r, c] for r < rows, c < cols. Whole 16 x 16 blocks of 2- and 4-byte elements are
// transposed in registers (16 row loads, four rounds of 16 two-vector shuffles, 16 row stores: a
// 128 x 128 fp16 transpose several times faster than element by element); the edges element by
// element, in 16 x 16 blocks so both sides stay in cache.
template <typename T>
inline void Transpose2D(T* out, int64_t out_stride, const T* in, int64_t in_stride, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = r0 + kBlock < rows ? r0 + kBlock : rows, c1 = c0 + kBlock < cols ? c0 + kBlock : cols;
      if constexpr (sizeof(T) == 2 || sizeof(T) == 4) {
        if (r1 - r0 == kBlock && c1 - c0 == kBlock) {
          TransposeBlock16(out + c0 * out_stride + r0, out_stride, in + r0 * in_stride + c0, in_stride);
          continue;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) out[c * out_stride + r] = in[r * in_stride + c];
      }
    }
  }
}

// A window whose columns are not contiguous in GM (order= picking a non-last axis for the columns,
// e.g. a transposed load). Tile rows along contiguous GM elements (a 2-D transposed load) are a
// transpose; anything else is gathered in 16 x 16 blocks so both sides stay in cache.
template <typename T>
inline void GatherFromGm(T* dst, int64_t dst_stride, const T* src, int64_t row_step, int64_t col_step, int64_t rows,
                         int64_t cols) {
  if (row_step == 1) return Transpose2D(dst, dst_stride, src, col_step, cols, rows);
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = r0 + kBlock < rows ? r0 + kBlock : rows, c1 = c0 + kBlock < cols ? c0 + kBlock : cols;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[r * dst_stride + c] = src[r * row_step + c * col_step];
      }
    }
  }
}

// GM -> tile for a load along `axes`; a tile with a pad value (TileType(pad=)) gets it everywhere
// outside the window.
template <typename T, int N>
inline void LoadWindowOf(const TileRef<T>& dst, const T* from, const GmTensor<T, N>& src, Axes axes,
                         const T* next = nullptr) {
  const int64_t row_step = axes.rows >= 0 ? src.stride[axes.rows] : 0, col_step = src.stride[axes.cols];
  if (col_step == 1) {
    CopyFromGm(dst.data, dst.cols, from, row_step, dst.valid_rows, dst.valid_cols,
               next ? next : from + dst.valid_cols);
  } else {
    GatherFromGm(dst.data, dst.cols, from, row_step, col_step, dst.valid_rows, dst.valid_cols);
  }
  if (dst.pad != 0) FillOutsideWindowOf(dst.data, dst.pad, dst.rows, dst.cols, dst.valid_rows, dst.valid_cols);
}

template <typename TileT, typename T, int N>
inline void LoadWindow(TileT& dst, const T* from, const GmTensor<T, N>& src, Axes axes) {
  LoadWindowOf(RefOf(dst), from, src, axes);
}

// Tensors at least this large are written with non-temporal stores: they would not stay in cache
// anyway, and streaming stores skip reading each destination line first (a third of an add's
// memory traffic). Smaller outputs stay cached for whatever reads them next, and so do the stores
// of kernels that compute enough per stored element (`cached`: codegen's store_cached): a streaming
// store stalls its core until the lines reach memory, where a cached one is written back while the
// core computes the next tile (softmax 4096x512: 20% faster with cached stores, layernorm 27%,
// Intel Xeon; the add, with nothing to overlap, runs faster streamed).
constexpr int64_t kStreamingStoreBytes = PTO_STREAMING_STORE_BYTES;

// Whether rows of `cols` elements stored into `t` go around the caches: a tensor of
// kStreamingStoreBytes or more, rows of a cache line at least, in memory that is not left untouched
// (never-touched pages fault in zeroed through the cache, and streaming stores then write each line
// twice: 32 MiB written by 2 threads took 11 ms streamed to fresh pages, 6.7 ms cached, 1.0 ms
// streamed to touched ones, Intel Xeon; the runtime faults fresh outputs in first where it can).
template <typename T, int N>
inline bool StreamsStores(const GmTensor<T, N>& t, int64_t cols) {
  return t.shape[0] * (N >= 2 ? t.stride[0] : 1) * int64_t(sizeof(T)) >= kStreamingStoreBytes &&
         cols * int64_t(sizeof(T)) >= 64 && !t.fresh;
}

// Whether the buffer of an output is large enough to stream to and still untouched (the runtime looks
// before the launch's blocks start and faults in the untouched ones it can: PtoRuntimeApi::fresh_memory).
inline bool FreshOutput(CoreCtx& ctx, const void* lo, int64_t bytes) {
  return bytes >= kStreamingStoreBytes && ctx.api->fresh_memory && ctx.api->fresh_memory(&ctx, lo, bytes);
}

// A tensor parameter with its mark (GmTensor::fresh).
template <typename T, int N>
inline GmTensor<T, N> MarkFresh(CoreCtx& ctx, GmTensor<T, N> t) {
  t.fresh = FreshOutput(ctx, t.lo, t.hi - t.lo);
  return t;
}

// Rows copied to GM with non-temporal stores where the destination is 64-byte aligned.
template <typename T>
inline void StreamRows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows, int64_t cols) {
#if defined(__AVX512F__)
  typedef float Lanes __attribute__((vector_size(64), aligned(4)));
  const int64_t bytes = cols * int64_t(sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    char* d = reinterpret_cast<char*>(dst + r * dst_stride);
    const char* s = reinterpret_cast<const char*>(src + r * src_stride);
    int64_t head = int64_t((64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63);
    if (head > bytes) head = bytes;
    __builtin_memcpy(d, s, size_t(head));
    int64_t b = head;
    for (; b + 64 <= bytes; b += 64) {
      StreamStore(d + b, *reinterpret_cast<const Lanes*>(s + b));
    }
    __builtin_memcpy(d + b, s + b, size_t(bytes - b));
  }
  // No fence here: the runtime fences once the core's program ends (see StreamStore).
#else
  Copy2D(dst, dst_stride, src, src_stride, rows, cols);
#endif
}

// The tile -> GM copy of a store along `axes`: plain, streamed for large tensors, through the
// fixpipe's stages (an Acc source), or added atomically (atomic=AtomicAdd).
template <typename E, typename T, int N>
inline void StoreWindowOf(T* to, const GmTensor<T, N>& dst, const TileRef<E>& src, Axes axes, const Fixpipe& f,
                          bool atomic, bool cached = false) {
  const int64_t row_step = axes.rows >= 0 ? dst.stride[axes.rows] : 0, col_step = dst.stride[axes.cols];
  const int64_t rows = src.valid_rows, cols = src.valid_cols;
  if (atomic || col_step != 1) {
    // Columns strided in GM (order= picking a non-last axis) or atomic adds: element by element.
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        T* at = to + r * row_step + c * col_step;
        const auto v = src.data[r * src.cols + c];
        T out;
        if constexpr (!kFixpipeSource<E>) {
          out = v;  // a Vec tile of a type no accumulator has: no fixpipe stage applies
        } else if constexpr (__is_same(E, T)) {
          out = f.Plain() ? v : FixpipeElem<T>(v, f);
        } else {
          out = FixpipeElem<T>(v, f);
        }
        if constexpr (__is_same(T, bool)) {
          *at = out;  // no atomic bool store: the verifier refuses atomic= on bool tensors
        } else if (atomic) {
          AtomicAdd(at, out);
        } else {
          *at = out;
        }
      }
    }
    return;
  }
  if constexpr (__is_same(E, T)) {
    if (kFixpipeSource<T> && !f.Plain()) {
      FixpipeCopy2D(to, row_step, src.data, src.cols, rows, cols, f);
    } else if (!cached && StreamsStores(dst, cols)) {
      StreamRows(to, row_step, src.data, src.cols, rows, cols);
    } else {
      Copy2D(to, row_step, src.data, src.cols, rows, cols);
    }
  } else if constexpr (kIsFloatLike<E> && kIsFloatLike<T>) {
    if (f.Plain()) {
      ConvertCopy2D(to, row_step, src.data, src.cols, rows, cols);
    } else {
      FixpipeCopy2D(to, row_step, src.data, src.cols, rows, cols, f);
    }
  } else {
    FixpipeCopy2D(to, row_step, src.data, src.cols, rows, cols, f);
  }
}

template <typename TileT, typename T, int N>
inline void StoreWindow(T* to, const GmTensor<T, N>& dst, const TileT& src, Axes axes, const Fixpipe& f, bool atomic) {
  StoreWindowOf(to, dst, RefOf(src), axes, f, atomic);
}

// The bodies of load / load_tile and of store / store_tile of a tile of the tensor's own dtype, on
// a TileRef: inline in a kernel compiled without PTO_EXTERN_ROUTINES, else compiled once into the
// routines library (routines/*.cpp) for every element type of PTO_ROUTINE_ELEMS and rank up to 4, and
// called there (docs/jit.md#precompiled-device-headers-and-routines): the same code either way.
template <typename T, int N>
inline void LoadBody(CoreCtx& ctx, int line, const char* op, int order, bool tile_units, const TileRef<T>& dst,
                     const GmTensor<T, N>& src, Idx<N> index) {
  const Axes axes = DecodeOrder<N>(order);
  const Idx<N> offsets = tile_units ? TileOffsetsOf(index, dst.rows, dst.cols, axes) : index;
  const T* from =
      CheckedWindowOf(ctx, line, op, dst.valid_rows, dst.valid_cols, dst.rows, dst.cols, src, offsets, axes);
  LoadWindowOf(dst, from, src, axes, PredictNextWindow(ctx, line, from, dst.valid_cols));
}

template <typename E, typename T, int N>
inline void StoreBody(CoreCtx& ctx, int line, const char* op, int relu_pre_mode, int64_t scale, int order, int atomic,
                      int phase, bool tile_units, bool cached, const GmTensor<T, N>& dst, const TileRef<E>& src,
                      Idx<N> index) {
  UnitFlagWait(ctx, line, op, phase, 1);
  const Axes axes = DecodeOrder<N>(order);
  const Idx<N> offsets = tile_units ? TileOffsetsOf(index, src.rows, src.cols, axes) : index;
  T* to = CheckedWindowOf(ctx, line, op, src.valid_rows, src.valid_cols, src.rows, src.cols, dst, offsets, axes);
  StoreWindowOf(to, dst, src, axes, MakeFixpipe(relu_pre_mode, scale), atomic == 1, cached);
  UnitFlagDone(ctx, phase, 0);
}

#define PTO_ROUTINE_ELEMS(X) \
  X(int8_t) X(int16_t) X(int32_t) X(int64_t) X(uint8_t) X(uint16_t) X(uint32_t) X(uint64_t) X(half) \
  X(bfloat16) X(float)
#define PTO_ROUTINE_RANKS(X, T) X(T, 1) X(T, 2) X(T, 3) X(T, 4)
constexpr int kRoutineMaxRank = 4;  // higher ranks (rare) compile inline

// Whether this kernel calls the routines library (compiled with PTO_EXTERN_ROUTINES).
#if defined(PTO_EXTERN_ROUTINES)
constexpr bool kExternRoutines = true;
#else
constexpr bool kExternRoutines = false;
#endif

template <typename T>
constexpr bool kRoutineElem = false;
#define PTO_ROUTINE_ELEM_(T) template <> constexpr bool kRoutineElem<T> = true;
PTO_ROUTINE_ELEMS(PTO_ROUTINE_ELEM_)
#undef PTO_ROUTINE_ELEM_

template <typename T, int N>
__attribute__((visibility("default"))) void LoadRoutine(CoreCtx& ctx, int line, const char* op, int order,
                                                        bool tile_units, const TileRef<T>& dst,
                                                        const GmTensor<T, N>& src, Idx<N> index);
template <typename T, int N>
__attribute__((visibility("default"))) void StoreRoutine(CoreCtx& ctx, int line, const char* op, int relu_pre_mode,
                                                         int64_t scale, int order, int atomic, int phase,
                                                         bool tile_units, bool cached, const GmTensor<T, N>& dst,
                                                         const TileRef<T>& src, Idx<N> index);

template <typename T, int N>
inline void Load(CoreCtx& ctx, int line, const char* op, int order, bool tile_units, const TileRef<T>& dst,
                 const GmTensor<T, N>& src, Idx<N> index) {
  if constexpr (kExternRoutines && kRoutineElem<T> && N <= kRoutineMaxRank) {
    LoadRoutine(ctx, line, op, order, tile_units, dst, src, index);
  } else {  // (an else: a statement after the if would be compiled too)
    LoadBody(ctx, line, op, order, tile_units, dst, src, index);
  }
}

// E: the tile's element type; an Acc tile converted on its way (E != T) always stores inline.
template <typename E, typename T, int N>
inline void Store(CoreCtx& ctx, int line, const char* op, int relu_pre_mode, int64_t scale, int order, int atomic,
                  int phase, bool tile_units, bool cached, const GmTensor<T, N>& dst, const TileRef<E>& src,
                  Idx<N> index) {
  if constexpr (kExternRoutines && __is_same(E, T) && kRoutineElem<T> && N <= kRoutineMaxRank) {
    StoreRoutine(ctx, line, op, relu_pre_mode, scale, order, atomic, phase, tile_units, cached, dst, src, index);
  } else {
    StoreBody(ctx, line, op, relu_pre_mode, scale, order, atomic, phase, tile_units, cached, dst, src, index);
  }
}

}  // namespace detail

// order: DecodeOrder's encoding of the order= option (-1: the last two axes).
template <typename TileT, typename T, int N>
inline void load(CoreCtx& ctx, int line, int order, TileT& dst, const GmTensor<T, N>& src, Idx<N> offsets) {
  static_assert(__is_same(typename TileT::Elem, T), "tile and tensor dtypes differ");
  detail::Load(ctx, line, "load", order, false, detail::RefOf(dst), src, offsets);
}

template <typename TileT, typename T, int N>
inline void load_tile(CoreCtx& ctx, int line, int order, TileT& dst, const GmTensor<T, N>& src, Idx<N> tile_idx) {
  static_assert(__is_same(typename TileT::Elem, T), "tile and tensor dtypes differ");
  detail::Load(ctx, line, "load_tile", order, true, detail::RefOf(dst), src, tile_idx);
}

// A load at the head of a fused run (fuse_rows): `strip` is the subview of `whole`'s rows from
// `row0`; it gets the GM rows of the load's window it covers. The first strip checks the whole window
// as load / load_tile do, so the load faults before any op of the run; the pass admits only loads
// along the tensor's last two axes into ND tiles without a pad value.
namespace detail {
template <typename TileT, typename T, int N>
inline void LoadRows(CoreCtx& ctx, int line, const char* op, TileT& strip, const GmTensor<T, N>& src,
                     Idx<N> offsets, const TileT& whole, int64_t row0) {
  static_assert(N >= 2, "fused loads run along the tensor's last two axes");
  const Axes axes = DecodeOrder<N>(-1);
  if (row0 == 0) {
    const T* from = CheckedWindow(ctx, line, op, whole, src, offsets, axes);
    ctx.ahead_window = from != nullptr ? PredictNextWindow(ctx, line, from, whole.valid_cols) : nullptr;
  }
  if (strip.valid_rows <= 0) return;
  offsets.v[axes.rows] += row0;
  const T* const from = ElementAt(src, offsets.v);
  LoadWindow(strip, from, src, axes);
  // What the next strip's load reads, for the strip's fused passes to prefetch (PtoCoreCtx::ahead_at)
  const int64_t stride = src.stride[axes.rows];
  const int64_t next_rows = whole.valid_rows - (row0 + strip.valid_rows);
  const T* next = next_rows > 0 ? from + strip.valid_rows * stride : static_cast<const T*>(ctx.ahead_window);
  ctx.ahead_at = reinterpret_cast<const char*>(next);
  ctx.ahead_col = 0;
  ctx.ahead_row_bytes = strip.valid_cols * int64_t(sizeof(T));
  ctx.ahead_stride = stride * int64_t(sizeof(T));
  ctx.ahead_rows = next_rows > 0 && next_rows < strip.valid_rows ? next_rows : strip.valid_rows;
}
}  // namespace detail

template <typename TileT, typename T, int N>
inline void load_rows(CoreCtx& ctx, int line, int /*order: -1*/, TileT& strip, const GmTensor<T, N>& src,
                      Idx<N> offsets, const TileT& whole, int64_t row0) {
  detail::LoadRows(ctx, line, "load", strip, src, offsets, whole, row0);
}

template <typename TileT, typename T, int N>
inline void load_tile_rows(CoreCtx& ctx, int line, int /*order: -1*/, TileT& strip, const GmTensor<T, N>& src,
                           Idx<N> tile_idx, const TileT& whole, int64_t row0) {
  detail::LoadRows(ctx, line, "load_tile", strip, src, detail::TileOffsets<TileT>(tile_idx), whole, row0);
}

// A store at the tail of a fused run (fuse_rows) whose one head load read `load_whole`'s window of
// `src` at `load_index`: `strip` is the subview of `whole`'s rows from `row0`, strips of `step` rows.
// When the store's GM window shares no byte with that load's window, or has the same rows (one first
// element, one row stride, rows that do not overlap each other), each strip stores its rows as soon
// as the run computed them: later strips load only rows the store never wrote. Otherwise the last
// strip stores the whole window, as the store after the run would. The first strip checks the whole
// window as store / store_tile do (the run's float ops cannot fault, and its load checked its own).
// Large tensors are written around the caches (kStreamingStoreBytes) even in a loop that computes:
// a strip's streaming stores drain while the next strip computes (softmax and layernorm 4096x512
// 8-14% faster than storing the whole tile through the caches after the run; strips stored through
// the caches were slower than that, Intel Xeon).
namespace detail {
// Where a strip store writes: the whole window's first element, and whether this strip's rows are
// stored now (the windows leave later strips' rows alone) or the last strip stores the whole window.
template <typename T>
struct StripStorePlan {
  T* at;
  bool now;
};

template <typename TileT, typename T, int N, typename LoadTileT, typename L, int M>
inline StripStorePlan<T> PlanStripStore(CoreCtx& ctx, int line, const char* op, bool tile_units, bool load_tile_units,
                                        const GmTensor<T, N>& dst, Idx<N> index, const TileT& whole,
                                        const GmTensor<L, M>& src, Idx<M> load_index, const LoadTileT& load_whole) {
  static_assert(N >= 2 && M >= 2, "fused stores and loads run along the tensors' last two axes");
  const Axes axes = DecodeOrder<N>(-1), load_axes = DecodeOrder<M>(-1);
  const Idx<N> offsets = tile_units ? TileOffsets<TileT>(index, axes) : index;
  T* const at = CheckedWindow(ctx, line, op, whole, dst, offsets, axes);
  const int64_t rows = whole.valid_rows, cols = whole.valid_cols;
  if (rows <= 0 || cols <= 0) return {at, false};
  const Idx<M> load_offsets = load_tile_units ? TileOffsets<LoadTileT>(load_index, load_axes) : load_index;
  const uintptr_t s0 = uintptr_t(at), l0 = uintptr_t(ElementAt(src, load_offsets.v));
  const int64_t s_stride = dst.stride[N - 2] * int64_t(sizeof(T)), l_stride = src.stride[M - 2] * int64_t(sizeof(L));
  const int64_t s_row = cols * int64_t(sizeof(T)), l_row = load_whole.valid_cols * int64_t(sizeof(L));
  const uintptr_t s1 = s0 + uintptr_t((rows - 1) * s_stride + s_row);
  const uintptr_t l1 = l0 + uintptr_t((load_whole.valid_rows - 1) * l_stride + l_row);
  const bool apart = load_whole.valid_rows <= 0 || l_row <= 0 || s1 <= l0 || l1 <= s0;
  const bool same_rows = s0 == l0 && s_stride == l_stride && s_row <= s_stride && l_row <= l_stride;
  return {at, apart || same_rows};
}

template <typename TileT, typename T, int N, typename LoadTileT, typename L, int M>
inline void StoreRows(CoreCtx& ctx, int line, const char* op, bool tile_units, bool load_tile_units,
                      const GmTensor<T, N>& dst, const TileT& strip, Idx<N> index, const TileT& whole, int64_t row0,
                      int64_t step, const GmTensor<L, M>& src, Idx<M> load_index, const LoadTileT& load_whole) {
  const StripStorePlan<T> plan =
      PlanStripStore(ctx, line, op, tile_units, load_tile_units, dst, index, whole, src, load_index, load_whole);
  if (whole.valid_rows <= 0 || whole.valid_cols <= 0) return;
  const Axes axes = DecodeOrder<N>(-1);
  const Fixpipe plain = MakeFixpipe(0, -1);
  if (plan.now) {
    if (strip.valid_rows > 0) StoreWindowOf(plan.at + row0 * dst.stride[N - 2], dst, RefOf(strip), axes, plain, false);
  } else if (row0 + step >= TileT::kRows) {
    StoreWindowOf(plan.at, dst, RefOf(whole), axes, plain, false);
  }
}

// The GM rows a fused pass (FusedRows) writes its stored tile's values to itself, for the strip store
// after it: when the store would store this strip's rows now as a plain fp32 copy; else none (`at`
// null), and the store runs after the pass as written. It checks the store's window as the store
// does, so a store that faults faults before the pass writes anything to GM.
template <typename TileT, typename T, int N, typename LoadTileT, typename L, int M>
inline FusedGm<T> StripStoreTarget(CoreCtx& ctx, int line, const char* op, bool tile_units, bool load_tile_units,
                                   const GmTensor<T, N>& dst, const TileT& strip, Idx<N> index, const TileT& whole,
                                   int64_t row0, const GmTensor<L, M>& src, Idx<M> load_index,
                                   const LoadTileT& load_whole) {
  const StripStorePlan<T> plan =
      PlanStripStore(ctx, line, op, tile_units, load_tile_units, dst, index, whole, src, load_index, load_whole);
  if (!__is_same(T, float) || !__is_same(typename TileT::Elem, T) || !plan.now || strip.valid_rows <= 0 ||
      strip.valid_cols <= 0 || dst.stride[N - 1] != 1) {
    return {};
  }
  return {plan.at + row0 * dst.stride[N - 2], dst.stride[N - 2], StreamsStores(dst, strip.valid_cols)};
}
}  // namespace detail

// store_rows / store_tile_rows after a load's strips (load_rows), or after a load_tile's (_after_tile).
#define PTO_STORE_ROWS_(name, tile_units, load_tile_units)                                                            \
  template <typename TileT, typename T, int N, typename LoadTileT, typename L, int M>                                \
  inline void name(CoreCtx& ctx, int line, const GmTensor<T, N>& dst, const TileT& strip, Idx<N> index,               \
                   const TileT& whole, int64_t row0, int64_t step, const GmTensor<L, M>& src, Idx<M> load_index,      \
                   const LoadTileT& load_whole) {                                                                     \
    detail::StoreRows(ctx, line, tile_units ? "store_tile" : "store", tile_units, load_tile_units, dst, strip, index, \
                      whole, row0, step, src, load_index, load_whole);                                                \
  }
PTO_STORE_ROWS_(store_rows, false, false)
PTO_STORE_ROWS_(store_tile_rows, true, false)
PTO_STORE_ROWS_(store_rows_after_tile, false, true)
PTO_STORE_ROWS_(store_tile_rows_after_tile, true, true)
#undef PTO_STORE_ROWS_

// <store>_target: the rows a fused pass ending in that strip store writes itself (StripStoreTarget).
#define PTO_STORE_ROWS_TARGET_(name, tile_units, load_tile_units)                                                     \
  template <typename TileT, typename T, int N, typename LoadTileT, typename L, int M>                                \
  inline FusedGm<T> name##_target(CoreCtx& ctx, int line, const GmTensor<T, N>& dst, const TileT& strip,             \
                                  Idx<N> index, const TileT& whole, int64_t row0, int64_t /*step*/,                  \
                                  const GmTensor<L, M>& src, Idx<M> load_index, const LoadTileT& load_whole) {       \
    return detail::StripStoreTarget(ctx, line, tile_units ? "store_tile" : "store", tile_units, load_tile_units, dst, \
                                    strip, index, whole, row0, src, load_index, load_whole);                          \
  }
PTO_STORE_ROWS_TARGET_(store_rows, false, false)
PTO_STORE_ROWS_TARGET_(store_tile_rows, true, false)
PTO_STORE_ROWS_TARGET_(store_rows_after_tile, false, true)
PTO_STORE_ROWS_TARGET_(store_tile_rows_after_tile, true, true)
#undef PTO_STORE_ROWS_TARGET_

// relu_pre_mode, scale (MakeFixpipe's encodings), order (DecodeOrder's), atomic (1: AtomicAdd) and
// phase (the unit-flag handshake, fixpipe.h) are the store's options.
template <typename TileT, typename T, int N>
inline void store(CoreCtx& ctx, int line, int relu_pre_mode, int64_t scale, int order, int atomic, int phase,
                  const GmTensor<T, N>& dst, const TileT& src, Idx<N> offsets) {
  static_assert(detail::kStorable<TileT, T>, "this tile cannot be stored to a tensor of this dtype");
  detail::Store(ctx, line, "store", relu_pre_mode, scale, order, atomic, phase, false, false, dst, detail::RefOf(src),
                offsets);
}

template <typename TileT, typename T, int N>
inline void store_tile(CoreCtx& ctx, int line, int relu_pre_mode, int64_t scale, int order, int atomic, int phase,
                       const GmTensor<T, N>& dst, const TileT& src, Idx<N> tile_idx) {
  static_assert(detail::kStorable<TileT, T>, "this tile cannot be stored to a tensor of this dtype");
  detail::Store(ctx, line, "store_tile", relu_pre_mode, scale, order, atomic, phase, true, false, dst,
                detail::RefOf(src), tile_idx);
}

// store / store_tile in a loop that computes enough per stored element (codegen decides): the tile
// goes to GM through the caches whatever the tensor's size (kStreamingStoreBytes).
template <typename TileT, typename T, int N>
inline void store_cached(CoreCtx& ctx, int line, int relu_pre_mode, int64_t scale, int order, int atomic, int phase,
                         const GmTensor<T, N>& dst, const TileT& src, Idx<N> offsets) {
  static_assert(detail::kStorable<TileT, T>, "this tile cannot be stored to a tensor of this dtype");
  detail::Store(ctx, line, "store", relu_pre_mode, scale, order, atomic, phase, false, true, dst, detail::RefOf(src),
                offsets);
}

template <typename TileT, typename T, int N>
inline void store_tile_cached(CoreCtx& ctx, int line, int relu_pre_mode, int64_t scale, int order, int atomic,
                              int phase, const GmTensor<T, N>& dst, const TileT& src, Idx<N> tile_idx) {
  static_assert(detail::kStorable<TileT, T>, "this tile cannot be stored to a tensor of this dtype");
  detail::Store(ctx, line, "store_tile", relu_pre_mode, scale, order, atomic, phase, true, true, dst,
                detail::RefOf(src), tile_idx);
}

// store(..., scale=<run-time scalar>): an fp32 scalar is the factor, an integer one carries its fp32
// bit pattern. The rest is the compile-time scale's path.
namespace detail {
inline int64_t ScaleBits(float f) { return int64_t(FloatBits(f)); }
template <typename S>
inline int64_t ScaleBits(S bits) {
  return int64_t(uint32_t(bits));
}
}  // namespace detail

template <typename TileT, typename T, int N, typename S>
inline void store_scaled(CoreCtx& ctx, int line, int relu_pre_mode, int order, int atomic, int phase,
                         const GmTensor<T, N>& dst, const TileT& src, Idx<N> offsets, S scale) {
  store(ctx, line, relu_pre_mode, detail::ScaleBits(scale), order, atomic, phase, dst, src, offsets);
}

template <typename TileT, typename T, int N, typename S>
inline void store_tile_scaled(CoreCtx& ctx, int line, int relu_pre_mode, int order, int atomic, int phase,
                              const GmTensor<T, N>& dst, const TileT& src, Idx<N> tile_idx, S scale) {
  store_tile(ctx, line, relu_pre_mode, detail::ScaleBits(scale), order, atomic, phase, dst, src, tile_idx);
}

// store(..., scale=<Scaling tile>): the fixpipe's per-channel path. Column c of the window is
// multiplied by the fp32 factor in the low 32 bits of the tile's element c (the rest must be 0), then
// converted like a scaled store.
namespace detail {

// The fp32 factors of the first `cols` elements of a per-channel Scaling tile (the low 32 bits of
// each int64; the rest must be 0).
template <typename TS>
inline void PerChannelFactors(CoreCtx& ctx, int line, const char* op, const TS& scaling, int64_t cols,
                              float* factors) {
  if (__builtin_expect(cols > scaling.valid_cols, 0)) {
    Fault(ctx, line, op, "the per-channel Scaling tile has fewer factors than the window has columns");
  }
  for (int64_t c = 0; c < cols; ++c) {
    const uint64_t word = uint64_t(scaling.data[c]);
    if (__builtin_expect(word >> 32, 0)) {
      Fault(ctx, line, op, "a per-channel factor has bits above its low 32 set (offset and sign fields of the "
                           "quantisation word are not implemented)");
    }
    factors[c] = BitsFloat(uint32_t(word));
  }
}

template <typename TileT, typename T, int N, typename TS>
inline void StorePerChannel(CoreCtx& ctx, int line, const char* op, T* to, const GmTensor<T, N>& dst, const TileT& src,
                            Axes axes, const TS& scaling, bool atomic) {
  const int64_t rows = src.valid_rows, cols = src.valid_cols;
  float factors[TS::kCols];
  PerChannelFactors(ctx, line, op, scaling, cols, factors);
  const int64_t row_step = axes.rows >= 0 ? dst.stride[axes.rows] : 0, col_step = dst.stride[axes.cols];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const T out = FixpipeElem<T>(src.data[r * TileT::kCols + c], Fixpipe{false, true, factors[c]});
      T* at = to + r * row_step + c * col_step;
      if (atomic) {
        AtomicAdd(at, out);
      } else {
        *at = out;
      }
    }
  }
}

}  // namespace detail

template <typename TileT, typename T, int N, typename TS>
inline void store_fp(CoreCtx& ctx, int line, int /*relu_pre_mode: excluded*/, int order, int atomic,
                     int /*phase: excluded*/, const GmTensor<T, N>& dst, const TileT& src, Idx<N> offsets,
                     const TS& scaling) {
  const detail::Axes axes = detail::DecodeOrder<N>(order);
  T* to = detail::CheckedWindow(ctx, line, "store", src, dst, offsets, axes);
  detail::StorePerChannel(ctx, line, "store", to, dst, src, axes, scaling, atomic == 1);
}

template <typename TileT, typename T, int N, typename TS>
inline void store_tile_fp(CoreCtx& ctx, int line, int /*relu_pre_mode: excluded*/, int order, int atomic,
                          int /*phase: excluded*/, const GmTensor<T, N>& dst, const TileT& src, Idx<N> tile_idx,
                          const TS& scaling) {
  const detail::Axes axes = detail::DecodeOrder<N>(order);
  Idx<N> offsets = detail::TileOffsets<TileT>(tile_idx, axes);
  T* to = detail::CheckedWindow(ctx, line, "store_tile", src, dst, offsets, axes);
  detail::StorePerChannel(ctx, line, "store_tile", to, dst, src, axes, scaling, atomic == 1);
}

}  // namespace pto

namespace pto {

// pl.init_output(tensor, offset=, size=, value=): elements [offset, offset + size) of a GM tensor,
// counted row-major over its shape, set to `value` (converted to the element type). On the NPU the
// value is expanded into a UB buffer (pipe V) and stored (MTE3); here the elements are written
// directly. A region outside the tensor, or outside its launch buffer, is a fault and writes nothing.
template <typename T, int N, typename O, typename S, typename V>
inline void init_output(CoreCtx& ctx, int line, const GmTensor<T, N>& tensor, O offset_value, S size_value,
                        V value) {
  const int64_t offset = int64_t(offset_value), size = int64_t(size_value), count = detail::Elements(tensor);
  if (__builtin_expect(offset < 0 || size <= 0 || offset > count || size > count - offset, 0)) {
    PtoFaultDetail d{};
    d.op = "init_output";
    d.message = size <= 0 ? "size must be positive" : "the region [offset, offset + size) leaves the tensor";
    d.tensor = tensor.name;
    d.rank = 1;
    d.offsets[0] = offset;
    d.extent[0] = size;
    d.shape[0] = count;
    Fault(ctx, line, d);
  }
  const T fill = detail::ToElement<T>(value);
  if (tensor.contiguous) {
    int64_t first[N] = {}, extent[N];
    for (int k = 0; k < N; ++k) extent[k] = 1;
    first[N - 1] = offset;
    extent[N - 1] = size;  // contiguous: the run's elements follow each other in the buffer
    detail::CheckBuffer(ctx, line, "init_output", tensor, first, extent);
    T* at = tensor.data + offset;
    for (int64_t i = 0; i < size; ++i) at[i] = fill;
    return;
  }
  for (int64_t i = 0; i < size; ++i) detail::GmElement(ctx, line, "init_output", tensor, offset + i);  // all first
  for (int64_t i = 0; i < size; ++i) *detail::GmElement(ctx, line, "init_output", tensor, offset + i) = fill;
}

template <typename T, int N, typename O, typename S, typename V>
inline void init_output(CoreCtx& ctx, int line, GmTensor<T, N>& tensor, O offset, S size, V value) {
  init_output(ctx, line, static_cast<const GmTensor<T, N>&>(tensor), offset, size, value);
}

}  // namespace pto
