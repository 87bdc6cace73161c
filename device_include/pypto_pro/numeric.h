// Element types and their conversion to and from fp32, scalar and 16 lanes at a time.
// fp16/bf16 math is done in fp32 and rounded back after every op (round to nearest even), which
// gives exactly the IEEE result for + - * / because fp32 carries more than 2p+2 bits.
// No <immintrin.h>: it costs ~250 ms per kernel compile; the compiler builtins below do not.
#pragma once

#include <stdint.h>

namespace pto {

// Default visibility (kernels compile with -fvisibility=hidden): a template of the routines library
// instantiated for them must be visible to the kernels that call it (routines/*.cpp).
struct __attribute__((visibility("default"))) half {
  uint16_t bits;
};
struct __attribute__((visibility("default"))) bfloat16 {
  uint16_t bits;
};

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef short i16x16 __attribute__((vector_size(32)));
typedef short i16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
#if defined(__AVX512FP16__)
// fp16 lanes the host computes with natively (avx512_fp16): direct runs and Map of the ops whose
// fp16 result is the fp32 lanes' rounded to fp16 (vector_ops.h, kHalfLanesExact).
typedef _Float16 h32 __attribute__((vector_size(64)));

// An fp16 value in every lane.
inline h32 HalfLanes(half h) {
  _Float16 x;
  __builtin_memcpy(&x, &h, sizeof x);
  return h32{} + x;
}

// 32 fp16 values (`bytes` of them, the other lanes zero) as lanes.
inline h32 LoadHalves(const half* p, size_t bytes = 64) {
  h32 v{};
  __builtin_memcpy(&v, p, bytes);
  return v;
}
#endif

// A 64- or 32-byte store around the caches (movntps / movntdq; p aligned to its size). GCC and clang
// spell the instruction differently. Such stores are weakly ordered: other threads may see them after
// later stores. The runtime fences once a core's program ends (runtime/core.h, RunCoreProgram), before
// anything tells another thread the block is done; within a launch, cores that exchange data through
// GM (pl.system.sync_all, INTER_BLOCK flags) all run on one host thread, which sees its own stores in
// program order. So the stores themselves need no fence (one per strip cost softmax 14%, Intel Xeon).
template <typename V>
__attribute__((always_inline)) inline void StreamStore(void* p, V v) {
  typedef long long Line64 __attribute__((vector_size(64)));  // aligned to their sizes
  typedef long long Line32 __attribute__((vector_size(32)));
  static_assert(sizeof(V) == 64 || sizeof(V) == 32, "a zmm or ymm register's worth");
  if constexpr (sizeof(V) == 64) {
#if defined(__clang__)
    __builtin_nontemporal_store((Line64)v, static_cast<Line64*>(p));
#elif defined(__AVX512F__)
    __builtin_ia32_movntdq512(static_cast<Line64*>(p), (Line64)v);
#else
    __builtin_memcpy(p, &v, sizeof v);
#endif
  } else {
#if defined(__clang__)
    __builtin_nontemporal_store((Line32)v, static_cast<Line32*>(p));
#elif defined(__AVX__)
    __builtin_ia32_movntdq256(static_cast<Line32*>(p), (Line32)v);
#else
    __builtin_memcpy(p, &v, sizeof v);
#endif
  }
}

inline uint32_t FloatBits(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float BitsFloat(uint32_t u) { return __builtin_bit_cast(float, u); }

// ---- fp16 ----
#if defined(__F16C__)
inline float ToFloat(half h) {
  i16x8 v = {short(h.bits), 0, 0, 0, 0, 0, 0, 0};
  return __builtin_ia32_vcvtph2ps(v)[0];
}
inline half HalfFromFloat(float f) {
  f32x4 v = {f, 0, 0, 0};
  return half{uint16_t(__builtin_ia32_vcvtps2ph(v, 0)[0])};
}
#else
inline float ToFloat(half h) {
  uint32_t sign = uint32_t(h.bits & 0x8000) << 16, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ff;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000 | (man << 13));
  if (exp == 0) {
    if (man == 0) return BitsFloat(sign);
    float v = float(man) * (1.0f / 16777216.0f);  // man * 2^-24
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (man << 13));
}
inline half HalfFromFloat(float f) {
  uint32_t u = FloatBits(f), sign = (u >> 16) & 0x8000, abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return half{uint16_t(sign | 0x7e00)};     // NaN
  if (abs >= 0x477ff000) return half{uint16_t(sign | 0x7c00)};    // rounds to infinity
  if (abs < 0x38800000) {                                          // fp16 subnormal or zero
    float scaled = BitsFloat(abs) * 16777216.0f;                   // exact: units of 2^-24
    uint32_t q = uint32_t(scaled);
    float frac = scaled - float(q);
    if (frac > 0.5f || (frac == 0.5f && (q & 1))) ++q;
    return half{uint16_t(sign | q)};
  }
  uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
  return half{uint16_t(sign | ((rounded - 0x38000000) >> 13))};
}
#endif

// ---- bf16 ----
inline float ToFloat(bfloat16 b) { return BitsFloat(uint32_t(b.bits) << 16); }
inline bfloat16 Bf16FromFloat(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return bfloat16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  return bfloat16{uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16)};
}

inline float ToFloat(float f) { return f; }

