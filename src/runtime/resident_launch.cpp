#include "resident_launch.h"

#include <string>

#include "launch_control.h"

namespace pypto_pro::runtime {

ResidentLaunch& ResidentLaunch::ForThisThread() {
  thread_local std::unique_ptr<ResidentLaunch> launch;
  if (!launch) launch = std::make_unique<ResidentLaunch>();
  return *launch;
}

void ResidentLaunch::Program(void* raw) {
  Slot& slot = *static_cast<Slot*>(raw);
  ResidentLaunch& launch = *slot.owner;
  try {
    launch.desc_->entry(&slot.ctx, launch.args_);
  } catch (KernelAbort& abort) {
    slot.fault = std::move(abort.info);
  } catch (const Cancelled&) {
    // The launch was abandoned: another block faulted or the barrier deadlocked.
  } catch (const std::exception& e) {
    slot.fault = CoreFault(slot.ctx, 0);
    slot.fault->message = std::string("internal error: ") + e.what();
  } catch (...) {
    slot.fault = CoreFault(slot.ctx, 0);
    slot.fault->message = "internal error: an unknown exception left the kernel";
  }
  if (!slot.core.output.empty()) slot.core.output.Flush(OutputPrefix(slot.ctx));
}

std::optional<FaultInfo> ResidentLaunch::Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch,
                                             int blocks, LaunchControl* control) {
  const bool cube = desc.kind == PTO_KERNEL_CUBE;
  const int resident = cube ? arch.aic_cores : arch.aiv_cores;
  if (blocks > resident) {
    FaultInfo info;
    info.op = "system.sync_all";
    info.message = "pl.system.sync_all needs every block of the launch resident at once, and " +
                   std::string(arch.name) + " has " + std::to_string(resident) + (cube ? " AICs" : " AIVs") +
                   " for block_dim " + std::to_string(blocks) +
                   ": on the NPU the blocks beyond them would never start and the barrier would never open "
                   "(launch at most " + std::to_string(resident) + " blocks)";
    return info;
  }
  desc_ = &desc;
  args_ = args;
  blocks_ = blocks;
  arrived_ = 0;
  generation_ = 0;
  cancelled_ = false;
  while (int(slots_.size()) < blocks) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->owner = this;
  }
  for (int b = 0; b < blocks; ++b) {
    Slot& s = *slots_[size_t(b)];
    s.ctx = PtoCoreCtx{};
    s.ctx.api = &CoreApi();
    s.ctx.core_type = cube ? PTO_CORE_AIC : PTO_CORE_AIV;
    s.ctx.block_idx = b;
    s.ctx.block_num = blocks;
    s.ctx.subblock_idx = 0;
    s.ctx.subblock_num = 1;
    s.ctx.runtime = &s.core;
    s.ctx.poll_word = PollWord();
    s.ctx.poll_seen = *s.ctx.poll_word;
    s.arena.Attach(s.ctx, arch);
    s.core = Core{};
    s.core.desc = &desc;
    s.core.control = control;
    s.core.block = b;
    s.core.resident = this;
    s.waiting = false;
    s.fault.reset();
    s.fiber.Start(&Program, &s);
  }
  // Round robin, in block order: deterministic, like a mixed block's cores.
  std::optional<FaultInfo> fault;
  for (;;) {
    bool unfinished = false, ran = false;
    for (int b = 0; b < blocks; ++b) {
      Slot& s = *slots_[size_t(b)];
      if (s.fiber.idle()) continue;
      unfinished = true;
      if (s.waiting && s.generation == generation_) continue;  // its barrier is still closed
      s.fiber.Resume();
      ran = true;
      if (s.fault) {
        fault = std::move(s.fault);
        break;
      }
    }
    if (fault || !unfinished) break;
    if (!ran) {
      fault = DeadlockReport(blocks);
      break;
    }
  }
  if (fault) Cancel(blocks);
  return fault;
}

void ResidentLaunch::SyncAll(PtoCoreCtx& ctx, int line) {
  Slot& slot = *slots_[size_t(CoreOf(&ctx).block)];
  if (++arrived_ == blocks_) {  // the last one opens the barrier for everyone
    arrived_ = 0;
    ++generation_;
    return;
  }
  slot.waiting = true;
  slot.generation = generation_;
  slot.line = line;
  while (slot.generation == generation_) {
    slot.fiber.Suspend();
    if (cancelled_) throw Cancelled{};
  }
  slot.waiting = false;
}

FaultInfo ResidentLaunch::DeadlockReport(int blocks) const {
  const std::string file = desc_->source_file ? desc_->source_file : "?";
  FaultInfo info;
  info.deadlock = true;
  info.op = "system.sync_all";
  int waiting = 0;
  std::string finished;
  for (int b = 0; b < blocks; ++b) {
    const Slot& s = *slots_[size_t(b)];
    if (s.waiting) {
      if (waiting++ == 0) {
        info.block = b;
        info.line = s.line;
      }
    } else {
      finished += (finished.empty() ? "" : ", ") + std::to_string(b);
    }
  }
  info.message = std::to_string(waiting) + " of " + std::to_string(blocks) + " blocks wait at pl.system.sync_all (" +
                 file + ":" + std::to_string(info.line) + ") for block(s) " + finished +
                 ", which ended without reaching it; every block must call sync_all the same number of times";
  return info;
}

void ResidentLaunch::Cancel(int blocks) {
  cancelled_ = true;
  for (int b = 0; b < blocks; ++b) {
    Slot& s = *slots_[size_t(b)];
    if (s.fiber.idle()) continue;
    if (s.fiber.started()) {
      s.fiber.Resume();  // the barrier's Suspend() returns and throws Cancelled, unwinding the block
    } else {
      s.fiber.Discard();
    }
  }
}

}  // namespace pypto_pro::runtime
