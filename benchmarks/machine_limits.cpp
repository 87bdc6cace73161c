// Measures this machine's limits the benchmark suite compares against: STREAM-style add bandwidth
// (a[i] = b[i] + c[i]) and the fp32 FMA peak of a register-blocked loop, on 1 and N threads.
// Prints JSON: {"add_gbps": {"1": x, "2": y}, "fma_gflops": {"1": x, "2": y}}.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

double AddBandwidth(int threads) {
  const size_t n = size_t(1) << 25;  // 3 x 128 MiB: far beyond the caches
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto body = [&](int t) {
    size_t begin = n * size_t(t) / size_t(threads), end = n * size_t(t + 1) / size_t(threads);
    for (size_t i = begin; i < end; ++i) a[i] = b[i] + c[i];
  };
  TimeParallel(threads, 1, body);  // touch the pages
  double seconds = TimeParallel(threads, 7, body);
  if (a[n / 2] != 3.0f) std::abort();
  return 3.0 * double(n) * sizeof(float) / seconds / 1e9;
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

int main() {
  int max_threads = int(std::max(1u, std::thread::hardware_concurrency()));
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
