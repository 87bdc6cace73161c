// Element-wise vector-pipe ops on Vec tiles: binary, scalar forms, unary, fused, fill. Each works
// on the destination's valid window; rows are processed as flat runs, and fp16/bf16/fp32 elements
// 16 lanes at a time in fp32 (fp16/bf16 rounded back after every op, like the hardware and torch).
#pragma once

#include "pypto_pro/data_movement.h"
#include "pypto_pro/op_lists.h"
#include "pypto_pro/tile.h"
#include "pypto_pro/vector_math.h"

namespace pto {

namespace detail {

// Copies the n < 16 elements of a vector's tail one by one. Not memcpy: a call (of a size only known
// at run time) makes the compiler keep every vector the calling loop accumulates in memory at -O1,
// as no vector register survives a call: a row sum ran three times slower for it.
template <typename T>
inline void CopyTail(T* d, const T* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = s[i];
}

// (Tails are read by LoadTail16, numeric.h: zero-padded lanes, so tails use the 16-lane code too.)
template <typename T>
struct Lanes {
  T v[16];
};

// Whether f of fp16 operands computed on fp16 lanes (h32) gives the bits of f on fp32 lanes rounded
// to fp16: add, sub, mul, div (one IEEE rounding each; with fp32's 24 >= 2 x 11 + 2 bits, rounding
// the fp32 result to fp16 never differs from rounding the exact one: Figueroa, "When is double
// rounding innocuous?", 1995), maximum, minimum and relu (the same compare-and-select, NaNs and
// signed zeros included), neg and abs (the sign bit). Which operand's NaN an op of two NaNs returns
// is not specified on either path (docs/device.md#numerics).
template <typename F>
constexpr bool kHalfLanesExact = false;

#if defined(__AVX512FP16__)
// d[i] = f(s[i]...) for i < n on fp16 lanes, 32 at a time (f: an op kHalfLanesExact names).
template <typename F, typename... TS>
inline void MapHalves(half* d, int64_t n, F f, const TS*... s) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const h32 v = f(LoadHalves(s + i)...);
    __builtin_memcpy(d + i, &v, 64);
  }
  if (i < n) {
    const size_t bytes = size_t(n - i) * sizeof(half);
    const h32 v = f(LoadHalves(s + i, bytes)...);
    __builtin_memcpy(d + i, &v, bytes);
  }
}
#endif

// d[i] = f(s[i]...) for i < n. Float-like elements go through f on f32x16 lanes (stored with
// round to nearest even), fp16 through the ops kHalfLanesExact names on fp16 lanes where the host has
// them (an fp16 add of 32 KiB tiles 20% faster, Intel Xeon), integers element by element; `d` may be
// one of the sources.
template <typename TD, typename F, typename... TS>
inline void Map(TD* d, int64_t n, F f, const TS*... s) {
#if defined(__AVX512FP16__)
  if constexpr (__is_same(TD, half) && (__is_same(TS, half) && ...) && kHalfLanesExact<F>) {
    return MapHalves(d, n, f, s...);
  }
#endif
  if constexpr (kIsFloatLike<TD>) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {  // two independent vectors per step: long ops (exp) overlap
      const auto lo = f(Load16(s + i)...);
      const auto hi = f(Load16(s + i + 16)...);
      Store16(d + i, lo);
      Store16(d + i + 16, hi);
    }
    for (; i + 16 <= n; i += 16) Store16(d + i, f(Load16(s + i)...));
    if (i < n) {
      TD out[16];
      Store16(out, f(LoadTail16(s + i, n - i)...));
      CopyTail(d + i, out, n - i);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = TD(f(s[i]...));
  }
}

// A scalar operand as an element of type T (a float scalar on an integer tile truncates).
template <typename T, typename S>
inline T AsElem(S s) {
  if constexpr (kIsFloatLike<T>) return FromFloat<T>(float(s));
  else return T(s);
}

