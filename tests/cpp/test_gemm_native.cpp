// The GEMM routine behind pl.matmul (gemm.h): each check of gemm_check.h runs here compiled like
// kernels for the host (-march=native: its dot-product paths, AMX where it has them), again without
// AMX (the AVX-512 BF16 / VNNI paths an AMX host would otherwise never run; see CMakeLists.txt), and
// in test_vector_ops.cpp compiled portably (the fp32 paths).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gemm_check.h"
#include "pypto_pro/device.h"

namespace pypto_pro {
namespace {

TEST(CubeGemm, Fp16MatchesNaive) { test_util::ExpectMatchesNaiveOnEveryShape<pto::half, float>(test_util::InitKind::kZero, 1); }
TEST(CubeGemm, Bf16MatchesNaive) {
  test_util::ExpectMatchesNaiveOnEveryShape<pto::bfloat16, float>(test_util::InitKind::kZero, 2);
}
TEST(CubeGemm, Fp32MatchesNaive) { test_util::ExpectMatchesNaiveOnEveryShape<float, float>(test_util::InitKind::kZero, 3); }
TEST(CubeGemm, Int8IsExactInInt32) {
  test_util::ExpectMatchesNaiveOnEveryShape<int8_t, int32_t>(test_util::InitKind::kZero, 4);
  test_util::ExpectInt8SumsExactAndWrapping();
}
TEST(CubeGemm, BiasAndInPlaceAccumulation) {
  test_util::ExpectMatchesNaiveOnEveryShape<pto::half, float>(test_util::InitKind::kBias, 5);
  test_util::ExpectMatchesNaiveOnEveryShape<pto::bfloat16, float>(test_util::InitKind::kMatrixInPlace, 6);
  test_util::ExpectMatchesNaiveOnEveryShape<int8_t, int32_t>(test_util::InitKind::kMatrixInPlace, 7);
  test_util::ExpectMatchesNaiveOnEveryShape<int8_t, int32_t>(test_util::InitKind::kBias, 8);
}
TEST(CubeGemm, EmptyKGivesTheInit) { test_util::ExpectEmptyKGivesTheInit(); }
TEST(CubeGemm, Fp16ProductsAreExact) { test_util::ExpectFp16ProductsExact(); }
// The widest operands a matmul takes (N up to 4095 with a short K): right on every path, and on AMX
// only where one k tile of the wider side fits a packed panel (fp16: 8 bytes per k and column).
TEST(CubeGemm, WidestOperands) {
  test_util::CheckGemm<pto::half, float>(5, 4095, 8, test_util::InitKind::kZero, 9);
  test_util::CheckGemm<pto::bfloat16, float>(5, 4095, 16, test_util::InitKind::kMatrixInPlace, 10);
  test_util::CheckGemm<int8_t, int32_t>(4095, 5, 16, test_util::InitKind::kBias, 11);
#if PTO_GEMM_AMX
  EXPECT_FALSE(pto::gemm::amx::Fits<pto::half>(5, 4095));
  EXPECT_FALSE(pto::gemm::amx::Fits<pto::half>(2049, 32));
  EXPECT_TRUE(pto::gemm::amx::Fits<pto::half>(32, 2048));
  EXPECT_TRUE(pto::gemm::amx::Fits<pto::bfloat16>(5, 4095));
  EXPECT_TRUE(pto::gemm::amx::Fits<int8_t>(4095, 5));
#endif
}
TEST(CubeGemm, RandomScaledMatmulsStayWithinTheirBound) {
  test_util::ExpectRandomScaledGemms<pto::bfloat16, float>(21, 40);
  test_util::ExpectRandomScaledGemms<pto::half, float>(22, 40);
  test_util::ExpectRandomScaledGemms<float, float>(23, 20);
  test_util::ExpectRandomScaledGemms<int8_t, int32_t>(24, 20);
}
TEST(CubeGemm, Fp32PriorSubnormalsAreKept) { test_util::ExpectFp32PriorKeptExactly(); }
TEST(CubeGemm, Bf16SubnormalsGiveIeeeResults) {
  for (const char* where : {"a", "b", "product"}) {
    test_util::ExpectBf16SubnormalsKept(64, 64, 64, where);    // A's tiles straight from A
    test_util::ExpectBf16SubnormalsKept(48, 48, 80, where);    // packed A, B's last columns by element
    test_util::ExpectBf16SubnormalsKept(64, 64, 2112, where);  // several k panels
  }
}
// The tile unit's and vdpbf16ps's sums are IEEE's when every nonzero product and partial sum is a
// multiple of 2^-126: the smallest exponents of A and B add up to -112 or more, and none is subnormal.
TEST(CubeGemm, Bf16DotExactnessBoundary) {
  using pto::gemm::detail::Bf16DotIsExact;
  using pto::gemm::detail::MinExponentField;
  const pto::bfloat16 values[] = {pto::bfloat16{0}, pto::bfloat16{0x8000}, pto::FromFloat<pto::bfloat16>(-0x1p-56f),
                                  pto::FromFloat<pto::bfloat16>(3.0f)};
  EXPECT_EQ(MinExponentField(values, 4, 1, 4), 127 - 56);
  EXPECT_EQ(MinExponentField(values, 4, 1, 2), 512);  // zeros only
  const pto::bfloat16 subnormal[] = {pto::FromFloat<pto::bfloat16>(1.0f), pto::bfloat16{0x807f}};
  EXPECT_EQ(MinExponentField(subnormal, 2, 1, 2), 0);
  EXPECT_TRUE(Bf16DotIsExact(127 - 56, 127 - 56));
  EXPECT_FALSE(Bf16DotIsExact(127 - 56, 127 - 57));
  EXPECT_TRUE(Bf16DotIsExact(127 - 126, 127 + 14));
  EXPECT_FALSE(Bf16DotIsExact(0, 255));
  EXPECT_TRUE(Bf16DotIsExact(512, 1));
}
TEST(CubeGemm, Fp16InfinityAndNanPropagate) {
  test_util::ExpectFp16InfinityAndNanPropagate(48, 40);    // one k block
  test_util::ExpectFp16InfinityAndNanPropagate(300, 700);  // several k blocks (the last one holds the inf)
}

// What Gemm derives from operands that cannot change during a launch (gemm::Reuse: packed panels, A's
// smallest magnitudes) is kept for that launch only: within it a later matmul of the same windows
// reads what was kept (so changing them in between, which forward_moves' conditions rule out, shows the
// old values); another launch derives afresh. Kept results are the bits of a matmul without Reuse, for
// values the tile unit takes and values it would flush (those run on the fp32 path either way).
template <typename TIn, typename TC>
void ExpectKeptForTheLaunch(uint64_t launch, float b_special, float a_special = 0) {
  constexpr int kM = 96, kK = 128, kN = 64, kLd = 256;  // windows of wider arrays, as in GM
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<TIn> a(size_t(kM) * kLd), b(size_t(kK) * kLd);
  auto value = [&](int v) {
    if constexpr (__is_same(TIn, int8_t)) return int8_t(v);
    else return pto::FromFloat<TIn>(float(v) * 0.25f);
  };
  for (TIn& x : a) x = value(small(rng));
  for (TIn& x : b) x = value(small(rng));
  if constexpr (!__is_same(TIn, int8_t)) {  // values another path takes (bf16 subnormals, fp16 infinities)
    if (b_special != 0) b[5 * kLd + 3] = pto::FromFloat<TIn>(b_special);
    if (a_special != 0) a[7 * kLd + 9] = pto::FromFloat<TIn>(a_special);
  }
  auto product = [&](pto::gemm::Reuse reuse) {
    std::vector<TC> c(size_t(kM) * kN);
    pto::gemm::Gemm(kM, kN, kK, a.data(), kLd, b.data(), kLd, c.data(), kN, pto::gemm::Init<TC>{}, reuse);
    return c;
  };
  auto same_bits = [](const std::vector<TC>& x, const std::vector<TC>& y) {  // NaNs included
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(TC)) == 0;
  };
  const std::vector<TC> plain = product({});
  EXPECT_TRUE(same_bits(product({launch, launch}), plain));
  EXPECT_TRUE(same_bits(product({launch, launch}), plain));  // from the kept panels
  for (TIn& x : b) x = value(1);
  const std::vector<TC> changed = product({});
  EXPECT_NE(changed, plain);
  EXPECT_EQ(product({launch + 1, launch + 1}), changed);  // another launch: derived afresh
  for (TIn& x : b) x = value(2);
  const std::vector<TC> kept = product({launch + 1, launch + 1});
#if PTO_GEMM_AMX  // only the tile unit's path keeps panels (A's subnormal keeps it on the fp32 path)
  const bool keeps = pto::gemm::amx::Enabled() && pto::gemm::amx::Fits<TIn>(kM, kN) && a_special == 0;
#else
  const bool keeps = false;
#endif
  EXPECT_EQ(kept, keeps ? changed : product({}));
}
TEST(CubeGemm, OperandsAreKeptForTheirLaunchOnly) {
  ExpectKeptForTheLaunch<pto::bfloat16, float>(1000, 0);
  ExpectKeptForTheLaunch<pto::bfloat16, float>(1010, 0x1p-130f);  // B subnormal: the fp32 path, kept or not
  ExpectKeptForTheLaunch<pto::bfloat16, float>(1040, 0, 0x1p-130f);  // A subnormal: its row block on the fp32 path
  ExpectKeptForTheLaunch<pto::half, float>(1020, 0);
  ExpectKeptForTheLaunch<pto::half, float>(1060, __builtin_inff());  // the vector path
  ExpectKeptForTheLaunch<int8_t, int32_t>(1030, 0);
}

// KLoop (fuse_k_loops) leaves C, and the window `also` a store after the loop writes, as Gemm called
// step by step leaves C (matmul, then matmul_acc in place), bit for bit, or declines with both untouched: on a host without the tile unit, for a launch of 0, for
// steps whose panels are not whole blocks, and for bf16 products below its margin (2^-106 here).
template <typename TIn, typename TC>
void ExpectKLoopGivesTheSteps(int m, int n, int kt, int steps, float scale, bool expect_fused, uint64_t launch) {
  const int k = kt * steps;
  const int64_t lda = k + 16, ldb = n + 32;  // windows of wider arrays, as in GM
  std::mt19937 rng(uint32_t(m * 7 + n * 3 + steps));
  std::normal_distribution<float> normal;
  std::vector<TIn> a(size_t(m) * lda), b(size_t(k) * ldb);
  auto value = [&](float scaled) {
    if constexpr (__is_same(TIn, int8_t)) return int8_t(int(normal(rng) * 40) % 128);
    else return pto::FromFloat<TIn>(normal(rng) * scaled);
  };
  for (TIn& x : a) x = value(1.0f);
  for (TIn& x : b) x = value(scale);
  // `also`: a wider array (a store's window in GM) that gets the finished sums too
  const int64_t ld_also = n + 48;
  std::vector<TC> stepwise(size_t(m) * n), fused(size_t(m) * n, TC(7)), also(size_t(m) * ld_also, TC(5));
  for (int s = 0; s < steps; ++s) {
    const pto::gemm::Init<TC> prior{s ? stepwise.data() : nullptr, s ? int64_t(n) : 0};
    pto::gemm::Gemm(m, n, kt, a.data() + s * kt, lda, b.data() + int64_t(s) * kt * ldb, ldb, stepwise.data(), n, prior,
                    pto::gemm::Reuse{launch, launch});
  }
  const bool ran = pto::gemm::KLoop(m, n, kt, steps, a.data(), lda, int64_t(kt), b.data(), ldb, int64_t(kt) * ldb,
                                    fused.data(), int64_t(n), launch, also.data(), ld_also);
#if PTO_GEMM_AMX
  const bool tile_unit = pto::gemm::amx::Enabled() && (!__is_same(TIn, int8_t) || PTO_GEMM_AMX_INT8);
#else
  const bool tile_unit = false;
#endif
  EXPECT_EQ(ran, expect_fused && tile_unit) << m << "x" << n << " kt " << kt << " steps " << steps;
  if (ran) {
    EXPECT_EQ(std::memcmp(fused.data(), stepwise.data(), fused.size() * sizeof(TC)), 0);
    for (int i = 0; i < m; ++i) {
      EXPECT_EQ(std::memcmp(&also[size_t(i) * ld_also], &stepwise[size_t(i) * n], n * sizeof(TC)), 0) << "row " << i;
      EXPECT_TRUE(std::all_of(&also[size_t(i) * ld_also + n], &also[size_t(i + 1) * ld_also],
                              [](TC x) { return x == TC(5); }));
    }
  } else {
    EXPECT_TRUE(std::all_of(fused.begin(), fused.end(), [](TC x) { return x == TC(7); }));
    EXPECT_TRUE(std::all_of(also.begin(), also.end(), [](TC x) { return x == TC(5); }));
  }
}
TEST(CubeGemm, KLoopGivesTheStepsBits) {
  ExpectKLoopGivesTheSteps<pto::bfloat16, float>(128, 128, 128, 4, 1.0f, true, 2000);
  ExpectKLoopGivesTheSteps<pto::bfloat16, float>(64, 96, 64, 3, 1.0f, true, 2001);
  ExpectKLoopGivesTheSteps<pto::half, float>(64, 64, 128, 5, 1.0f, true, 2002);
  ExpectKLoopGivesTheSteps<int8_t, int32_t>(96, 128, 256, 3, 1.0f, true, 2003);
  ExpectKLoopGivesTheSteps<pto::bfloat16, float>(128, 128, 128, 2, 0x1p-100f, false, 2004);  // below the margin
  ExpectKLoopGivesTheSteps<pto::bfloat16, float>(48, 64, 128, 2, 1.0f, false, 2005);  // not whole blocks
  ExpectKLoopGivesTheSteps<pto::bfloat16, float>(64, 64, 128, 2, 1.0f, false, 0);     // no launch to keep for
  ExpectKLoopGivesTheSteps<float, float>(64, 64, 64, 2, 1.0f, false, 2006);           // no tile-unit path
}

}  // namespace
}  // namespace pypto_pro
