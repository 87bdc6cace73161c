#include "mixed_block.h"

#include <cstring>
#include <memory>
#include <string>

#include "launch_control.h"
#include "resident_launch.h"
#include "pypto_pro/hw_tables.h"

namespace pypto_pro::runtime {

MixedBlock::MixedBlock() {
  for (int i = 0; i < CrossCoreFlags::kCores; ++i) {
    slots_[i].owner = this;
    slots_[i].index = i;
  }
}

MixedBlock& MixedBlock::ForThisThread() {
  thread_local std::unique_ptr<MixedBlock> block;
  if (!block) block = std::make_unique<MixedBlock>();
  return *block;
}

void MixedBlock::Program(void* raw) {
  Slot& slot = *static_cast<Slot*>(raw);
  MixedBlock& block = *slot.owner;
  // Cancelled: the block was abandoned (another core faulted, or it deadlocked).
  RunCoreProgram<Cancelled>(*block.desc_, block.args_, slot.ctx, slot.core, slot.fault);
}

void MixedBlock::Start(const PtoKernelDesc& desc, const void* args, const ArchModel& arch, int block, int blocks,
                       LaunchControl* control, ResidentLaunch* resident, uint64_t launch_id) {
  desc_ = &desc;
  args_ = args;
  block_ = block;
  cancelled_ = false;
  flags_.Clear();
  std::memset(ssbuf_, 0, sizeof ssbuf_);
  for (Slot& s : slots_) {
    const bool aic = s.index == CrossCoreFlags::kAic;
    const int subblock = aic ? 0 : s.index - CrossCoreFlags::kAiv0;
    s.ctx = PtoCoreCtx{};
    s.ctx.api = &CoreApi();
    s.ctx.core_type = aic ? PTO_CORE_AIC : PTO_CORE_AIV;
    s.ctx.block_idx = aic ? block : 2 * block + subblock;  // AIVs are numbered across the launch
    s.ctx.block_num = blocks;
    s.ctx.launch_id = launch_id;
    s.ctx.subblock_idx = subblock;
    s.ctx.subblock_num = aic ? 1 : 2;
    s.ctx.runtime = &s.core;
    s.ctx.poll_word = PollWord();
    s.ctx.poll_seen = *s.ctx.poll_word;
    PtoResetRegisters(&s.ctx);
    s.ctx.ssbuf = ssbuf_;
    s.arena.Attach(s.ctx, arch);
    s.core.desc = &desc;
    s.core.control = control;
    s.core.block = block;
    s.core.mixed = this;
    s.core.slot = s.index;
    s.core.resident = resident;
    s.waiting = false;
    s.barrier = nullptr;
    s.fault.reset();
    s.fiber.Start(&Program, &s);
  }
}

// Round robin: each core runs until it waits, yields or ends. Nothing runs concurrently, so the
// schedule (and therefore any printed output) is the same on every run.
MixedBlock::StepResult MixedBlock::Step() {
  StepResult r;
  for (Slot& s : slots_) {
    if (s.fiber.idle()) continue;
    r.unfinished = true;
    if (s.waiting && !WaitCanReturn(s)) continue;
    if (s.barrier && *s.barrier == s.barrier_generation) continue;  // its barrier is still closed
    NameThreadAfterCore(*desc_, s.ctx, block_);
    s.fiber.Resume();
    r.ran = true;
    if (s.fault) {
      r.fault = std::move(s.fault);
      return r;
    }
  }
  return r;
}

std::optional<FaultInfo> MixedBlock::Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch,
                                         int block, int blocks, LaunchControl* control, uint64_t launch_id) {
  Start(desc, args, arch, block, blocks, control, nullptr, launch_id);
  std::optional<FaultInfo> fault;
  for (;;) {
    StepResult r = Step();
    if (r.fault) fault = std::move(r.fault);
    if (fault || !r.unfinished) break;
    if (!r.ran) {
      fault = DeadlockReport();
      break;
    }
  }
  if (fault) Cancel();
  return fault;
}

bool MixedBlock::Unfinished() const {
  for (const Slot& s : slots_) {
    if (!s.fiber.idle()) return true;
  }
  return false;
}

bool MixedBlock::AnyAtBarrier() const {
  for (const Slot& s : slots_) {
    if (!s.fiber.idle() && s.barrier) return true;
  }
  return false;
}

void MixedBlock::WaitAtBarrier(PtoCoreCtx& ctx, int line, const uint64_t* generation) {
  Slot& slot = SlotOf(ctx);
  slot.barrier = generation;
  slot.barrier_generation = *generation;
  slot.barrier_line = line;
  while (*generation == slot.barrier_generation) Suspend(slot);
  slot.barrier = nullptr;
}

void MixedBlock::Suspend(Slot& slot) {
  slot.fiber.Suspend();
  if (cancelled_) throw Cancelled{};
}