// A scalar operand as the op computes with it: rounded to T first, like the device does.
template <typename T, typename S>
inline auto ScalarAs(S s) {
  if constexpr (kIsFloatLike<T>) return Splat(ToFloat(AsElem<T>(s)));
  else return T(s);
}

// The exact value of an element, as ops compare and combine it: fp16/bf16 as fp32.
template <typename T>
inline auto Exact(T v) {
  if constexpr (kIsNarrowFloat<T>) return ToFloat(v);
  else return v;
}

// The value of `v` rounded to T, for the intermediate results of fused ops (integers wrap at the end).
template <typename T, typename V>
inline V Round(V v) {
  if constexpr (__is_same(V, f32x16)) return RoundTo<T>(v);
  else return v;
}

// Runs `run(offset, n)` over the rows x cols valid window of a tile of `tile_cols` columns: one flat
// run when rows are full.
template <typename Run>
inline void ForWindowOf(int64_t tile_cols, int64_t rows, int64_t cols, Run run) {
  if (rows <= 0 || cols <= 0) return;
  if (cols == tile_cols) {
    run(0, rows * cols);
  } else {
    for (int64_t r = 0; r < rows; ++r) run(r * tile_cols, cols);
  }
}

template <typename TileT, typename Run>
inline void ForWindow(TileT& tile, Run run) {
  ForWindowOf(TileT::kCols, tile.valid_rows, tile.valid_cols, run);
}

// dst[i] = f(srcs[i]...) over dst's valid window; the sources share dst's layout.
template <typename TD, typename F, typename... TS>
inline void MapWindow(TD& dst, F f, const TS&... srcs) {
  ForWindow(dst, [&](int64_t off, int64_t n) { Map(dst.data + off, n, f, srcs.data + off...); });
}

template <typename T>
inline void CheckNoZeroDivisor(CoreCtx& ctx, int line, const char* op, const T* b, int64_t n) {
  if constexpr (!kIsFloatLike<T>) {
    for (int64_t i = 0; i < n; ++i) {
      if (b[i] == T(0)) Fault(ctx, line, op, "integer division by zero in a tile");
    }
  }
}

template <typename T>
inline T WrapNeg(T a) {
  T r;
  __builtin_sub_overflow(T(0), a, &r);
  return r;
}

template <typename T>
inline T DivInt(T a, T b) {
  return b == T(-1) ? WrapNeg(a) : T(a / b);  // INT_MIN / -1 wraps like the device instead of trapping
}

// fp32 lanes, or fp16 lanes (h32) where the host has them.
template <typename V>
#if defined(__AVX512FP16__)
constexpr bool kIsLanes = __is_same(V, f32x16) || __is_same(V, h32);
#else
constexpr bool kIsLanes = __is_same(V, f32x16);
#endif

// ---- integer elements 64 bytes at a time (GCC vector extensions: packed on the widest registers) ----

template <typename T>
struct Lanes64 {
  typedef T type __attribute__((vector_size(64)));
};

template <typename T> struct UnsignedOf { using type = T; };
template <> struct UnsignedOf<int8_t> { using type = uint8_t; };
template <> struct UnsignedOf<int16_t> { using type = uint16_t; };
template <> struct UnsignedOf<int32_t> { using type = uint32_t; };
template <> struct UnsignedOf<int64_t> { using type = uint64_t; };

// d[i] = f(s[i]...) for i < n on integer elements: f sees 64-byte vectors of T, then the scalars
// of the tail; `d` may be one of the sources.
template <typename T, typename F, typename... TS>
inline void MapInt(T* d, int64_t n, F f, const TS*... s) {
  using V = typename Lanes64<T>::type;
  constexpr int64_t kLanes = int64_t(64 / sizeof(T));
  auto load = [](const auto* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V out = f(load(s + i)...);
    __builtin_memcpy(d + i, &out, sizeof out);
  }
  for (; i < n; ++i) d[i] = T(f(s[i]...));
}

