// Fibers: execution contexts with their own stacks, switched cooperatively on one host thread.
// The three simulated cores of a mixed kernel's logical block (1 AIC + 2 AIV) run as fibers, so a
// core that waits for a cross-core flag hands the thread to the others instead of blocking it:
// any block_dim runs on any number of host threads (docs/device.md#execution).
#pragma once

#include <ucontext.h>

#include <cstddef>

namespace pypto_pro::runtime {

class Fiber {
 public:
  using Function = void (*)(void* arg);
  // Kernel frames are small (tiles live in the arenas), but device ops may keep row buffers on the
  // stack; the pages are only backed once touched.
  static constexpr size_t kDefaultStackBytes = size_t(1) << 20;

  explicit Fiber(size_t stack_bytes = kDefaultStackBytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Makes the fiber run fn(arg) from its next Resume(). Only while it is idle: never started, or
  // fn has returned. fn must catch every exception it throws: unwinding cannot leave a fiber.
  void Start(Function fn, void* arg);
  // From outside the fiber: runs it until it calls Suspend() or its function returns.
  void Resume();
  // On the fiber: hands control back to the Resume() that ran it.
  void Suspend();
  // Drops a fiber that was started but never resumed (it has no frames to unwind).
  void Discard();

  bool idle() const { return state_ == State::kIdle; }
  bool started() const { return state_ == State::kSuspended || state_ == State::kRunning; }  // has frames

 private:
  enum class State { kIdle, kReady, kRunning, kSuspended };
  static void Entry(unsigned lo, unsigned hi);

  ucontext_t context_{};
  ucontext_t caller_{};  // where Suspend() and the end of the function return to
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  size_t stack_bytes_ = 0;
  Function fn_ = nullptr;
  void* arg_ = nullptr;
  State state_ = State::kIdle;
};

}  // namespace pypto_pro::runtime
