// Bitwise ops and shifts on integer Vec tiles (pl.and_, or_, xor, not_, shl, shr). Each works on
// the destination's valid window, 64 bytes of elements at a time.
//
// Shift amounts: the public pages ask for 0 <= amount < the element's bit width. An amount outside
// that (the ISA documents no result for it, and C++ shifts by it are undefined) is a KernelFault
// naming the element, checked over the whole window before anything is written. Left shifts drop
// the bits shifted out (signed elements wrap); right shifts are arithmetic on signed elements and
// logical on unsigned ones (public shr page).
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

namespace detail {

struct AndF { template <typename V> V operator()(V a, V b) const { return a & b; } };
struct OrF { template <typename V> V operator()(V a, V b) const { return a | b; } };
struct XorF { template <typename V> V operator()(V a, V b) const { return a ^ b; } };
struct NotF { template <typename V> V operator()(V a) const { return ~a; } };

// f over the rows x cols window of tiles tile_cols wide (every operand at the destination's offsets),
// on pointers: the compiled kernel and the tier-0 executor share it.
template <typename T, typename F, typename... TS>
inline void MapIntWindowOf(T* d, int64_t tile_cols, int64_t rows, int64_t cols, F f, const TS*... srcs) {
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) { MapInt(d + off, n, f, srcs + off...); });
}

template <typename TD, typename F, typename... TS>
inline void MapIntWindow(TD& dst, F f, const TS&... srcs) {
  MapIntWindowOf(dst.data, TD::kCols, dst.valid_rows, dst.valid_cols, f, srcs.data...);
}

// A scalar operand as every lane of x's type (a 64-byte vector or one element).
template <typename T, typename V>
inline V SplatLike(T v) {
  return V(V{} + v);
}

// lhs op v over the window (v: the scalar's bits at the element's width; the compiler refuses
// constants that do not fit).
template <typename F, typename T>
inline void BitwiseScalarOf(T* d, const T* lhs, int64_t tile_cols, int64_t rows, int64_t cols, T v) {
  MapIntWindowOf(d, tile_cols, rows, cols, [v](auto x) { return F{}(x, SplatLike<T, decltype(x)>(v)); }, lhs);
}

template <typename F, typename TD, typename TA, typename S>
inline void BitwiseScalar(TD& dst, const TA& lhs, S s) {
  using T = typename TD::Elem;
  BitwiseScalarOf<F>(dst.data, lhs.data, TD::kCols, dst.valid_rows, dst.valid_cols, T(s));
}

template <typename T>
constexpr int kBitsOf = int(8 * sizeof(T));

// Every amount of `rhs` (a tile of tile_rows x tile_cols) in the rows x cols window lies in [0, bits),
// or the op faults at the first that does not.
template <typename T>
inline void CheckShiftAmountsOf(CoreCtx& ctx, int line, const char* op, const T* rhs, int64_t tile_rows,
                                int64_t tile_cols, int64_t rows, int64_t cols) {
  using U = typename UnsignedOf<T>::type;
  using UV = typename Lanes64<U>::type;
  constexpr int64_t kLanes = int64_t(64 / sizeof(T));
  constexpr U kBits = U(kBitsOf<T>);
  ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) {
    const T* p = rhs + off;
    bool bad = false;
    int64_t i = 0;
    if (n >= kLanes) {  // kBits is a power of two: an amount in range has no bit above kBits - 1
      UV high{};         // (as unsigned, a negative amount has them too)
      for (; i + kLanes <= n; i += kLanes) {
        UV v;
        __builtin_memcpy(&v, p + i, sizeof v);
        high |= v & U(~(kBits - 1));
      }
      for (int64_t k = 0; k < kLanes; ++k) bad |= high[k] != 0;
    }
    for (; i < n; ++i) bad |= U(p[i]) >= kBits;
    if (__builtin_expect(!bad, 1)) return;
    for (i = 0; i < n; ++i) {
      if (U(p[i]) < kBits) continue;
      FaultText text;
      text << "shift amount " << p[i] << " in 'rhs' is outside [0, " << kBitsOf<T>
           << "): the amount must be at least 0 and less than the element's bit width";
      ElementFaultAt(ctx, line, op, text.text, (off + i) / tile_cols, (off + i) % tile_cols, tile_rows, tile_cols);
    }
  });
}

