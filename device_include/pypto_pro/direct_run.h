// Direct runs (docs/device.md#direct-runs; fused ops, at the end, are their local-memory kin): the
// loads, element-wise ops and stores of a run the fuse_direct pass found, computed in one pass over
// the window from GM through registers to GM.
// Generated code checks every GM window first, in program order (direct_load / direct_store: the
// faults of load / store, at the same lines; the stores after the first, which op by op would fault
// only after the stores before them wrote GM, without faulting: direct_store_after), then, when every
// window passed and no store window shares a byte with another window of the run, calls DirectRows with
// the ops' element-wise body; otherwise it runs the statements op by op as written.
#pragma once

#include "pypto_pro/data_movement.h"
#include "pypto_pro/vector_cast.h"
#include "pypto_pro/vector_ops.h"
#include "pypto_pro/vector_reduce.h"

namespace pto {

// A window a direct run reads or writes: its first element, its row stride in elements, whether its
// columns lie together, and (GM outputs) whether it is written with non-temporal stores.
template <typename T>
struct DirectWindow {
  T* at;
  int64_t row_stride;
  bool contiguous;
  bool stream;
};

namespace detail {

// The row stride of a window along the tensor's last two axes; a 1-D tensor's windows are one row
// (its length: no second row to reach).
template <typename T, int N>
inline int64_t RowStride(const GmTensor<T, N>& gm) {
  if constexpr (N >= 2) return gm.stride[N - 2];
  else return gm.shape[0];
}

// The window of `cols` columns of `gm` from `at`, written around the caches as StoreWindowOf does.
template <typename T, int N>
inline DirectWindow<T> WindowAt(const GmTensor<T, N>& gm, T* at, int64_t cols) {
  return {at, RowStride(gm), gm.stride[N - 1] == 1, StreamsStores(gm, cols)};
}

template <typename TileT, typename T, int N>
inline DirectWindow<T> DirectGm(CoreCtx& ctx, int line, const char* op, bool tile_units, const TileT& tile,
                                const GmTensor<T, N>& gm, Idx<N> index) {
  const Axes axes = DecodeOrder<N>(-1);
  const Idx<N> offsets = tile_units ? TileOffsets<TileT>(index, axes) : index;
  return WindowAt(gm, CheckedWindow(ctx, line, op, tile, gm, offsets, axes), tile.valid_cols);
}

// Whether two rows x cols windows share bytes without being the same window (the same first
// element, row stride and element type).
template <typename A, typename B>
inline bool WindowsPartlyShared(const DirectWindow<A>& a, const DirectWindow<B>& b, int64_t rows, int64_t cols) {
  if constexpr (__is_same(A, B)) {
    if (a.at == b.at && a.row_stride == b.row_stride) return false;
  }
  const uintptr_t a0 = uintptr_t(a.at), b0 = uintptr_t(b.at);
  const uintptr_t a1 = a0 + uintptr_t(((rows - 1) * a.row_stride + cols) * int64_t(sizeof(A)));
  const uintptr_t b1 = b0 + uintptr_t(((rows - 1) * b.row_stride + cols) * int64_t(sizeof(B)));
  return a0 < b1 && b0 < a1;
}

// 16 lanes to an output: around the caches where asked and the address allows.
template <typename T>
__attribute__((always_inline)) inline void Put16(T* p, f32x16 v, bool stream) {
#if defined(__AVX512F__)
  if (stream) {
    if constexpr (__is_same(T, float)) {
      if ((uintptr_t(p) & 63) == 0) {
        StreamStore(p, v);
        return;
      }
    } else {
      if ((uintptr_t(p) & 31) == 0) {
        T narrow[16];
        Store16(narrow, v);
        i16x16 raw;
        __builtin_memcpy(&raw, narrow, sizeof raw);
        StreamStore(p, raw);
        return;
      }
    }
  }
#endif
  (void)stream;
  Store16(p, v);
}

// 32 narrow (fp16 / bf16) elements, two groups of 16 lanes, to an output: one 64-byte store around
// the caches where asked and the address allows (two 32-byte ones measured 4% slower on an fp16 add).
template <typename T>
__attribute__((always_inline)) inline void Put32(T* p, f32x16 lo, f32x16 hi, bool stream) {
#if defined(__AVX512F__)
  if (stream && (uintptr_t(p) & 63) == 0) {
    T narrow[32];
    Store16(narrow, lo);
    Store16(narrow + 16, hi);
    i16x16 a, b;
    __builtin_memcpy(&a, narrow, sizeof a);
    __builtin_memcpy(&b, narrow + 16, sizeof b);
    const auto line = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                              19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    StreamStore(p, line);
    return;
  }
#endif
  Put16(p, lo, stream);
  Put16(p + 16, hi, stream);
}

}  // namespace detail

// The checks of load / load_tile / store / store_tile (the same faults with the same messages), and
// the window the run then reads or writes directly.
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_load(CoreCtx& ctx, int line, const TileT& tile, const GmTensor<T, N>& src,
                                   Idx<N> offsets) {
  return detail::DirectGm(ctx, line, "load", false, tile, src, offsets);
}
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_load_tile(CoreCtx& ctx, int line, const TileT& tile, const GmTensor<T, N>& src,
                                        Idx<N> tile_idx) {
  return detail::DirectGm(ctx, line, "load_tile", true, tile, src, tile_idx);
}
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_store(CoreCtx& ctx, int line, const GmTensor<T, N>& dst, const TileT& tile,
                                    Idx<N> offsets) {
  return detail::DirectGm(ctx, line, "store", false, tile, dst, offsets);
}
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_store_tile(CoreCtx& ctx, int line, const GmTensor<T, N>& dst, const TileT& tile,
                                         Idx<N> tile_idx) {
  return detail::DirectGm(ctx, line, "store_tile", true, tile, dst, tile_idx);
}

// The window of a store after the run's first (store / store_tile): checked without faulting, `at`
// null where the store would fault. Op by op the stores before it write GM first, so the run then goes
// as written and faults at that store with GM as op by op leaves it.
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_store_after(const GmTensor<T, N>& dst, const TileT& tile, Idx<N> offsets) {
  const detail::Axes axes = detail::DecodeOrder<N>(-1);
  if (!detail::WindowPasses(tile.valid_rows, tile.valid_cols, TileT::kRows, TileT::kCols, dst, offsets, axes)) {
    return {nullptr, 0, false, false};
  }
  return detail::WindowAt(dst, detail::ElementAt(dst, offsets.v), tile.valid_cols);
}
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_store_tile_after(const GmTensor<T, N>& dst, const TileT& tile, Idx<N> tile_idx) {
  return direct_store_after(dst, tile, detail::TileOffsets<TileT>(tile_idx, detail::DecodeOrder<N>(-1)));
}

// A direct loop's window of one load / store (`tile_units`: load_tile / store_tile) (docs/device.md#
// direct-loops): the windows of its iterations side by side, rows x cols from the first iteration's
// offsets `first` (`tile` gives the tile type). `at` is null when the window leaves the tensor's shape
// or buffer, which is when some iteration's window would fault: the loop then runs as written and
// faults there.
template <typename TileT, typename T, int N>
inline DirectWindow<T> direct_loop_window(const TileT&, const GmTensor<T, N>& gm, bool tile_units, Idx<N> first,
                                          int64_t rows, int64_t cols) {
  const detail::Axes axes = detail::DecodeOrder<N>(-1);
  const Idx<N> off = tile_units ? detail::TileOffsets<TileT>(first, axes) : first;
  int64_t extent[N];
  bool inside = rows >= 0 && cols >= 0;
  for (int i = 0; i < N; ++i) {
    extent[i] = detail::WindowExtent<N>(axes, i, rows, cols);
    inside = inside && off.v[i] >= 0 && off.v[i] <= gm.shape[i] - extent[i];
  }
  int64_t begin, end;
  bool overflow;
  if (!inside || !detail::InBuffer(gm, off.v, extent, begin, end, overflow)) return {nullptr, 0, false, false};
  return detail::WindowAt(gm, detail::ElementAt(gm, off.v), cols);
}

// A tile the run reads or writes in local memory (the whole tile: direct runs take full windows).
template <typename TileT>
inline DirectWindow<typename TileT::Elem> DirectTile(TileT& tile) {
  return {tile.data, TileT::kCols, true, false};
}

// Whether the run may go directly: every window's columns lie together, and no output shares a byte
// with an input or another output unless it is the very same window (then each element's operands
// are read before anything the run writes could change them, and the last store of an element wins,
// as op by op).
template <typename TI, typename TO, int NI, int NO>
inline bool DirectDisjoint(int64_t rows, int64_t cols, const DirectWindow<TI> (&in)[NI],
                           const DirectWindow<TO> (&out)[NO]) {
  for (int j = 0; j < NO; ++j) {
    if (!out[j].contiguous || out[j].row_stride < cols) return false;
    for (int i = 0; i < NI; ++i) {
      if (!in[i].contiguous || detail::WindowsPartlyShared(out[j], in[i], rows, cols)) return false;
    }
    for (int k = 0; k < j; ++k) {
      if (detail::WindowsPartlyShared(out[j], out[k], rows, cols)) return false;
    }
  }
  return true;
}

// How far a direct run reads ahead: every 64 bytes an input walks, it prefetches the line kAheadLines
// further along its walk into L1 (the rows of the window, then the first rows of the next window along
// the row, which a tile loop reads next): rows of a few lines at a tensor's row stride defeat the CPU's stream prefetchers, and a
// prefetch distance in lines, not rows, keeps long rows (direct loops) from flooding the line fill
// buffers. 32 lines: measured best for 256 B to 8 KiB rows (fp16 and fp32 adds, Intel Xeon).
constexpr int64_t kAheadLines = 32;

namespace detail {

// The prefetch cursor of a direct run: row `row` of the window (past its end: of the next window),
// byte `col`. One prefetch per 64 bytes the inputs walk, issued by the loops (a counter costs 4% on
// an fp16 add).
template <typename TI, int NI>
struct AheadCursor {
  const DirectWindow<TI> (&in)[NI];
  int64_t rows, bytes, row, col;
  AheadCursor(const DirectWindow<TI> (&windows)[NI], int64_t rows_, int64_t cols)
      : in(windows), rows(rows_), bytes(cols * int64_t(sizeof(TI))) {
    row = bytes > 0 ? kAheadLines * 64 / bytes : 0;
    col = bytes > 0 ? kAheadLines * 64 % bytes : 0;
  }
  __attribute__((always_inline)) void Next() {
    const bool next = row >= rows;
    const int64_t r = next ? row - rows : row, c = next ? col + bytes : col;
    for (int i = 0; i < NI; ++i) __builtin_prefetch(reinterpret_cast<const char*>(in[i].at + r * in[i].row_stride) + c, 0, 3);
    col += 64;
    if (col >= bytes) col = 0, ++row;
  }
};

#if defined(__AVX512FP16__)
// fp16 runs whose ops the host computes natively (avx512_fp16; kHalfLanesExact), 32 lanes at a time:
// an fp16 add 3-4 points nearer the memory limit than through fp32 lanes (Intel Xeon), same bits.
template <int NI, int NO, typename Body>
__attribute__((always_inline)) inline void DirectRowsHalf(int64_t rows, int64_t cols, const DirectWindow<half> (&in)[NI],
                                                          const DirectWindow<half> (&out)[NO], Body body) {
  AheadCursor<half, NI> ahead(in, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const half* src[NI];
    half* dst[NO];
    for (int i = 0; i < NI; ++i) src[i] = in[i].at + r * in[i].row_stride;
    for (int j = 0; j < NO; ++j) dst[j] = out[j].at + r * out[j].row_stride;
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
      ahead.Next();
      h32 v[NI], o[NO];
      for (int i = 0; i < NI; ++i) v[i] = LoadHalves(src[i] + c);
      body(v, o);
      for (int j = 0; j < NO; ++j) {
        if (out[j].stream && (uintptr_t(dst[j] + c) & 63) == 0) {
          StreamStore(dst[j] + c, o[j]);
        } else {
          __builtin_memcpy(dst[j] + c, &o[j], 64);
        }
      }
    }
    if (c < cols) {  // the last columns: zero-padded lanes, only the window's stored
      ahead.Next();
      const size_t bytes = size_t(cols - c) * sizeof(half);
      h32 v[NI], o[NO];
      for (int i = 0; i < NI; ++i) v[i] = LoadHalves(src[i] + c, bytes);
      body(v, o);
      for (int j = 0; j < NO; ++j) __builtin_memcpy(dst[j] + c, &o[j], bytes);
    }
  }
}
#endif

}  // namespace detail

