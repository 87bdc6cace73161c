// Spin-then-sleep hand-offs between launching threads, stream workers and device helpers.
#pragma once

#include <chrono>

namespace pypto_pro::runtime {

// How long a thread spins for a hand-off before it sleeps on a condition variable. A futex
// sleep/wake costs 5-100 us (virtual machines are at the high end): a launch + synchronize loop
// would pay it twice per launch, and once a waiter sleeps the other side's spin runs out too, so
// the loop stays slow. 200 us covers the gap Python leaves between two launches.
inline constexpr std::chrono::microseconds kSpinBudget{200};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or the budget is spent; returns done().
template <typename Done>
bool SpinUntil(Done done, std::chrono::microseconds budget = kSpinBudget) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {  // ~1.5 us of pauses between clock reads
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace pypto_pro::runtime
