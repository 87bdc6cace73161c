// The simulated AI Core array: runs the blocks of a launch on a pool of host threads, each block
// with its own core context and local-memory arenas of the kernel's arch sizes. A mixed kernel's
// logical block (1 AIC + 2 AIV) runs its three cores as fibers on one thread (MixedBlock).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"

namespace pypto_pro::runtime {

class Device {
 public:
  // The process-wide device; never destroyed (kernels may still run while Python exits).
  static Device& Get();

  // Runs every block of one launch (the calling thread takes part) and returns the first fault.
  // Runs exactly block_dim blocks; pl.get_block_num() is block_dim however many cores the arch has.
  std::optional<FaultInfo> Run(const PtoKernelDesc& desc, const void* args, uint32_t block_dim);

  int num_threads() const { return num_threads_; }

 private:
  struct Job;
  Device();
  void HelperLoop();
  static void RunBlocks(Job& job);
  template <typename RunBlock>
  static void ClaimBlocks(Job& job, RunBlock run);

  int num_threads_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::vector<Job*> jobs_;  // launches with blocks left; guarded by mutex_
  std::atomic<int> job_count_{0};  // jobs_.size(), for helpers spinning without the mutex
  std::vector<std::thread> helpers_;
};

}  // namespace pypto_pro::runtime