// The run itself: for every row of the rows x cols window and every 16 columns, the inputs as fp32
// lanes, `body(in, out)` (the ops, each result rounded to T), the outputs stored. Columns past a
// multiple of 16 go through zero-padded lanes, as the tile ops' tails do; fp16 / bf16 go 32 at a time.
// kNativeHalf (generated code: an fp16 run of ops DirectRowsHalf gives the bits of, and a body taking
// any lanes): on a host with avx512_fp16, DirectRowsHalf.
template <bool kNativeHalf = false, typename TI, typename TO, int NI, int NO, typename Body>
__attribute__((always_inline)) inline void DirectRows(int64_t rows, int64_t cols, const DirectWindow<TI> (&in)[NI],
                                                      const DirectWindow<TO> (&out)[NO], Body body) {
  static_assert(kIsFloatLike<TI> && kIsFloatLike<TO>, "direct runs compute on float-like elements");
#if defined(__AVX512FP16__)
  if constexpr (kNativeHalf && __is_same(TI, half) && __is_same(TO, half)) {
    return detail::DirectRowsHalf(rows, cols, in, out, body);
  }
#endif
  detail::AheadCursor<TI, NI> ahead(in, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const TI* src[NI];
    TO* dst[NO];
    for (int i = 0; i < NI; ++i) src[i] = in[i].at + r * in[i].row_stride;
    for (int j = 0; j < NO; ++j) dst[j] = out[j].at + r * out[j].row_stride;
    int64_t c = 0;
    if constexpr (kIsNarrowFloat<TO>) {  // 32 at a time: whole 64-byte lines to the outputs
      for (; c + 32 <= cols; c += 32) {
        ahead.Next();
        if constexpr (sizeof(TI) == 4) ahead.Next();  // 128 bytes of fp32 inputs
        f32x16 v[NI], o[NO], v2[NI], o2[NO];
        for (int i = 0; i < NI; ++i) v[i] = Load16(src[i] + c), v2[i] = Load16(src[i] + c + 16);
        body(v, o);
        body(v2, o2);
        for (int j = 0; j < NO; ++j) detail::Put32(dst[j] + c, o[j], o2[j], out[j].stream);
      }
    }
    for (; c + 16 <= cols; c += 16) {
      if (sizeof(TI) == 4 || (c & 16) == 0) ahead.Next();  // 64 bytes of fp32, or of fp16 every other step
      f32x16 v[NI], o[NO];
      for (int i = 0; i < NI; ++i) v[i] = Load16(src[i] + c);
      body(v, o);
      for (int j = 0; j < NO; ++j) detail::Put16(dst[j] + c, o[j], out[j].stream);
    }
    if (c < cols) {
      ahead.Next();
      const int64_t n = cols - c;
      f32x16 v[NI], o[NO];
      for (int i = 0; i < NI; ++i) v[i] = LoadTail16(src[i] + c, n);
      body(v, o);
      for (int j = 0; j < NO; ++j) {
        TO tail[16];
        Store16(tail, o[j]);
        detail::CopyTail(dst[j] + c, tail, n);
      }
    }
  }
}