// Map for every element type: 16 fp32 lanes for float-like elements, 64-byte vectors for integers.
template <typename T, typename F, typename... TS>
inline void MapLanes(T* d, int64_t n, F f, const TS*... s) {
  if constexpr (kIsFloatLike<T>) Map(d, n, f, s...);
  else MapInt(d, n, f, s...);
}

// a op b wrapping modulo 2^bits on integer scalars and vectors (computed unsigned: no signed
// overflow), plain on fp32 lanes.
template <typename T, typename Op, typename V>
inline V Wrapping(V a, V b, Op op) {
  if constexpr (kIsFloatLike<T>) {
    return op(a, b);
  } else if constexpr (__is_same(V, T)) {
    using U = __typeof__(T(0) + 0u);  // at least unsigned int: no promotion to a signed type
    return T(op(U(a), U(b)));
  } else {
    using UV = typename Lanes64<typename UnsignedOf<T>::type>::type;
    return (V)op((UV)a, (UV)b);
  }
}
template <typename T>
struct WrapAddF {
  template <typename V> V operator()(V a, V b) const { return Wrapping<T>(a, b, [](auto x, auto y) { return x + y; }); }
};
template <typename T>
struct WrapSubF {
  template <typename V> V operator()(V a, V b) const { return Wrapping<T>(a, b, [](auto x, auto y) { return x - y; }); }
};
template <typename T>
struct WrapMulF {
  template <typename V> V operator()(V a, V b) const { return Wrapping<T>(a, b, [](auto x, auto y) { return x * y; }); }
};

// The bytes a tile's rows x cols window spans from its first element (with the rows between).
template <typename TA, typename TB>
inline bool WindowsOverlapAt(const TA* a, int64_t a_tile_cols, int64_t a_rows, int64_t a_cols, const TB* b,
                             int64_t b_tile_cols, int64_t b_rows, int64_t b_cols) {
  if (a_rows <= 0 || a_cols <= 0 || b_rows <= 0 || b_cols <= 0) return false;
  const uintptr_t a0 = uintptr_t(a), b0 = uintptr_t(b);
  const uintptr_t a1 = a0 + uintptr_t(((a_rows - 1) * a_tile_cols + a_cols) * int64_t(sizeof(TA)));
  const uintptr_t b1 = b0 + uintptr_t(((b_rows - 1) * b_tile_cols + b_cols) * int64_t(sizeof(TB)));
  return a0 < b1 && b0 < a1;
}

template <typename TileT>
inline bool WindowsOverlap(const TileT& a, int64_t a_rows, int64_t a_cols, const auto& b, int64_t b_rows,
                           int64_t b_cols) {
  using TB = __typeof__(b);
  return WindowsOverlapAt(a.data, TileT::kCols, a_rows, a_cols, b.data, TB::kCols, b_rows, b_cols);
}

// A fault at element (row, col) of a tile window ([rows, cols] the tile's shape).
[[noreturn]] inline void ElementFaultAt(CoreCtx& ctx, int line, const char* op, const char* message, int64_t row,
                                        int64_t col, int64_t rows, int64_t cols) {
  PtoFaultDetail d{};
  d.op = op;
  d.message = message;
  d.rank = 2;
  d.offsets[0] = row;
  d.offsets[1] = col;
  d.extent[0] = d.extent[1] = 1;
  d.shape[0] = rows;
  d.shape[1] = cols;
  Fault(ctx, line, d);
}

