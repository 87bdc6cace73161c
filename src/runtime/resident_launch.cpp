#include "resident_launch.h"

#include <string>

#include "launch_control.h"
#include "sanitizer.h"

namespace pypto_pro::runtime {

namespace {

const char* const kBarrierNames[] = {"AIV_ONLY", "AIC_ONLY", "MIX"};

}  // namespace

ResidentLaunch& ResidentLaunch::ForThisThread() {
  thread_local std::unique_ptr<ResidentLaunch> launch;
  if (!launch) launch = std::make_unique<ResidentLaunch>();
  return *launch;
}

void ResidentLaunch::Program(void* raw) {
  Slot& slot = *static_cast<Slot*>(raw);
  ResidentLaunch& launch = *slot.owner;
  // Cancelled: the launch was abandoned (another block faulted, or the barrier deadlocked).
  RunCoreProgram<Cancelled>(*launch.desc_, launch.args_, slot.ctx, slot.core, slot.fault);
}

int ResidentLaunch::Participants(int kind) const {
  if (desc_->kind != PTO_KERNEL_MIXED) return blocks_;
  return kind == 0 ? 2 * blocks_ : kind == 1 ? blocks_ : 3 * blocks_;
}

std::optional<FaultInfo> ResidentLaunch::Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch,
                                             int blocks, LaunchControl* control) {
  const bool mixed = desc.kind == PTO_KERNEL_MIXED;
  const bool cube = desc.kind == PTO_KERNEL_CUBE;
  // A mixed block needs an AIC (and two AIVs); a vector or cube block one core of its kind.
  const int resident = mixed || cube ? arch.aic_cores : arch.aiv_cores;
  if (blocks > resident) {
    FaultInfo info;
    info.op = "system.sync_all";
    info.message = "pl.system.sync_all needs every block of the launch resident at once, and " +
                   std::string(arch.name) + " has " + std::to_string(resident) +
                   (mixed ? " AICs (one per mixed block)" : cube ? " AICs" : " AIVs") + " for block_dim " +
                   std::to_string(blocks) +
                   ": on the NPU the blocks beyond them would never start and the barrier would never open "
                   "(launch at most " + std::to_string(resident) + " blocks)";
    return info;
  }
  desc_ = &desc;
  args_ = args;
  blocks_ = blocks;
  cancelled_ = false;
  for (int k = 0; k < kBarrierKinds; ++k) arrived_[k] = 0, generation_[k] = 0, line_[k] = 0;
  arriving_.assign(size_t(blocks), {});
  opened_.assign(size_t(blocks), {});
  return mixed ? RunMixed(arch, control) : RunSingle(arch, control);
}

std::optional<FaultInfo> ResidentLaunch::RunSingle(const ArchModel& arch, LaunchControl* control) {
  const int blocks = blocks_;
  const bool cube = desc_->kind == PTO_KERNEL_CUBE;
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
    s.core.desc = desc_;
    s.core.control = control;
    s.core.block = b;
    s.core.resident = this;
    s.barrier = -1;
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
      if (s.barrier >= 0 && s.generation == generation_[s.barrier]) continue;  // its barrier is still closed
      s.fiber.Resume();
      ran = true;
      if (s.fault) {
        fault = std::move(s.fault);
        break;
      }
    }
    if (fault || !unfinished) break;
    if (!ran) {
      int waiting = 0;
      std::string finished;
      for (int b = 0; b < blocks; ++b) {
        if (slots_[size_t(b)]->barrier >= 0) {
          ++waiting;
        } else {
          finished += (finished.empty() ? "block(s) " : ", ") + std::to_string(b);
        }
      }
      fault = BarrierDeadlock(std::to_string(waiting) + " of " + std::to_string(blocks) + " blocks", finished);
      break;
    }
  }
  if (fault) {
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
  return fault;
}

