#include "pypto_pro/runtime/stream.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "launch_control.h"
#include "pypto_pro/runtime/device.h"
#include "pypto_pro/runtime/spin.h"

namespace pypto_pro::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// How long the worker leaves a new item for a synchronising thread to run itself: a launch +
// synchronize loop comes back within microseconds, and a hand-off to the worker would make the
// synchroniser wait for a thread that the machine's load may keep off a core for milliseconds.
constexpr auto kWorkerGrace = std::chrono::microseconds(50);
// After its last item the worker looks for new ones every kWorkerPoll for kWorkerActive (so busy
// launchers need not wake it), then sleeps until a launch wakes it.
constexpr auto kWorkerPoll = std::chrono::milliseconds(1);
constexpr auto kWorkerActive = std::chrono::milliseconds(100);
// A synchroniser waiting for a launch the worker runs spins this long before it sleeps.
constexpr auto kWaitSpin = std::chrono::microseconds(20);

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
// (Every callback after submit stays null: value-initialised, whatever the ABI adds.)
const PtoRuntimeApi kStreamApi = [] {
  PtoRuntimeApi api{};
  api.abi_version = PTO_ABI_VERSION;
  api.submit = &SubmitThunk;
  return api;
}();

int64_t SubmitThunk(void* stream, const PtoKernelDesc* desc, const void* args, uint32_t args_size,
                    uint32_t block_dim) {
  if (stream == nullptr || desc == nullptr || desc->abi_version != PTO_ABI_VERSION) return -1;
  Stream* owner = static_cast<Stream::Handle*>(static_cast<PtoStreamHandle*>(stream))->owner;
  return int64_t(owner->Submit(desc, args, args_size, block_dim));
}

// The stream whose launch this thread is running itself (inside WaitFor), if any.
thread_local const Stream* t_running_inline = nullptr;
thread_local AssertMode t_submit_assert_mode = AssertMode::kPrint;

