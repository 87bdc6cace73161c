// The simulated AI Core array: runs the blocks of a launch on the calling thread and, when the
// launch is big enough to pay for waking them, on a pool of helper threads; each block with its own
// core context and local-memory arenas of the kernel's arch sizes. A mixed kernel's logical block
// (1 AIC + 2 AIV) runs its three cores as fibers on one thread (MixedBlock).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"

namespace pypto_pro::runtime {

struct LaunchControl;

class Device {
 public:
  // The process-wide device; never destroyed (kernels may still run while Python exits). The first
  // call reads PYPTO_PRO_NUM_THREADS and PYPTO_PRO_KERNEL_TIMEOUT and throws std::invalid_argument
  // naming the variable when one is malformed (the launch path calls it before queueing anything).
  static Device& Get();

  // Runs every block of one launch (the calling thread takes part) and returns the first fault.
  // Runs exactly block_dim blocks; pl.get_block_num() is block_dim however many cores the arch has.
  // `control` (may be null) can stop the launch: its cores look at it at every loop back-edge.
  std::optional<FaultInfo> Run(const PtoKernelDesc& desc, const void* args, uint32_t block_dim,
                               LaunchControl* control = nullptr);

  int num_threads() const { return num_threads_; }
  // PYPTO_PRO_KERNEL_TIMEOUT: seconds a launch may run before it is stopped; 0 = no limit.
  double kernel_timeout_seconds() const { return kernel_timeout_seconds_; }

 private:
  struct Job;
  Device();
  void HelperLoop();
  // With mutex_ held: a job for a launch helpers may join (pooled: a helper that wakes up late
  // still finds valid memory, and the launch never waits for a helper that did not join).
  Job* AcquireJobLocked();
  void ReleaseJobLocked(Job* job);
  // With mutex_ held: offers `job` to the helpers, starting them on first use.
  void PostLocked(Job* job);
  template <typename AfterBlock>
  static void RunBlocks(Job& job, bool from_back, AfterBlock after_block);
  static void AtForkChild();

  int num_threads_;
  double kernel_timeout_seconds_;
  int helpers_started_ = 0;         // guarded by mutex_
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::vector<Job*> posted_;        // launches with blocks left for helpers; guarded by mutex_
  std::atomic<uint64_t> posts_{0};  // jobs posted so far: what lingering helpers watch
  std::vector<Job*> free_jobs_;     // guarded by mutex_
  std::vector<std::unique_ptr<Job>> all_jobs_;
};

}  // namespace pypto_pro::runtime
