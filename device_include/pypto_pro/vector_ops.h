// Vector-pipe compute ops on Vec tiles. Each works on the destination's valid window; rows are
// processed as flat runs so the compiler vectorises them (fp16/bf16 16 lanes at a time via fp32).
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

namespace detail {

// d[i] = f(a[i], b[i]) for i < n, with fp16/bf16 computed in fp32 and rounded per op.
template <typename T, typename F>
inline void MapBinary(T* d, const T* a, const T* b, int64_t n, F f) {
  if constexpr (kIsNarrowFloat<T>) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) Store16(d + i, f(Load16(a + i), Load16(b + i)));
    for (; i < n; ++i) d[i] = FromFloat<T>(f(ToFloat(a[i]), ToFloat(b[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = T(f(a[i], b[i]));
  }
}

// d[i] = f(a[i], s) for i < n; the scalar is first rounded to the element type like the device does.
template <typename T, typename S, typename F>
inline void MapScalar(T* d, const T* a, S s, int64_t n, F f) {
  if constexpr (kIsNarrowFloat<T>) {
    const float sf = ToFloat(FromFloat<T>(float(s)));
    const f32x16 sv = sf - f32x16{};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) Store16(d + i, f(Load16(a + i), sv));
    for (; i < n; ++i) d[i] = FromFloat<T>(f(ToFloat(a[i]), sf));
  } else {
    const T st = T(s);
    for (int64_t i = 0; i < n; ++i) d[i] = T(f(a[i], st));
  }
}

// Runs `row(dst, a, b, n)` over the destination's valid window: one flat run when rows are full.
template <typename TD, typename Row>
inline void ForWindow(TD& dst, Row row) {
  const int64_t rows = dst.valid_rows, cols = dst.valid_cols;
  if (rows <= 0 || cols <= 0) return;
  if (cols == TD::kCols) {
    row(0, rows * cols);
  } else {
    for (int64_t r = 0; r < rows; ++r) row(r * TD::kCols, cols);
  }
}

template <typename T>
inline void CheckNoZeroDivisor(CoreCtx& ctx, int line, const T* b, int64_t n) {
  if constexpr (!kIsFloatLike<T>) {
    for (int64_t i = 0; i < n; ++i) {
      if (b[i] == T(0)) Fault(ctx, line, "div", "integer division by zero in a tile");
    }
  }
}

template <typename T>
inline T DivInt(T a, T b) {
  if (b == T(-1)) {
    T r;
    __builtin_sub_overflow(T(0), a, &r);
    return r;
  }
  return a / b;
}

struct AddF { template <typename V> V operator()(V a, V b) const { return a + b; } };
struct SubF { template <typename V> V operator()(V a, V b) const { return a - b; } };
struct MulF { template <typename V> V operator()(V a, V b) const { return a * b; } };
struct DivF {
  template <typename V> V operator()(V a, V b) const {
    if constexpr (__is_same(V, f32x16) || __is_same(V, float) || __is_same(V, double)) return a / b;
    else return DivInt(a, b);
  }
};
struct MaxF { template <typename V> V operator()(V a, V b) const { return a > b ? a : b; } };
struct MinF { template <typename V> V operator()(V a, V b) const { return a < b ? a : b; } };

template <typename F, typename TD, typename TA, typename TB>
inline void Binary(CoreCtx& ctx, int line, TD& dst, const TA& a, const TB& b) {
  using T = typename TD::Elem;
  ForWindow(dst, [&](int64_t off, int64_t n) {
    if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, b.data + off, n);
    MapBinary(dst.data + off, a.data + off, b.data + off, n, F{});
  });
  (void)sizeof(T);
}

template <typename F, typename TD, typename TA, typename S>
inline void Scalar(CoreCtx& ctx, int line, TD& dst, const TA& a, S s) {
  using T = typename TD::Elem;
  if constexpr (__is_same(F, DivF) && !kIsFloatLike<T>) {
    if (T(s) == T(0)) Fault(ctx, line, "divs", "integer division by zero");
  }
  ForWindow(dst, [&](int64_t off, int64_t n) { MapScalar(dst.data + off, a.data + off, s, n, F{}); });
}

}  // namespace detail

#define PTO_BINARY_OP(name, functor)                                             \
  template <typename TD, typename TA, typename TB>                               \
  inline void name(CoreCtx& ctx, int line, TD& dst, const TA& a, const TB& b) {  \
    detail::Binary<detail::functor>(ctx, line, dst, a, b);                       \
  }
#define PTO_SCALAR_OP(name, functor)                                             \
  template <typename TD, typename TA, typename S>                                \
  inline void name(CoreCtx& ctx, int line, TD& dst, const TA& a, S s) {          \
    detail::Scalar<detail::functor>(ctx, line, dst, a, s);                       \
  }

PTO_BINARY_OP(add, AddF)
PTO_BINARY_OP(sub, SubF)
PTO_BINARY_OP(mul, MulF)
PTO_BINARY_OP(div, DivF)
PTO_BINARY_OP(maximum, MaxF)
PTO_BINARY_OP(minimum, MinF)
PTO_SCALAR_OP(adds, AddF)
PTO_SCALAR_OP(subs, SubF)
PTO_SCALAR_OP(muls, MulF)
PTO_SCALAR_OP(divs, DivF)
PTO_SCALAR_OP(maxs, MaxF)
PTO_SCALAR_OP(mins, MinF)

#undef PTO_BINARY_OP
#undef PTO_SCALAR_OP

}  // namespace pto