// A scalar operand of a direct run's op (ScalarAs: fp32 lanes of the value rounded to the element
// type) on the lanes of the op's tile operand v.
__attribute__((always_inline)) inline f32x16 LanesLike(f32x16, f32x16 s) { return s; }

#if defined(__AVX512FP16__)
__attribute__((always_inline)) inline h32 LanesLike(h32, f32x16 s) {
  return h32{} + _Float16(s[0]);  // exact: s is an fp16 value
}

// fp16 lanes hold every result as fp16 already.
template <typename T>
__attribute__((always_inline)) inline h32 RoundTo(h32 v) {
  static_assert(__is_same(T, half), "native lanes are fp16's");
  return v;
}

#endif

// One op of a direct run's body: f on the lanes, rounded to the element type as the tile holds it
// (DirectOp: a later op reads it) or left to the output's store to round (DirectOpStored: only
// outputs take it; one rounding gives the same bits).
template <typename T, typename F, typename... V>
__attribute__((always_inline)) inline auto DirectOp(F f, V... v) {
  return RoundTo<T>(f(v...));
}
template <typename T, typename F, typename... V>
__attribute__((always_inline)) inline auto DirectOpStored(F f, V... v) {
  if constexpr (__is_same(T, float)) return RoundTo<T>(f(v...));  // keeps fp32 ops unfused (no FMA)
  else return f(v...);
}

