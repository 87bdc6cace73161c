// pl.cast: element type conversion with the rounding modes of pl.RoundMode.
//
// What each conversion does (the public docs name the modes; the rest is chosen here):
// - float -> narrower float (fp32 -> fp16/bf16, fp16 <-> bf16) and int -> float round by the mode:
//   CAST_RINT nearest/even, CAST_ROUND nearest/away from zero, CAST_FLOOR, CAST_CEIL, CAST_TRUNC,
//   CAST_ODD round to odd (fp32 -> fp16 only, as in the docs), CAST_NONE nearest/even (the mode
//   lossy conversions use when none is asked for). Overflow gives infinity, or the largest finite
//   value when the mode rounds toward zero there (round-to-odd too), as IEEE 754 directed rounding does.
// - float -> int rounds by the mode to an integer, then saturates to the target's range (NaN -> 0),
//   like the hardware's conversions; CAST_NONE rounds like CAST_RINT.
// - widening float -> float is exact; int -> int wraps modulo 2^bits like C++, numpy and torch.
#pragma once

#include "pypto_pro/vector_ops.h"

namespace pto {

// pl.RoundMode, from the one list in hw_tables.h (the choices of cast(mode=) in the op registry).
#define PTO_DEVICE_ROUND_MODE_(name) name,
enum class RoundMode : int { PTO_HW_ROUND_MODES(PTO_DEVICE_ROUND_MODE_) };
#undef PTO_DEVICE_ROUND_MODE_

namespace detail {

// How a magnitude is rounded; CAST_FLOOR and CAST_CEIL pick by the sign.
enum MagMode : int { kNearestEven, kNearestAway, kTowardZero, kAwayFromZero, kToOdd };

constexpr MagMode MagFor(RoundMode m, bool negative) {
  switch (m) {
    case RoundMode::CAST_ROUND: return kNearestAway;
    case RoundMode::CAST_FLOOR: return negative ? kAwayFromZero : kTowardZero;
    case RoundMode::CAST_CEIL: return negative ? kTowardZero : kAwayFromZero;
    case RoundMode::CAST_TRUNC: return kTowardZero;
    case RoundMode::CAST_ODD: return kToOdd;
    default: return kNearestEven;
  }
}

// 1 where `cond` holds, else 0: from a bool, or from a lane mask of -1/0.
template <typename U, typename C>
inline U OneIf(C cond) {
  if constexpr (__is_same(U, u32x16)) return (U)(-cond);
  else return U(cond);
}

// q = the kept high bits of a magnitude, rem = the dropped low bits, half = the weight of the
// highest dropped bit: q rounded by `m` (q + 1 may carry into the next binade).
template <typename U>
inline U RoundKept(U q, U rem, U half, MagMode m) {
  switch (m) {
    case kNearestEven: return q + OneIf<U>((rem > half) | ((rem == half) & ((q & 1) != 0)));
    case kNearestAway: return q + OneIf<U>(rem >= half);
    case kTowardZero: return q;
    case kAwayFromZero: return q + OneIf<U>(rem != 0);
    case kToOdd: return q | OneIf<U>(rem != 0);
  }
  return q;
}

// As RoundKept, with the mode of each lane chosen by its sign (FLOOR/CEIL).
template <RoundMode M>
inline u32x16 RoundKeptLanes(u32x16 q, u32x16 rem, u32x16 half, u32x16 sign) {
  constexpr MagMode pos = MagFor(M, false), neg = MagFor(M, true);
  if constexpr (pos == neg) {
    return RoundKept(q, rem, half, pos);
  } else {
    return sign != 0 ? RoundKept(q, rem, half, neg) : RoundKept(q, rem, half, pos);
  }
}

// Lanes whose rounding stays below the format's largest finite value on overflow.
template <RoundMode M>
inline i32x16 SaturatesOnOverflow(u32x16 sign) {
  constexpr bool pos = MagFor(M, false) == kTowardZero || MagFor(M, false) == kToOdd;
  constexpr bool neg = MagFor(M, true) == kTowardZero || MagFor(M, true) == kToOdd;
  return (sign != 0 ? i32x16{} + (neg ? -1 : 0) : i32x16{} + (pos ? -1 : 0));
}

// fp32 lanes -> bf16 bits in the low half of each lane. bf16 keeps fp32's exponent range, so
// rounding is dropping 16 mantissa bits (subnormals and overflow to infinity included).
template <RoundMode M>
inline u32x16 Bf16Bits(f32x16 v) {
  u32x16 u = (u32x16)v, sign = u & 0x80000000u, a = u & 0x7fffffffu;
  u32x16 mag = RoundKeptLanes<M>(a >> 16, a & 0xffffu, u32x16{} + 0x8000u, sign);
  u32x16 nan = (u >> 16) | 0x40u;  // quiet NaN, sign and payload kept
  return a > 0x7f800000u ? nan : (sign >> 16) | mag;
}

// fp32 lanes -> fp16 bits in the low half of each lane.
template <RoundMode M>
inline u32x16 HalfBits(f32x16 v) {
  u32x16 u = (u32x16)v, sign = u & 0x80000000u, a = u & 0x7fffffffu;
  // Normal fp16 range: rebias the exponent, drop 13 mantissa bits; overflow saturates or is inf.
  u32x16 b = a - 0x38000000u;
  u32x16 normal = RoundKeptLanes<M>(b >> 13, b & 0x1fffu, u32x16{} + 0x1000u, sign);
  u32x16 overflow = (u32x16)SaturatesOnOverflow<M>(sign);
  normal = normal >= 0x7c00u ? ((overflow & 0x7bffu) | (~overflow & 0x7c00u)) : normal;
  // Below 2^-14: the result counts units of 2^-24; the fp32 significand shifted right by
  // 126 - exponent (at most 31: everything smaller rounds like a tiny nonzero value).
  u32x16 e = a >> 23;
  u32x16 significand = (a & 0x7fffffu) | (e != 0 ? u32x16{} + 0x800000u : u32x16{});
  u32x16 shift = 126u - (e != 0 ? e : u32x16{} + 1u);
  shift = shift > 31u ? u32x16{} + 31u : shift;
  const u32x16 one = u32x16{} + 1u;
  u32x16 dropped = significand & ((one << shift) - 1u);
  u32x16 sub = RoundKeptLanes<M>(significand >> shift, dropped, one << (shift - 1u), sign);
  u32x16 nan = 0x7e00u | ((a & 0x7fffffu) >> 13);
  u32x16 mag = a < 0x38800000u ? sub : a < 0x7f800000u ? normal : a == 0x7f800000u ? u32x16{} + 0x7c00u : nan;
  return (sign >> 16) | mag;
}

template <typename T, RoundMode M>
inline void StoreRounded16(T* p, f32x16 v) {
  if constexpr (__is_same(T, float) || M == RoundMode::CAST_RINT || M == RoundMode::CAST_NONE) {
    Store16(p, v);  // round to nearest even: the conversion instructions
  } else {
    u32x16 bits;
    if constexpr (__is_same(T, half)) bits = HalfBits<M>(v);
    else bits = Bf16Bits<M>(v);
    u16x16 narrow = __builtin_convertvector(bits, u16x16);
    __builtin_memcpy(p, &narrow, sizeof narrow);
  }
}

// The bits of the float format (kMant mantissa bits, kExp exponent bits) nearest to the integer
// `mag` by mode `m`, with the sign bit set for `negative`: for integers too wide for an exact fp32.
template <int kMant, int kExp>
inline uint32_t FloatBitsOfInteger(uint64_t mag, bool negative, RoundMode m) {
  constexpr int kPrecision = kMant + 1;
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const uint32_t sign = negative ? 1u << (kMant + kExp) : 0u;
  if (mag == 0) return sign;
  const MagMode mode = MagFor(m, negative);
  int width = 64 - __builtin_clzll(mag), exponent = width - 1;
  uint64_t q = mag << (width < kPrecision ? kPrecision - width : 0);
  if (width > kPrecision) {
    int dropped = width - kPrecision;
    q = RoundKept<uint64_t>(mag >> dropped, mag & ((uint64_t(1) << dropped) - 1), uint64_t(1) << (dropped - 1), mode);
    if (q >> kPrecision) {
      q >>= 1;
      ++exponent;
    }
  }
  if (exponent > kBias) {
    bool saturate = mode == kTowardZero || mode == kToOdd;
    return sign | (((uint32_t(2 * kBias + 1) << kMant) - (saturate ? 1u : 0u)));
  }
  return sign | (uint32_t(exponent + kBias) << kMant) | uint32_t(q & ((uint64_t(1) << kMant) - 1));
}

template <typename T>
inline T FloatOfInteger(uint64_t mag, bool negative, RoundMode m) {
  if constexpr (__is_same(T, float)) return BitsFloat(FloatBitsOfInteger<23, 8>(mag, negative, m));
  else if constexpr (__is_same(T, half)) return half{uint16_t(FloatBitsOfInteger<10, 5>(mag, negative, m))};
  else return bfloat16{uint16_t(FloatBitsOfInteger<7, 8>(mag, negative, m))};
}

template <RoundMode M>
inline f32x16 RoundToIntegral16(f32x16 x) {
  switch (M) {
    case RoundMode::CAST_ROUND: return RoundAway16(x);
    case RoundMode::CAST_FLOOR: return Floor16(x);
    case RoundMode::CAST_CEIL: return Ceil16(x);
    case RoundMode::CAST_TRUNC: return Trunc16(x);
    default: return Rint16(x);
  }
}

template <typename T>
inline bool BeyondExactFp32(T v) {
  if constexpr (T(-1) < T(0)) return int64_t(v) > (1 << 24) || int64_t(v) < -(1 << 24);
  else return uint64_t(v) > (1u << 24);
}

// An integral float, saturated to I's range (NaN -> 0).
template <typename I>
inline I SaturateToInt(float r) {
  constexpr bool kSigned = I(-1) < I(0);
  constexpr int kBits = int(sizeof(I)) * 8 - (kSigned ? 1 : 0);
  constexpr I kMax = kSigned ? I((uint64_t(1) << kBits) - 1) : I(~uint64_t(0));
  constexpr I kMin = kSigned ? I(-kMax - 1) : I(0);
  constexpr float kHi = float(uint64_t(1) << (kBits - 1)) * 2.0f;  // 2^kBits, exact
  if (r != r) return I(0);
  if (r >= kHi) return kMax;
  if (r < (kSigned ? -kHi : 0.0f)) return kMin;
  return I(r);
}

template <RoundMode M, typename TD, typename TS>
inline void CastRun(TD* d, const TS* s, int64_t n) {
  if constexpr (kIsFloatLike<TD> && kIsFloatLike<TS>) {
    if constexpr (__is_same(TD, TS)) {
      __builtin_memmove(d, s, size_t(n) * sizeof(TD));
    } else {
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) StoreRounded16<TD, M>(d + i, Load16(s + i));
      if (i < n) {
        TD out[16];
        StoreRounded16<TD, M>(out, LoadTail16(s + i, n - i));
        CopyTail(d + i, out, n - i);
      }
    }
  } else if constexpr (kIsFloatLike<TS>) {  // float -> int
    for (int64_t i = 0; i < n; i += 16) {
      const int64_t m = n - i < 16 ? n - i : 16;
      f32x16 r = RoundToIntegral16<M>(m == 16 ? Load16(s + i) : LoadTail16(s + i, m));
      for (int64_t j = 0; j < m; ++j) d[i + j] = SaturateToInt<TD>(r[j]);
    }
  } else if constexpr (kIsFloatLike<TD>) {  // int -> float: exact in fp32 up to 2^24
    for (int64_t i = 0; i < n; i += 16) {
      const int64_t m = n - i < 16 ? n - i : 16;
      f32x16 exact{};
      bool wide = false;
      for (int64_t j = 0; j < m; ++j) {
        exact[j] = float(s[i + j]);
        wide |= BeyondExactFp32(s[i + j]);
      }
      TD out[16];
      StoreRounded16<TD, M>(out, exact);
      for (int64_t j = 0; wide && j < m; ++j) {
        const TS v = s[i + j];
        if (BeyondExactFp32(v)) {
          const bool negative = v < TS(0);
          out[j] = FloatOfInteger<TD>(negative ? uint64_t(0) - uint64_t(v) : uint64_t(v), negative, M);
        }
      }
      __builtin_memcpy(d + i, out, size_t(m) * sizeof(TD));
    }
  } else {  // int -> int
    for (int64_t i = 0; i < n; ++i) d[i] = TD(s[i]);
  }
}

// The rows x cols window of tiles of `tile_cols` columns (source and destination alike), converted.
template <typename TD, typename TS>
inline void CastBody(CoreCtx& ctx, int line, RoundMode mode, TD* d, const TS* s, int64_t tile_cols, int64_t rows,
                     int64_t cols) {
  auto run = [&]<RoundMode M>() {
    ForWindowOf(tile_cols, rows, cols, [&](int64_t off, int64_t n) { CastRun<M>(d + off, s + off, n); });
  };
  switch (mode) {
    case RoundMode::CAST_RINT: return run.template operator()<RoundMode::CAST_RINT>();
    case RoundMode::CAST_ROUND: return run.template operator()<RoundMode::CAST_ROUND>();
    case RoundMode::CAST_FLOOR: return run.template operator()<RoundMode::CAST_FLOOR>();
    case RoundMode::CAST_CEIL: return run.template operator()<RoundMode::CAST_CEIL>();
    case RoundMode::CAST_TRUNC: return run.template operator()<RoundMode::CAST_TRUNC>();
    case RoundMode::CAST_NONE: return run.template operator()<RoundMode::CAST_NONE>();
    case RoundMode::CAST_ODD:
      if constexpr (__is_same(TD, half) && __is_same(TS, float)) return run.template operator()<RoundMode::CAST_ODD>();
      break;
  }
  Fault(ctx, line, "cast", "CAST_ODD is only defined for fp32 -> fp16");
}

}  // namespace detail