Clock::time_point DeadlineAfter(double seconds) {
  if (seconds < 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

void SetSubmitAssertMode(AssertMode mode) { t_submit_assert_mode = mode; }

Stream::Stream() : ring_(kCapacity), control_(std::make_unique<LaunchControl>()) {
  handle_.api = &kStreamApi;
  handle_.owner = this;
  static const bool at_fork = [] {
    pthread_atfork(&Stream::AtForkPrepare, &Stream::AtForkParent, &Stream::AtForkChild);
    return true;
  }();
  (void)at_fork;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(this);
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
  if (worker_ && worker_->joinable()) worker_->join();
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

uint64_t Stream::Submit(const PtoKernelDesc* desc, const void* args, uint32_t args_size, uint32_t block_dim) {
  Item item;
  item.desc = desc;
  item.block_dim = block_dim;
  item.assert_mode = t_submit_assert_mode;
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
  item.queued = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  space_cv_.wait(lock, [&] { return count_ < kCapacity; });
  ring_[(head_ + count_) % kCapacity] = std::move(item);
  ++count_;
  uint64_t seq = submitted_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (!worker_) StartWorkerLocked();
  if (worker_state_ == WorkerState::kAsleep) work_cv_.notify_one();
  return seq;
}

void Stream::StartWorkerLocked() {
  last_activity_ = Clock::now();
  worker_state_ = WorkerState::kAwake;
  worker_ = std::make_unique<std::thread>([this] { WorkerLoop(); });
}

Stream::Item Stream::PopLocked() {
  Item item = std::move(ring_[head_]);
  head_ = (head_ + 1) % kCapacity;
  --count_;
  executing_ = true;
  double limit = 0;
  try {
    limit = Device::Get().kernel_timeout_seconds();  // the launch path made the device already
  } catch (const std::exception&) {
  }
  control_->Reset(item.event || limit <= 0 ? Clock::time_point::max() : DeadlineAfter(limit), limit,
                  item.assert_mode == AssertMode::kRaise);
  space_cv_.notify_one();
  return item;
}

void Stream::FinishLocked() {
  executing_ = false;
  last_activity_ = Clock::now();
  completed_.fetch_add(1, std::memory_order_acq_rel);
  if (waiters_ > 0) done_cv_.notify_all();
}

void Stream::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (count_ > 0 && !executing_) {
      const auto age = Clock::now() - ring_[head_].queued;
      if (age < kWorkerGrace && !stop_) {  // a synchroniser will likely run it itself
        worker_state_ = WorkerState::kPolling;
        work_cv_.wait_for(lock, kWorkerGrace - age);
        worker_state_ = WorkerState::kAwake;
        continue;
      }
      Item item = PopLocked();
      lock.unlock();
      Execute(item);
      lock.lock();
      FinishLocked();
      continue;
    }
    if (stop_ && count_ == 0 && !executing_) return;
    if (Clock::now() - last_activity_ < kWorkerActive) {
      worker_state_ = WorkerState::kPolling;
      work_cv_.wait_for(lock, kWorkerPoll);
    } else {
      worker_state_ = WorkerState::kAsleep;
      work_cv_.wait(lock);
    }
    worker_state_ = WorkerState::kAwake;
  }
}

void Stream::Execute(Item& item) {
  if (item.event) {
    item.event->when = Clock::now();
    item.event->completed.store(true, std::memory_order_release);
    return;
  }
  std::optional<FaultInfo> fault;
  try {
    // While a launch may be stopped by a deadline or by its waiter's Ctrl-C, the ticker makes its
    // loops look (they only read the poll word).
    const InlineWait* wait = CurrentInlineWait();
    TickDemand ticks(control_->deadline != Clock::time_point::max() ||
                     (wait && (wait->interrupted || wait->deadline != Clock::time_point::max())));
    control_->fresh.Prepare(*item.desc, item.args());  // before the cores start: see FreshBuffers
    fault = Device::Get().Run(*item.desc, item.args(), item.block_dim, control_.get());
  } catch (const std::exception& e) {  // nothing may leave a runtime thread
    fault = FaultInfo{};
    fault->kernel = item.desc->name ? item.desc->name : "?";
    fault->message = std::string("internal error of the simulated device: ") + e.what();
  } catch (...) {
    fault = FaultInfo{};
    fault->kernel = item.desc->name ? item.desc->name : "?";
    fault->message = "internal error of the simulated device: an unknown exception";
  }
  // An interrupted launch is reported by the KeyboardInterrupt of its waiter, not as a fault.
  if (!fault || fault->cancel == CancelReason::kInterrupt) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (sticky_fault_) {
    sticky_fault_->other_faults += 1 + fault->other_faults;
  } else {
    sticky_fault_ = std::move(fault);
  }
}

uint64_t Stream::CancelLocked(CancelReason reason) {
  uint64_t dropped = count_;
  const auto now = Clock::now();
  while (count_ > 0) {
    Item item = std::move(ring_[head_]);
    head_ = (head_ + 1) % kCapacity;
    --count_;
    if (item.event) {  // the stream passes it, having run nothing
      item.event->when = now;
      item.event->completed.store(true, std::memory_order_release);
    }
    completed_.fetch_add(1, std::memory_order_acq_rel);
  }
  space_cv_.notify_all();
  if (executing_) {
    control_->Cancel(reason);
    ++dropped;
  }
  if (waiters_ > 0) done_cv_.notify_all();
  return dropped;
}

uint64_t Stream::Cancel(CancelReason reason) {
  std::unique_lock<std::mutex> lock(mutex_);
  return CancelLocked(reason);
}

void Stream::WaitIdleLocked(std::unique_lock<std::mutex>& lock) {
  ++waiters_;
  done_cv_.wait(lock, [&] { return !executing_; });
  --waiters_;
}

std::optional<FaultInfo> Stream::TakeFault() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<FaultInfo> fault;
  fault.swap(sticky_fault_);
  return fault;
}

