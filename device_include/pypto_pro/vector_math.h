// Math on 16 fp32 lanes for the vector ops: rounding to integers, sqrt, exp, log, and rounding a
// value to a narrower element type. Written with GCC vector extensions so every op on a tile runs
// 16 lanes at a time; the libm calls behind __builtin_expf & co. would run one element at a time
// (-fmath-errno keeps the compiler from vectorising them).
#pragma once

#include "pypto_pro/numeric.h"

namespace pto {

typedef int32_t i32x16 __attribute__((vector_size(64)));

inline f32x16 Splat(float f) { return f - f32x16{}; }

inline f32x16 Abs16(f32x16 v) { return (f32x16)((u32x16)v & 0x7fffffffu); }
#if defined(__AVX512FP16__)
typedef uint16_t u16x32 __attribute__((vector_size(64)));
inline h32 Abs16(h32 v) { return (h32)((u16x32)v & uint16_t(0x7fff)); }
#endif

// |magnitude| with the sign bit of `sign`.
inline f32x16 CopySign16(f32x16 magnitude, f32x16 sign) {
  return (f32x16)(((u32x16)magnitude & 0x7fffffffu) | ((u32x16)sign & 0x80000000u));
}

// Round to an integral value, ties to even: adding 2^23 leaves no fraction bits. Values of 2^23 and
// more are integral already (NaN and infinities included).
inline f32x16 Rint16(f32x16 x) {
  const f32x16 big = Splat(8388608.0f);
  f32x16 ax = Abs16(x);
  f32x16 r = (ax + big) - big;
  return CopySign16(ax < big ? r : ax, x);
}
inline f32x16 Floor16(f32x16 x) {
  f32x16 r = Rint16(x);
  return r > x ? r - 1.0f : r;
}
inline f32x16 Ceil16(f32x16 x) {
  f32x16 r = Rint16(x);
  return r < x ? r + 1.0f : r;
}
inline f32x16 Trunc16(f32x16 x) { return CopySign16(Floor16(Abs16(x)), x); }
// Ties away from zero (C's round()); the fraction x - trunc(x) is exact.
inline f32x16 RoundAway16(f32x16 x) {
  f32x16 t = Trunc16(x);
  f32x16 up = CopySign16(Abs16(t) + 1.0f, x);
  return Abs16(x - t) >= 0.5f ? up : t;
}

inline f32x16 Sqrt16(f32x16 x) {
#if defined(__AVX512F__) && defined(__clang__)
  return __builtin_ia32_sqrtps512(x, 4);
#elif defined(__AVX512F__)
  return __builtin_ia32_sqrtps512_mask(x, x, (unsigned short)0xffff, 4);
#else
  for (int i = 0; i < 16; ++i) x[i] = __builtin_sqrtf(x[i]);
  return x;
#endif
}

// AVX-512 instructions for exp's clamping, rounding and scaling with GCC (clang spells some of their
// builtins otherwise; its portable forms below give the same values).
#if defined(__AVX512F__) && !defined(__clang__)
#define PTO_FUSED_EXP 1
#endif

// exp(x) = 2^n * exp(r) with r = x - n ln2 in [-ln2/2, ln2/2] and Cephes' degree-5 polynomial for
// exp(r) (about 1 ulp), in fused multiply-adds (FusedMulAdd16: the same bits on every host with FMA).
// Softmax and attention spend most of their time here, so AVX-512 hosts also get vscalefps (2^n with
// over/underflow and subnormals handled in hardware): 16 instructions per 16 lanes instead of 40.
// Elsewhere 2^n is applied as two exact factors and one rounding, the same value, so results in the
// subnormal range and n = 128 come out right. |x| is clamped only to keep n finite and in int range
// (the product over/underflows by itself).
inline f32x16 Exp16(f32x16 x) {
#if PTO_FUSED_EXP
  // vminps / vmaxps return their second operand unless the first is less / greater: a NaN x stays
  // NaN, as with the comparisons below (one instruction each instead of a compare and a blend)
  x = __builtin_ia32_minps512_mask(Splat(89.0f), x, x, (unsigned short)0xffff, 4);
  x = __builtin_ia32_maxps512_mask(Splat(-104.0f), x, x, (unsigned short)0xffff, 4);
#else
  x = x > 89.0f ? Splat(89.0f) : x;
  x = x < -104.0f ? Splat(-104.0f) : x;
#endif
#if PTO_FUSED_EXP
  f32x16 n = __builtin_ia32_rndscaleps_mask(x * 1.44269504088896341f, 0, x, (unsigned short)0xffff, 4);
#else
  f32x16 n = Rint16(x * 1.44269504088896341f);
#endif
  f32x16 r = FusedMulAdd16(n, Splat(-0.693359375f), x);  // ln2 split in two: n * 0.693359375 is exact
  r = FusedMulAdd16(n, Splat(2.12194440e-4f), r);
  f32x16 p = Splat(1.9875691500e-4f);
  p = FusedMulAdd16(p, r, Splat(1.3981999507e-3f));
  p = FusedMulAdd16(p, r, Splat(8.3334519073e-3f));
  p = FusedMulAdd16(p, r, Splat(4.1665795894e-2f));
  p = FusedMulAdd16(p, r, Splat(1.6666665459e-1f));
  p = FusedMulAdd16(p, r, Splat(5.0000001201e-1f));
  f32x16 y = FusedMulAdd16(p, r * r, r) + 1.0f;
#if PTO_FUSED_EXP
  return __builtin_ia32_scalefps512_mask(y, n, y, (unsigned short)0xffff, 4);
#else
  i32x16 k = __builtin_convertvector(n, i32x16);
  i32x16 half = k >> 1;
  f32x16 s1 = (f32x16)((half + 127) << 23);
  f32x16 s2 = (f32x16)((k - half + 127) << 23);
  return y * s1 * s2;
#endif
}

// a / b with the division's bits (correctly rounded) from y = RN(1/b), one division per divisor
// instead of one per 16 lanes: q0 = RN(a y) is within 1.5 ulp of a/b; one correction with the
// residual, q1 = RN(q0 + RN(a - b q0) y), is within an ulp (faithful); then a - b q1 is exact in one
// FMA and q1 + (a - b q1) y rounded once is RN(a/b) (Markstein's theorem, IBM J. Res. Dev. 34(1),
// 1990) — provided nothing over- or underflows, which |a| and |b| in [2^-60, 2^61) guarantee. A
// vector with a lane outside (zeros, subnormals, huge values, infinities, NaN) divides. One multiply
// and four FMAs: ~2.5 cycles on two FMA ports for a 16-lane division's ~10 (Intel); the row-broadcast
// and tile-scalar divisions (row_expand_div, divs: a divisor per row or tile) use it.
#if PTO_FUSED_EXP
#define PTO_RECIPROCAL_DIVISION 1
inline bool DividesByReciprocal(float b) {
  const uint32_t e = (__builtin_bit_cast(uint32_t, b) >> 23) & 0xffu;
  return e - 67u <= 120u;  // biased exponents 67 .. 187: 2^-60 <= |b| < 2^61
}
inline f32x16 DivByReciprocal16(f32x16 a, f32x16 b, f32x16 y) {
  const u32x16 e = ((u32x16)a >> 23) & 0xffu;
  if (__builtin_ia32_ucmpd512_mask((i32x16)(e - 67u), (i32x16)(u32x16{} + 120u), 6 /* greater than */,
                                   (unsigned short)0xffff)) {
    return a / b;
  }
  const f32x16 q0 = a * y;
  const f32x16 q1 = FusedMulAdd16(FusedMulAdd16(-q0, b, a), y, q0);
  return FusedMulAdd16(FusedMulAdd16(-q1, b, a), y, q1);
}
#endif
#undef PTO_FUSED_EXP

// log(x) = e ln2 + log(m) with x = m 2^e, m in [sqrt(1/2), sqrt(2)), and Cephes' polynomial for
// log(1 + t) (about 1 ulp). Subnormal inputs are scaled into the normal range first.
inline f32x16 Log16(f32x16 x) {
  const f32x16 tiny = Splat(1.17549435e-38f);  // the smallest normal
  f32x16 scaled = x < tiny ? x * 8388608.0f : x;
  f32x16 e_adjust = x < tiny ? Splat(-23.0f) : f32x16{};
  u32x16 bits = (u32x16)scaled;
  f32x16 e = __builtin_convertvector((i32x16)(bits >> 23) - 126, f32x16) + e_adjust;
  f32x16 m = (f32x16)((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  i32x16 low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  f32x16 t = (low ? m + m : m) - 1.0f;
  f32x16 z = t * t;
  f32x16 p = Splat(7.0376836292e-2f);
  p = p * t - 1.1514610310e-1f;
  p = p * t + 1.1676998740e-1f;
  p = p * t - 1.2420140846e-1f;
  p = p * t + 1.4249322787e-1f;
  p = p * t - 1.6668057665e-1f;
  p = p * t + 2.0000714765e-1f;
  p = p * t - 2.4999993993e-1f;
  p = p * t + 3.3333331174e-1f;
  f32x16 y = p * t * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  f32x16 result = t + y + e * 0.693359375f;
  const f32x16 inf = Splat(__builtin_inff());
  result = x == inf ? inf : result;
  result = x == 0.0f ? -inf : result;
  return x < 0.0f || x != x ? Splat(__builtin_nanf("")) : result;
}

// The fp32 value of `v` rounded to T (round to nearest even): fused ops round every intermediate
// result to the element type, like the separate instructions the hardware issues. For fp32 the
// empty asm makes the value opaque, so the compiler cannot contract x * y + z into one FMA (C++
// compiles with -ffp-contract=fast by default), which would round once instead of twice.
template <typename T>
inline f32x16 RoundTo(f32x16 v) {
  if constexpr (kIsNarrowFloat<T>) {
    T tmp[16];
    Store16(tmp, v);
    return Load16(tmp);
  } else {
#if defined(__AVX512F__)
    __asm__("" : "+v"(v));
#else
    __asm__("" : "+m"(v));
#endif
    return v;
  }
}

}  // namespace pto
