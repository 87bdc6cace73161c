#include "pypto_pro/runtime/device.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <chrono>
#include <new>
#include <thread>

#include "arena.h"
#include "core.h"
#include "launch_control.h"
#include "long_launches.h"
#include "mixed_block.h"
#include "resident_launch.h"
#include "pypto_pro/runtime/spin.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/config.h"
#include "profile_recorder.h"
#include "sanitizer.h"

namespace pypto_pro::runtime {

namespace {

// A launch runs on the calling thread alone until it has taken this long: waking a sleeping helper
// costs the waker a system call and the helper tens of microseconds (more on a loaded machine),
// more than a small launch takes in all.
constexpr auto kInlineBudget = std::chrono::microseconds(30);
// The launching thread waits this long for the blocks helpers are running before it sleeps.
constexpr auto kHelperWaitSpin = std::chrono::microseconds(20);
// After its launch a helper stays awake this long, watching for the next one (yielding its CPU to
// any other thread that wants it). A sleeping helper's CPU may be halted: on virtual machines waking
// it has been seen to take over a millisecond, so a loop of launches would run on one thread.
constexpr auto kHelperLinger = std::chrono::milliseconds(2);

LongLaunches& RecentLongLaunches() {
  static LongLaunches table;
  return table;
}

// The local memories of one host thread: blocks of a vector- or cube-only kernel on one thread run
// one after another, so they can share them like a core does.
Arena& ThreadArena() {
  thread_local Arena arena;
  return arena;
}

// Linux may wake a helper on its waker's CPU and leave it there while another CPU idles (seen on a
// KVM guest: both threads of a 2-vCPU machine on one vCPU, a 30 ms launch at one thread's speed).
// A helper that finds itself on a CPU its launch's other threads hold narrows its affinity to the
// CPUs they do not hold, which moves it at once, and widens it again after the launch.
class CpuSpread {
 public:
  // With Device::mutex_ held: notes this thread's CPU in `held`, or plans a move off it.
  void Plan(cpu_set_t& held) {
    move_ = false;
    const int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE) return;
    if (!CPU_ISSET(cpu, &held)) {
      CPU_SET(cpu, &held);
      return;
    }
    if (pthread_getaffinity_np(pthread_self(), sizeof home_, &home_) != 0) return;
    CPU_ZERO(&away_);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &home_) && !CPU_ISSET(c, &held)) CPU_SET(c, &away_);
    }
    move_ = CPU_COUNT(&away_) > 0;
    if (move_) CPU_OR(&held, &held, &away_);  // later helpers of the launch: every CPU is taken or ours
  }
  // Without the lock: the move, and its undo after the launch.
  void Move() {
    if (move_ && pthread_setaffinity_np(pthread_self(), sizeof away_, &away_) != 0) move_ = false;
  }
  void Return() {
    if (move_) pthread_setaffinity_np(pthread_self(), sizeof home_, &home_);
    move_ = false;
  }

 private:
  cpu_set_t home_, away_;
  bool move_ = false;
};

}  // namespace

struct Device::Job {
  const PtoKernelDesc* desc = nullptr;
  const void* args = nullptr;
  const ArchModel* arch = nullptr;
  LaunchControl* control = nullptr;
  int core_type = PTO_CORE_AIV;
  int blocks = 0;
  uint64_t launch_id = 0;
  // The blocks not yet claimed, [front, back): the launching thread claims from the front and
  // helpers from the back, so each thread runs a run of neighbouring blocks, which mostly read
  // neighbouring data (a K-loop matmul whose blocks share rows of A packs a quarter fewer panels than
  // with the threads taking turns: ~4% faster, Intel Xeon). Low 32 bits: front; high 32: back.
  std::atomic<uint64_t> unclaimed{0};
  std::atomic<int> done{0};
  std::atomic<int> faults{0};
  FaultInfo first_fault;        // written by the thread whose fault was first
  int refs = 0;                 // threads using the job; guarded by Device::mutex_
  cpu_set_t held_cpus;          // CPUs its threads run on once posted (CpuSpread); guarded by Device::mutex_
  std::mutex mutex;             // the launching thread waits on cv for the blocks helpers run
  std::condition_variable cv;

  void Reset() {
    done.store(0, std::memory_order_relaxed);
    faults.store(0, std::memory_order_relaxed);
    first_fault = FaultInfo{};
  }

  void SetBlocks(int count) {
    blocks = count;
    unclaimed.store(uint64_t(uint32_t(count)) << 32, std::memory_order_relaxed);
  }