// a << n and a >> n with n in [0, bits): on one element, or lane by lane on 64-byte vectors.
template <typename T>
struct ShlF {
  template <typename V> V operator()(V a, V n) const {
    if constexpr (__is_same(V, T)) {
      using U = typename UnsignedOf<T>::type;
      return T(uint64_t(U(a)) << unsigned(U(n)));
    } else {
      using UV = typename Lanes64<typename UnsignedOf<T>::type>::type;
      return (V)((UV)a << (UV)n);
    }
  }
};
template <typename T>
struct ShrF {
  template <typename V> V operator()(V a, V n) const {
    if constexpr (__is_same(V, T)) {
      using U = typename UnsignedOf<T>::type;
      return T(a >> unsigned(U(n)));  // C++20: arithmetic on signed values
    } else {
      return a >> n;  // GCC vectors: arithmetic on signed lanes, logical on unsigned ones
    }
  }
};

}  // namespace detail

template <typename TD, typename TA, typename TB>
inline void and_(CoreCtx&, int, TD& dst, const TA& lhs, const TB& rhs) {
  detail::MapIntWindow(dst, detail::AndF{}, lhs, rhs);
}
template <typename TD, typename TA, typename TB>
inline void or_(CoreCtx&, int, TD& dst, const TA& lhs, const TB& rhs) {
  detail::MapIntWindow(dst, detail::OrF{}, lhs, rhs);
}
template <typename TD, typename TA, typename S>
inline void ands(CoreCtx&, int, TD& dst, const TA& lhs, S s) {
  detail::BitwiseScalar<detail::AndF>(dst, lhs, s);
}
template <typename TD, typename TA, typename S>
inline void ors(CoreCtx&, int, TD& dst, const TA& lhs, S s) {
  detail::BitwiseScalar<detail::OrF>(dst, lhs, s);
}

namespace detail {

// xor(out, lhs, rhs, tmp) on pointers (out, lhs and rhs tile_cols wide, tmp tmp_cols): tmp is the
// hardware's scratch (public page: of out's shape and dtype, not overlapping the other operands); the
// computation here does not need it and leaves it as it is.
template <typename T>
inline void XorBody(CoreCtx& ctx, int line, T* d, const T* lhs, const T* rhs, const T* tmp, int64_t tile_cols,
                    int64_t tmp_cols, int64_t rows, int64_t cols) {
  if (WindowsOverlapAt(tmp, tmp_cols, rows, cols, d, tile_cols, rows, cols) ||
      WindowsOverlapAt(tmp, tmp_cols, rows, cols, lhs, tile_cols, rows, cols) ||
      WindowsOverlapAt(tmp, tmp_cols, rows, cols, rhs, tile_cols, rows, cols)) {
    Fault(ctx, line, "xor", "'tmp' overlaps 'out', 'lhs' or 'rhs'; the scratch tile must lie apart from them");
  }
  MapIntWindowOf(d, tile_cols, rows, cols, XorF{}, lhs, rhs);
}

// shl / shr on pointers (every operand a tile of tile_rows x tile_cols): the amounts checked first.
template <bool kLeft, typename T>
inline void ShiftBody(CoreCtx& ctx, int line, T* d, const T* lhs, const T* rhs, int64_t tile_rows, int64_t tile_cols,
                      int64_t rows, int64_t cols) {
  CheckShiftAmountsOf(ctx, line, kLeft ? "shl" : "shr", rhs, tile_rows, tile_cols, rows, cols);
  if constexpr (kLeft) MapIntWindowOf(d, tile_cols, rows, cols, ShlF<T>{}, lhs, rhs);
  else MapIntWindowOf(d, tile_cols, rows, cols, ShrF<T>{}, lhs, rhs);
}

}  // namespace detail

template <typename TD, typename TA, typename TB, typename TT>
inline void xor_(CoreCtx& ctx, int line, TD& dst, const TA& lhs, const TB& rhs, TT& tmp) {
  detail::XorBody(ctx, line, dst.data, lhs.data, rhs.data, tmp.data, TD::kCols, TT::kCols, dst.valid_rows,
                  dst.valid_cols);
}

template <typename TD, typename TS>
inline void not_(CoreCtx&, int, TD& dst, const TS& src) {
  detail::MapIntWindow(dst, detail::NotF{}, src);
}

template <typename TD, typename TA, typename TB>
inline void shl(CoreCtx& ctx, int line, TD& dst, const TA& lhs, const TB& rhs) {
  detail::ShiftBody<true>(ctx, line, dst.data, lhs.data, rhs.data, TB::kRows, TD::kCols, dst.valid_rows,
                          dst.valid_cols);
}
template <typename TD, typename TA, typename TB>
inline void shr(CoreCtx& ctx, int line, TD& dst, const TA& lhs, const TB& rhs) {
  detail::ShiftBody<false>(ctx, line, dst.data, lhs.data, rhs.data, TB::kRows, TD::kCols, dst.valid_rows,
                           dst.valid_cols);
}

}  // namespace pto
