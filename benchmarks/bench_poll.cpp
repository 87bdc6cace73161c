// What the cancellation poll at every loop back-edge of generated code costs: the loop of a kernel
// (one small tile op per iteration, and a scalar-only body, the worst case) with and without
// pto::Poll, built with the kernels' own compile flags. Prints JSON for benchmarks/bench.py.
// Build and run: make bench   (or: cmake --build cmake-build --target bench_poll)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "pypto_pro/device.h"

namespace {

using Clock = std::chrono::steady_clock;

uint32_t g_poll_word = 0;  // never changes here: the poll's branch is never taken, as in a normal launch
alignas(64) uint8_t g_ub[256 * 1024];

[[noreturn]] void Fail(PtoCoreCtx*, int32_t, const PtoFaultDetail*) { std::abort(); }
const PtoRuntimeApi kApi = {PTO_ABI_VERSION, nullptr, &Fail};

using Row = pto::Tile<float, 1, 64, pto::kVec, pto::kND>;

// Best ns per iteration of `iters` iterations of `body` over 5 runs (the minimum is the least
// disturbed on a shared machine).
template <typename Body>
double BestNsPerIter(long iters, Body body) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto start = Clock::now();
    body(iters);
    double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / double(iters);
    if (ns < best) best = ns;
  }
  return best;
}

// The loops kernel.cpp has for `for i in pl.range(n): <body>`, with (Poll) and without the poll.
template <bool Poll>
__attribute__((noinline)) void TileLoop(pto::CoreCtx& ctx, Row& t, long n) {
  for (int64_t it = 0; it < n; ++it) {
    if constexpr (Poll) pto::Poll(ctx, 12);
    pto::adds(ctx, 13, t, t, float(1e-3f));
  }
}

template <bool Poll>
__attribute__((noinline)) int64_t ScalarLoop(pto::CoreCtx& ctx, long n) {
  int64_t acc = 0;
  for (int64_t it = 0; it < n; ++it) {
    if constexpr (Poll) pto::Poll(ctx, 12);
    acc = acc * 3 + it;
    __asm__ volatile("" : "+r"(acc));
  }
  return acc;
}

}  // namespace

int main() {
  PtoCoreCtx ctx{};
  ctx.api = &kApi;
  ctx.mem[pto::kVec] = g_ub;
  ctx.mem_size[pto::kVec] = sizeof g_ub;
  ctx.poll_word = &g_poll_word;
  ctx.poll_seen = 0;
  Row t;
  pto::InitTile(ctx, t, 0, 1, 64, 0);
  const long kIters = 20000000;
  double tile_plain = BestNsPerIter(kIters / 4, [&](long n) { TileLoop<false>(ctx, t, n); });
  double tile_poll = BestNsPerIter(kIters / 4, [&](long n) { TileLoop<true>(ctx, t, n); });
  int64_t sink = 0;
  double scalar_plain = BestNsPerIter(kIters, [&](long n) { sink += ScalarLoop<false>(ctx, n); });
  double scalar_poll = BestNsPerIter(kIters, [&](long n) { sink += ScalarLoop<true>(ctx, n); });
  std::printf("{\"tile_plain_ns\": %.3f, \"tile_poll_ns\": %.3f, \"scalar_plain_ns\": %.3f, "
              "\"scalar_poll_ns\": %.3f, \"sink\": %lld}\n",
              tile_plain, tile_poll, scalar_plain, scalar_poll, static_cast<long long>(sink & 1));
  return 0;
}