// Default visibility (kernels compile with -fvisibility=hidden): the routines library instantiates its
// BinaryRoutine<F, T>, UnaryRoutine<F, T>, RowExpandRoutine<F, T>... for them.
#define PTO_VISIBLE __attribute__((visibility("default")))
struct PTO_VISIBLE AddF { template <typename V> V operator()(V a, V b) const { return a + b; } };
struct PTO_VISIBLE SubF { template <typename V> V operator()(V a, V b) const { return a - b; } };
struct PTO_VISIBLE MulF { template <typename V> V operator()(V a, V b) const { return a * b; } };
struct PTO_VISIBLE DivF {
  template <typename V> V operator()(V a, V b) const {
    if constexpr (kIsLanes<V>) return a / b;
    else return DivInt(a, b);
  }
};
struct PTO_VISIBLE MaxF { template <typename V> V operator()(V a, V b) const { return a > b ? a : b; } };
struct PTO_VISIBLE MinF { template <typename V> V operator()(V a, V b) const { return a < b ? a : b; } };
template <> constexpr bool kHalfLanesExact<AddF> = true;
template <> constexpr bool kHalfLanesExact<SubF> = true;
template <> constexpr bool kHalfLanesExact<MulF> = true;
template <> constexpr bool kHalfLanesExact<MaxF> = true;
template <> constexpr bool kHalfLanesExact<MinF> = true;
template <> constexpr bool kHalfLanesExact<DivF> = true;  // (one rounding: the same argument as for mul)

struct PTO_VISIBLE NegF {
  template <typename V> V operator()(V a) const {
#if defined(__AVX512FP16__)
    // fp16 lanes: the sign bit flipped as bits, so that the compiler, which keeps no fp16 rounding
    // between ops of fp16 lanes, cannot fold -a + b into b - a (a NaN a's sign then, not -a's)
    if constexpr (__is_same(V, h32)) return (h32)((u16x32)a ^ uint16_t(0x8000));
#endif
    if constexpr (kIsLanes<V>) return -a;
    else return WrapNeg(a);
  }
};
struct PTO_VISIBLE AbsF {
  template <typename V> V operator()(V a) const {
    if constexpr (kIsLanes<V>) return Abs16(a);
    else return a < V(0) ? WrapNeg(a) : a;
  }
};
// NaN stays NaN, like torch.relu.
struct PTO_VISIBLE ReluF { template <typename V> V operator()(V a) const { return a < V{} ? V{} : a; } };
template <> constexpr bool kHalfLanesExact<NegF> = true;  // sign bit operations and a compare-and-select
template <> constexpr bool kHalfLanesExact<AbsF> = true;
template <> constexpr bool kHalfLanesExact<ReluF> = true;
struct PTO_VISIBLE ExpF { f32x16 operator()(f32x16 a) const { return Exp16(a); } };
struct PTO_VISIBLE LogF { f32x16 operator()(f32x16 a) const { return Log16(a); } };
struct PTO_VISIBLE SqrtF { f32x16 operator()(f32x16 a) const { return Sqrt16(a); } };
// 1 / sqrt(x) with both steps rounded, as torch.rsqrt computes it.
struct PTO_VISIBLE RsqrtF { f32x16 operator()(f32x16 a) const { return 1.0f / Sqrt16(a); } };
struct PTO_VISIBLE RecipF { f32x16 operator()(f32x16 a) const { return 1.0f / a; } };
#undef PTO_VISIBLE

// d = f(a, b) over the rows x cols window of tiles of `tile_cols` columns (the operands share it).
template <typename F, typename TD, typename TA, typename TB>
inline void BinaryBody(CoreCtx& ctx, int line, TD* d, const TA* a, const TB* b, int64_t tile_cols, int64_t rows,
                       int64_t cols) {
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
    if constexpr (__is_same(F, DivF)) CheckNoZeroDivisor(ctx, line, "div", b + off, n);
    Map(d + off, n, F{}, a + off, b + off);
  });
}

// The binary ops on tiles of one element type run in the routines library in a kernel compiled with
// PTO_EXTERN_ROUTINES (routines/*.cpp, docs/jit.md#precompiled-device-headers-and-routines).
template <typename F, typename T>
__attribute__((visibility("default"))) void BinaryRoutine(CoreCtx& ctx, int line, T* d, const T* a, const T* b,
                                                          int64_t tile_cols, int64_t rows, int64_t cols);

