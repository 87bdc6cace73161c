// Broadcast ops over the destination's valid window: row_expand_* combine row r of src with
// element r of an [R, 1] column tile, col_expand_* combine column c with element c of a [1, C] row
// tile (pl.expand_*(dim=0 / dim=1) are the same ops). Integer division by zero is a kernel fault.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

template <typename F, typename TD, typename TS, typename TC>
inline void RowExpand([[maybe_unused]] CoreCtx& ctx, [[maybe_unused]] int line, TD& dst, const TS& src, const TC& col) {
  using T = typename TD::Elem;
  const int64_t rows = dst.valid_rows, cols = dst.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, "row_expand_div", col.data, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const auto v = ScalarAs<T>(Exact(col.data[r * TC::kCols]));
    Map(dst.data + r * TD::kCols, cols, [&](auto x) { return F{}(x, decltype(x)(v)); }, src.data + r * TS::kCols);
  }
}

template <typename F, typename TD, typename TS, typename TR>
inline void ColExpand([[maybe_unused]] CoreCtx& ctx, [[maybe_unused]] int line, TD& dst, const TS& src, const TR& row) {
  const int64_t rows = dst.valid_rows, cols = dst.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, "col_expand_div", row.data, cols);
  for (int64_t r = 0; r < rows; ++r) Map(dst.data + r * TD::kCols, cols, F{}, src.data + r * TS::kCols, row.data);
}

}  // namespace detail

#define PTO_EXPAND_OPS(op, functor)                                                          \
  template <typename TD, typename TS, typename TC>                                           \
  inline void row_expand_##op(CoreCtx& ctx, int line, TD& dst, const TS& src, const TC& col) { \
    detail::RowExpand<detail::functor>(ctx, line, dst, src, col);                            \
  }                                                                                          \
  template <typename TD, typename TS, typename TR>                                           \
  inline void col_expand_##op(CoreCtx& ctx, int line, TD& dst, const TS& src, const TR& row) { \
    detail::ColExpand<detail::functor>(ctx, line, dst, src, row);                            \
  }

PTO_EXPAND_OPS(add, AddF)
PTO_EXPAND_OPS(sub, SubF)
PTO_EXPAND_OPS(mul, MulF)
PTO_EXPAND_OPS(div, DivF)
PTO_EXPAND_OPS(max, MaxF)
PTO_EXPAND_OPS(min, MinF)

#undef PTO_EXPAND_OPS

}  // namespace pto
