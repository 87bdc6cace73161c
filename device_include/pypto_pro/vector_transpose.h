// pl.transpose: out[j, i] = src[i, j] over src's valid window (out's own window is neither consulted
// nor changed, as for a transposing move). out and src must not overlap (public page).
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

template <typename TD, typename TS>
inline void transpose(CoreCtx& ctx, int line, TD& dst, const TS& src) {
  using T = typename TD::Elem;
  static_assert(__is_same(T, typename TS::Elem), "transpose keeps the dtype");
  const int64_t rows = src.valid_rows, cols = src.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  if (detail::WindowsOverlap(src, rows, cols, dst, cols, rows)) {
    Fault(ctx, line, "transpose", "'out' overlaps 'src'; transpose into another tile");
  }
  // 16 x 16 blocks: the rows of a block stay in cache while its columns are written.
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = r0 + kBlock < rows ? r0 + kBlock : rows;
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = c0 + kBlock < cols ? c0 + kBlock : cols;
      for (int64_t c = c0; c < c1; ++c) {
        T* d = dst.data + c * TD::kCols;
        const T* s = src.data + c;
        for (int64_t r = r0; r < r1; ++r) d[r] = s[r * TS::kCols];
      }
    }
  }
}

}  // namespace pto