template <typename F, typename TD, typename TA, typename TB>
inline void Binary(CoreCtx& ctx, int line, TD& dst, const TA& a, const TB& b) {
  using T = typename TD::Elem;
  if constexpr (kExternRoutines && __is_same(typename TA::Elem, T) && __is_same(typename TB::Elem, T) &&
                kRoutineElem<T>) {
    BinaryRoutine<F, T>(ctx, line, dst.data, a.data, b.data, TD::kCols, dst.valid_rows, dst.valid_cols);
  } else {
    BinaryBody<F>(ctx, line, dst.data, a.data, b.data, TD::kCols, dst.valid_rows, dst.valid_cols);
  }
}

// d = f(a, e) over the rows x cols window of tiles of `tile_cols` columns; `e`: the scalar operand
// already rounded to the element type (AsElem), as the device computes with it.
template <typename F, typename ED, typename EA>
inline void ScalarBody(CoreCtx& ctx, int line, ED* d, const EA* a, int64_t tile_cols, int64_t rows, int64_t cols,
                       ED e) {
  if constexpr (__is_same(F, DivF) && !kIsFloatLike<ED>) {
    if (e == ED(0)) Fault(ctx, line, "divs", "integer division by zero");
  }
  const auto sv = [&] {
    if constexpr (kIsFloatLike<ED>) return Splat(ToFloat(e));
    else return e;
  }();
#if PTO_RECIPROCAL_DIVISION
  if constexpr (__is_same(F, DivF) && kIsFloatLike<ED>) {
    if (DividesByReciprocal(sv[0])) {  // the same bits as F, a third of the time (DivByReciprocal16)
      const f32x16 y = Splat(1.0f / sv[0]);
      ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
        Map(d + off, n, [&](f32x16 x) { return DivByReciprocal16(x, sv, y); }, a + off);
      });
      return;
    }
  }
#endif
#if defined(__AVX512FP16__)
  if constexpr (__is_same(ED, half) && __is_same(EA, half) && kHalfLanesExact<F>) {  // e is fp16 already
    const h32 ev = HalfLanes(e);
    ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
      MapHalves(d + off, n, [&](h32 x) { return F{}(x, ev); }, a + off);
    });
    return;
  }
#endif
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
    Map(d + off, n, [&](auto x) { return F{}(x, decltype(x)(sv)); }, a + off);
  });
}

template <typename F, typename T>
__attribute__((visibility("default"))) void ScalarRoutine(CoreCtx& ctx, int line, T* d, const T* a,
                                                          int64_t tile_cols, int64_t rows, int64_t cols, T e);

template <typename F, typename TD, typename TA, typename S>
inline void Scalar(CoreCtx& ctx, int line, TD& dst, const TA& a, S s) {
  using T = typename TD::Elem;
  const T e = AsElem<T>(s);
  if constexpr (kExternRoutines && __is_same(typename TA::Elem, T) && kRoutineElem<T>) {
    ScalarRoutine<F, T>(ctx, line, dst.data, a.data, TD::kCols, dst.valid_rows, dst.valid_cols, e);
  } else {
    ScalarBody<F>(ctx, line, dst.data, a.data, TD::kCols, dst.valid_rows, dst.valid_cols, e);
  }
}

// d = f(s) over the rows x cols window of tiles of `tile_cols` columns.
template <typename F, typename TD, typename TS>
inline void UnaryBody(TD* d, const TS* s, int64_t tile_cols, int64_t rows, int64_t cols) {
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) { Map(d + off, n, F{}, s + off); });
}

// The routines library's unary ops: every element type for neg/abs/relu, the float-like ones for the
// math functions.
template <typename F, typename T>
constexpr bool kUnaryRoutine = kRoutineElem<T> && (kIsFloatLike<T> || __is_same(F, NegF) || __is_same(F, AbsF) ||
                                                   __is_same(F, ReluF));
template <typename F, typename T>
__attribute__((visibility("default"))) void UnaryRoutine(T* d, const T* s, int64_t tile_cols, int64_t rows,
                                                         int64_t cols);