// row_expand_div in a fused pass: a / b (b: a row's divisor in every lane, y: 1 / b rounded) as the
// op divides, by the reciprocal where the divisor allows it (vector_math.h, DivByReciprocal16: the
// division's bits).
template <typename T>
__attribute__((always_inline)) inline f32x16 FusedColumnDiv(f32x16 a, f32x16 b, [[maybe_unused]] f32x16 y) {
#if PTO_RECIPROCAL_DIVISION
  if (DividesByReciprocal(b[0])) return RoundTo<T>(DivByReciprocal16(a, b, y));
#endif
  return DirectOp<T>(detail::DivF{}, a, b);
}

// A pl.cast in a direct run: the lanes rounded to TD by mode M as pl.cast rounds (a narrower float's
// value is exact in the lanes; fp32 -> fp32 leaves them as they are).
template <typename TD, RoundMode M>
__attribute__((always_inline)) inline f32x16 DirectCast(f32x16 v) {
  if constexpr (__is_same(TD, float)) {
    return v;
  } else {
    TD rounded[16];
    detail::StoreRounded16<TD, M>(rounded, v);
    return Load16(rounded);
  }
}

// ---- Fused ops (docs/device.md#fused-ops) ----
// Consecutive element-wise and broadcast ops the fuse_ops pass found, over one window of local
// memory, in one pass: the generated code checks that every op's destination has the same valid
// window and that no tile an op writes shares a byte with another tile of the run (else it runs the
// ops as written), then calls FusedRows with the ops' element-wise body.

