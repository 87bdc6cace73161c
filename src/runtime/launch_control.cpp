#include "launch_control.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <new>
#include <thread>

namespace pypto_pro::runtime {

namespace {

std::atomic<uint32_t> g_poll_word{0};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

thread_local const InlineWait* t_inline_wait = nullptr;

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

// One thread for the process, started on first demand. While demanded it bumps the poll word every
// kTickInterval; after a second without demand it sleeps until the next one (so launch + synchronize
// loops, which demand it briefly each time, do not wake it each time).
class Ticker {
 public:
  static Ticker& Get() {
    static Ticker* ticker = new Ticker();  // never destroyed: its thread may outlive static destructors
    return *ticker;
  }

  void Add() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++demand_;
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    } else if (asleep_) {
      cv_.notify_one();
    }
  }
  void Remove() {
    std::lock_guard<std::mutex> lock(mutex_);
    --demand_;
  }

 private:
  Ticker() {
    pthread_atfork([] { Get().mutex_.lock(); }, [] { Get().mutex_.unlock(); },
                   [] {  // the thread is gone in the child; the next demand starts another
                     Ticker& t = Get();
                     new (&t.mutex_) std::mutex();
                     new (&t.cv_) std::condition_variable();
                     t.started_ = false;
                     t.asleep_ = false;
                     t.demand_ = 0;
                   });
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto last_demand = Clock::now();
    for (;;) {
      if (demand_ > 0) {
        last_demand = Clock::now();
        cv_.wait_for(lock, kTickInterval);
        if (demand_ > 0) BumpPollWord();
      } else if (Clock::now() - last_demand < std::chrono::seconds(1)) {
        cv_.wait_for(lock, kTickInterval);
      } else {
        asleep_ = true;
        cv_.wait(lock, [&] { return demand_ > 0; });
        asleep_ = false;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  int demand_ = 0;
  bool started_ = false;
  bool asleep_ = false;
};

}  // namespace

const volatile uint32_t* PollWord() { return reinterpret_cast<const volatile uint32_t*>(&g_poll_word); }

void BumpPollWord() { g_poll_word.fetch_add(1, std::memory_order_release); }

void LaunchControl::Cancel(CancelReason why) {
  int expected = 0;
  reason.compare_exchange_strong(expected, int(why), std::memory_order_acq_rel);
  BumpPollWord();
}

std::string LaunchControl::Describe() const {
  switch (cancelled()) {
    case CancelReason::kNone: return "";
    case CancelReason::kInterrupt: return "was interrupted (KeyboardInterrupt)";
    case CancelReason::kSyncTimeout:
      return "was still running when synchronize(timeout=" + Seconds(sync_limit.load()) + ") ran out, and was stopped";
    case CancelReason::kKernelTimeout:
      return "ran longer than its limit of " + Seconds(kernel_limit) + " (PYPTO_PRO_KERNEL_TIMEOUT) and was stopped";
  }
  return "";
}

const InlineWait* CurrentInlineWait() { return t_inline_wait; }

InlineWaitScope::InlineWaitScope(const InlineWait* wait) : previous_(t_inline_wait) { t_inline_wait = wait; }
InlineWaitScope::~InlineWaitScope() { t_inline_wait = previous_; }

CancelReason CheckLaunch(LaunchControl& control) {
  if (control.cancelled() != CancelReason::kNone) return control.cancelled();
  const auto now = Clock::now();
  if (now >= control.deadline) control.Cancel(CancelReason::kKernelTimeout);
  if (const InlineWait* wait = t_inline_wait) {
    if (wait->interrupted && wait->interrupted()) {
      control.Cancel(CancelReason::kInterrupt);
    } else if (now >= wait->deadline) {
      control.sync_limit.store(wait->timeout_seconds);
      control.Cancel(CancelReason::kSyncTimeout);
    }
  }
  return control.cancelled();
}

TickDemand::TickDemand(bool active) : active_(active) {
  if (active_) Ticker::Get().Add();
}
TickDemand::~TickDemand() {
  if (active_) Ticker::Get().Remove();
}

bool Untouched(const void* lo, int64_t bytes) {
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  constexpr int64_t kPages = 64;
  const uintptr_t begin = uintptr_t(lo), end = begin + uintptr_t(bytes);
  const uintptr_t first = ((begin + end) / 2 - kPages / 2 * page) & ~(page - 1);
  if (bytes < int64_t(4 * kPages * page) || first <= begin) return false;
  unsigned char resident[kPages];
  if (::mincore(reinterpret_cast<void*>(first), size_t(kPages) * page, resident) != 0) return false;
  int absent = 0;
  for (unsigned char r : resident) absent += !(r & 1);
  return 2 * absent > kPages;
}

void FreshBuffers::Prepare(const PtoKernelDesc& desc, const void* args) {
  count_.store(0, std::memory_order_relaxed);
  if (!desc.outputs) return;
  PtoRange outputs[kMax];
  const int32_t n = desc.outputs(args, outputs, kMax);
  int fresh = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (outputs[i].bytes < PTO_STREAMING_STORE_BYTES || !Untouched(outputs[i].lo, outputs[i].bytes)) continue;
    Buffer& b = buffers_[fresh++];
    b.lo = outputs[i].lo;
    b.bytes = outputs[i].bytes;
    b.next_chunk.store(0, std::memory_order_relaxed);
    b.failed.store(false, std::memory_order_relaxed);
  }
  count_.store(fresh, std::memory_order_release);  // the cores start after this (the launch's post)
}

bool FreshBuffers::Fresh(const void* lo, int64_t bytes) {
  (void)bytes;
  Buffer* b = nullptr;
  const int n = count_.load(std::memory_order_acquire);
  for (int i = 0; i < n && !b; ++i) {
    if (buffers_[i].lo == lo) b = &buffers_[i];
  }
  if (!b) return false;
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  constexpr int64_t kChunk = int64_t(2) << 20;
  const uintptr_t begin = uintptr_t(b->lo) & ~(page - 1);
  const uintptr_t end = (uintptr_t(b->lo) + uintptr_t(b->bytes) + page - 1) & ~(page - 1);
  for (;;) {
    const uintptr_t at = begin + uintptr_t(b->next_chunk.fetch_add(1, std::memory_order_relaxed) * kChunk);
    if (at >= end) break;
    const size_t len = size_t(std::min<uintptr_t>(end - at, uintptr_t(kChunk)));
    if (::madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE) != 0) {
      b->failed.store(true, std::memory_order_relaxed);
    }
  }
  return b->failed.load(std::memory_order_relaxed);
}

}  // namespace pypto_pro::runtime
