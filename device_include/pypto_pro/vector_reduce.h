// Reductions over the source's valid window: each row to one value of an [R, 1] tile (row_*,
// argmax/argmin with dim=0), or each column to one value of a [1, C] tile (col_*, dim=1).
//
// Sums of fp16/bf16/fp32 accumulate in fp32 and round once (the hardware's accumulation order is
// not public; one rounding matches torch's CPU reductions); integer sums wrap modulo 2^bits. An
// empty window leaves `out` unchanged. The `tmp` tiles of the public signatures are never used.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

// lanes[i] + lanes[i + width] for width 8, 4, 2, 1: ReduceLanes' order, on halves of the vector
// instead of a scalar loop over memory (a row sum's reduction cost more than its loop).
inline float SumLanes(f32x16 v) {
  typedef float f32x8 __attribute__((vector_size(32)));
  typedef float f32x4 __attribute__((vector_size(16)));
  const f32x8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const f32x4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  const float s0 = s4[0] + s4[2], s1 = s4[1] + s4[3];
  return s0 + s1;
}

template <typename F>
inline float ReduceLanes(f32x16 v, F f) {
  float lanes[16];
  __builtin_memcpy(lanes, &v, sizeof lanes);
  for (int width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) lanes[i] = f(lanes[i], lanes[i + width]);
  }
  return lanes[0];
}

// The sum of n elements, in fp32 for float-like T (16 lanes), else modulo 2^64.
template <typename T>
inline auto SumRun(const T* p, int64_t n) {
  if constexpr (kIsFloatLike<T>) {
    // Four independent accumulators: one would make the loop wait on the add latency.
    f32x16 a0{}, a1{}, a2{}, a3{};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      a0 += Load16(p + i);
      a1 += Load16(p + i + 16);
      a2 += Load16(p + i + 32);
      a3 += Load16(p + i + 48);
    }
    for (; i + 16 <= n; i += 16) a0 += Load16(p + i);
    if (i < n) a1 += LoadTail16(p + i, n - i);
    f32x16 total = (a0 + a1) + (a2 + a3);
    return SumLanes(total);
  } else {
    uint64_t acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += uint64_t(p[i]);
    return acc;
  }
}

// max (F = MaxF) or min (MinF) of n > 0 elements, exact.
template <typename F, typename T>
inline T ExtremeRun(const T* p, int64_t n) {
  if constexpr (kIsFloatLike<T>) {
    f32x16 acc = Splat(ToFloat(p[0]));
    f32x16 a1 = acc, a2 = acc, a3 = acc;  // independent chains, as in SumRun
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      acc = F{}(acc, Load16(p + i));
      a1 = F{}(a1, Load16(p + i + 16));
      a2 = F{}(a2, Load16(p + i + 32));
      a3 = F{}(a3, Load16(p + i + 48));
    }
    acc = F{}(F{}(acc, a1), F{}(a2, a3));
    for (; i + 16 <= n; i += 16) acc = F{}(acc, Load16(p + i));
    if (i < n) {
      Lanes<T> tail;
      for (T& v : tail.v) v = p[0];  // padding that cannot change the result
      CopyTail(tail.v, p + i, n - i);
      acc = F{}(acc, Load16(tail.v));
    }
    return FromFloat<T>(ReduceLanes(acc, [](float a, float b) { return F{}(a, b); }));
  } else {
    T acc = p[0];
    for (int64_t i = 1; i < n; ++i) acc = F{}(acc, p[i]);
    return acc;
  }
}

template <typename TO, typename TS, typename RowFn>
inline void ForEachRow(TO& out, const TS& src, RowFn row_fn) {
  const int64_t rows = src.valid_rows, cols = src.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  for (int64_t r = 0; r < rows; ++r) out.data[r * TO::kCols] = row_fn(src.data + r * TS::kCols, cols);
}