// An operand of fused ops: a tile's first element and row stride (in elements).
template <typename T>
struct FusedOperand {
  T* at;
  int64_t stride;
};
template <typename TileT>
inline FusedOperand<typename TileT::Elem> FusedTile(TileT& tile) {
  return {tile.data, TileT::kCols};
}

// The bytes an operand covers: a rows x cols window, a column operand's first `rows` elements down
// its first column (row_expand's [R, 1] tile), a row operand's first `cols` (col_expand's [1, C]).
struct FusedSpan {
  uintptr_t lo, hi;
};
template <typename TileT>
inline FusedSpan FusedWindowSpan(const TileT& tile, int64_t rows, int64_t cols) {
  const int64_t n = rows > 0 && cols > 0 ? (rows - 1) * TileT::kCols + cols : 0;
  return {uintptr_t(tile.data), uintptr_t(tile.data + n)};
}
template <typename TileT>
inline FusedSpan FusedColumnSpan(const TileT& tile, int64_t rows) {
  return FusedWindowSpan(tile, rows, 1);
}
template <typename TileT>
inline FusedSpan FusedRowSpan(const TileT& tile, int64_t cols) {
  return FusedWindowSpan(tile, 1, cols);
}
// Whether two spans share no byte (an empty span never counts as apart: the ops then run as written).
inline bool FusedApart(FusedSpan a, FusedSpan b) {
  return a.lo < a.hi && b.lo < b.hi && (a.hi <= b.lo || b.hi <= a.lo);
}

