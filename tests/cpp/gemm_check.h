// The GEMM routine (gemm.h) against a naive product in double, shared by a test compiled for the
// host's vector unit (test_cube_ops.cpp: the dot-product paths the host has) and one compiled
// portably (test_vector_ops.cpp: the fp32 paths every host has).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pypto_pro/device.h"

namespace pypto_pro::test_util {

template <typename T>
T Convert(float x) {
  if constexpr (__is_same(T, int8_t)) return T(x);
  else return pto::FromFloat<T>(x);
}

template <typename T>
double AsDouble(T x) {
  if constexpr (__is_same(T, int8_t) || __is_same(T, int32_t)) return double(x);
  else return double(pto::ToFloat(x));
}

// C = init + A x B in double (exact for int8), on row-major arrays with leading dimensions.
template <typename TIn, typename TC>
std::vector<double> NaiveGemm(int m, int n, int k, const std::vector<TIn>& a, int lda, const std::vector<TIn>& b,
                              int ldb, const TC* init, int64_t init_stride) {
  std::vector<double> c(size_t(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = init ? double(init[i * init_stride + j]) : 0.0;
      for (int p = 0; p < k; ++p) sum += AsDouble(a[size_t(i) * lda + p]) * AsDouble(b[size_t(p) * ldb + j]);
      c[size_t(i) * n + j] = sum;
    }
  }
  return c;
}

enum class InitKind { kZero, kBias, kMatrixInPlace };

// Runs Gemm on m x k x n windows of padded arrays (leading dimensions larger than the window) and
// checks the window against NaiveGemm and that nothing outside it was written.
template <typename TIn, typename TC>
void CheckGemm(int m, int n, int k, InitKind init_kind, unsigned seed) {
  SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) + " init " +
               std::to_string(int(init_kind)));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-128, 127);
  std::normal_distribution<float> normal;
  auto value = [&]() { return __is_same(TIn, int8_t) ? float(small(rng)) : normal(rng); };
  const int lda = k + 3, ldb = n + 5, ldc = n + 7;
  std::vector<TIn> a(size_t(m) * lda), b(size_t(k + 1) * ldb);
  for (TIn& x : a) x = Convert<TIn>(value());
  for (TIn& x : b) x = Convert<TIn>(value());
  const TC kSentinel = TC(-12345);
  std::vector<TC> c(size_t(m + 1) * ldc, kSentinel);
  std::vector<TC> bias(static_cast<size_t>(n));
  for (TC& x : bias) x = TC(__is_same(TC, int32_t) ? small(rng) * 1000 : normal(rng));
  pto::gemm::Init<TC> init;
  const TC* ref_init = nullptr;
  int64_t ref_stride = 0;
  if (init_kind == InitKind::kBias) {
    init = {bias.data(), 0};
    ref_init = bias.data();
  } else if (init_kind == InitKind::kMatrixInPlace) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) c[size_t(i) * ldc + j] = TC(__is_same(TC, int32_t) ? small(rng) * 77 : normal(rng));
    }
    init = {c.data(), ldc};
    ref_init = c.data();
    ref_stride = ldc;
  }
  std::vector<double> ref = NaiveGemm(m, n, k, a, lda, b, ldb, ref_init, ref_stride);  // before C is overwritten
  pto::gemm::Gemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, init);
  double worst = 0;
  for (int i = 0; i <= m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      TC got = c[size_t(i) * ldc + j];
      if (i == m || j >= n) {
        ASSERT_EQ(got, kSentinel) << "written outside the window at " << i << ", " << j;
        continue;
      }
      double want = ref[size_t(i) * n + j];
      if constexpr (__is_same(TC, int32_t)) {
        ASSERT_EQ(double(got), want) << "at " << i << ", " << j;
      } else {
        worst = std::max(worst, std::fabs(double(got) - want) / (1.0 + std::fabs(want)));
      }
    }
  }
  // fp32 accumulation of k products: relative error within a few k * 2^-24.
  EXPECT_LT(worst, 1e-6 * (k + 16)) << "fp32 accumulation error";
}

