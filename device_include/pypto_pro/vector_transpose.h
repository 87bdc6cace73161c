// pl.transpose: out[j, i] = src[i, j] over src's valid window (out's own window is neither consulted
// nor changed, as for a transposing move). out and src must not overlap (public page).
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

// The body on pointers and tile widths: the compiled kernel and the tier-0 executor share it.
template <typename T>
inline void TransposeBody(CoreCtx& ctx, int line, T* dst, int64_t dst_cols, const T* src, int64_t src_cols,
                          int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if (WindowsOverlapAt(src, src_cols, rows, cols, dst, dst_cols, cols, rows)) {
    Fault(ctx, line, "transpose", "'out' overlaps 'src'; transpose into another tile");
  }
  Transpose2D(dst, dst_cols, src, src_cols, rows, cols);
}

}  // namespace detail

template <typename TD, typename TS>
inline void transpose(CoreCtx& ctx, int line, TD& dst, const TS& src) {
  static_assert(__is_same(typename TD::Elem, typename TS::Elem), "transpose keeps the dtype");
  detail::TransposeBody(ctx, line, dst.data, TD::kCols, src.data, TS::kCols, src.valid_rows, src.valid_cols);
}

}  // namespace pto
