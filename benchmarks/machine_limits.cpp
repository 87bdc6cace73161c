// Measures this machine's limits the benchmark suite compares against: STREAM-style add bandwidth
// (a[i] = b[i] + c[i]) and the fp32 FMA peak of a register-blocked loop, on 1 and N threads.
// Prints JSON: {"add_gbps": {"1": x, "2": y}, "fma_gflops": {"1": x, "2": y}}. Built as a library
// too (PTO_MACHINE_LIMITS_LIBRARY): pto_bench_stream_add times one STREAM add over the caller's own
// arrays and pto_bench_fma one FMA-peak run, which the bench interleaves with the kernels it judges
// against them.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include <immintrin.h>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>
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

// Helper threads kept from run to run, as the device keeps its own, spinning for kLinger after a run
// before they sleep. Threads created for each run made the STREAM samples 10-20% slower than the add
// kernel over the same arrays (Intel Xeon guest: the bench's rows read 106-120% of the limit): the
// device's helpers, lingering between launches, find their vCPU awake; a new thread wakes an idle one.
class Crew {
 public:
  // Runs job(t) for t in [0, threads), the caller as thread 0, and returns when all have.
  void Run(int threads, const std::function<void(int)>& job) {
    while (int(helpers_.size()) < threads - 1) {
      const int t = int(helpers_.size()) + 1;
      helpers_.emplace_back([this, t] { Serve(t); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      threads_ = threads;
      pending_.store(threads - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job(0);
    while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  }

  ~Crew() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& helper : helpers_) helper.join();
  }

 private:
  static constexpr auto kLinger = std::chrono::milliseconds(2);  // the device's helpers' (kHelperLinger)

  void Serve(int t) {
    uint64_t seen = 0;
    for (;;) {
      const auto until = Clock::now() + kLinger;
      while (generation_.load(std::memory_order_acquire) == seen && Clock::now() < until) _mm_pause();
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      seen = generation_.load(std::memory_order_relaxed);
      if (quit_) return;
      const std::function<void(int)>* job = job_;
      const bool in_run = t < threads_;
      lock.unlock();
      if (in_run) {
        (*job)(t);
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int)>* job_ = nullptr;
  int threads_ = 0;
  bool quit_ = false;
  std::vector<std::thread> helpers_;
};

Crew& TheCrew() {
  static Crew crew;
  return crew;
}

// Runs fn(thread_index) on `threads` threads at once, `reps` times; returns the median seconds from
// the first thread's start to the last one's end. The calling thread is thread 0: a timing thread
// beside the workers would share their CPUs on a small machine and be scheduled late (seen on a
// 2-vCPU guest: 2-thread STREAM figures from 6 to 187 GB/s).
template <typename Fn>
double TimeParallel(int threads, int reps, Fn fn) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    std::barrier sync(threads);
    std::vector<Clock::time_point> starts(static_cast<size_t>(threads)), ends(static_cast<size_t>(threads));
    TheCrew().Run(threads, [&](int t) {
      sync.arrive_and_wait();
      starts[size_t(t)] = Clock::now();
      fn(t);
      ends[size_t(t)] = Clock::now();
    });
    const auto first = *std::min_element(starts.begin(), starts.end());
    const auto last = *std::max_element(ends.begin(), ends.end());
    times.push_back(std::chrono::duration<double>(last - first).count());
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

// Both inputs 4 KiB ahead, into L1: on a virtual machine the hardware prefetchers alone were measured
// to leave a plain STREAM loop ~15% below what a loop with software prefetches (a kernel's) reaches.
inline void PrefetchAhead(const void* b, const void* c) {
  __builtin_prefetch(static_cast<const char*>(b) + 4096, 0, 3);
  __builtin_prefetch(static_cast<const char*>(c) + 4096, 0, 3);
}

// One STREAM add a = b + c over `n` 32-bit lanes (a multiple of 16, 64-byte aligned arrays) on
// `threads` threads with non-temporal stores; seconds between the threads' start and end barriers.
// Integer adds: the caller's bytes may be anything (fp16 data read as fp32 is full of denormals,
// whose float adds take microcode assists on Intel and would time the arithmetic, not the memory).
// The threads claim 256 KiB pieces of a as they go, as the device's threads claim blocks: a thread
// the guest wakes late (tenths of a millisecond seen) does fewer pieces instead of stretching the
// run by its delay, which halves fixed per thread had measured as 10-25% less bandwidth than the
// kernels reach.
double StreamAddOnce(void* a, const void* b, const void* c, size_t n, int threads) {
  typedef int32_t i32x16v __attribute__((vector_size(64)));
  auto* va = static_cast<f32x16v*>(a);
  const auto* vb = static_cast<const i32x16v*>(b);
  const auto* vc = static_cast<const i32x16v*>(c);
  constexpr size_t kPiece = 4096;  // vectors: 256 KiB of a
  std::atomic<size_t> next{0};
  return TimeParallel(threads, 1, [&](int) {
    for (size_t begin = next.fetch_add(kPiece); begin < n / 16; begin = next.fetch_add(kPiece)) {
      const size_t end = std::min(n / 16, begin + kPiece);
      for (size_t i = begin; i < end; ++i) {
        PrefetchAhead(&vb[i], &vc[i]);
        StreamStore(&va[i], (f32x16v)(vb[i] + vc[i]));
      }
    }
#if defined(__AVX__)
    _mm_sfence();
#endif
  });
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
        for (size_t i = begin; i < end; ++i) {
          PrefetchAhead(&b[i], &c[i]);
          StreamStore(&a[i], b[i] + c[i]);
        }
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

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__) && defined(__linux__)
#define PTO_MACHINE_AMX 1
// The AMX tile unit's peak (Sapphire Rapids and later): four independent 16x16 accumulators fed by
// tiles loaded once, tdpbf16ps (16 x 16 x 32 bf16 multiply-adds each) or tdpbssd (16 x 16 x 64 int8);
// 0 where Linux refuses the tile state. GFLOP/s (bf16) or GOP/s (int8) on `threads` threads.
double AmxPeak(int threads, bool int8) {
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) return 0;
  constexpr long kIterations = 2'000'000;
  const double seconds = TimeParallel(threads, 5, [&](int) {
    struct alignas(64) {
      uint8_t palette = 1, start_row = 0, reserved[14] = {};
      uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
      uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
    } config;
    alignas(64) static thread_local uint8_t data[1024] = {};
    _tile_loadconfig(&config);
    _tile_loadd(4, data, 64);
    _tile_loadd(5, data, 64);
    _tile_loadd(6, data, 64);
    _tile_loadd(7, data, 64);
    for (long i = 0; i < kIterations; ++i) {
      if (int8) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
      } else {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    _tile_release();
  });
  return 2.0 * 16 * 16 * (int8 ? 64 : 32) * 4 * double(kIterations) * threads / seconds / 1e9;
}
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) double pto_bench_stream_add(void* a, const void* b, const void* c,
                                                                             size_t n, int threads) {
  return StreamAddOnce(a, b, c, n, threads);
}

// Seconds of one FMA-peak run on `threads` threads (kFmaSampleFlops per thread), for the bench to
// sample in the same rounds as the matmul kernels it judges against it.
constexpr long kFmaSampleIterations = 4'000'000;
extern "C" __attribute__((visibility("default"))) double pto_bench_fma(int threads) {
  std::atomic<float> sink{0};
  return TimeParallel(threads, 1, [&](int t) { sink = sink + FmaLoop(kFmaSampleIterations, float(t + 1)); });
}
extern "C" __attribute__((visibility("default"))) double pto_bench_fma_flops_per_thread() {
  return 2.0 * 16 * 12 * double(kFmaSampleIterations);
}

#if !defined(PTO_MACHINE_LIMITS_LIBRARY)
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
  std::printf("}");
#if PTO_MACHINE_AMX
  if (AmxPeak(1, false) > 0) {  // only the figures for all threads: the bench's rows use those
    std::printf(", \"amx_bf16_gflops\": {\"%d\": %.0f}, \"amx_int8_gops\": {\"%d\": %.0f}", max_threads,
                AmxPeak(max_threads, false), max_threads, AmxPeak(max_threads, true));
  }
#endif
  std::printf("}\n");
  return 0;
}
#endif