struct GemmShape {
  int m, n, k;
};
// Odd sizes around the register tile (4 x 64), the int8 dot product's quads of k and the packing
// blocks (k 256, n 128).
const GemmShape kShapes[] = {{1, 1, 1}, {7, 31, 3}, {8, 32, 16}, {9, 33, 17}, {37, 71, 50}, {128, 128, 128},
                             {13, 300, 600}, {130, 129, 257}};

template <typename TIn, typename TC>
void ExpectMatchesNaiveOnEveryShape(InitKind init_kind, unsigned seed) {
  for (const GemmShape& s : kShapes) CheckGemm<TIn, TC>(s.m, s.n, s.k, init_kind, seed);
}

// Random matmuls whose rows of A and columns of B carry random powers of two (down into the subnormals,
// for fp16 and bf16 as stored values too), with random zeros, whole rows and columns of zeros (C is
// then the prior) and a prior of the same scale or far smaller: every element must be within fp32
// accumulation's bound of the exact result, measured against the sizes of its own products, so a path
// that flushes or loses small values cannot hide behind large ones.
// int8: exact. One call checks `count` matmuls from `seed`.
template <typename TIn, typename TC>
void ExpectRandomScaledGemms(unsigned seed, int count) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> percent(0, 99), small(-128, 127);
  auto pick_size = [&](int most) {
    const int round[] = {16, 32, 48, 64, 96, 128};
    return percent(rng) < 50 ? round[percent(rng) % 6] % (most + 1) + (percent(rng) < 10) : 1 + percent(rng) * most / 100;
  };
  const bool fp16 = __is_same(TIn, pto::half);
  for (int t = 0; t < count; ++t) {
    // exponent ranges of the row and column scales: half the cases into the subnormals of the stored
    // type or of fp32, half narrow (where the host's fast paths take the whole matmul)
    const bool wide = t % 2 == 0;
    const int row_lo = wide ? (fp16 ? -26 : -140) : -8, row_hi = fp16 ? 2 : wide ? 20 : 8;
    const int col_lo = wide ? (fp16 ? -8 : -60) : -4, col_hi = fp16 ? 3 : wide ? 60 : 4;
    const int m = std::max(1, pick_size(130)), n = std::max(1, pick_size(130)), k = std::max(1, pick_size(300));
    const InitKind init_kind = InitKind(percent(rng) % 3);
    SCOPED_TRACE("case " + std::to_string(t) + ": " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                 std::to_string(k) + " init " + std::to_string(int(init_kind)));
    std::vector<double> row_scale(m), col_scale(n);
    for (double& x : row_scale) x = std::ldexp(1.0, row_lo + percent(rng) * (row_hi - row_lo) / 99);
    for (double& x : col_scale) x = std::ldexp(1.0, col_lo + percent(rng) * (col_hi - col_lo) / 99);
    auto value = [&](double scale) -> TIn {
      if (percent(rng) < 10) return TIn{};
      if constexpr (__is_same(TIn, int8_t)) return TIn(small(rng));
      else return Convert<TIn>(float(normal(rng) * scale));
    };
    std::vector<TIn> a(size_t(m) * k), b(size_t(k) * n);
    std::vector<bool> zero_row(m), zero_col(n);
    for (int i = 0; i < m; ++i) zero_row[i] = percent(rng) < 10;
    for (int j = 0; j < n; ++j) zero_col[j] = percent(rng) < 10;
    for (int i = 0; i < m; ++i) {
      for (int p = 0; p < k; ++p) a[size_t(i) * k + p] = zero_row[i] ? TIn{} : value(row_scale[i]);
    }
    for (int p = 0; p < k; ++p) {
      for (int j = 0; j < n; ++j) b[size_t(p) * n + j] = zero_col[j] ? TIn{} : value(col_scale[j]);
    }
    std::vector<TC> c(size_t(m) * n), bias(n);
    for (int j = 0; j < n; ++j) bias[j] = __is_same(TC, int32_t) ? TC(small(rng) * 1000) : TC(normal(rng) * col_scale[j]);
    pto::gemm::Init<TC> init;
    if (init_kind == InitKind::kBias) init = {bias.data(), 0};
    if (init_kind == InitKind::kMatrixInPlace) {
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          const double tiny = percent(rng) < 20 ? std::ldexp(1.0, -100 - percent(rng) % 50) : 1.0;
          c[size_t(i) * n + j] = __is_same(TC, int32_t) ? TC(small(rng) * 77)
                                 : percent(rng) < 10 ? TC(0) : TC(normal(rng) * row_scale[i] * col_scale[j] * tiny);
        }
      }
      init = {c.data(), n};
    }
    const std::vector<TC> prior = c;
    const TC* ref_init = init_kind == InitKind::kBias ? bias.data() : init_kind == InitKind::kMatrixInPlace ? prior.data() : nullptr;
    const int64_t ref_stride = init_kind == InitKind::kMatrixInPlace ? n : 0;
    const std::vector<double> ref = NaiveGemm(m, n, k, a, k, b, n, ref_init, ref_stride);
    pto::gemm::Gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, init);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        const double want = ref[size_t(i) * n + j], got = double(c[size_t(i) * n + j]);
        if constexpr (__is_same(TC, int32_t)) {
          ASSERT_EQ(got, want) << "at " << i << ", " << j;
        } else {
          double size = ref_init ? std::fabs(double(ref_init[i * ref_stride + j])) : 0.0;
          for (int p = 0; p < k; ++p) size += std::fabs(AsDouble(a[size_t(i) * k + p]) * AsDouble(b[size_t(p) * n + j]));
          const double bound = (k + 2) * (0x1p-23 * size + 0x1p-149);
          ASSERT_LE(std::fabs(got - want), bound) << "at " << i << ", " << j << ": got " << got << ", want " << want;
        }
      }
    }
  }
}

