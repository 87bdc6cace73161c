#include "pypto_pro/runtime/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/config.h"

namespace pypto_pro::runtime {

namespace {

// Thrown by the fault callback through the kernel's frames; caught by the block runner.
struct KernelAbort {
  FaultInfo info;
};

// The local memories of one host thread, sized for the largest arch; a block uses the prefix its
// arch has. Blocks on one thread run one after another, so they can share it like a core does.
class Arena {
 public:
  Arena() {
    size_t offset = 0;
    for (size_t m = 0; m < PTO_MEM_COUNT; ++m) {
      uint32_t largest = 0;
      for (std::string_view name : ArchNames()) largest = std::max(largest, FindArch(name)->capacity[m]);
      offsets_[m] = offset;
      offset += (largest + 4095) / 4096 * 4096;
    }
    size_ = offset;
    memory_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, size_)));
    if (!memory_) throw std::bad_alloc();
  }
  uint8_t* base(size_t memory) { return memory_.get() + offsets_[memory]; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> memory_;
  size_t offsets_[PTO_MEM_COUNT] = {};
  size_t size_ = 0;
};

Arena& ThreadArena() {
  thread_local Arena arena;
  return arena;
}

inline void CpuRelax() { __builtin_ia32_pause(); }

std::string FormatDetail(const PtoFaultDetail& d) {
  std::ostringstream os;
  os << (d.message ? d.message : "fault");
  auto list = [&](const int64_t* v) {
    os << "[";
    for (int i = 0; i < d.rank && i < PTO_FAULT_MAX_RANK; ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  };
  if (d.rank > 0) {
    if (d.tensor) os << ": tensor '" << d.tensor << "' of shape ";
    else os << ": size ";
    list(d.shape);
    os << ", offsets ";
    list(d.offsets);
    os << ", window ";
    list(d.extent);
  }
  return os.str();
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

void Device::FaultCallback(PtoCoreCtx* ctx, int32_t line, const PtoFaultDetail* detail) {
  FaultInfo info;
  info.line = line;
  info.block = ctx->block_idx;
  info.core = std::string(ctx->core_type == PTO_CORE_AIC ? "AIC " : "AIV ") + std::to_string(ctx->block_idx);
  info.op = detail && detail->op ? detail->op : "";
  info.message = detail ? FormatDetail(*detail) : "fault";
  throw KernelAbort{std::move(info)};
}

namespace {
int64_t SubmitUnavailable(void*, const PtoKernelDesc*, const void*, uint32_t, uint32_t) { return -1; }
// The API blocks see: faults only (blocks cannot launch kernels).
const PtoRuntimeApi kBlockApi = {PTO_ABI_VERSION, &SubmitUnavailable, &Device::FaultCallback};
}  // namespace

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

void Device::RunBlocks(Job& job) {
  Arena& arena = ThreadArena();
  PtoCoreCtx ctx{};
  ctx.api = &kBlockApi;
  ctx.core_type = job.core_type;
  ctx.block_num = job.blocks;
  ctx.subblock_idx = 0;
  ctx.subblock_num = 1;
  ctx.runtime = &job;
  for (size_t m = 0; m < PTO_MEM_COUNT; ++m) {
    ctx.mem[m] = arena.base(m);
    ctx.mem_size[m] = job.arch->capacity[m];
  }
  for (;;) {
    int block = job.next.fetch_add(1, std::memory_order_relaxed);
    if (block >= job.blocks) break;
    if (job.faults.load(std::memory_order_relaxed) == 0) {  // after a fault the launch is abandoned
      ctx.block_idx = block;
      try {
        job.desc->entry(&ctx, job.args);
      } catch (KernelAbort& abort) {
        if (job.faults.fetch_add(1) == 0) job.first_fault = std::move(abort.info);
      } catch (const std::exception& e) {
        if (job.faults.fetch_add(1) == 0) {
          job.first_fault.block = block;
          job.first_fault.message = std::string("internal error: ") + e.what();
        }
      }
    }
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.blocks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.cv.notify_all();
    }
  }
}

void Device::HelperLoop() {
  for (;;) {
    Job* job = nullptr;
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
  int cores = job.core_type == PTO_CORE_AIC ? job.arch->aic_cores : job.arch->aiv_cores;
  job.blocks = int(std::min<uint32_t>(std::max<uint32_t>(block_dim, 1), uint32_t(cores)));

  bool parallel = job.blocks > 1 && num_threads_ > 1;
  if (parallel) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(&job);
    work_cv_.notify_all();
  }
  RunBlocks(job);
  if (parallel) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), &job), jobs_.end());
    }
    // Helpers may still be finishing blocks, or about to leave RunBlocks.
    for (int spin = 0; spin < 4000 && (job.done.load() < job.blocks || job.helpers.load() > 0); ++spin) CpuRelax();
    std::unique_lock<std::mutex> lock(job.mutex);
    job.cv.wait(lock, [&] { return job.done.load() >= job.blocks && job.helpers.load() == 0; });
  }
  if (job.faults.load() == 0) return std::nullopt;
  FaultInfo fault = std::move(job.first_fault);
  fault.kernel = desc.name ? desc.name : "?";
  fault.source_file = desc.source_file ? desc.source_file : "?";
  fault.other_faults += job.faults.load() - 1;
  return fault;
}

}  // namespace pypto_pro::runtime