template <typename T>
inline T FromFloat(float f);
template <>
inline float FromFloat<float>(float f) { return f; }
template <>
inline half FromFloat<half>(float f) { return HalfFromFloat(f); }
template <>
inline bfloat16 FromFloat<bfloat16>(float f) { return Bf16FromFloat(f); }

template <typename T>
constexpr bool kIsFloatLike = __is_same(T, float) || __is_same(T, half) || __is_same(T, bfloat16);
template <typename T>
constexpr bool kIsNarrowFloat = __is_same(T, half) || __is_same(T, bfloat16);

// ---- 16 lanes ----
inline f32x16 Load16(const half* p) {
  i16x16 raw;
  __builtin_memcpy(&raw, p, sizeof raw);
#if defined(__AVX512F__)
  return __builtin_ia32_vcvtph2ps512_mask(raw, f32x16{}, (unsigned short)0xffff, 4);
#elif defined(__F16C__)
  i16x8 lo = {raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]};
  i16x8 hi = {raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]};
  f32x8 a = __builtin_ia32_vcvtph2ps256(lo), b = __builtin_ia32_vcvtph2ps256(hi);
  return f32x16{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
#else
  f32x16 out;
  for (int i = 0; i < 16; ++i) out[i] = ToFloat(p[i]);
  return out;
#endif
}

inline void Store16(half* p, f32x16 v) {
#if defined(__AVX512F__)
  i16x16 raw = __builtin_ia32_vcvtps2ph512_mask(v, 0, i16x16{}, (unsigned short)0xffff);
  __builtin_memcpy(p, &raw, sizeof raw);
#else
  for (int i = 0; i < 16; ++i) p[i] = HalfFromFloat(v[i]);
#endif
}

inline f32x16 Load16(const bfloat16* p) {
  u16x16 raw;
  __builtin_memcpy(&raw, p, sizeof raw);
  u32x16 wide = __builtin_convertvector(raw, u32x16) << 16;
  return (f32x16)wide;
}

inline void Store16(bfloat16* p, f32x16 v) {
  u32x16 u = (u32x16)v;
  u32x16 rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
  u32x16 nan = (u32x16)((u & 0x7fffffff) > 0x7f800000);
  rounded = (nan & ((u >> 16) | 0x40)) | (~nan & rounded);
  u16x16 narrow = __builtin_convertvector(rounded, u16x16);
  __builtin_memcpy(p, &narrow, sizeof narrow);
}

inline f32x16 Load16(const float* p) {
  f32x16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void Store16(float* p, f32x16 v) { __builtin_memcpy(p, &v, sizeof v); }

// a * b + c rounded once on every host with fused multiply-adds (AVX-512, or AVX2's FMA), for either
// compiler, so exp and the fp32 GEMM give the same bits on all of them; only an x86 without FMA
// (before 2013) rounds twice. Kernels compile as ISO C++ (-ffp-contract=off): a * b + c never fuses.
// The body is a macro so gemm.h spells the same one inside its -O3 region: a function defined outside
// it and called from there costs the GEMM its register tile (spilled: 5x slower, fp32 128^3). Without
// AVX-512 the two 8-lane halves go through memory: the fp32 GEMM 25% slower there than rounding twice.
#if defined(__AVX512F__)
#define PTO_FUSED_MUL_ADD16_BODY(a, b, c) return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)0xffff, 4);
#elif defined(__FMA__)
#define PTO_FUSED_MUL_ADD16_BODY(a, b, c)                                          \
  f32x8 h[6];                                                                      \
  __builtin_memcpy(&h[0], &a, 64);                                                 \
  __builtin_memcpy(&h[2], &b, 64);                                                 \
  __builtin_memcpy(&h[4], &c, 64);                                                 \
  const f32x8 r[2] = {__builtin_ia32_vfmaddps256(h[0], h[2], h[4]),                \
                      __builtin_ia32_vfmaddps256(h[1], h[3], h[5])};               \
  f32x16 out;                                                                      \
  __builtin_memcpy(&out, r, 64);                                                   \
  return out;
#else
#define PTO_FUSED_MUL_ADD16_BODY(a, b, c) return a * b + c;
#endif
inline f32x16 FusedMulAdd16(f32x16 a, f32x16 b, f32x16 c) { PTO_FUSED_MUL_ADD16_BODY(a, b, c) }

constexpr u32x16 kLaneIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// v with lanes n.. zeroed, in registers.
inline f32x16 ZeroLanesFrom(f32x16 v, int64_t n) {
  return (f32x16)((u32x16)v & (u32x16)(kLaneIndex < uint32_t(n)));
}

// The first n < 16 elements at p as f32x16 lanes, the rest zero, read element by element and blended
// into their lanes in registers. A tail is often data an op just stored: element loads take it from
// the store buffer, where a vector load over a copy of it in memory (or over lanes written one by one)
// stalls until those stores reach the cache (a fused pass over 200-column rows spent 14% of its time
// there). Plain vector operations: the same code for every compiler.
template <typename T>
inline f32x16 LoadTail16(const T* p, int64_t n) {
  u32x16 v{};
  for (int64_t i = 0; i < n; ++i) {
    const u32x16 at = (u32x16)(kLaneIndex == uint32_t(i));
    v |= (u32x16{} + FloatBits(ToFloat(p[i]))) & at;  // (bits: an fp32 signalling NaN stays one)
  }
  return (f32x16)v;
}

}  // namespace pto
