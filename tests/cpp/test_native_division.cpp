// Division by a reciprocal (vector_math.h, DivByReciprocal16): what row_expand_div and divs compute
// with on AVX-512 hosts must be the division's bits, for every dividend, on every divisor it is used
// for. Built like kernels (-march=native) into the native test binary (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pypto_pro/device.h"

namespace {

using pto::f32x16;

uint32_t Bits(float f) { return __builtin_bit_cast(uint32_t, f); }
float FromBits(uint32_t u) { return __builtin_bit_cast(float, u); }

#if PTO_RECIPROCAL_DIVISION

// The lanes of `a` (a multiple of 16) where a / b by reciprocal differs from the division (NaNs
// agree with NaNs); the first one described in `first`.
int64_t Mismatches(const std::vector<float>& a, float b, std::string& first) {
  const f32x16 divisor = pto::Splat(b), y = pto::Splat(1.0f / b);
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); i += 16) {
    f32x16 x;
    std::memcpy(&x, a.data() + i, sizeof x);
    const f32x16 got = pto::DivByReciprocal16(x, divisor, y), want = x / divisor;
    for (int k = 0; k < 16; ++k) {
      if (Bits(got[k]) == Bits(want[k]) || (got[k] != got[k] && want[k] != want[k])) continue;
      if (count++ == 0) {
        std::ostringstream out;
        out << std::hexfloat << x[k] << " / " << b << ": " << got[k] << ", the division " << want[k];
        first = out.str();
      }
    }
  }
  return count;
}

TEST(ReciprocalDivision, EveryMantissaOfTheDividendGivesTheDivisionsBits) {
  // Divisors of every kind of significand (1, all ones, one ulp above 1, random) and at both ends
  // of the range where the reciprocal is used.
  const float divisors[] = {1.0f,           3.0f,           0x1.fffffep0f,   0x1.000002p0f, 1.5f,
                            7.0f,           -0.1f,          1234.5678f,      0x1.3a5c7ep-17f, 0x1p-60f,
                            0x1.fffffep60f, -0x1.55555p-59f};
  std::vector<float> a(size_t(1) << 23);
  for (const int exponent : {0, 37, -45, 59, -60}) {
    for (uint32_t m = 0; m < a.size(); ++m) {
      a[m] = FromBits(((m & 1u) << 31) | (uint32_t(exponent + 127) << 23) | m);  // both signs
    }
    for (const float b : divisors) {
      ASSERT_TRUE(pto::DividesByReciprocal(b)) << b;
      std::string first;
      EXPECT_EQ(Mismatches(a, b, first), 0) << "dividends 2^" << exponent << " x [1, 2): " << first;
    }
  }
}

TEST(ReciprocalDivision, RandomOperandsGiveTheDivisionsBits) {
  // Divisors and dividends of any significand and sign over the whole range the reciprocal is used
  // for (biased exponents 67 .. 187); in every 64th vector one lane of any bits (a zero, subnormal,
  // infinity or NaN there sends the vector to the division).
  std::mt19937 rng(7);
  auto in_range = [&] { return FromBits((uint32_t(rng()) & 0x807fffffu) | ((67u + uint32_t(rng()) % 121u) << 23)); };
  std::vector<float> a(size_t(1) << 16);
  for (int divisors = 0; divisors < 2000; ++divisors) {
    const float b = in_range();
    for (float& x : a) x = in_range();
    for (size_t i = 0; i < a.size(); i += 64 * 16) a[i + rng() % 16] = FromBits(uint32_t(rng()));
    std::string first;
    ASSERT_EQ(Mismatches(a, b, first), 0) << first;
  }
}

TEST(ReciprocalDivision, ItIsUsedOnlyWhereNothingOverOrUnderflows) {
  EXPECT_TRUE(pto::DividesByReciprocal(0x1p-60f));
  EXPECT_TRUE(pto::DividesByReciprocal(-0x1.fffffep60f));
  EXPECT_FALSE(pto::DividesByReciprocal(0x1.fffffep-61f));
  EXPECT_FALSE(pto::DividesByReciprocal(0x1p61f));
  for (const float b : {0.0f, -0.0f, 0x1p-149f, __builtin_inff(), __builtin_nanf("")}) {
    EXPECT_FALSE(pto::DividesByReciprocal(b)) << b;
  }
}

#else

TEST(ReciprocalDivision, NotUsedOnThisHost) { GTEST_SKIP() << "row_expand_div and divs divide (no AVX-512 FMA)"; }

#endif

}  // namespace
