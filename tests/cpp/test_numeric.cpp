// The fp16/bf16 conversions of device_include/pypto_pro/numeric.h. This file is compiled without
// -march=native (unlike kernels), so pto::HalfFromFloat / pto::ToFloat(half) are the software
// fallback; they are checked against the F16C instructions, used through a function-level target.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

// numeric.h's 64-byte vector types draw an ABI note without AVX-512; nothing crosses a binary here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#include "pypto_pro/numeric.h"
#pragma GCC diagnostic pop

namespace pypto_pro {
namespace {

using pto::BitsFloat;
using pto::FloatBits;

// Hardware references, compiled for F16C whatever the flags of this file.
__attribute__((target("f16c"))) uint16_t HardwareHalfFromFloat(float f) {
  pto::f32x4 v = {f, 0, 0, 0};
  return uint16_t(__builtin_ia32_vcvtps2ph(v, _MM_FROUND_TO_NEAREST_INT)[0]);
}

__attribute__((target("f16c"))) float HardwareHalfToFloat(uint16_t h) {
  pto::i16x8 v = {short(h), 0, 0, 0, 0, 0, 0, 0};
  return __builtin_ia32_vcvtph2ps(v)[0];
}

bool HalfIsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool FloatIsNan(uint32_t u) { return (u & 0x7fffffff) > 0x7f800000; }
uint16_t SoftHalf(float f) { return pto::HalfFromFloat(f).bits; }
float SoftToFloat(uint16_t h) { return pto::ToFloat(pto::half{h}); }

bool HasF16c() { return __builtin_cpu_supports("f16c"); }

// The fallback makes every NaN 0x7e00 (with its sign) where F16C keeps the payload, which shows the
// other tests exercise the fallback. A build that adds F16C to this file's flags is told so.
TEST(Numeric, SoftwareHalfPathIsUnderTest) {
#if defined(__F16C__)
  GTEST_SKIP() << "this file was compiled with F16C: the software half conversions are not under test";
#else
  EXPECT_EQ(SoftHalf(BitsFloat(0x7fffe000)), 0x7e00);
  EXPECT_EQ(SoftHalf(BitsFloat(0xffc02000)), 0xfe00);
  if (HasF16c()) EXPECT_EQ(HardwareHalfFromFloat(BitsFloat(0x7fffe000)), 0x7fff);
#endif
}

TEST(Numeric, HandCheckedHalfConversions) {
  EXPECT_EQ(SoftToFloat(0x3c00), 1.0f);
  EXPECT_EQ(SoftToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(SoftToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(SoftToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(SoftToFloat(0xc000), -2.0f);
  EXPECT_EQ(SoftToFloat(0xfc00), -INFINITY);
  EXPECT_EQ(FloatBits(SoftToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(SoftHalf(1.0f), 0x3c00);
  EXPECT_EQ(SoftHalf(-0.0f), 0x8000);
  EXPECT_EQ(SoftHalf(65504.0f), 0x7bff);
  EXPECT_EQ(SoftHalf(65519.99f), 0x7bff);
  EXPECT_EQ(SoftHalf(65520.0f), 0x7c00);  // the tie rounds to even: the odd 0x7bff goes up to inf
  EXPECT_EQ(SoftHalf(1e10f), 0x7c00);
  EXPECT_EQ(SoftHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(SoftHalf(std::ldexp(1.0f, -25)), 0x0000);                                // tie -> even 0
  EXPECT_EQ(SoftHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(SoftHalf(std::ldexp(3.0f, -25)), 0x0002);                                // 1.5 ulp -> 2
  EXPECT_EQ(SoftHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);       // up into normals
  EXPECT_EQ(SoftHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);                        // tie -> even
  EXPECT_EQ(SoftHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);                    // tie -> even
  EXPECT_TRUE(HalfIsNan(SoftHalf(NAN)));
}

TEST(Numeric, EveryHalfRoundTrips) {
  int nans = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = uint16_t(bits);
    float f = SoftToFloat(h);
    uint16_t back = SoftHalf(f);
    if (HalfIsNan(h)) {
      ++nans;
      ASSERT_TRUE(FloatIsNan(FloatBits(f))) << std::hex << bits;
      ASSERT_TRUE(HalfIsNan(back)) << std::hex << bits << " -> " << back;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << bits;
    } else {
      ASSERT_EQ(back, h) << std::hex << bits << " -> " << f;
    }
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(Numeric, HalfToFloatMatchesF16c) {
  if (!HasF16c()) GTEST_SKIP() << "the CPU has no F16C";
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = uint16_t(bits);
    uint32_t soft = FloatBits(SoftToFloat(h)), hard = FloatBits(HardwareHalfToFloat(h));
    if (HalfIsNan(h)) {
      ASSERT_TRUE(FloatIsNan(soft) && FloatIsNan(hard)) << std::hex << bits;
    } else {
      ASSERT_EQ(soft, hard) << std::hex << bits;
    }
  }
}

// ~1e6 floats that stress the conversion: any bit pattern, the fp16 range (subnormals and the
// overflow edge included), exact ties between neighbouring halves and their float neighbours.
std::vector<float> HalfConversionInputs() {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> out;
  out.reserve(1'050'000);
  for (int n = 0; n < 250'000; ++n) out.push_back(BitsFloat(any(rng)));
  // Exponents 2^-26 .. 2^16: below the smallest subnormal half up to past the largest half.
  std::uniform_int_distribution<uint32_t> exp(101, 143), man(0, 0x7fffff);
  for (int n = 0; n < 250'000; ++n) out.push_back(BitsFloat((any(rng) & 0x80000000u) | exp(rng) << 23 | man(rng)));
  // Midpoints between half h and h + 1, and one float ulp either side of them.
  std::uniform_int_distribution<uint32_t> half_bits(0, 0x7bff);
  for (int n = 0; n < 160'000; ++n) {
    uint16_t h = uint16_t(half_bits(rng));
    float lo = SoftToFloat(h);
    float tie = h < 0x0400 ? std::ldexp(float(2 * h + 1), -25)  // subnormal: (2h + 1) * 2^-25
                           : BitsFloat(FloatBits(lo) + 0x1000);  // normal: half a half-ulp above
    float sign = any(rng) & 1 ? -1.0f : 1.0f;
    out.push_back(sign * tie);
    out.push_back(sign * std::nextafter(tie, 0.0f));
    out.push_back(sign * std::nextafter(tie, INFINITY));
  }
  // Neighbourhoods of the edges: 0, min subnormal/2, min normal, 1, max half, the overflow tie, float min.
  for (float edge : {0.0f, std::ldexp(1.0f, -25), std::ldexp(1.0f, -24), std::ldexp(1.0f, -14), 1.0f, 65504.0f,
                     65520.0f, 65536.0f, std::ldexp(1.0f, -126)}) {
    for (int32_t k = -2000; k <= 2000; ++k) {
      int64_t bits = int64_t(FloatBits(edge)) + k;
      if (bits < 0) continue;
      out.push_back(BitsFloat(uint32_t(bits)));
      out.push_back(-BitsFloat(uint32_t(bits)));
    }
  }
  return out;
}

TEST(Numeric, HalfFromFloatMatchesF16c) {
  if (!HasF16c()) GTEST_SKIP() << "the CPU has no F16C";
  std::vector<float> inputs = HalfConversionInputs();
  ASSERT_GT(inputs.size(), 1'000'000u);
  size_t ties = 0, subnormals = 0, overflows = 0;
  for (float f : inputs) {
    uint16_t soft = SoftHalf(f), hard = HardwareHalfFromFloat(f);
    if (FloatIsNan(FloatBits(f))) {
      ASSERT_TRUE(HalfIsNan(soft)) << std::hexfloat << f;
      ASSERT_TRUE(HalfIsNan(hard));
      ASSERT_EQ(soft & 0x8000, hard & 0x8000) << std::hexfloat << f;
      continue;
    }
    ASSERT_EQ(soft, hard) << std::hexfloat << f << " (bits " << std::hex << FloatBits(f) << ")";
    uint16_t mag = hard & 0x7fff;
    subnormals += mag != 0 && mag < 0x0400;
    overflows += mag == 0x7c00 && std::isfinite(f);
    if (mag < 0x7c00 && std::fabs(f) != SoftToFloat(mag)) {
      // A tie sits exactly half way between the result and its neighbour on the input's side.
      float d = std::fabs(f) - SoftToFloat(mag);
      uint16_t neighbour = uint16_t(d > 0 ? mag + 1 : mag - 1);
      ties += 2 * d == SoftToFloat(neighbour) - SoftToFloat(mag);
    }
  }
  // The interesting regions really were covered.
  EXPECT_GT(subnormals, 10'000u);
  EXPECT_GT(overflows, 10'000u);
  EXPECT_GT(ties, 100'000u);
}

// ---- bf16 ----

uint16_t SoftBf16(uint32_t bits) { return pto::Bf16FromFloat(BitsFloat(bits)).bits; }

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(SoftBf16(0x3f800000), 0x3f80);  // 1.0
  EXPECT_EQ(SoftBf16(0x3f807fff), 0x3f80);  // below the midpoint
  EXPECT_EQ(SoftBf16(0x3f808000), 0x3f80);  // tie, even stays
  EXPECT_EQ(SoftBf16(0x3f808001), 0x3f81);  // above the midpoint
  EXPECT_EQ(SoftBf16(0x3f818000), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(SoftBf16(0xbf818000), 0xbf82);  // the same, negative
  EXPECT_EQ(SoftBf16(0x3f7fffff), 0x3f80);  // carries into the exponent
  EXPECT_EQ(SoftBf16(0x7f7f7fff), 0x7f7f);  // largest finite stays finite
  EXPECT_EQ(SoftBf16(0x7f7fffff), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(SoftBf16(0xff7fffff), 0xff80);
  EXPECT_EQ(SoftBf16(0x7f800000), 0x7f80);  // inf
  EXPECT_EQ(SoftBf16(0x00008000), 0x0000);  // float subnormal tie to even zero
  EXPECT_EQ(SoftBf16(0x00018000), 0x0002);
  EXPECT_EQ(SoftBf16(0x80000000), 0x8000);  // -0
  EXPECT_EQ(pto::ToFloat(pto::bfloat16{0x4049}), 3.140625f);
  EXPECT_EQ(pto::ToFloat(pto::bfloat16{0xc2f7}), -123.5f);
}

TEST(Numeric, Bf16KeepsNaNsQuiet) {
  // Payloads only in the low half would truncate to inf without the NaN check.
  for (uint32_t nan : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffc00000u, 0x7fa00000u, 0x7fffffffu, 0x7f80ffffu}) {
    uint16_t b = SoftBf16(nan);
    EXPECT_TRUE((b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0) << std::hex << nan << " -> " << b;
    EXPECT_NE(b & 0x40, 0) << "not quiet: " << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
    EXPECT_TRUE(std::isnan(pto::ToFloat(pto::bfloat16{b})));
  }
  EXPECT_EQ(SoftBf16(0x7fa00000), 0x7fe0);  // the payload is kept
}

TEST(Numeric, Bf16MatchesAReferenceRounding) {
  // Reference: truncate, then add one when the dropped half is above the midpoint or a tie on odd.
  auto reference = [](uint32_t u) -> uint16_t {
    uint32_t kept = u >> 16, dropped = u & 0xffff;
    return uint16_t(kept + (dropped > 0x8000 || (dropped == 0x8000 && (kept & 1))));
  };
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<uint32_t> bits(1 << 18);
  for (size_t n = 0; n < bits.size(); ++n) {
    uint32_t u = any(rng);
    bits[n] = n % 4 == 0 ? (u & 0xffff0000u) | 0x8000 : u;  // a quarter are exact ties
  }
  for (uint32_t u : bits) {
    uint16_t got = SoftBf16(u);
    if (FloatIsNan(u)) {
      ASSERT_TRUE((got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0) << std::hex << u;
    } else {
      ASSERT_EQ(got, reference(u)) << std::hex << u;
    }
  }
}

}  // namespace
}  // namespace pypto_pro