void Stream::WaitFor(uint64_t seq, const WaitOptions& options) {
  if (completed() >= seq) return;
  if (t_running_inline == this) {  // a signal handler run by the launch's own Ctrl-C check, say
    throw std::logic_error("a stream cannot be synchronised from inside one of its own launches (a signal "
                           "handler that synchronises?)");
  }
  const Clock::time_point deadline = DeadlineAfter(options.timeout_seconds);
  InlineWait inline_wait;  // what stops a launch this thread runs itself
  inline_wait.interrupted = options.interrupted;
  inline_wait.deadline = options.cancel_on_timeout ? deadline : Clock::time_point::max();
  inline_wait.timeout_seconds = options.timeout_seconds;
  CancelReason cancel = CancelReason::kNone;  // why the wait ends early
  std::unique_lock<std::mutex> lock(mutex_);
  while (completed() < seq) {
    if (!executing_ && count_ > 0) {
      // Nobody runs the next item: run it here rather than hand it to the worker and wait.
      Item item = PopLocked();
      lock.unlock();
      {
        InlineWaitScope scope(&inline_wait);
        const Stream* outer = t_running_inline;
        t_running_inline = this;
        Execute(item);
        t_running_inline = outer;
      }
      lock.lock();
      const CancelReason stopped = control_->cancelled();  // a kernel timeout is the launch's own fault
      if (stopped == CancelReason::kInterrupt || stopped == CancelReason::kSyncTimeout) cancel = stopped;
      FinishLocked();
      if (cancel != CancelReason::kNone) break;
      continue;
    }
    // The worker (or another synchroniser) runs an item: wait for it, a tick at a time, so that
    // Ctrl-C and the timeout are seen; the check runs without the lock (it may take the GIL).
    lock.unlock();
    const uint64_t target = std::min(seq, completed() + 1);
    const bool done_spinning = SpinUntil([&] { return completed() >= target; }, kWaitSpin);
    if (!done_spinning) {
      if (options.interrupted && options.interrupted()) {
        cancel = CancelReason::kInterrupt;
      } else if (Clock::now() >= deadline) {
        if (!options.cancel_on_timeout) return;
        cancel = CancelReason::kSyncTimeout;
      }
    }
    lock.lock();
    if (cancel != CancelReason::kNone) break;
    if (done_spinning || completed() >= target) continue;
    ++waiters_;
    done_cv_.wait_until(lock, std::min(Clock::now() + kTickInterval, deadline),
                        [&] { return completed() >= target || (!executing_ && count_ > 0); });
    --waiters_;
  }
  if (cancel == CancelReason::kNone) return;
  if (cancel == CancelReason::kSyncTimeout) control_->sync_limit.store(options.timeout_seconds);
  const uint64_t queued = count_;
  CancelLocked(cancel);
  WaitIdleLocked(lock);
  if (cancel == CancelReason::kInterrupt) throw WaitInterrupted{};
  // Timed out: the stopped launch's fault names the line it was at; queued launches are dropped.
  FaultInfo timeout;
  if (sticky_fault_ && sticky_fault_->cancel == CancelReason::kSyncTimeout) {
    timeout = std::move(*sticky_fault_);
  } else {
    timeout.cancel = CancelReason::kSyncTimeout;
    char text[96];
    std::snprintf(text, sizeof text, "synchronize(timeout=%.3g s) ran out", options.timeout_seconds);
    timeout.message = text;
    if (sticky_fault_) timeout.other_faults += 1 + sticky_fault_->other_faults;
  }
  sticky_fault_.reset();
  if (queued > 0) timeout.epilogue = "; " + std::to_string(queued) + " queued launch(es) were cancelled";
  lock.unlock();
  ThrowFault(std::move(timeout));
}

void Stream::Synchronize(const WaitOptions& options) {
  WaitFor(submitted(), options);
  std::optional<FaultInfo> fault = TakeFault();
  if (fault) ThrowFault(std::move(*fault));
}

// ---- fork(): the child keeps the streams, not their threads or the launches in flight ----

void Stream::AtForkPrepare() {
  RegistryMutex().lock();
  for (Stream* s : Registry()) s->mutex_.lock();
}

void Stream::AtForkParent() {
  for (Stream* s : Registry()) s->mutex_.unlock();
  RegistryMutex().unlock();
}

void Stream::AtForkChild() {
  new (&RegistryMutex()) std::mutex();
  for (Stream* s : Registry()) {
    new (&s->mutex_) std::mutex();
    new (&s->work_cv_) std::condition_variable();
    new (&s->space_cv_) std::condition_variable();
    new (&s->done_cv_) std::condition_variable();
    s->worker_.release();  // the thread does not exist here; the next launch starts another
    s->worker_state_ = WorkerState::kAwake;
    s->waiters_ = 0;
    const uint64_t lost = s->count_ + (s->executing_ ? 1 : 0);
    s->executing_ = false;
    while (s->count_ > 0) {
      s->ring_[s->head_] = Item{};
      s->head_ = (s->head_ + 1) % kCapacity;
      --s->count_;
    }
    s->completed_.store(s->submitted_.load());
    if (lost > 0 && !s->sticky_fault_) {
      FaultInfo info;
      info.message = std::to_string(lost) +
                     " launch(es) were queued or running on this stream when the process forked; a forked "
                     "child does not inherit them, so their outputs are not written in this process";
      s->sticky_fault_ = std::move(info);
    }
  }
}

}  // namespace pypto_pro::runtime
