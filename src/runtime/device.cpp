#include "pypto_pro/runtime/device.h"

#include <algorithm>
#include <atomic>

#include "arena.h"
#include "core.h"
#include "mixed_block.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/runtime/spin.h"
#include "pypto_pro/support/config.h"
#include "sanitizer.h"

namespace pypto_pro::runtime {

namespace {

// The local memories of one host thread: blocks of a vector- or cube-only kernel on one thread run
// one after another, so they can share them like a core does.
Arena& ThreadArena() {
  thread_local Arena arena;
  return arena;
}

}  // namespace

struct Device::Job {
  const PtoKernelDesc* desc = nullptr;
  const void* args = nullptr;
  const ArchModel* arch = nullptr;
  int core_type = PTO_CORE_AIV;
  int blocks = 0;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::atomic<int> helpers{0};  // helper threads currently inside RunBlocks
  std::atomic<int> faults{0};
  FaultInfo first_fault;        // written by the thread whose fault was first
  std::mutex mutex;
  std::condition_variable cv;
};

Device& Device::Get() {
  static Device* device = new Device();
  return *device;
}

Device::Device() {
  long requested = GetEnvInt("PYPTO_PRO_NUM_THREADS");
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  num_threads_ = requested > 0 ? int(std::min<long>(requested, 256)) : int(hw);
  for (int i = 1; i < num_threads_; ++i) {
    helpers_.emplace_back([this] { HelperLoop(); });
    helpers_.back().detach();
  }
}

// Claims blocks of `job` until none are left and runs each with `run(block)`, which returns its
// fault. After a fault the launch is abandoned: the remaining blocks are claimed but not run.
template <typename RunBlock>
void Device::ClaimBlocks(Job& job, RunBlock run) {
  for (;;) {
    int block = job.next.fetch_add(1, std::memory_order_relaxed);
    if (block >= job.blocks) break;
    if (job.faults.load(std::memory_order_relaxed) == 0) {
      std::optional<FaultInfo> fault = run(block);
      if (fault && job.faults.fetch_add(1) == 0) job.first_fault = std::move(*fault);
    }
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.blocks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.cv.notify_all();
    }
  }
}

void Device::RunBlocks(Job& job) {
  if (job.desc->kind == PTO_KERNEL_MIXED) {
    MixedBlock& mixed = MixedBlock::ForThisThread();
    ClaimBlocks(job, [&](int block) { return mixed.Run(*job.desc, job.args, *job.arch, block, job.blocks); });
    return;
  }
  Core core;
  core.desc = job.desc;
  PtoCoreCtx ctx{};
  ctx.api = &CoreApi();
  ctx.core_type = job.core_type;
  ctx.block_num = job.blocks;
  ctx.subblock_idx = 0;
  ctx.subblock_num = 1;
  ctx.runtime = &core;
  ThreadArena().Attach(ctx, *job.arch);
  ClaimBlocks(job, [&](int block) -> std::optional<FaultInfo> {
    ctx.block_idx = block;
    core.block = block;
    std::optional<FaultInfo> fault;
    try {
      job.desc->entry(&ctx, job.args);
    } catch (KernelAbort& abort) {
      fault = std::move(abort.info);
    } catch (const std::exception& e) {
      fault = CoreFault(ctx, 0);
      fault->message = std::string("internal error: ") + e.what();
    }
    if (!core.output.empty()) core.output.Flush(OutputPrefix(ctx));
    return fault;
  });
}

void Device::HelperLoop() {
  for (;;) {
    Job* job = nullptr;
    // A short spin catches back-to-back launches; helpers that spun longer would take CPU time from
    // the launching thread between launches.
    SpinUntil([&] { return job_count_.load(std::memory_order_relaxed) > 0; }, std::chrono::microseconds(50));
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return !jobs_.empty(); });
      job = jobs_.front();
      job->helpers.fetch_add(1);
    }
    RunBlocks(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
      job_count_.store(int(jobs_.size()), std::memory_order_relaxed);
    }
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->helpers.fetch_sub(1);
      job->cv.notify_all();
    }
  }
}

std::optional<FaultInfo> Device::Run(const PtoKernelDesc& desc, const void* args, uint32_t block_dim) {
  Job job;
  job.desc = &desc;
  job.args = args;
  job.arch = FindArch(desc.arch ? desc.arch : "");
  if (!job.arch) job.arch = &DefaultArch();
  job.core_type = desc.kind == PTO_KERNEL_CUBE ? PTO_CORE_AIC : PTO_CORE_AIV;
  // Exactly block_dim blocks, never truncated: more blocks than the arch has cores run in waves, as
  // on the hardware (the host threads claim blocks until none are left).
  job.blocks = int(std::max<uint32_t>(block_dim, 1));

  SanitizerLaunch sanitizer(desc, args);
  bool parallel = job.blocks > 1 && num_threads_ > 1;
  if (parallel) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(&job);
    job_count_.store(int(jobs_.size()), std::memory_order_relaxed);
    work_cv_.notify_all();
  }
  RunBlocks(job);
  if (parallel) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), &job), jobs_.end());
      job_count_.store(int(jobs_.size()), std::memory_order_relaxed);
    }
    // Helpers may still be finishing blocks, or about to leave RunBlocks.
    SpinUntil([&] { return job.done.load() >= job.blocks && job.helpers.load() == 0; });
    std::unique_lock<std::mutex> lock(job.mutex);
    job.cv.wait(lock, [&] { return job.done.load() >= job.blocks && job.helpers.load() == 0; });
  }
  if (job.faults.load() == 0) return sanitizer.Finish(std::nullopt);
  FaultInfo fault = std::move(job.first_fault);
  fault.kernel = desc.name ? desc.name : "?";
  fault.source_file = desc.source_file ? desc.source_file : "?";
  fault.other_faults += job.faults.load() - 1;
  return sanitizer.Finish(std::move(fault));
}

}  // namespace pypto_pro::runtime
