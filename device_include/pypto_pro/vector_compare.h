// Compares that write a bit-packed mask, and select by such a mask.
//
// Mask format (public docs: a UINT8 tile of the compared tile's shape, bit-packed): row r of the
// mask holds the predicates of row r of the operands, element c in bit c % 8 (least significant
// first) of byte c / 8 of that row. A row's bytes past ceil(valid_cols / 8) are left untouched.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

struct EqF { template <typename V> bool operator()(V a, V b) const { return a == b; } };
struct NeF { template <typename V> bool operator()(V a, V b) const { return a != b; } };
struct LtF { template <typename V> bool operator()(V a, V b) const { return a < b; } };
struct LeF { template <typename V> bool operator()(V a, V b) const { return a <= b; } };
struct GtF { template <typename V> bool operator()(V a, V b) const { return a > b; } };
struct GeF { template <typename V> bool operator()(V a, V b) const { return a >= b; } };

// Packs pred(c) for c < cols into mask bytes, 64 predicates at a time so the compares vectorise.
template <typename Pred>
inline void PackRow(uint8_t* mask, int64_t cols, Pred pred) {
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int64_t n = cols - c0 < 64 ? cols - c0 : 64;
    uint8_t bits[64] = {};
    for (int64_t j = 0; j < n; ++j) bits[j] = pred(c0 + j) ? 1 : 0;
    for (int64_t b = 0; b < (n + 7) / 8; ++b) {
      uint8_t byte = 0;
      for (int k = 0; k < 8; ++k) byte |= uint8_t(bits[b * 8 + k] << k);
      mask[c0 / 8 + b] = byte;
    }
  }
}

// The mask's rows x cols window (`mask_cols`, `cols_of`: the mask's and the operands' tile columns);
// rhs_at(i): the right operand of element i of lhs's tile.
template <typename F, typename EA, typename RhsAt>
inline void CompareBody(uint8_t* mask, int64_t mask_cols, const EA* lhs, int64_t cols_of, int64_t rows, int64_t cols,
                        RhsAt rhs_at) {
  if (rows <= 0 || cols <= 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const EA* a = lhs + r * cols_of;
    PackRow(mask + r * mask_cols, cols, [&](int64_t c) { return F{}(Exact(a[c]), rhs_at(r * cols_of + c)); });
  }
}

template <typename F, typename TM, typename TA, typename RhsAt>
inline void Compare(TM& mask, const TA& lhs, RhsAt rhs_at) {
  CompareBody<F>(mask.data, TM::kCols, lhs.data, TA::kCols, mask.valid_rows, mask.valid_cols, rhs_at);
}

}  // namespace detail

#define PTO_COMPARE_OP(name, functor)                                                       \
  template <typename TM, typename TA, typename TB>                                          \
  inline void name(CoreCtx&, int, TM& mask, const TA& lhs, const TB& rhs) {                 \
    detail::Compare<detail::functor>(mask, lhs, [&](int64_t i) { return detail::Exact(rhs.data[i]); }); \
  }                                                                                         \
  template <typename TM, typename TA, typename S>                                           \
  inline void name##_scalar(CoreCtx&, int, TM& mask, const TA& lhs, S s) {                  \
    const auto v = detail::Exact(detail::AsElem<typename TA::Elem>(s));                     \
    detail::Compare<detail::functor>(mask, lhs, [&](int64_t) { return v; });                \
  }

PTO_COMPARE_OP(eq, EqF)
PTO_COMPARE_OP(ne, NeF)
PTO_COMPARE_OP(lt, LtF)
PTO_COMPARE_OP(le, LeF)
PTO_COMPARE_OP(gt, GtF)
PTO_COMPARE_OP(ge, GeF)

#undef PTO_COMPARE_OP

namespace detail {

// dst's rows x cols window (`cols_of`: the tiles' columns, `mask_cols`: the mask's).
template <typename ED, typename RhsAt>
inline void SelectBody(ED* dst, int64_t cols_of, const uint8_t* mask, int64_t mask_cols, const ED* lhs, int64_t rows,
                       int64_t cols, RhsAt rhs_at) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* m = mask + r * mask_cols;
    const int64_t row = r * cols_of;
    for (int64_t c = 0; c < cols; ++c) dst[row + c] = (m[c >> 3] >> (c & 7)) & 1 ? lhs[row + c] : rhs_at(row + c);
  }
}

template <typename TD, typename TM, typename TA, typename RhsAt>
inline void Select(TD& dst, const TM& mask, const TA& lhs, RhsAt rhs_at) {
  static_assert(__is_same(typename TD::Elem, typename TA::Elem), "select keeps the dtype");
  SelectBody(dst.data, TD::kCols, mask.data, TM::kCols, lhs.data, dst.valid_rows, dst.valid_cols, rhs_at);
}

}  // namespace detail

// out = mask ? lhs : rhs element by element; tmp is part of the public signature only (the docs:
// the implementation neither reads nor writes it).
template <typename TD, typename TM, typename TA, typename TB, typename TT>
inline void select(CoreCtx&, int, TD& dst, const TM& mask, const TA& lhs, const TB& rhs, TT&) {
  detail::Select(dst, mask, lhs, [&](int64_t i) { return rhs.data[i]; });
}

template <typename TD, typename TM, typename TA, typename S, typename TT>
inline void select_scalar(CoreCtx&, int, TD& dst, const TM& mask, const TA& lhs, S s, TT&) {
  const auto v = detail::AsElem<typename TD::Elem>(s);
  detail::Select(dst, mask, lhs, [&](int64_t) { return v; });
}

}  // namespace pto