// Column sums of float-like tiles: fp32 accumulators for 256 columns at a time (`src_cols`: the
// source tile's columns).
template <typename T>
inline void ColumnSumsFloat(T* out, const T* src, int64_t src_cols, int64_t rows, int64_t cols) {
  constexpr int64_t kChunk = 256;
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t n = cols - c0 < kChunk ? cols - c0 : kChunk;
    f32x16 acc[kChunk / 16] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = src + r * src_cols + c0;
      int64_t j = 0;
      for (; j + 16 <= n; j += 16) acc[j / 16] += Load16(row + j);
      if (j < n) acc[j / 16] += LoadTail16(row + j, n - j);
    }
    for (int64_t j = 0; j < n; j += 16) {
      T rounded[16];
      Store16(rounded, acc[j / 16]);
      __builtin_memcpy(out + c0 + j, rounded, size_t(n - j < 16 ? n - j : 16) * sizeof(T));
    }
  }
}

// out[c] = F(out[c], row[c]) over the rows, starting from row 0.
template <typename F, typename T>
inline void ColumnFold(T* out, const T* src, int64_t src_cols, int64_t rows, int64_t cols) {
  __builtin_memmove(out, src, size_t(cols) * sizeof(T));
  for (int64_t r = 1; r < rows; ++r) Map(out, cols, F{}, out, src + r * src_cols);
}

// out[c] = F over column c of the rows x cols window of a tile of `src_cols` columns.
template <typename F, typename T>
inline void ColumnReduceBody(T* out, const T* src, int64_t src_cols, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if constexpr (__is_same(F, AddF) && kIsFloatLike<T>) ColumnSumsFloat(out, src, src_cols, rows, cols);
  else ColumnFold<F>(out, src, src_cols, rows, cols);
}

template <typename F, typename TO, typename TS>
inline void ColumnReduce(TO& out, const TS& src) {
  static_assert(__is_same(typename TO::Elem, typename TS::Elem), "column reductions keep the dtype");
  ColumnReduceBody<F>(out.data, src.data, TS::kCols, src.valid_rows, src.valid_cols);
}

// Index of the first greatest (F = GtF-like `better`) element of each row of the rows x cols window
// of a tile of `src_cols` columns, into column 0 of a tile of `out_cols` columns.
template <typename Better, typename I, typename T>
inline void RowArgExtremeBody(I* out, int64_t out_cols, const T* src, int64_t src_cols, int64_t rows, int64_t cols,
                              Better better) {
  if (rows <= 0 || cols <= 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * src_cols;
    auto best = Exact(row[0]);
    int64_t index = 0;
    for (int64_t c = 1; c < cols; ++c) {
      auto v = Exact(row[c]);
      if (better(v, best)) {
        best = v;
        index = c;
      }
    }
    out[r * out_cols] = I(index);
  }
}

template <typename Better, typename TO, typename TS>
inline void RowArgExtreme(TO& out, const TS& src, Better better) {
  RowArgExtremeBody(out.data, TO::kCols, src.data, TS::kCols, src.valid_rows, src.valid_cols, better);
}

// Row index of the first greatest element of each column, 256 columns at a time.
template <typename Better, typename I, typename T>
inline void ColArgExtremeBody(I* out, const T* src, int64_t src_cols, int64_t rows, int64_t cols, Better better) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int64_t kChunk = 256;
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t n = cols - c0 < kChunk ? cols - c0 : kChunk;
    decltype(Exact(T{})) best[kChunk];
    I index[kChunk];
    for (int64_t j = 0; j < n; ++j) {
      best[j] = Exact(src[c0 + j]);
      index[j] = 0;
    }
    for (int64_t r = 1; r < rows; ++r) {
      const T* row = src + r * src_cols + c0;
      for (int64_t j = 0; j < n; ++j) {
        auto v = Exact(row[j]);
        bool take = better(v, best[j]);
        best[j] = take ? v : best[j];
        index[j] = take ? I(r) : index[j];
      }
    }
    __builtin_memcpy(out + c0, index, size_t(n) * sizeof(I));
  }
}