template <typename TD, typename TS>
inline void cast(CoreCtx& ctx, int line, RoundMode mode, TD& dst, const TS& src) {
  detail::CastBody(ctx, line, mode, dst.data, src.data, TD::kCols, dst.valid_rows, dst.valid_cols);
}

// add_relu_cast / sub_relu_cast / mul_cast (public pages): the backend issues the binary op into lhs,
// the relu in place, then the conversion into out, so lhs keeps the intermediate result (rounded to
// its dtype, integers wrapping) and out gets it converted as pl.cast with `mode` would. Everything
// runs over out's valid window. target_type is out's dtype (checked at compile time).
namespace detail {

// The steps of add_relu_cast and sub_relu_cast (mul_cast's: WrapMulF), named for the tier-0 executor.
template <typename T>
struct AddReluStep {
  template <typename V>
  V operator()(V a, V b) const { return ReluF{}(Round<T>(a + b)); }
};
template <typename T>
struct SubReluStep {
  template <typename V>
  V operator()(V a, V b) const { return ReluF{}(Round<T>(a - b)); }
};

// The mode StepThenCast converts with: CAST_ODD means round-to-odd for fp32 -> fp16 only; the compiler
// lets it through for exact conversions too, where any mode gives the same result.
template <typename TD, typename TA>
constexpr RoundMode StepCastMode(RoundMode mode) {
  return mode == RoundMode::CAST_ODD && !(__is_same(TD, half) && __is_same(TA, float)) ? RoundMode::CAST_RINT : mode;
}

template <RoundMode M, typename Step, typename TD, typename TA, typename TB>
inline void StepThenCast(TD& dst, TA& lhs, const TB& rhs, Step step) {
  ForWindow(dst, [&](int64_t off, int64_t n) {
    MapLanes(lhs.data + off, n, step, lhs.data + off, rhs.data + off);
    CastRun<M>(dst.data + off, lhs.data + off, n);
  });
}

template <typename Step, typename TD, typename TA, typename TB>
inline void StepThenCast(RoundMode mode, TD& dst, TA& lhs, const TB& rhs, Step step) {
  switch (mode) {
    case RoundMode::CAST_RINT: return StepThenCast<RoundMode::CAST_RINT>(dst, lhs, rhs, step);
    case RoundMode::CAST_ROUND: return StepThenCast<RoundMode::CAST_ROUND>(dst, lhs, rhs, step);
    case RoundMode::CAST_FLOOR: return StepThenCast<RoundMode::CAST_FLOOR>(dst, lhs, rhs, step);
    case RoundMode::CAST_CEIL: return StepThenCast<RoundMode::CAST_CEIL>(dst, lhs, rhs, step);
    case RoundMode::CAST_TRUNC: return StepThenCast<RoundMode::CAST_TRUNC>(dst, lhs, rhs, step);
    case RoundMode::CAST_NONE: return StepThenCast<RoundMode::CAST_NONE>(dst, lhs, rhs, step);
    case RoundMode::CAST_ODD:
      if constexpr (StepCastMode<typename TD::Elem, typename TA::Elem>(RoundMode::CAST_ODD) == RoundMode::CAST_ODD) {
        return StepThenCast<RoundMode::CAST_ODD>(dst, lhs, rhs, step);
      } else {
        return StepThenCast<RoundMode::CAST_RINT>(dst, lhs, rhs, step);
      }
  }
}

}  // namespace detail

template <typename TD, typename TA, typename TB>
inline void add_relu_cast(CoreCtx&, int, int /*target_type*/, RoundMode mode, TD& dst, TA& lhs, const TB& rhs) {
  detail::StepThenCast(mode, dst, lhs, rhs, detail::AddReluStep<typename TA::Elem>{});
}
template <typename TD, typename TA, typename TB>
inline void sub_relu_cast(CoreCtx&, int, int /*target_type*/, RoundMode mode, TD& dst, TA& lhs, const TB& rhs) {
  detail::StepThenCast(mode, dst, lhs, rhs, detail::SubReluStep<typename TA::Elem>{});
}
template <typename TD, typename TA, typename TB>
inline void mul_cast(CoreCtx&, int, int /*target_type*/, RoundMode mode, TD& dst, TA& lhs, const TB& rhs) {
  detail::StepThenCast(mode, dst, lhs, rhs, detail::WrapMulF<typename TA::Elem>{});
}

}  // namespace pto
