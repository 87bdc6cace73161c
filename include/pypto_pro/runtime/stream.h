// Streams: in-order launch queues, each served by its own worker thread (SIMULATOR.md "Streams").
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

// A point in a stream's queue; completes (with a timestamp) when the worker reaches it.
struct EventState {
  std::atomic<bool> completed{false};
  std::chrono::steady_clock::time_point when{};
  Stream* stream = nullptr;
  uint64_t seq = 0;  // 0 = never recorded
};

class Stream {
 public:
  // The PtoStreamHandle call_kernel receives, with the way back to its stream.
  struct Handle : PtoStreamHandle {
    Stream* owner;
  };

  Stream();
  ~Stream();
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
  // last synchronisation (and clears it, so the stream stays usable).
  void Synchronize();
  // Waits until item `seq` has run; never throws.
  void WaitFor(uint64_t seq);
  uint64_t completed() const { return completed_.load(); }
  uint64_t submitted() const { return submitted_.load(); }

  // Every live stream, for pypto_pro.runtime.synchronize().
  static std::vector<Stream*> All();

 private:
  struct Item {
    const PtoKernelDesc* desc = nullptr;
    std::shared_ptr<EventState> event;
    uint32_t block_dim = 0;
    uint32_t args_size = 0;
    alignas(16) uint8_t inline_args[192];
    std::unique_ptr<uint8_t[]> heap_args;
    const void* args() const { return heap_args ? heap_args.get() : inline_args; }
  };
  static constexpr size_t kCapacity = 1024;

  uint64_t Push(Item&& item);
  void WorkerLoop();
  void Execute(Item& item);

  Handle handle_;
  std::mutex mutex_;
  std::condition_variable work_cv_;   // worker waits for items
  std::condition_variable space_cv_;  // producers wait for a free ring slot
  std::condition_variable done_cv_;   // synchronisers wait for completion
  std::vector<Item> ring_;
  size_t head_ = 0;                   // next item to run (guarded by mutex_)
  size_t count_ = 0;                  // queued items (guarded by mutex_)
  bool stop_ = false;
  bool worker_sleeping_ = false;
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::optional<FaultInfo> sticky_fault_;  // guarded by mutex_
  std::thread worker_;
};

}  // namespace pypto_pro::runtime
