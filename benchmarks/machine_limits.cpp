// Measures this machine's limits the benchmark suite compares against: STREAM-style add bandwidth
// (a[i] = b[i] + c[i]) and the fp32 FMA peak of a register-blocked loop, on 1 and N threads.
// Prints JSON: {"add_gbps": {"1": x, "2": y}, "fma_gflops": {"1": x, "2": y}}.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <immintrin.h>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
typedef float f32x16 __attribute__((vector_size(64)));

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs fn(thread_index) on `threads` threads at once, `reps` times; returns the median seconds.
template <typename Fn>
double TimeParallel(int threads, int reps, Fn fn) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    std::barrier sync(threads + 1);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        sync.arrive_and_wait();
        fn(t);
        sync.arrive_and_wait();
      });
    }
    sync.arrive_and_wait();
    auto start = Clock::now();
    sync.arrive_and_wait();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    for (auto& th : pool) th.join();
  }
  return Median(times);
}

typedef float f32x16v __attribute__((vector_size(64)));

// A store that bypasses the caches where the host has one.
inline void StreamStore(f32x16v* to, f32x16v value) {
#if defined(__AVX512F__)
  _mm512_stream_ps(reinterpret_cast<float*>(to), __m512(value));
#elif defined(__AVX__)
  __m256 halves[2];
  __builtin_memcpy(halves, &value, sizeof value);
  _mm256_stream_ps(reinterpret_cast<float*>(to), halves[0]);
  _mm256_stream_ps(reinterpret_cast<float*>(to) + 8, halves[1]);
#else
  *to = value;
#endif
}

// The machine's add bandwidth: the better of plain stores (which read each destination line before
// writing it) and non-temporal ones (which do not: what a streaming kernel or library can reach), so a
// kernel is never judged against less than the machine can do.
double AddBandwidth(int threads) {
  const size_t n = size_t(1) << 25;  // 3 x 128 MiB: far beyond the caches
  std::vector<f32x16v> a(n / 16), b(n / 16), c(n / 16);
  for (size_t i = 0; i < n / 16; ++i) b[i] = f32x16v{} + 1.0f, c[i] = f32x16v{} + 2.0f;
  double best = 0;
  for (bool streaming : {false, true}) {
    auto body = [&](int t) {
      size_t begin = n / 16 * size_t(t) / size_t(threads), end = n / 16 * size_t(t + 1) / size_t(threads);
      if (streaming) {
        for (size_t i = begin; i < end; ++i) StreamStore(&a[i], b[i] + c[i]);
      } else {
        for (size_t i = begin; i < end; ++i) a[i] = b[i] + c[i];
      }
    };
    TimeParallel(threads, 1, body);  // touch the pages
    const double seconds = TimeParallel(threads, 7, body);
    if (a[n / 32][3] != 3.0f) std::abort();
    best = std::max(best, 3.0 * double(n) * sizeof(float) / seconds / 1e9);
  }
  return best;
}

__attribute__((noinline)) float FmaLoop(long iterations, float seed) {
  f32x16 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = f32x16{} + seed * float(k);
  const f32x16 x = f32x16{} + 0.999999f, y = f32x16{} + 1e-7f;
  for (long i = 0; i < iterations; ++i) {
    for (int k = 0; k < 12; ++k) acc[k] = acc[k] * x + y;  // 12 independent FMA chains hide latency
  }
  f32x16 sum = f32x16{};
  for (int k = 0; k < 12; ++k) sum += acc[k];
  float s = 0;
  for (int l = 0; l < 16; ++l) s += sum[l];
  return s;
}

double FmaPeak(int threads) {
  const long iterations = 20'000'000;
  std::atomic<float> sink{0};
  double seconds = TimeParallel(threads, 5, [&](int t) { sink = sink + FmaLoop(iterations, float(t + 1)); });
  return 2.0 * 16 * 12 * double(iterations) * threads / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int max_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  if (argc == 3 && std::string(argv[1]) == "add") {  // one STREAM add figure, for the bench to interleave
    std::printf("%.2f\n", AddBandwidth(std::max(1, std::atoi(argv[2]))));
    return 0;
  }
  std::printf("{\"threads\": %d, \"add_gbps\": {", max_threads);
  for (int t = 1; t <= max_threads; t = t == max_threads ? t + 1 : std::min(t * 2, max_threads)) {
    std::printf("%s\"%d\": %.2f", t == 1 ? "" : ", ", t, AddBandwidth(t));
  }
  std::printf("}, \"fma_gflops\": {");
  for (int t = 1; t <= max_threads; t = t == max_threads ? t + 1 : std::min(t * 2, max_threads)) {
    std::printf("%s\"%d\": %.1f", t == 1 ? "" : ", ", t, FmaPeak(t));
  }
  std::printf("}}\n");
  return 0;
}