std::optional<FaultInfo> ResidentLaunch::RunMixed(const ArchModel& arch, LaunchControl* control) {
  const int blocks = blocks_;
  while (int(mixed_.size()) < blocks) mixed_.push_back(std::make_unique<MixedBlock>());
  for (int b = 0; b < blocks; ++b) mixed_[size_t(b)]->Start(*desc_, args_, arch, b, blocks, control, this);
  std::optional<FaultInfo> fault;
  for (;;) {
    bool unfinished = false, ran = false;
    for (int b = 0; b < blocks && !fault; ++b) {
      MixedBlock::StepResult r = mixed_[size_t(b)]->Step();
      unfinished = unfinished || r.unfinished;
      ran = ran || r.ran;
      if (r.fault) fault = std::move(r.fault);
    }
    if (fault || !unfinished) break;
    if (!ran) {
      // Nothing can run: cores at a barrier that the others never reach, or a block's cross-core
      // waits that no core will satisfy.
      int at_barrier = -1;
      for (int b = 0; b < blocks && at_barrier < 0; ++b) {
        if (mixed_[size_t(b)]->AnyAtBarrier()) at_barrier = b;
      }
      if (at_barrier < 0) {
        for (int b = 0; b < blocks; ++b) {
          if (!mixed_[size_t(b)]->Unfinished()) continue;
          fault = mixed_[size_t(b)]->DeadlockReport();
          break;
        }
      } else {
        fault = mixed_[size_t(at_barrier)]->DeadlockReport();
        int kind = 0;
        for (int k = 0; k < kBarrierKinds; ++k) kind = arrived_[k] > 0 ? k : kind;
        FaultInfo barrier = BarrierDeadlock(std::to_string(arrived_[kind]) + " of " +
                                                std::to_string(Participants(kind)) + " cores",
                                            "the others");
        barrier.message += "\n" + fault->message;
        fault = std::move(barrier);
      }
      break;
    }
  }
  if (fault) {
    cancelled_ = true;
    for (int b = 0; b < blocks; ++b) mixed_[size_t(b)]->Cancel();
  }
  return fault;
}

FaultInfo ResidentLaunch::BarrierDeadlock(const std::string& who_waits, const std::string& others) const {
  const std::string file = desc_->source_file ? desc_->source_file : "?";
  int kind = 0;
  for (int k = 0; k < kBarrierKinds; ++k) kind = arrived_[k] > 0 ? k : kind;
  FaultInfo info;
  info.deadlock = true;
  info.op = "system.sync_all";
  info.line = line_[kind];
  info.message = who_waits + " wait at pl.system.sync_all(core_type=" + kBarrierNames[kind] + ") (" + file + ":" +
                 std::to_string(line_[kind]) + ") for " + others +
                 ", which never reach it (they ended or wait elsewhere); every core of the barrier must call "
                 "sync_all the same number of times";
  return info;
}

void ResidentLaunch::SyncAll(PtoCoreCtx& ctx, int line, int core_type) {
  const int kind = core_type >= 0 && core_type < kBarrierKinds ? core_type : kBarrierKinds - 1;
  Core& core = CoreOf(&ctx);
  const size_t block = size_t(core.block);
  line_[kind] = line;
  SanitizerBarrierArrive(ctx, arriving_[block][kind]);
  if (++arrived_[kind] == Participants(kind)) {  // the last one opens the barrier for everyone
    arrived_[kind] = 0;
    ++generation_[kind];
    for (size_t b = 0; b < arriving_.size(); ++b) {
      opened_[b][kind] = arriving_[b][kind];
      arriving_[b][kind] = san::VectorClock{};
    }
    SanitizerBarrierLeave(ctx, opened_[block][kind]);
    return;
  }
  if (core.mixed) {
    core.mixed->WaitAtBarrier(ctx, line, &generation_[kind]);
    SanitizerBarrierLeave(ctx, opened_[block][kind]);
    return;
  }
  Slot& slot = *slots_[size_t(core.block)];
  slot.barrier = kind;
  slot.generation = generation_[kind];
  while (slot.generation == generation_[kind]) {
    slot.fiber.Suspend();
    if (cancelled_) throw Cancelled{};
  }
  slot.barrier = -1;
  SanitizerBarrierLeave(ctx, opened_[block][kind]);
}

}  // namespace pypto_pro::runtime