  // The next block from the front (from_back: from the back), or -1 once all are claimed.
  int Claim(bool from_back) {
    uint64_t seen = unclaimed.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t front = uint32_t(seen), back = uint32_t(seen >> 32);
      if (front >= back) return -1;
      const uint64_t rest = from_back ? (uint64_t(back - 1) << 32) | front : (uint64_t(back) << 32) | (front + 1);
      if (unclaimed.compare_exchange_weak(seen, rest, std::memory_order_relaxed)) {
        return int(from_back ? back - 1 : front);
      }
    }
  }
  bool AllClaimed() const {
    const uint64_t seen = unclaimed.load(std::memory_order_relaxed);
    return uint32_t(seen) >= uint32_t(seen >> 32);
  }
};

Device& Device::Get() {
  static Device* device = new Device();
  return *device;
}

Device::Device() {
  long requested = GetEnvInt("PYPTO_PRO_NUM_THREADS");  // throws, naming it, when malformed
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  num_threads_ = requested > 0 ? int(std::min<long>(requested, 256)) : int(hw);
  kernel_timeout_seconds_ = GetEnvSeconds("PYPTO_PRO_KERNEL_TIMEOUT", true);
  pthread_atfork([] { Get().mutex_.lock(); }, [] { Get().mutex_.unlock(); }, &Device::AtForkChild);
}

// Claims blocks of `job` until none are left and runs each; after_block() follows every block.
// After a fault the launch is abandoned: the remaining blocks are claimed but not run.
template <typename AfterBlock>
void Device::RunBlocks(Job& job, bool from_back, AfterBlock after_block) {
  const bool mixed = job.desc->kind == PTO_KERNEL_MIXED;
  MixedBlock* mixed_block = mixed ? &MixedBlock::ForThisThread() : nullptr;
  Core core;
  core.desc = job.desc;
  core.control = job.control;
  PtoCoreCtx ctx{};
  ctx.api = &CoreApi();
  ctx.core_type = job.core_type;
  ctx.block_num = job.blocks;
  ctx.launch_id = job.launch_id;
  ctx.subblock_idx = 0;
  ctx.subblock_num = 1;
  ctx.runtime = &core;
  ctx.poll_word = PollWord();
  if (!mixed) ThreadArena().Attach(ctx, *job.arch);
  alignas(8) uint8_t ssbuf[PTO_SSBUF_BYTES];  // a vector- or cube-only block's SSBUF
  ctx.ssbuf = ssbuf;
  for (;;) {
    const int block = job.Claim(from_back);
    if (block < 0) break;
    if (job.faults.load(std::memory_order_relaxed) == 0) {
      std::optional<FaultInfo> fault;
      if (job.control && job.control->cancelled() != CancelReason::kNone) {
        fault = FaultInfo{};  // stopped before this block started: no line to name
        fault->cancel = job.control->cancelled();
        fault->block = block;
        fault->message = job.control->Describe();
      } else if (mixed) {
        fault = mixed_block->Run(*job.desc, job.args, *job.arch, block, job.blocks, job.control, job.launch_id);
      } else {
        ctx.block_idx = block;
        ctx.poll_seen = *ctx.poll_word;
        ctx.unit_flag = 0;
        PtoResetRegisters(&ctx);
        std::memset(ssbuf, 0, sizeof ssbuf);
        core.block = block;
        NameThreadAfterCore(*job.desc, ctx, block);
        RunCoreProgram<NotUnwound>(*job.desc, job.args, ctx, core, fault);
      }
      if (fault && job.faults.fetch_add(1) == 0) job.first_fault = std::move(*fault);
    }
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.blocks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.cv.notify_all();
    }
    after_block();
  }
}

Device::Job* Device::AcquireJobLocked() {
  if (free_jobs_.empty()) {
    all_jobs_.push_back(std::make_unique<Job>());
    free_jobs_.push_back(all_jobs_.back().get());
  }
  Job* job = free_jobs_.back();
  free_jobs_.pop_back();
  job->Reset();
  job->refs = 1;
  return job;
}

void Device::ReleaseJobLocked(Job* job) {
  if (--job->refs == 0) free_jobs_.push_back(job);
}

void Device::PostLocked(Job* job) {
  posted_.push_back(job);
  posts_.fetch_add(1, std::memory_order_relaxed);
  while (helpers_started_ < num_threads_ - 1) {
    ++helpers_started_;
    std::thread([this] { HelperLoop(); }).detach();
  }
  work_cv_.notify_all();
}

void Device::HelperLoop() {
  CpuSpread spread;
  std::unique_lock<std::mutex> lock(mutex_);
  auto linger_until = std::chrono::steady_clock::time_point{};
  for (;;) {
    if (posted_.empty() && std::chrono::steady_clock::now() < linger_until) {
      const uint64_t seen = posts_.load(std::memory_order_relaxed);
      lock.unlock();
      PollUntil([&] { return posts_.load(std::memory_order_relaxed) != seen; }, linger_until, true);
      lock.lock();
      linger_until = {};
      continue;
    }
    work_cv_.wait(lock, [&] { return !posted_.empty(); });
    Job* job = posted_.front();
    if (job->AllClaimed()) {  // its launcher took the last block
      posted_.erase(posted_.begin());
      continue;
    }
    ++job->refs;
    spread.Plan(job->held_cpus);
    lock.unlock();
    spread.Move();
    try {
      RunBlocks(*job, true, [] {});
    } catch (...) {  // a failure before the first claim (no memory for a fiber): the launcher runs them
    }
    spread.Return();
    lock.lock();
    posted_.erase(std::remove(posted_.begin(), posted_.end(), job), posted_.end());
    ReleaseJobLocked(job);
    linger_until = std::chrono::steady_clock::now() + kHelperLinger;
  }
}