template <typename Better, typename TO, typename TS>
inline void ColArgExtreme(TO& out, const TS& src, Better better) {
  ColArgExtremeBody(out.data, src.data, TS::kCols, src.valid_rows, src.valid_cols, better);
}

struct Greater { template <typename V> bool operator()(V a, V b) const { return a > b; } };
struct Less { template <typename V> bool operator()(V a, V b) const { return a < b; } };

}  // namespace detail

namespace detail {

// A row sum, rounded to the element type.
struct __attribute__((visibility("default"))) RowSumOf {
  template <typename T>
  T operator()(const T* row, int64_t n) const {
    if constexpr (kIsFloatLike<T>) return FromFloat<T>(SumRun(row, n));
    else return T(SumRun(row, n));
  }
};
template <typename F>
struct __attribute__((visibility("default"))) RowExtremeOf {
  template <typename T>
  T operator()(const T* row, int64_t n) const { return ExtremeRun<F>(row, n); }
};

// out[r] = fold(row r of src) for the rows x cols window; `out_cols` / `src_cols`: the tiles' columns.
template <typename Fold, typename EO, typename ES>
inline void RowReduceBody(EO* out, int64_t out_cols, const ES* src, int64_t src_cols, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  for (int64_t r = 0; r < rows; ++r) out[r * out_cols] = Fold{}(src + r * src_cols, cols);
}

// Tiles of one element type use the routines library (routines/*.cpp).
template <typename Fold, typename T>
__attribute__((visibility("default"))) void RowReduceRoutine(T* out, int64_t out_cols, const T* src, int64_t src_cols,
                                                             int64_t rows, int64_t cols);

template <typename Fold, typename TO, typename TS>
inline void RowReduce(TO& out, const TS& src) {
  using T = typename TS::Elem;
  if constexpr (kExternRoutines && __is_same(typename TO::Elem, T) && kRoutineElem<T>) {
    RowReduceRoutine<Fold, T>(out.data, TO::kCols, src.data, TS::kCols, src.valid_rows, src.valid_cols);
  } else {
    RowReduceBody<Fold>(out.data, TO::kCols, src.data, TS::kCols, src.valid_rows, src.valid_cols);
  }
}

}  // namespace detail

template <typename TO, typename TS, typename TT>
inline void row_sum(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::RowReduce<detail::RowSumOf>(out, src);
}

template <typename TO, typename TS, typename TT>
inline void row_max(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::RowReduce<detail::RowExtremeOf<detail::MaxF>>(out, src);
}

template <typename TO, typename TS, typename TT>
inline void row_min(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::RowReduce<detail::RowExtremeOf<detail::MinF>>(out, src);
}

template <typename TO, typename TS, typename TT>
inline void col_sum(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::ColumnReduce<detail::AddF>(out, src);
}

template <typename TO, typename TS, typename TT>
inline void col_max(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::ColumnReduce<detail::MaxF>(out, src);
}

template <typename TO, typename TS, typename TT>
inline void col_min(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::ColumnReduce<detail::MinF>(out, src);
}

// argmax / argmin: the index of the first extreme element (like torch and numpy).
template <typename TO, typename TS, typename TT>
inline void argmax(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::RowArgExtreme(out, src, detail::Greater{});
}

template <typename TO, typename TS, typename TT>
inline void argmin(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::RowArgExtreme(out, src, detail::Less{});
}

template <typename TO, typename TS, typename TT>
inline void col_argmax(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::ColArgExtreme(out, src, detail::Greater{});
}

template <typename TO, typename TS, typename TT>
inline void col_argmin(CoreCtx&, int, TO& out, const TS& src, TT&) {
  detail::ColArgExtreme(out, src, detail::Less{});
}

}  // namespace pto
