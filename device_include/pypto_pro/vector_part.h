// Partial element-wise ops (pl.partadd, partmax, partmin, partmul; public pages, the ISA's TPARTADD
// & co.): over out's valid window, where both sources are valid the result is src0 op src1, where
// only one is valid it is a copy of that one. At least one source's valid window must be out's and
// the other's must lie inside it; anything else is a KernelFault (the ISA leaves it target-defined).
// An empty out window does nothing. Integers wrap.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

// The body of the partial ops over tiles `cols` elements a row (out's window rows x cols; each
// source's window rows0 x cols0, rows1 x cols1): shared by the tile ops and the tier-0 executor.
template <typename F, typename T>
inline void PartBody(CoreCtx& ctx, int line, const char* op, T* dst, int64_t tile_cols, int64_t rows, int64_t cols,
                     const T* src0, int64_t rows0, int64_t cols0, const T* src1, int64_t rows1, int64_t cols1) {
  if (rows <= 0 || cols <= 0) return;
  const bool full0 = rows0 == rows && cols0 == cols, full1 = rows1 == rows && cols1 == cols;
  auto inside = [&](int64_t r, int64_t c) { return r >= 0 && c >= 0 && r <= rows && c <= cols; };
  if (__builtin_expect(!((full0 && inside(rows1, cols1)) || (full1 && inside(rows0, cols0))), 0)) {
    FaultText text;
    text << "the valid windows of 'src0' [" << rows0 << ", " << cols0 << "] and 'src1' [" << rows1 << ", " << cols1
         << "] do not fit 'out' [" << rows << ", " << cols
         << "]: one source's window must equal out's and the other's lie inside it";
    Fault(ctx, line, op, text.text);
  }
  // `whole` is valid over all of the window; the other source only over its top-left both_rows x both_cols.
  const T* whole = full0 ? src0 : src1;
  const int64_t both_rows = full0 ? rows1 : rows0;
  const int64_t both_cols = full0 ? cols1 : cols0;
  auto copy = [&](int64_t off, int64_t n) {
    if (n > 0 && dst + off != whole + off) __builtin_memmove(dst + off, whole + off, size_t(n) * sizeof(T));
  };
  if (cols == tile_cols && both_cols == cols) {  // whole rows: two flat runs
    MapLanes(dst, both_rows * cols, F{}, src0, src1);
    copy(both_rows * cols, (rows - both_rows) * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = r * tile_cols, both = r < both_rows ? both_cols : 0;
    if (both > 0) MapLanes(dst + off, both, F{}, src0 + off, src1 + off);
    copy(off + both, cols - both);
  }
}

template <typename F, typename TD, typename TA, typename TB>
inline void Part(CoreCtx& ctx, int line, const char* op, TD& dst, const TA& src0, const TB& src1) {
  using T = typename TD::Elem;
  static_assert(__is_same(T, typename TA::Elem) && __is_same(T, typename TB::Elem), "partial ops keep the dtype");
  static_assert(TD::kCols == TA::kCols && TD::kCols == TB::kCols, "partial ops take tiles of one shape");
  PartBody<F>(ctx, line, op, dst.data, TD::kCols, dst.valid_rows, dst.valid_cols, src0.data, src0.valid_rows,
              src0.valid_cols, src1.data, src1.valid_rows, src1.valid_cols);
}

}  // namespace detail

#define PTO_PART_OP(name, functor)                                                               \
  template <typename TD, typename TA, typename TB>                                               \
  inline void name(CoreCtx& ctx, int line, TD& dst, const TA& src0, const TB& src1) {            \
    detail::Part<functor>(ctx, line, #name, dst, src0, src1);                                    \
  }

PTO_PART_OP(partadd, detail::WrapAddF<typename TD::Elem>)
PTO_PART_OP(partmax, detail::MaxF)
PTO_PART_OP(partmin, detail::MinF)
PTO_PART_OP(partmul, detail::WrapMulF<typename TD::Elem>)

#undef PTO_PART_OP

}  // namespace pto
