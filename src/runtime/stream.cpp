#include "pypto_pro/runtime/stream.h"

#include <algorithm>
#include <cstring>

#include "pypto_pro/runtime/device.h"
#include "pypto_pro/runtime/spin.h"

namespace pypto_pro::runtime {

namespace {

std::mutex& RegistryMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::vector<Stream*>& Registry() {
  static std::vector<Stream*>* streams = new std::vector<Stream*>();
  return *streams;
}

int64_t SubmitThunk(void* stream, const PtoKernelDesc* desc, const void* args, uint32_t args_size,
                     uint32_t block_dim);

// call_kernel only submits; the callbacks of running cores come with PtoCoreCtx::api.
const PtoRuntimeApi kStreamApi = {PTO_ABI_VERSION, &SubmitThunk, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr};

}  // namespace

Stream::Stream() : ring_(kCapacity) {
  handle_.api = &kStreamApi;
  handle_.owner = this;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    Registry().push_back(this);
  }
  worker_ = std::thread([this] { WorkerLoop(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    auto& all = Registry();
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Stream& Stream::Default() {
  static Stream* stream = new Stream();
  return *stream;
}

std::vector<Stream*> Stream::All() {
  Stream::Default();
  std::lock_guard<std::mutex> lock(RegistryMutex());
  return Registry();
}

namespace {
int64_t SubmitThunk(void* stream, const PtoKernelDesc* desc, const void* args, uint32_t args_size,
                    uint32_t block_dim) {
  if (stream == nullptr || desc == nullptr || desc->abi_version != PTO_ABI_VERSION) return -1;
  Stream* owner = static_cast<Stream::Handle*>(static_cast<PtoStreamHandle*>(stream))->owner;
  return int64_t(owner->Submit(desc, args, args_size, block_dim));
}
}  // namespace

uint64_t Stream::Submit(const PtoKernelDesc* desc, const void* args, uint32_t args_size, uint32_t block_dim) {
  Item item;
  item.desc = desc;
  item.block_dim = block_dim;
  item.args_size = args_size;
  if (args_size > sizeof item.inline_args) {
    item.heap_args.reset(new uint8_t[args_size]);
    std::memcpy(item.heap_args.get(), args, args_size);
  } else {
    std::memcpy(item.inline_args, args, args_size);
  }
  return Push(std::move(item));
}

uint64_t Stream::Record(const std::shared_ptr<EventState>& event) {
  Item item;
  item.event = event;
  event->completed.store(false);
  event->stream = this;
  uint64_t seq = Push(std::move(item));
  event->seq = seq;
  return seq;
}

uint64_t Stream::Push(Item&& item) {
  std::unique_lock<std::mutex> lock(mutex_);
  space_cv_.wait(lock, [&] { return count_ < kCapacity; });
  ring_[(head_ + count_) % kCapacity] = std::move(item);
  ++count_;
  uint64_t seq = submitted_.fetch_add(1) + 1;
  if (worker_sleeping_) work_cv_.notify_one();
  return seq;
}

void Stream::WorkerLoop() {
  for (;;) {
    SpinUntil([&] { return submitted() != completed(); });
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (count_ == 0 && !stop_) {
        worker_sleeping_ = true;
        work_cv_.wait(lock);
        worker_sleeping_ = false;
      }
      if (count_ == 0) return;  // stopped and drained
      item = std::move(ring_[head_]);
      head_ = (head_ + 1) % kCapacity;
      --count_;
    }
    space_cv_.notify_one();
    Execute(item);
    completed_.fetch_add(1);
    if (waiters_ > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_all();
    }
  }
}

void Stream::Execute(Item& item) {
  if (item.event) {
    item.event->when = std::chrono::steady_clock::now();
    item.event->completed.store(true, std::memory_order_release);
    return;
  }
  std::optional<FaultInfo> fault = Device::Get().Run(*item.desc, item.args(), item.block_dim);
  if (!fault) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (sticky_fault_) {
    sticky_fault_->other_faults += 1 + fault->other_faults;
  } else {
    sticky_fault_ = std::move(fault);
  }
}

void Stream::WaitFor(uint64_t seq) {
  if (SpinUntil([&] { return completed() >= seq; })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++waiters_;
  done_cv_.wait(lock, [&] { return completed() >= seq; });
  --waiters_;
}

void Stream::Synchronize() {
  WaitFor(submitted());
  std::optional<FaultInfo> fault;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fault.swap(sticky_fault_);
  }
  if (fault) ThrowFault(std::move(*fault));
}

}  // namespace pypto_pro::runtime
