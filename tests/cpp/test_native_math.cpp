// exp as kernels compute it (vector_math.h, Exp16): on AVX-512 hosts its clamps, rounding and scaling
// are single instructions (vminps / vmaxps, vrndscaleps, vscalefps), which the portable test binary
// (test_vector_ops.cpp) never runs. Built like kernels (-march=native) into the native test binary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pypto_pro/device.h"

namespace {

double UlpError(float r, double ref) {
  if (std::isnan(ref)) return std::isnan(r) ? 0 : 1e9;
  if (std::isinf(ref) || std::isinf(r)) return float(ref) == r ? 0 : 1e9;
  const float fr = float(ref);
  double ulp = std::fabs(double(std::nextafter(fr, INFINITY)) - double(fr));
  if (ulp == 0 || std::isinf(ulp)) ulp = std::ldexp(1.0, -149);
  return std::fabs(double(r) - ref) / ulp;
}

TEST(NativeMath, ExpWithinAnUlpAndAHalfEverywhere) {
  double worst = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 65537 * 3) {
    float lanes[16];
    for (int i = 0; i < 16; ++i) {
      const uint32_t u = uint32_t(b + uint64_t(i) * 4099);
      std::memcpy(&lanes[i], &u, 4);
    }
    pto::f32x16 v;
    std::memcpy(&v, lanes, sizeof v);
    const pto::f32x16 e = pto::Exp16(v);
    for (int i = 0; i < 16; ++i) worst = std::max(worst, UlpError(e[i], std::exp(double(lanes[i]))));
  }
  EXPECT_LT(worst, 1.5);
}

TEST(NativeMath, ExpOfSpecialValues) {
  const float in[16] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 88.7f, 89.0f,
                        89.5f,    1e30f,     -103.9f, -104.0f, -105.0f, -1e30f, 1e-45f, -87.4f};
  pto::f32x16 v;
  std::memcpy(&v, in, sizeof v);
  const pto::f32x16 e = pto::Exp16(v);
  EXPECT_EQ(e[0], INFINITY);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_TRUE(std::isnan(e[3]));
  EXPECT_EQ(e[4], 1.0f);
  EXPECT_EQ(e[5], 1.0f);
  EXPECT_EQ(e[8], INFINITY);
  EXPECT_EQ(e[9], INFINITY);
  EXPECT_EQ(e[12], 0.0f);
  EXPECT_EQ(e[13], 0.0f);
  for (int i : {6, 7, 10, 11, 14, 15}) EXPECT_LT(UlpError(e[i], std::exp(double(in[i]))), 1.5) << in[i];
}

}  // namespace
