// Streams: in-order launch queues (docs/device.md#streams-and-events). A stream's worker thread runs launches
// nobody waits for; a thread that synchronises runs the queued launches itself instead of waiting
// for a hand-off, so a launch + synchronize loop runs on one thread whatever else the machine does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"

namespace pypto_pro::runtime {

class Stream;
struct LaunchControl;

// What a failed pl.pto_assert does in a launch (PYPTO_PRO_ASSERT): print a line and go on (the NPU's
// behaviour) or end the block with a fault.
enum class AssertMode : uint8_t { kPrint, kRaise };
// The mode of the launches this thread submits from now on. The launching thread reads the
// environment and sets it (for kernels with pl.pto_assert): a core must not call getenv while Python
// may be changing the environment on another thread.
void SetSubmitAssertMode(AssertMode mode);

// A point in a stream's queue; completes (with a timestamp) when the stream reaches it.
struct EventState {
  std::atomic<bool> completed{false};
  std::chrono::steady_clock::time_point when{};
  Stream* stream = nullptr;
  uint64_t seq = 0;  // 0 = never recorded
};

// Thrown by a wait whose `interrupted` check fired: the stream's running and queued launches were
// cancelled, and the waiting thread keeps the error state its check set (KeyboardInterrupt).
struct WaitInterrupted {};

struct WaitOptions {
  double timeout_seconds = -1;      // < 0: as long as it takes
  bool cancel_on_timeout = true;    // false: a wait that runs out just returns (check completed())
  bool (*interrupted)() = nullptr;  // polled about every 20 ms while waiting or running a launch
};

class Stream {
 public:
  // The PtoStreamHandle call_kernel receives, with the way back to its stream.
  struct Handle : PtoStreamHandle {
    Stream* owner;
  };

  Stream();
  ~Stream();  // runs what is still queued first
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The process-wide default stream (never destroyed).
  static Stream& Default();

  // What call_kernel receives as its `stream` argument.
  void* handle() { return &handle_; }

  // Queues a launch (copies `args`); returns its sequence number (> 0).
  uint64_t Submit(const PtoKernelDesc* desc, const void* args, uint32_t args_size, uint32_t block_dim);
  // Queues an event marker; returns its sequence number.
  uint64_t Record(const std::shared_ptr<EventState>& event);

  // Waits for everything queued so far; then throws KernelFaultError for the first fault since the
  // last synchronisation (and clears it, so the stream stays usable). On timeout the running launch
  // is stopped at its next loop back-edge and the queued ones are dropped: KernelFaultError with
  // FaultInfo::cancel set. Interrupted: the same, then WaitInterrupted.
  void Synchronize(const WaitOptions& options = {});
  // Waits until item `seq` has run (events); throws only WaitInterrupted.
  void WaitFor(uint64_t seq, const WaitOptions& options = {});
  // Stops the running launch and drops the queued ones (a process exiting, an interrupted wait of
  // another stream); returns how many were dropped or stopped.
  uint64_t Cancel(CancelReason reason);
  // The fault waiting for the next synchronisation, without waiting (taken: it is not raised again).
  std::optional<FaultInfo> TakeFault();

  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  uint64_t submitted() const { return submitted_.load(std::memory_order_acquire); }

  // Every live stream, for pypto_pro.runtime.synchronize().
  static std::vector<Stream*> All();

 private:
  struct Item {
    const PtoKernelDesc* desc = nullptr;
    std::shared_ptr<EventState> event;
    uint32_t block_dim = 0;
    uint32_t args_size = 0;
    AssertMode assert_mode = AssertMode::kPrint;
    std::chrono::steady_clock::time_point queued{};
    alignas(16) uint8_t inline_args[192];
    std::unique_ptr<uint8_t[]> heap_args;
    const void* args() const { return heap_args ? heap_args.get() : inline_args; }
  };
  static constexpr size_t kCapacity = 1024;
  enum class WorkerState { kAwake, kPolling, kAsleep };

  uint64_t Push(Item&& item);
  void WorkerLoop();
  // With mutex_ held: takes the next item and the right to run it (executing_).
  Item PopLocked();
  // Runs `item` (no lock held) and records its fault; never throws.
  void Execute(Item& item);
  // With mutex_ held: `item` has run; wakes waiters.
  void FinishLocked();
  // With mutex_ held: drops the queued items, stops the running one; returns how many.
  uint64_t CancelLocked(CancelReason reason);
  // Waits (lock held) until no item is running: the one a cancel stopped ends at its next back-edge.
  void WaitIdleLocked(std::unique_lock<std::mutex>& lock);
  void StartWorkerLocked();
  static void AtForkPrepare();
  static void AtForkParent();
  static void AtForkChild();

  Handle handle_;
  std::mutex mutex_;
  std::condition_variable work_cv_;   // the worker waits for items
  std::condition_variable space_cv_;  // producers wait for a free ring slot
  std::condition_variable done_cv_;   // synchronisers wait for completion
  std::vector<Item> ring_;
  size_t head_ = 0;                   // next item to run (guarded by mutex_)
  size_t count_ = 0;                  // queued items (guarded by mutex_)
  bool executing_ = false;            // an item is running, on the worker or a synchroniser (mutex_)
  bool stop_ = false;
  WorkerState worker_state_ = WorkerState::kAwake;  // guarded by mutex_
  std::chrono::steady_clock::time_point last_activity_{};  // guarded by mutex_
  int waiters_ = 0;                   // threads in done_cv_ (mutex_)
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::optional<FaultInfo> sticky_fault_;  // guarded by mutex_
  std::unique_ptr<LaunchControl> control_;  // of the running item
  std::unique_ptr<std::thread> worker_;     // started by the first launch; leaked in a forked child
};

}  // namespace pypto_pro::runtime