std::optional<FaultInfo> Device::Run(const PtoKernelDesc& desc, const void* args, uint32_t block_dim,
                                     LaunchControl* control) {
  // Exactly block_dim blocks, never truncated: more blocks than the arch has cores run in waves, as
  // on the hardware (the host threads claim blocks until none are left).
  const int blocks = int(std::max<uint32_t>(block_dim, 1));
  static std::atomic<uint64_t> launches{0};
  const uint64_t launch_id = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  DebugThreadName thread_name(desc);
  if (desc.flags & PTO_KERNEL_FLAG_RESIDENT) {
    // pl.system.sync_all: every block resident at once, as fibers of this thread.
    const ArchModel* arch = FindArch(desc.arch ? desc.arch : "");
    SanitizerLaunch sanitizer(desc, args);
    ProfileLaunch profile(desc, args, uint32_t(blocks));
    std::optional<FaultInfo> result =
        ResidentLaunch::ForThisThread().Run(desc, args, arch ? *arch : DefaultArch(), blocks, control, launch_id);
    if (result) {
      result->kernel = desc.name ? desc.name : "?";
      if (result->source_file.empty()) result->source_file = desc.source_file ? desc.source_file : "?";
    }
    profile.Finish(result.has_value());
    return sanitizer.Finish(std::move(result));
  }
  const bool may_share = blocks > 1 && num_threads_ > 1 && !(desc.flags & PTO_KERNEL_FLAG_DEBUG);
  Job local;
  Job* job = &local;
  if (may_share) {
    std::lock_guard<std::mutex> lock(mutex_);
    job = AcquireJobLocked();
  }
  job->desc = &desc;
  job->args = args;
  job->arch = FindArch(desc.arch ? desc.arch : "");
  if (!job->arch) job->arch = &DefaultArch();
  job->control = control;
  job->core_type = desc.kind == PTO_KERNEL_CUBE ? PTO_CORE_AIC : PTO_CORE_AIV;
  job->SetBlocks(blocks);
  job->launch_id = launch_id;

  SanitizerLaunch sanitizer(desc, args);
  ProfileLaunch profile(desc, args, uint32_t(blocks));
  const auto start = std::chrono::steady_clock::now();
  bool posted = false;
  auto post = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    CPU_ZERO(&job->held_cpus);
    CpuSpread().Plan(job->held_cpus);  // the launcher's CPU: the first of the set, never a move
    PostLocked(job);
    posted = true;
  };
  if (may_share && RecentLongLaunches().Contains(&desc)) post();
  RunBlocks(*job, false, [&] {
    if (!may_share || posted || job->AllClaimed()) return;
    if (std::chrono::steady_clock::now() - start < kInlineBudget) return;
    post();
  });
  if (may_share) {
    if (posted) {
      std::lock_guard<std::mutex> lock(mutex_);
      posted_.erase(std::remove(posted_.begin(), posted_.end(), job), posted_.end());
    }
    // Helpers may still be running blocks they claimed; the launch waits for those only.
    auto all_done = [&] { return job->done.load(std::memory_order_acquire) >= job->blocks; };
    if (!SpinUntil(all_done, kHelperWaitSpin)) {
      std::unique_lock<std::mutex> lock(job->mutex);
      job->cv.wait(lock, all_done);
    }
  }
  if (may_share) RecentLongLaunches().Note(&desc, std::chrono::steady_clock::now() - start >= kInlineBudget);
  std::optional<FaultInfo> result;
  if (job->faults.load() > 0) {
    FaultInfo fault = std::move(job->first_fault);
    fault.kernel = desc.name ? desc.name : "?";
    if (fault.source_file.empty()) fault.source_file = desc.source_file ? desc.source_file : "?";
    fault.other_faults += job->faults.load() - 1;
    result = std::move(fault);
  }
  if (may_share) {
    std::lock_guard<std::mutex> lock(mutex_);
    ReleaseJobLocked(job);
  }
  profile.Finish(result.has_value());
  return sanitizer.Finish(std::move(result));
}

void Device::AtForkChild() {
  // Only the forking thread exists in the child: the helpers and the jobs they held are gone.
  Device& d = Get();
  new (&d.mutex_) std::mutex();
  new (&d.work_cv_) std::condition_variable();
  d.posted_.clear();
  d.helpers_started_ = 0;
}

}  // namespace pypto_pro::runtime
