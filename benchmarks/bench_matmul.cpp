// The matmul device routine (device_include/pypto_pro/gemm.h) on one core, against this core's
// fp32 FMA peak measured in the same run and against a naive triple loop.
// Build and run: make bench   (or: cmake --build cmake-build --target bench_matmul)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "pypto_pro/gemm.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Best time of `reps` runs of fn (the machine is shared: the minimum is the least disturbed).
template <typename F>
double BestSeconds(int reps, F fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    fn();
    double s = Seconds(Clock::now() - start);
    if (s < best) best = s;
  }
  return best;
}

// 16 independent FMA chains of 16 lanes: the throughput bound of the core.
double FmaPeakGflops() {
  constexpr long kIters = 4000000;
  float sink = 0;
  double s = BestSeconds(5, [&] {
    pto::f32x16 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = pto::f32x16{} + float(i) * 1e-3f;
    pto::f32x16 a = pto::f32x16{} + 0.999f, b = pto::f32x16{} + 1e-4f;
    __asm__ volatile("" : "+v"(a), "+v"(b));
    for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) acc[i] = pto::FusedMulAdd16(acc[i], a, b);
    }
    for (int i = 0; i < 16; ++i) sink += acc[i][0];
  });
  if (sink == 12345.0f) std::puts("");
  return 2.0 * 16 * 16 * kIters / s / 1e9;
}

template <typename TIn>
TIn From(float x) {
  if constexpr (__is_same(TIn, int8_t)) return TIn(int(x * 40) % 100);
  else return pto::FromFloat<TIn>(x);
}

template <typename TIn, typename TC>
void Naive(int m, int n, int k, const TIn* a, const TIn* b, TC* c) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float sum = 0;
      for (int p = 0; p < k; ++p) sum += pto::gemm::detail::ToFloat1(a[i * k + p]) * pto::gemm::detail::ToFloat1(b[p * n + j]);
      c[i * n + j] = TC(sum);
    }
  }
}

template <typename TIn, typename TC>
void Row(const char* name, int m, int n, int k, double peak) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<TIn> a(size_t(m) * k), b(size_t(k) * n);
  for (TIn& x : a) x = From<TIn>(dist(rng));
  for (TIn& x : b) x = From<TIn>(dist(rng));
  std::vector<TC> c(size_t(m) * n), ref(size_t(m) * n);
  const double flop = 2.0 * m * n * k;
  const int reps = int(2e9 / flop) + 3;
  double fast = BestSeconds(reps, [&] {
    pto::gemm::Gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n);
  });
  double naive = BestSeconds(3, [&] { Naive(m, n, k, a.data(), b.data(), ref.data()); });
  double err = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    double d = double(c[i]) - double(ref[i]);
    err = d < 0 ? (-d > err ? -d : err) : (d > err ? d : err);
  }
  double gflops = flop / fast / 1e9;
  std::printf("| %-6s | %4d x %4d x %4d | %8.1f | %5.0f%% | %8.2f | %7.1fx | %.2g |\n", name, m, n, k, gflops,
              100 * gflops / peak, flop / naive / 1e9, naive / fast, err);
}

}  // namespace

int main() {
  double peak = FmaPeakGflops();
  std::printf("fp32 FMA peak of this core, measured now: %.1f GFLOP/s\n\n", peak);
  std::printf("| dtype  | M x N x K          | GFLOP/s  | %% peak | naive    | speed-up | max |diff| vs naive |\n");
  std::printf("|--------|--------------------|----------|--------|----------|----------|-----|\n");
  Row<pto::half, float>("fp16", 128, 128, 128, peak);
  Row<pto::bfloat16, float>("bf16", 128, 128, 128, peak);
  Row<float, float>("fp32", 128, 128, 128, peak);
  Row<int8_t, int32_t>("int8", 128, 128, 128, peak);
  Row<pto::half, float>("fp16", 64, 64, 64, peak);
  Row<pto::half, float>("fp16", 127, 129, 131, peak);
  Row<pto::half, float>("fp16", 256, 256, 256, peak);
  return 0;
}