inline void ExpectInt8SumsExactAndWrapping() {
  // Sums of k = 2000 products of -128 are 2^25 - ...: past fp32's exact integers, still exact here.
  std::vector<int8_t> a(2000, -128), b(2000 * 3, -127);
  a[0] = 3;
  std::vector<int32_t> c(3);
  pto::gemm::Gemm(1, 3, 2000, a.data(), 2000, b.data(), 3, c.data(), 3);
  EXPECT_EQ(c[0], 1999 * 128 * 127 - 3 * 127);
  // int32 sums wrap like the device's accumulator: INT32_MAX - 5 + 4 * 127 * 127 (k = 4) and
  // INT32_MIN - 5 * 128 * 127 (k = 5: a partial quad of k).
  std::vector<int8_t> highs(5, 127), lows(5, -128);
  std::vector<int32_t> acc = {2147483647 - 5, -2147483647 - 1};
  pto::gemm::Gemm(1, 1, 4, highs.data(), 4, highs.data(), 1, acc.data(), 1, pto::gemm::Init<int32_t>{acc.data(), 1});
  pto::gemm::Gemm(1, 1, 5, lows.data(), 5, highs.data(), 1, acc.data() + 1, 1,
                  pto::gemm::Init<int32_t>{acc.data() + 1, 1});
  EXPECT_EQ(uint32_t(acc[0]), 2147483647u - 5u + 4u * 127u * 127u);
  EXPECT_EQ(uint32_t(acc[1]), 2147483648u - 5u * 128u * 127u);
}

// Every product of two fp16 values is exact in fp32 (11 + 11 significant bits, exponents from 2^-48
// to 2^32), so with k = 1 C must hold it exactly, for any split of the values the GEMM makes.
inline void ExpectFp16ProductsExact() {
  std::vector<pto::half> values;
  for (uint16_t bits : {0x0001, 0x0003, 0x03ff, 0x0400, 0x07ff, 0x1234, 0x3bff, 0x3c00, 0x3c01, 0x3fff, 0x4e6d,
                        0x5bdf, 0x7bff, 0x8001, 0x8765, 0xbc01, 0xc5a3, 0xfbff, 0x0000, 0x8000, 0x3555, 0x2aaa,
                        0x77fe, 0x0155, 0x6c3f, 0xa001, 0x9ffe, 0x7801, 0x13f7, 0x3d2f, 0xf0f0, 0x0f0f}) {
    values.push_back(pto::half{bits});
  }
  const int n = int(values.size());
  std::vector<float> c(size_t(n) * n);
  pto::gemm::Gemm(n, n, 1, values.data(), 1, values.data(), n, c.data(), n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double want = AsDouble(values[i]) * AsDouble(values[j]);
      ASSERT_EQ(double(c[size_t(i) * n + j]), want) << "fp16 bits " << values[i].bits << " x " << values[j].bits;
    }
  }
}

