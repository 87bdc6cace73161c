#include "pypto_pro/support/fork.h"

#include <pthread.h>

#include <atomic>
#include <new>
#include <vector>

namespace pypto_pro {

namespace {

std::atomic<uint64_t> g_generation{0};

struct ForkState {
  std::mutex mutex;  // guards `resets` (registration only; the child handler runs single-threaded)
  std::vector<std::mutex*> resets;
};

ForkState& State() {
  static ForkState* state = [] {
    auto* s = new ForkState();
    pthread_atfork(nullptr, nullptr, [] {
      ForkState& st = State();
      new (&st.mutex) std::mutex();
      for (std::mutex* m : st.resets) new (m) std::mutex();
      g_generation.fetch_add(1);
    });
    return s;
  }();
  return *state;
}

}  // namespace

uint64_t ForkGeneration() {
  State();  // the handler is registered before anything can depend on the counter
  return g_generation.load(std::memory_order_relaxed);
}

void ResetInForkedChild(std::mutex* mutex) {
  ForkState& s = State();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.resets.push_back(mutex);
}

}  // namespace pypto_pro
