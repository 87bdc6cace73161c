// Broadcast ops over the destination's valid window: row_expand_* combine row r of src with
// element r of an [R, 1] column tile, col_expand_* combine column c with element c of a [1, C] row
// tile (pl.expand_*(dim=0 / dim=1) are the same ops). Integer division by zero is a kernel fault.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

// The bodies on row strides known at run time (d_cols, s_cols, c_cols: the tiles' columns).
template <typename F, typename ED, typename ES, typename EC>
inline void RowExpandBody([[maybe_unused]] CoreCtx& ctx, [[maybe_unused]] int line, ED* d, int64_t d_cols,
                          const ES* s, int64_t s_cols, const EC* c, int64_t c_cols, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, "row_expand_div", c, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const auto v = ScalarAs<ED>(Exact(c[r * c_cols]));
#if PTO_RECIPROCAL_DIVISION
    if constexpr (__is_same(F, DivF) && kIsFloatLike<ED>) {
      if (DividesByReciprocal(v[0])) {  // the same bits as F, a third of the time (DivByReciprocal16)
        const f32x16 y = Splat(1.0f / v[0]);
        Map(d + r * d_cols, cols, [&](f32x16 x) { return DivByReciprocal16(x, v, y); }, s + r * s_cols);
        continue;
      }
    }
#endif
    Map(d + r * d_cols, cols, [&](auto x) { return F{}(x, decltype(x)(v)); }, s + r * s_cols);
  }
}

template <typename F, typename ED, typename ES, typename ER>
inline void ColExpandBody([[maybe_unused]] CoreCtx& ctx, [[maybe_unused]] int line, ED* d, int64_t d_cols,
                          const ES* s, int64_t s_cols, const ER* row, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, "col_expand_div", row, cols);
  for (int64_t r = 0; r < rows; ++r) Map(d + r * d_cols, cols, F{}, s + r * s_cols, row);
}

// Tiles of one element type use the routines library (routines/*.cpp).
template <typename F, typename T>
__attribute__((visibility("default"))) void RowExpandRoutine(CoreCtx& ctx, int line, T* d, int64_t d_cols,
                                                             const T* s, int64_t s_cols, const T* c, int64_t c_cols,
                                                             int64_t rows, int64_t cols);
template <typename F, typename T>
__attribute__((visibility("default"))) void ColExpandRoutine(CoreCtx& ctx, int line, T* d, int64_t d_cols,
                                                             const T* s, int64_t s_cols, const T* row, int64_t rows,
                                                             int64_t cols);

template <typename F, typename TD, typename TS, typename TC>
inline void RowExpand(CoreCtx& ctx, int line, TD& dst, const TS& src, const TC& col) {
  using T = typename TD::Elem;
  if constexpr (kExternRoutines && __is_same(typename TS::Elem, T) && __is_same(typename TC::Elem, T) &&
                kRoutineElem<T>) {
    RowExpandRoutine<F, T>(ctx, line, dst.data, TD::kCols, src.data, TS::kCols, col.data, TC::kCols, dst.valid_rows,
                           dst.valid_cols);
  } else {
    RowExpandBody<F>(ctx, line, dst.data, TD::kCols, src.data, TS::kCols, col.data, TC::kCols, dst.valid_rows,
                     dst.valid_cols);
  }
}

template <typename F, typename TD, typename TS, typename TR>
inline void ColExpand(CoreCtx& ctx, int line, TD& dst, const TS& src, const TR& row) {
  using T = typename TD::Elem;
  if constexpr (kExternRoutines && __is_same(typename TS::Elem, T) && __is_same(typename TR::Elem, T) &&
                kRoutineElem<T>) {
    ColExpandRoutine<F, T>(ctx, line, dst.data, TD::kCols, src.data, TS::kCols, row.data, dst.valid_rows,
                           dst.valid_cols);
  } else {
    ColExpandBody<F>(ctx, line, dst.data, TD::kCols, src.data, TS::kCols, row.data, dst.valid_rows, dst.valid_cols);
  }
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
