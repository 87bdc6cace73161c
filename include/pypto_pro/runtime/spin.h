// Short spins before a thread sleeps on a condition variable. Spin only while the thread being
// waited for is known to be running (it holds the work), and briefly: on a loaded machine a spinner
// takes the core the other thread needs (see stream.cpp and device.cpp for who waits for whom).
#pragma once

#include <chrono>
#include <thread>

namespace pypto_pro::runtime {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls done() until it holds or `deadline` passes; returns done(). With `offer_cpu`, the thread
// yields between clock reads (a lingering thread must not keep a runnable one off its core).
template <typename Done>
bool PollUntil(Done done, std::chrono::steady_clock::time_point deadline, bool offer_cpu) {
  for (;;) {
    for (int i = 0; i < 64; ++i) {  // ~1.5 us of pauses between clock reads
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    if (offer_cpu) std::this_thread::yield();
  }
}

// Spins until done() holds or the budget is spent; returns done().
template <typename Done>
bool SpinUntil(Done done, std::chrono::microseconds budget) {
  return done() || PollUntil(done, std::chrono::steady_clock::now() + budget, false);
}

}  // namespace pypto_pro::runtime