// An infinity or NaN among fp16 inputs gives IEEE's results (inf x 1 = inf, not the NaN that
// splitting inf into parts would give), whether it is met in the first k block or a later one.
inline void ExpectFp16InfinityAndNanPropagate(int n, int k) {
  SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k));
  const int m = 3;
  std::vector<pto::half> a(size_t(m) * k, pto::FromFloat<pto::half>(0.5f)), b(size_t(k) * n);
  for (size_t i = 0; i < b.size(); ++i) b[i] = pto::FromFloat<pto::half>(1.0f + float(i % 7) / 8);
  a[size_t(0) * k + k - 1] = pto::half{0x7c00};  // +inf, in the last k
  a[size_t(1) * k + k / 2] = pto::half{0x7e00};  // NaN
  std::vector<float> c(size_t(m) * n);
  pto::gemm::Gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n);
  std::vector<double> ref = NaiveGemm<pto::half, float>(m, n, k, a, k, b, n, nullptr, 0);
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(c[j], std::numeric_limits<float>::infinity()) << "column " << j;
    EXPECT_TRUE(std::isnan(c[size_t(n) + j])) << "column " << j;
    EXPECT_NEAR(c[size_t(2) * n + j], ref[size_t(2) * n + j], 1e-6 * k * std::fabs(ref[size_t(2) * n + j]));
  }
}

// bf16 A (m x k) and B (k x n) of small multiples of 1/2 and 1/4 in a fixed pattern: every product
// and every sum of up to thousands of them is exact in fp32, in any order.
inline void SmallMultiplesOfAQuarter(int m, int n, int k, std::vector<pto::bfloat16>& a,
                                     std::vector<pto::bfloat16>& b) {
  a.assign(size_t(m) * k, pto::bfloat16{0});
  b.assign(size_t(k) * n, pto::bfloat16{0});
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) a[size_t(i) * k + p] = pto::FromFloat<pto::bfloat16>(0.5f * float((i + 2 * p) % 5 - 2));
  }
  for (int p = 0; p < k; ++p) {
    for (int j = 0; j < n; ++j) b[size_t(p) * n + j] = pto::FromFloat<pto::bfloat16>(0.25f * float((3 * p + j) % 7 - 3));
  }
}

