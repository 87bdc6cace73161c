// Stopping a running launch: the poll word every generated loop back-edge reads, the cancel state
// of a launch, and the ticker that makes long launches look at it (timeouts, Ctrl-C).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"

namespace pypto_pro::runtime {

using Clock = std::chrono::steady_clock;

// The word PtoCoreCtx::poll_word points at. Bumping it sends every running core into the runtime's
// poll callback at its next loop back-edge; nothing else reads it.
const volatile uint32_t* PollWord();
void BumpPollWord();

// The outputs a launch found untouched as it began (PtoRuntimeApi::fresh_memory). Before the blocks
// start, the runtime looks at the kernel's large outputs (PtoKernelDesc::outputs; a system call made
// while the cores run costs this guest tens of microseconds of the launch, one made before them does
// not); each untouched one is faulted in by the cores that ask, 2 MiB at a time, every one helping
// (MADV_POPULATE_WRITE: contiguous, in parallel, contents kept), and then stored into as any touched
// buffer. Where that fails (an older kernel, a read-only mapping) the buffer is left fresh and its
// stores go through the caches. Other buffers are not fresh, and asking costs no system call.
class FreshBuffers {
 public:
  void Clear() { count_.store(0, std::memory_order_relaxed); }
  // Before the launch's blocks start (no core asks yet): looks at the kernel's large outputs.
  void Prepare(const PtoKernelDesc& desc, const void* args);
  // Whether [lo, lo + bytes) is still untouched; helps fault it in first.
  bool Fresh(const void* lo, int64_t bytes);

 private:
  struct Buffer {
    const void* lo = nullptr;
    int64_t bytes = 0;
    std::atomic<int64_t> next_chunk{0};  // of the 2 MiB pieces to fault in
    std::atomic<bool> failed{false};
  };
  static constexpr int kMax = 8;  // outputs looked at per launch
  std::atomic<int> count_{0};     // untouched outputs of the launch
  Buffer buffers_[kMax];
};

// Whether most pages of [lo, lo + bytes) are not in memory (never touched, or given back): 64 pages
// from its middle, past whatever an allocator wrote at its start.
bool Untouched(const void* lo, int64_t bytes);

// The stop state of the launch a stream is running (one at a time). The poll callback of its cores
// reads it; a synchronising thread or the ticker writes it.
struct LaunchControl {
  std::atomic<int> reason{0};                // CancelReason
  Clock::time_point deadline = Clock::time_point::max();  // PYPTO_PRO_KERNEL_TIMEOUT of this launch
  double kernel_limit = 0;                   // its seconds, for the message
  std::atomic<double> sync_limit{0};         // the synchronize(timeout=) that cancelled it, for the message
  bool assert_raises = false;                // PYPTO_PRO_ASSERT=raise when it was launched
  FreshBuffers fresh;                        // its GM buffers that were untouched

  // Before each launch (with the stream's mutex held: no cancel can be in flight).
  void Reset(Clock::time_point new_deadline, double limit, bool raises) {
    reason.store(0, std::memory_order_relaxed);
    deadline = new_deadline;
    kernel_limit = limit;
    assert_raises = raises;
    fresh.Clear();
  }
  // Asks the launch to stop (the first reason wins) and wakes its cores' polls.
  void Cancel(CancelReason why);
  CancelReason cancelled() const { return CancelReason(reason.load(std::memory_order_acquire)); }
  // "ran longer than its limit of 2 s (PYPTO_PRO_KERNEL_TIMEOUT)" and the like, for fault messages.
  std::string Describe() const;
};

// What a thread that runs a launch itself while it waits for it (Stream::Synchronize) can be
// stopped by: its own Ctrl-C check and its timeout. Set on that thread only, for the launch's length.
struct InlineWait {
  bool (*interrupted)() = nullptr;  // true: the thread was interrupted (it keeps its own error state)
  Clock::time_point deadline = Clock::time_point::max();
  double timeout_seconds = 0;
};
const InlineWait* CurrentInlineWait();
class InlineWaitScope {
 public:
  explicit InlineWaitScope(const InlineWait* wait);
  ~InlineWaitScope();

 private:
  const InlineWait* previous_;
};

// Run by a core's poll callback: decides whether `control`'s launch must stop now (its deadline,
// the inline waiter's Ctrl-C and timeout) and returns the reason it was cancelled, if any.
CancelReason CheckLaunch(LaunchControl& control);

// While at least one TickDemand lives, the poll word is bumped every kTickInterval, so a launch
// whose loops never call the runtime still checks its deadline and its waiter's Ctrl-C.
inline constexpr std::chrono::milliseconds kTickInterval{20};
class TickDemand {
 public:
  explicit TickDemand(bool active);
  ~TickDemand();
  TickDemand(const TickDemand&) = delete;
  TickDemand& operator=(const TickDemand&) = delete;

 private:
  bool active_;
};

}  // namespace pypto_pro::runtime