// For every row of the rows x cols window and every 16 columns: the tile operands' lanes (t), the
// column operands' element of the row as 16 lanes (c: as row_expand reads it) and its reciprocal (rc:
// for FusedColumnDiv), the row operands' lanes (w: as col_expand reads them), `body(t, c, rc, w, out,
// s)` (the ops, each result rounded to T),
// the outputs stored, and the lanes each row_sum of the run reads (s) added up; at the row's end
// each sum goes to its column tile. Columns past a multiple of 16 go through zero-padded lanes, as
// the ops' tails do. The sums add in SumRun's order (vector_reduce.h: four accumulators over 64
// columns at a time, then 16 at a time into the first, the zero-padded tail into the second), so
// each is the bits row_sum gives. GO >= 0: output GO is also written to `gm`'s rows (when gm->at is
// set), the strip store after the pass done in the pass: an fp32 copy of the same bits, its stores
// draining while the pass computes (softmax's division and store: 30% less time together, Intel Xeon).
namespace detail {

// The next strip's rows a fused pass prefetches, a line per 16 lanes computed (PtoCoreCtx::ahead_at;
// hints only), taken from the core and given back (Save) when the pass ends.
struct StripAhead {
  CoreCtx& ctx;
  const char* at;
  int64_t col, rows;
  const int64_t row_bytes, stride;
  explicit StripAhead(CoreCtx& c)
      : ctx(c), at(c.ahead_at), col(c.ahead_col), rows(c.ahead_rows), row_bytes(c.ahead_row_bytes),
        stride(c.ahead_stride) {}
  __attribute__((always_inline)) void Next() {
    if (at == nullptr) return;
    __builtin_prefetch(at + col, 0, 3);
    col += 64;
    if (col >= row_bytes) {
      col = 0;
      at += stride;
      if (--rows <= 0) at = nullptr;
    }
  }
  // Back to the core for its next pass (no destructor: kernels link without the C++ runtime's
  // unwinding support, which a cleanup on every call that may throw would need).
  void Save() {
    ctx.ahead_at = at;
    ctx.ahead_col = col;
    ctx.ahead_rows = rows;
  }
};

#if defined(__AVX512FP16__)
// FusedRows of fp16 element-wise ops kHalfLanesExact names (no broadcasts, no sums), on fp16 lanes
// 32 at a time: the same bits.
template <int NT, int NO, typename Body>
__attribute__((always_inline)) inline void FusedRowsHalf(CoreCtx& ctx, int64_t rows, int64_t cols,
                                                         const FusedOperand<half>* tiles,
                                                         const FusedOperand<half>* outs, Body body) {
  constexpr int kT = NT > 0 ? NT : 1, kO = NO > 0 ? NO : 1;
  StripAhead ahead(ctx);
  h32 none[1] = {};  // the body's column, row and sum lanes: none
  for (int64_t r = 0; r < rows; ++r) {
    const half* src[kT];
    half* dst[kO];
    for (int i = 0; i < NT; ++i) src[i] = tiles[i].at + r * tiles[i].stride;
    for (int j = 0; j < NO; ++j) dst[j] = outs[j].at + r * outs[j].stride;
    int64_t k = 0;
    for (; k + 32 <= cols; k += 32) {
      ahead.Next();
      ahead.Next();
      h32 t[kT], o[kO];
      for (int i = 0; i < NT; ++i) t[i] = LoadHalves(src[i] + k);
      body(t, none, none, none, o, none);
      for (int j = 0; j < NO; ++j) __builtin_memcpy(dst[j] + k, &o[j], 64);
    }
    if (k < cols) {
      const size_t bytes = size_t(cols - k) * sizeof(half);
      h32 t[kT], o[kO];
      for (int i = 0; i < NT; ++i) t[i] = LoadHalves(src[i] + k, bytes);
      body(t, none, none, none, o, none);
      for (int j = 0; j < NO; ++j) __builtin_memcpy(dst[j] + k, &o[j], bytes);
    }
  }
  ahead.Save();
}
#endif

}  // namespace detail

