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
  detail::Transpose2D(dst.data, TD::kCols, src.data, TS::kCols, rows, cols);
}

}  // namespace pto