// bf16 subnormals give IEEE's results on every path: the host's bf16 dot products (AMX, vdpbf16ps)
// flush subnormal inputs and results, so gemm.h hands such matmuls (on AMX: the rows from the first
// row block of A that needs it) to the fp32 path. Every other value is a small multiple of 1/4 and
// every sum exact, and row r's products are one per element, so C must equal the exact product bit for bit. `where`: which operand holds the
// small values ("a": a subnormal in A's row r, "b": one in B, "product": two normal values whose
// product is subnormal); r = 40, in A's second row block of 32.
inline void ExpectBf16SubnormalsKept(int m, int n, int k, const char* where) {
  SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) + " " + where);
  std::vector<pto::bfloat16> a, b;
  SmallMultiplesOfAQuarter(m, n, k, a, b);
  const int r = 40 < m ? 40 : m - 1, col = n / 2;
  // Row r of A holds one value, in column 1, the only one there: row r of C is that value times B's row 1.
  for (int i = 0; i < m; ++i) a[size_t(i) * k + 1] = pto::bfloat16{0};
  for (int p = 0; p < k; ++p) a[size_t(r) * k + p] = pto::bfloat16{0};
  const std::string w = where;
  for (int j = 0; j < n; ++j) b[size_t(1) * n + j] = pto::FromFloat<pto::bfloat16>(w == "a" ? 0x1p100f * float(j % 3 + 1) : 0.0f);
  if (w == "a") a[size_t(r) * k + 1] = pto::bfloat16{0x0002};                      // 2^-132, subnormal
  if (w == "b") {
    a[size_t(r) * k + 1] = pto::FromFloat<pto::bfloat16>(0x1p90f);
    b[size_t(1) * n + col] = pto::bfloat16{0x8003};                                  // -3 x 2^-133
  }
  if (w == "product") {
    a[size_t(r) * k + 1] = pto::FromFloat<pto::bfloat16>(0x1p-70f);
    b[size_t(1) * n + col] = pto::FromFloat<pto::bfloat16>(-0x1.8p-70f);             // product -1.5 x 2^-140
  }
  std::vector<float> c(size_t(m) * n, -1.0f);
  pto::gemm::Gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n);
  const std::vector<double> ref = NaiveGemm<pto::bfloat16, float>(m, n, k, a, k, b, n, nullptr, 0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      ASSERT_EQ(c[size_t(i) * n + j], float(ref[size_t(i) * n + j])) << "row " << i << " column " << j;
    }
  }
  EXPECT_NE(c[size_t(r) * n + col], 0.0f);  // the small product itself
}

// matmul_acc in place with an fp32 prior holding values the tile unit would flush: a subnormal prior
// (3 x 2^-149 + 0) and a normal one that a product brings into the subnormals (2^-112 + 2^-135 - 2^-112);
// every other value is a small multiple of 1/4 and every sum exact, so C must be exact bit for bit.
inline void ExpectFp32PriorKeptExactly() {
  const int m = 64, n = 64, k = 64;
  std::vector<pto::bfloat16> a, b;
  SmallMultiplesOfAQuarter(m, n, k, a, b);
  for (int p = 0; p < k; ++p) a[p] = a[size_t(40) * k + p] = pto::bfloat16{0};  // rows 0 and 40 of A: zeros
  for (int i = 0; i < m; ++i) a[size_t(i) * k + 1] = pto::bfloat16{0};
  for (int j = 0; j < n; ++j) b[size_t(1) * n + j] = pto::bfloat16{0};
  a[size_t(40) * k + 1] = pto::FromFloat<pto::bfloat16>(-0x1p-56f);                // one product: -2^-112 at [40, 40]
  b[size_t(1) * n + 40] = pto::FromFloat<pto::bfloat16>(0x1p-56f);
  std::vector<float> c(size_t(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) c[size_t(i) * n + j] = 0.25f * float((i * 7 + j) % 9 - 4);
  }
  c[0] = 0x1.8p-148f;                                // subnormal
  c[size_t(40) * n + 40] = 0x1p-112f + 0x1p-135f;    // + (-2^-112) = 2^-135, subnormal
  const std::vector<float> prior = c;
  pto::gemm::Gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, pto::gemm::Init<float>{c.data(), n});
  const std::vector<double> ref = NaiveGemm<pto::bfloat16, float>(m, n, k, a, k, b, n, prior.data(), n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      ASSERT_EQ(c[size_t(i) * n + j], float(ref[size_t(i) * n + j])) << "row " << i << " column " << j;
    }
  }
  EXPECT_EQ(c[0], 0x1.8p-148f);
  EXPECT_EQ(c[size_t(40) * n + 40], 0x1p-135f);
}

inline void ExpectEmptyKGivesTheInit() {
  std::vector<pto::half> a(4), b(4);
  std::vector<float> c(6, 1.0f), bias = {0.5f, -2.0f, 4.0f};
  pto::gemm::Gemm(2, 3, 0, a.data(), 1, b.data(), 3, c.data(), 3, pto::gemm::Init<float>{bias.data(), 0});
  EXPECT_EQ(c, (std::vector<float>{0.5f, -2.0f, 4.0f, 0.5f, -2.0f, 4.0f}));
}

}  // namespace pypto_pro::test_util