template <typename T, int NT, int NC, int NR, int NO, int NS, int GO, bool kNativeHalf = false, typename Body>
__attribute__((always_inline)) inline void FusedRows(CoreCtx& ctx, int64_t rows, int64_t cols, const FusedOperand<T>* tiles,
                                                     const FusedOperand<T>* columns, const FusedOperand<T>* row_ops,
                                                     const FusedOperand<T>* outs, const FusedOperand<T>* sums,
                                                     const FusedGm<T>* gm, Body body) {
  static_assert(kIsFloatLike<T>, "fused ops compute on float-like elements");
  static_assert(GO < NO && (GO < 0 || __is_same(T, float)), "the pass stores one of its fp32 outputs");
#if defined(__AVX512FP16__)
  if constexpr (kNativeHalf && __is_same(T, half) && NC == 0 && NR == 0 && NS == 0 && GO < 0) {
    return detail::FusedRowsHalf<NT, NO>(ctx, rows, cols, tiles, outs, body);
  }
#endif
  constexpr int kT = NT > 0 ? NT : 1, kC = NC > 0 ? NC : 1, kR = NR > 0 ? NR : 1, kO = NO > 0 ? NO : 1,
                kS = NS > 0 ? NS : 1;
  detail::StripAhead ahead(ctx);
  for (int64_t r = 0; r < rows; ++r) {
    const T* src[kT];
    T* dst[kO];
    f32x16 c[kC], rc[kC], a0[kS] = {}, a1[kS] = {}, a2[kS] = {}, a3[kS] = {};  // SumRun's four accumulators
    for (int i = 0; i < NT; ++i) src[i] = tiles[i].at + r * tiles[i].stride;
    for (int i = 0; i < NC; ++i) {
      c[i] = detail::ScalarAs<T>(detail::Exact(columns[i].at[r * columns[i].stride]));
      rc[i] = Splat(1.0f / c[i][0]);  // (unused unless the body divides by the column)
    }
    for (int j = 0; j < NO; ++j) dst[j] = outs[j].at + r * outs[j].stride;
    T* const gm_row = GO >= 0 && gm->at ? gm->at + r * gm->stride : nullptr;
    const bool stream = gm_row && gm->stream && reinterpret_cast<uintptr_t>(gm_row) % 64 == 0;
    // 16 columns from k: the ops, the outputs stored, the sums' lanes added to `into` (one of a0..a3,
    // named, not indexed: the accumulators stay in registers).
    auto step = [&](int64_t k, f32x16 (&into)[kS]) __attribute__((always_inline)) {
      f32x16 t[kT], w[kR], o[kO], s[kS];
      ahead.Next();
      for (int i = 0; i < NT; ++i) t[i] = Load16(src[i] + k);
      for (int i = 0; i < NR; ++i) w[i] = Load16(row_ops[i].at + k);
      body(t, c, rc, w, o, s);
      for (int j = 0; j < NO; ++j) Store16(dst[j] + k, o[j]);
      if constexpr (GO >= 0) {
        if (stream) StreamStore(gm_row + k, o[GO]);
        else if (gm_row) Store16(gm_row + k, o[GO]);
      }
      for (int i = 0; i < NS; ++i) into[i] += s[i];
    };
    int64_t k = 0;
    if constexpr (NS > 0) {
      for (; k + 64 <= cols; k += 64) {
        step(k, a0);
        step(k + 16, a1);
        step(k + 32, a2);
        step(k + 48, a3);
      }
    }
    for (; k + 16 <= cols; k += 16) step(k, a0);
    if (k < cols) {
      const int64_t n = cols - k;
      f32x16 t[kT], w[kR], o[kO], s[kS];
      for (int i = 0; i < NT; ++i) t[i] = LoadTail16(src[i] + k, n);
      for (int i = 0; i < NR; ++i) w[i] = LoadTail16(row_ops[i].at + k, n);
      body(t, c, rc, w, o, s);
      for (int j = 0; j < NO; ++j) {
        T tail[16];
        Store16(tail, o[j]);
        detail::CopyTail(dst[j] + k, tail, n);
        if (j == GO && gm_row) detail::CopyTail(gm_row + k, tail, n);
      }
      for (int i = 0; i < NS; ++i) a1[i] += ZeroLanesFrom(s[i], n);  // as SumRun's zero-padded tail
    }
    for (int i = 0; i < NS; ++i) {
      sums[i].at[r * sums[i].stride] = FromFloat<T>(detail::SumLanes((a0[i] + a1[i]) + (a2[i] + a3[i])));
    }
  }
  ahead.Save();
}

}  // namespace pto