CrossCoreFlags::Route MixedBlock::RouteFor(PtoCoreCtx& ctx, int line, const char* op, bool set, int event,
                                           int mode) {
  CrossCoreFlags::Route route = CrossCoreFlags::RouteOf(set, SlotOf(ctx).index, mode, event);
  if (route.error) {
    AbortCore(ctx, line, op, std::string(route.error) + " (event_id " + std::to_string(event) + " on " +
                                 CrossCoreFlags::Name(SlotOf(ctx).index) + ")");
  }
  return route;
}

void MixedBlock::SetCrossCore(PtoCoreCtx& ctx, int line, int /*pipe*/, int event, int mode) {
  const CrossCoreFlags::Route route = RouteFor(ctx, line, "system.set_cross_core", true, event, mode);
  Slot& slot = SlotOf(ctx);
  if (flags_.Set(route) < 0) return;
  // A full counter: the receivers may not have had their turn yet (on the hardware they run at the
  // same time), so let every other core run once before calling it an overflow.
  Suspend(slot);
  int full = flags_.Set(route);
  if (full < 0) return;
  AbortCore(ctx, line, "system.set_cross_core",
        "event " + std::to_string(event) + " already has " + std::to_string(CrossCoreFlags::kMaxPending) +
            " pending sets that " + CrossCoreFlags::Name(full) +
            " has not waited for; the hardware counter holds at most 15");
}

bool MixedBlock::WaitCanReturn(const Slot& s) const {
  if (s.wait.mode == PTO_SYNC_INTER_BLOCK) return s.core.resident->InterBlockReady(s.ctx, s.wait.event);
  return flags_.CanWait(CrossCoreFlags::RouteOf(false, s.index, s.wait.mode, s.wait.event));
}

void MixedBlock::WaitCrossCore(PtoCoreCtx& ctx, int line, int pipe, int event, int mode) {
  Slot& waiter = SlotOf(ctx);
  if (mode == PTO_SYNC_INTER_BLOCK) {  // the resident launch's counters; it takes the set itself
    waiter.waiting = true;
    waiter.wait = Wait{line, pipe, event, mode};
    do {
      Suspend(waiter);
    } while (!WaitCanReturn(waiter));
    waiter.waiting = false;
    return;
  }
  const CrossCoreFlags::Route route = RouteFor(ctx, line, "system.wait_cross_core", false, event, mode);
  Slot& slot = SlotOf(ctx);
  if (flags_.TryWait(route)) return;
  slot.waiting = true;
  slot.wait = Wait{line, pipe, event, mode};
  do {
    Suspend(slot);
  } while (!flags_.TryWait(route));
  slot.waiting = false;
}

FaultInfo MixedBlock::DeadlockReport() const {
  const std::string where = " of block " + std::to_string(block_);
  FaultInfo info;
  info.deadlock = true;
  info.block = block_;
  info.op = "system.wait_cross_core";
  info.message = "every unfinished core of block " + std::to_string(block_) +
                 " waits for a cross-core flag that no other core will set:";
  for (const Slot& s : slots_) {
    std::string name = CrossCoreFlags::Name(s.index);
    if (s.barrier && !s.fiber.idle()) {
      info.message += "\n  " + name + where + " at " + SourceWhere(*desc_, s.barrier_line) +
                      ": waits at pl.system.sync_all";
      continue;
    }
    if (!s.waiting) {
      info.message += "\n  " + name + where + " has finished";
      continue;
    }
    if (info.core.empty()) {
      info.core = name;
      info.line = LineNumber(s.wait.line);
      info.source_file = SourceFile(*desc_, s.wait.line);
    }
    const bool inter = s.wait.mode == PTO_SYNC_INTER_BLOCK;
    info.message += "\n  " + name + where + " at " + SourceWhere(*desc_, s.wait.line) +
                    ": pl.system.wait_cross_core(pipe=" + std::string(hw::PipeName(s.wait.pipe)) +
                    ", event_id=" + std::to_string(s.wait.event) + (inter ? ", sync_mode=INTER_BLOCK" : "") +
                    ") waits for " +
                    (inter ? s.core.resident->DescribeInterBlockWait(s.ctx, s.wait.event)
                           : flags_.DescribeWait(CrossCoreFlags::RouteOf(false, s.index, s.wait.mode, s.wait.event)));
  }
  return info;
}

void MixedBlock::Cancel() {
  cancelled_ = true;
  for (Slot& s : slots_) {
    if (s.fiber.idle()) continue;
    if (s.fiber.started()) {
      s.fiber.Resume();  // Suspend() throws Cancelled, which unwinds the core's frames
    } else {
      s.fiber.Discard();  // never ran: nothing to unwind, nothing printed
    }
  }
}

}  // namespace pypto_pro::runtime