template <typename F, typename TD, typename TS>
inline void Unary(TD& dst, const TS& src) {
  using T = typename TD::Elem;
  if constexpr (kExternRoutines && __is_same(typename TS::Elem, T) && kUnaryRoutine<F, T>) {
    UnaryRoutine<F, T>(dst.data, src.data, TD::kCols, dst.valid_rows, dst.valid_cols);
  } else {
    UnaryBody<F>(dst.data, src.data, TD::kCols, dst.valid_rows, dst.valid_cols);
  }
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
#define PTO_UNARY_OP(name, functor)                                              \
  template <typename TD, typename TS>                                            \
  inline void name(CoreCtx&, int, TD& dst, const TS& src) {                      \
    detail::Unary<detail::functor>(dst, src);                                    \
  }

PTO_BINARY_OPS(PTO_BINARY_OP)
PTO_SCALAR_OPS(PTO_SCALAR_OP)
PTO_UNARY_OPS(PTO_UNARY_OP)

#undef PTO_BINARY_OP
#undef PTO_SCALAR_OP
#undef PTO_UNARY_OP

// expands: every element of the window becomes `s` (as the element type).
namespace detail {
template <typename T>
inline void ExpandsBody(T* d, int64_t tile_cols, int64_t rows, int64_t cols, T v) {
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[off + i] = v;
  });
}
}  // namespace detail

template <typename TD, typename S>
inline void expands(CoreCtx&, int, TD& dst, S s) {
  detail::ExpandsBody(dst.data, TD::kCols, dst.valid_rows, dst.valid_cols, detail::AsElem<typename TD::Elem>(s));
}

// fill_index: start, start + 1, ... (wrapping in the element type) along the valid columns of the
// first row; the valid rows are not consulted (as the ISA's TCI).
namespace detail {
template <typename T, typename S>
inline void FillIndexBody(T* d, int64_t cols, S start) {
  using U = __typeof__(T(0) + 0u);  // unsigned arithmetic wraps
  for (int64_t k = 0; k < cols; ++k) d[k] = T(U(start) + U(k));
}
}  // namespace detail

template <typename TD, typename S>
inline void fill_index(CoreCtx&, int, TD& dst, S start) {
  detail::FillIndexBody(dst.data, dst.valid_cols < TD::kCols ? dst.valid_cols : TD::kCols, start);
}

// add_relu / sub_relu issue the add (sub) into lhs and then the relu into out, as the public docs
// describe: lhs is overwritten with the intermediate sum.
template <typename TD, typename TA, typename TB>
inline void add_relu(CoreCtx& ctx, int line, TD& dst, TA& lhs, const TB& rhs) {
  add(ctx, line, lhs, lhs, rhs);
  relu(ctx, line, dst, lhs);
}
template <typename TD, typename TA, typename TB>
inline void sub_relu(CoreCtx& ctx, int line, TD& dst, TA& lhs, const TB& rhs) {
  sub(ctx, line, lhs, lhs, rhs);
  relu(ctx, line, dst, lhs);
}

