// Partial element-wise ops (pl.partadd, partmax, partmin, partmul; public pages, the ISA's TPARTADD
// & co.): over out's valid window, where both sources are valid the result is src0 op src1, where
// only one is valid it is a copy of that one. At least one source's valid window must be out's and
// the other's must lie inside it; anything else is a KernelFault (the ISA leaves it target-defined).
// An empty out window does nothing. Integers wrap.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

template <typename F, typename TD, typename TA, typename TB>
inline void Part(CoreCtx& ctx, int line, const char* op, TD& dst, const TA& src0, const TB& src1) {
  using T = typename TD::Elem;
  static_assert(__is_same(T, typename TA::Elem) && __is_same(T, typename TB::Elem), "partial ops keep the dtype");
  static_assert(TD::kCols == TA::kCols && TD::kCols == TB::kCols, "partial ops take tiles of one shape");
  const int64_t rows = dst.valid_rows, cols = dst.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  auto is_full = [&](const auto& s) { return s.valid_rows == rows && s.valid_cols == cols; };
  auto inside = [&](const auto& s) {
    return s.valid_rows >= 0 && s.valid_cols >= 0 && s.valid_rows <= rows && s.valid_cols <= cols;
  };
  const bool full0 = is_full(src0), full1 = is_full(src1);
  if (__builtin_expect(!((full0 && inside(src1)) || (full1 && inside(src0))), 0)) {
    FaultText text;
    text << "the valid windows of 'src0' [" << src0.valid_rows << ", " << src0.valid_cols << "] and 'src1' ["
         << src1.valid_rows << ", " << src1.valid_cols << "] do not fit 'out' [" << rows << ", " << cols
         << "]: one source's window must equal out's and the other's lie inside it";
    Fault(ctx, line, op, text.text);
  }
  // `whole` is valid over all of the window; the other source only over its top-left both_rows x both_cols.
  const T* whole = full0 ? src0.data : src1.data;
  const int64_t both_rows = full0 ? src1.valid_rows : src0.valid_rows;
  const int64_t both_cols = full0 ? src1.valid_cols : src0.valid_cols;
  auto copy = [&](int64_t off, int64_t n) {
    if (n > 0 && dst.data + off != whole + off) __builtin_memmove(dst.data + off, whole + off, size_t(n) * sizeof(T));
  };
  if (cols == TD::kCols && both_cols == cols) {  // whole rows: two flat runs
    MapLanes(dst.data, both_rows * cols, F{}, src0.data, src1.data);
    copy(both_rows * cols, (rows - both_rows) * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = r * TD::kCols, both = r < both_rows ? both_cols : 0;
    if (both > 0) MapLanes(dst.data + off, both, F{}, src0.data + off, src1.data + off);
    copy(off + both, cols - both);
  }
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