namespace detail {
// The three-operand forms' element functions (the tile ops below and the tier-0 executor): f(x, y, z)
// of elements of T, each intermediate rounded to T.
template <typename T>
struct AddcOf {  // x + y + z
  template <typename V>
  V operator()(V x, V y, V z) const { return Round<T>(x + y) + z; }
};
template <typename T>
struct MulAddOf {  // x * y + z
  template <typename V>
  V operator()(V x, V y, V z) const { return Round<T>(x * y) + z; }
};
template <typename T>
struct MulAddReluOf {  // relu(x * y + z)
  template <typename V>
  V operator()(V x, V y, V z) const { return ReluF{}(Round<T>(x * y) + z); }
};
template <typename T, typename A>
struct AxpyOf {  // alpha * x + acc, the product rounded to T (alpha: ScalarAs of the source's type)
  A alpha;
  template <typename V>
  V operator()(V x, V acc) const { return Round<T>(V(alpha) * x) + acc; }
};

// fillpad's body: out (rows x cols, pad value `pad`) = src's valid window (src: src_rows x src_cols)
// at its top-left, every other element the pad value; `mode` 2 (INPLACE) fills out in place.
template <typename T>
inline void FillpadBody(CoreCtx& ctx, int line, int mode, T* out, int64_t rows, int64_t cols, int pad, const T* src,
                        int64_t src_rows, int64_t src_cols, int64_t valid_rows, int64_t valid_cols) {
  if (__builtin_expect(valid_rows < 0 || valid_cols < 0 || valid_rows > src_rows || valid_cols > src_cols ||
                           valid_rows > rows || valid_cols > cols, 0)) {
    Fault(ctx, line, "fillpad", "the source's valid window does not fit the source or 'out'");
  }
  const bool same_address = static_cast<const void*>(out) == static_cast<const void*>(src);
  if (__builtin_expect(same_address != (mode == 2), 0)) {
    Fault(ctx, line, "fillpad",
          mode == 2 ? "mode=INPLACE fills 'out' in place: 'out' and 'src' must be at the same address"
                    : "mode=NORMAL and EXPAND copy 'src' into 'out' at another address (INPLACE fills in place)");
  }
  if (!same_address) Copy2D(out, cols, src, src_cols, valid_rows, valid_cols);
  FillOutsideWindowOf(out, pad, rows, cols, valid_rows, valid_cols);
}
}  // namespace detail

// out = a + b + c, rounded after each add.
template <typename TD, typename TA, typename TB, typename TC>
inline void addc(CoreCtx&, int, TD& dst, const TA& a, const TB& b, const TC& c) {
  detail::MapWindow(dst, detail::AddcOf<typename TD::Elem>{}, a, b, c);
}

// out = lhs * rhs + out
template <typename TD, typename TA, typename TB>
inline void mul_add_dst(CoreCtx&, int, TD& dst, const TA& lhs, const TB& rhs) {
  detail::MapWindow(dst, detail::MulAddOf<typename TD::Elem>{}, lhs, rhs, dst);
}

// out = lhs * out + rhs
template <typename TD, typename TA, typename TB>
inline void fused_mul_add(CoreCtx&, int, TD& dst, const TA& lhs, const TB& rhs) {
  detail::MapWindow(dst, detail::MulAddOf<typename TD::Elem>{}, lhs, dst, rhs);
}

// out = relu(out * a + b)
template <typename TD, typename TA, typename TB>
inline void fused_mul_add_relu(CoreCtx&, int, TD& dst, const TA& a, const TB& b) {
  detail::MapWindow(dst, detail::MulAddReluOf<typename TD::Elem>{}, dst, a, b);
}

// out = alpha * src + out. alpha is taken as src's element type; the product and the sum are rounded
// to out's type (exact for the fp16 -> fp32 widening form).
template <typename TD, typename TS, typename S>
inline void axpy(CoreCtx&, int, TD& dst, const TS& src, S alpha) {
  const auto a = detail::ScalarAs<typename TS::Elem>(alpha);
  detail::MapWindow(dst, detail::AxpyOf<typename TD::Elem, decltype(a)>{a}, src, dst);
}

// fillpad (mode 0 NORMAL, 1 EXPAND, 2 INPLACE): out = src's valid window at the top-left, every other
// element of out its pad value. NORMAL and EXPAND read src at another address, INPLACE at out's own.
template <typename TD, typename TS>
inline void fillpad(CoreCtx& ctx, int line, int mode, TD& out, const TS& src) {
  static_assert(__is_same(typename TD::Elem, typename TS::Elem), "fillpad keeps the dtype");
  static_assert(TD::kPad != 0, "fillpad fills with out's pad value");
  detail::FillpadBody(ctx, line, mode, out.data, TD::kRows, TD::kCols, TD::kPad, src.data, TS::kRows, TS::kCols,
                      src.valid_rows, src.valid_cols);
}

}  // namespace pto
