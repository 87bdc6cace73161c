#include "resident_launch.h"

#include "profile_recorder.h"

#include <cstring>
#include <string>

#include "launch_control.h"
#include "pypto_pro/hw_tables.h"
#include "sanitizer.h"

namespace pypto_pro::runtime {

namespace {

const char* const kBarrierNames[] = {"AIV_ONLY", "AIC_ONLY", "MIX",
                                     "AIV_ONLY, mode=SOFT", "AIC_ONLY, mode=SOFT", "MIX, mode=SOFT"};
// A HARD sync_all signals through these cross-core event ids itself.
constexpr int kBarrierEventFirst = 11, kBarrierEventLast = 14;

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
  if (expected_[kind] > 0) return int(expected_[kind]);  // a SOFT barrier's used_cores
  if (desc_->kind != PTO_KERNEL_MIXED) return blocks_;
  const int core_type = kind % 3;
  return core_type == 0 ? 2 * blocks_ : core_type == 1 ? blocks_ : 3 * blocks_;
}

int ResidentLaunch::KindOf(const PtoCoreCtx& ctx) {
  return ctx.core_type == PTO_CORE_AIC ? InterBlockFlags::kAic : InterBlockFlags::kAiv;
}

std::optional<FaultInfo> ResidentLaunch::Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch,
                                             int blocks, LaunchControl* control, uint64_t launch_id) {
  const bool mixed = desc.kind == PTO_KERNEL_MIXED;
  const bool cube = desc.kind == PTO_KERNEL_CUBE;
  // A mixed block needs an AIC (and two AIVs); a vector or cube block one core of its kind.
  const int resident = mixed || cube ? arch.aic_cores : arch.aiv_cores;
  if (blocks > resident) {
    FaultInfo info;
    info.op = "system.sync_all";
    info.message = "pl.system.sync_all and INTER_BLOCK cross-core flags need every block of the launch resident "
                   "at once, and " +
                   std::string(arch.name) + " has " + std::to_string(resident) +
                   (mixed ? " AICs (one per mixed block)" : cube ? " AICs" : " AIVs") + " for block_dim " +
                   std::to_string(blocks) +
                   ": on the NPU the blocks beyond them would never start and the others would wait for them "
                   "forever "
                   "(launch at most " + std::to_string(resident) + " blocks)";
    return info;
  }
  desc_ = &desc;
  args_ = args;
  blocks_ = blocks;
  launch_id_ = launch_id;
  cancelled_ = false;
  for (int k = 0; k < kBarrierKinds; ++k) arrived_[k] = 0, expected_[k] = 0, generation_[k] = 0, line_[k] = 0;
  inter_.Reset(mixed ? 2 * blocks : cube ? 0 : blocks, mixed || cube ? blocks : 0);
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
    s.ctx.launch_id = launch_id_;
    s.ctx.subblock_idx = 0;
    s.ctx.subblock_num = 1;
    s.ctx.runtime = &s.core;
    s.ctx.poll_word = PollWord();
    s.ctx.poll_seen = *s.ctx.poll_word;
    PtoResetRegisters(&s.ctx);
    std::memset(s.ssbuf, 0, sizeof s.ssbuf);
    s.ctx.ssbuf = s.ssbuf;
    s.arena.Attach(s.ctx, arch);
    s.core = Core{};
    s.core.desc = desc_;
    s.core.control = control;
    s.core.block = b;
    s.core.resident = this;
    s.barrier = -1;
    s.flag_event = -1;
    s.fault.reset();
    s.fiber.Start(&Program, &s);
  }
  const int kind = cube ? InterBlockFlags::kAic : InterBlockFlags::kAiv;
  // Round robin, in block order: deterministic, like a mixed block's cores.
  std::optional<FaultInfo> fault;
  for (;;) {
    bool unfinished = false, ran = false;
    for (int b = 0; b < blocks; ++b) {
      Slot& s = *slots_[size_t(b)];
      if (s.fiber.idle()) continue;
      unfinished = true;
      if (s.barrier >= 0 && s.generation == generation_[s.barrier]) continue;  // its barrier is still closed
      if (s.flag_event >= 0 && !inter_.Ready(kind, s.flag_event, b)) continue;  // its flag is not set yet
      NameThreadAfterCore(*desc_, s.ctx, b);
      s.fiber.Resume();
      ran = true;
      if (s.fault) {
        fault = std::move(s.fault);
        break;
      }
    }
    if (fault || !unfinished) break;
    if (!ran) {
      fault = SingleDeadlock();
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
  for (int b = 0; b < blocks; ++b) mixed_[size_t(b)]->Start(*desc_, args_, arch, b, blocks, control, this, launch_id_);
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

FaultInfo ResidentLaunch::SingleDeadlock() const {
  const int blocks = blocks_;
  bool at_flag = false;
  for (int b = 0; b < blocks; ++b) at_flag = at_flag || (!slots_[size_t(b)]->fiber.idle() && slots_[size_t(b)]->flag_event >= 0);
  if (!at_flag) {
    int waiting = 0;
    std::string finished;
    for (int b = 0; b < blocks; ++b) {
      if (slots_[size_t(b)]->barrier >= 0) {
        ++waiting;
      } else {
        finished += (finished.empty() ? "block(s) " : ", ") + std::to_string(b);
      }
    }
    return BarrierDeadlock(std::to_string(waiting) + " of " + std::to_string(blocks) + " blocks", finished);
  }
  // Cores wait for INTER_BLOCK flags (and maybe at barriers) that the others never set.
  FaultInfo info;
  info.deadlock = true;
  info.op = "system.wait_cross_core";
  info.message = "every unfinished core of the launch waits, and no core will set what it waits for:";
  int listed = 0, finished = 0;
  for (int b = 0; b < blocks; ++b) {
    const Slot& s = *slots_[size_t(b)];
    if (s.fiber.idle()) {
      ++finished;
      continue;
    }
    const std::string name = CoreName(s.ctx);
    if (info.core.empty() && s.flag_event >= 0) {
      info.core = name;
      info.block = b;
      info.line = LineNumber(s.flag_line);
      info.source_file = SourceFile(*desc_, s.flag_line);
    }
    if (++listed > 16) continue;
    if (s.flag_event >= 0) {
      info.message += "\n  " + name + " at " + SourceWhere(*desc_, s.flag_line) +
                      ": pl.system.wait_cross_core(pipe=" + std::string(hw::PipeName(s.flag_pipe)) +
                      ", event_id=" + std::to_string(s.flag_event) + ", sync_mode=INTER_BLOCK) waits for " +
                      inter_.DescribeWait(KindOf(s.ctx), s.flag_event, b);
    } else {
      info.message += "\n  " + name + " at " + SourceWhere(*desc_, line_[s.barrier]) +
                      ": waits at pl.system.sync_all(core_type=" + kBarrierNames[s.barrier] + ")";
    }
  }
  if (listed > 16) info.message += "\n  ... and " + std::to_string(listed - 16) + " more waiting";
  if (finished) info.message += "\n  " + std::to_string(finished) + " core(s) have finished";
  return info;
}

FaultInfo ResidentLaunch::BarrierDeadlock(const std::string& who_waits, const std::string& others) const {
  int kind = 0;
  for (int k = 0; k < kBarrierKinds; ++k) kind = arrived_[k] > 0 ? k : kind;
  FaultInfo info;
  info.deadlock = true;
  info.op = "system.sync_all";
  info.line = LineNumber(line_[kind]);
  info.source_file = SourceFile(*desc_, line_[kind]);
  info.message = who_waits + " wait at pl.system.sync_all(core_type=" + kBarrierNames[kind] + ") (" +
                 SourceWhere(*desc_, line_[kind]) + ") for " + others +
                 ", which never reach it (they ended or wait elsewhere); every core of the barrier must call "
                 "sync_all the same number of times";
  return info;
}

void ResidentLaunch::SyncAll(PtoCoreCtx& ctx, int line, int core_type, bool soft, int64_t participants) {
  const int kind = (core_type >= 0 && core_type < 3 ? core_type : 2) + (soft ? 3 : 0);
  Core& core = CoreOf(&ctx);
  const size_t block = size_t(core.block);
  if (!soft) CheckBarrierEventIds(ctx, line);
  if (soft && participants > 0) {
    // used_cores: the barrier opens when that many cores have arrived; they must agree on it.
    if (arrived_[kind] == 0) {
      expected_[kind] = participants;
    } else if (expected_[kind] != participants) {
      AbortCore(ctx, line, "system.sync_all",
                "the cores of this SOFT barrier disagree on used_cores: " + std::to_string(participants) +
                    " here, " + std::to_string(expected_[kind]) + " where the first core arrived");
    }
  }
  line_[kind] = line;
  if (core.profile && core.profile->size() < core.profile_cap) {  // profile mode: the barrier, for the model
    ProfileEvent e;
    e.kind = ProfileEvent::kSyncAll;
    e.pipe = uint8_t(hw::Pipe::kS);
    e.id = uint32_t(kind);
    e.units = Participants(kind);
    e.line = line;
    core.profile->push_back(e);
  }
  SanitizerBarrierArrive(ctx, arriving_[block][kind]);
  if (++arrived_[kind] == Participants(kind)) {  // the last one opens the barrier for everyone
    arrived_[kind] = 0;
    expected_[kind] = 0;
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

void ResidentLaunch::CheckBarrierEventIds(PtoCoreCtx& ctx, int line) const {
  Core& core = CoreOf(&ctx);
  for (int e = kBarrierEventFirst; e <= kBarrierEventLast; ++e) {
    const bool intra = core.mixed && core.mixed->PendingSets(e) > 0;
    if (!intra && !inter_.InFlight(KindOf(ctx), e)) continue;
    AbortCore(ctx, line, "system.sync_all",
              "pl.system.sync_all (mode=HARD) signals through cross-core event ids 11..14 itself, and event " +
                  std::to_string(e) + " still has " +
                  (intra ? std::string("a set_cross_core of this block that no wait_cross_core took")
                         : std::string("INTER_BLOCK sets that not every core has waited for")) +
                  ": on the NPU the barrier and that hand-over would take each other's signals; finish the hand-over "
                  "before the barrier or use another event id");
  }
}

void ResidentLaunch::YieldCore(PtoCoreCtx& ctx) {
  Core& core = CoreOf(&ctx);
  if (core.mixed) {
    core.mixed->Yield(ctx);
    return;
  }
  slots_[size_t(core.block)]->fiber.Suspend();
  if (cancelled_) throw Cancelled{};
}

namespace {

void CheckInterBlockEvent(PtoCoreCtx& ctx, int line, const char* op, int event) {
  if (event >= 0 && event < InterBlockFlags::kEvents) return;
  AbortCore(ctx, line, op, "event_id " + std::to_string(event) + " is out of range [0, 15] (INTER_BLOCK)");
}

}  // namespace

void ResidentLaunch::SetInterBlock(PtoCoreCtx& ctx, int line, int event) {
  CheckInterBlockEvent(ctx, line, "system.set_cross_core", event);
  const int kind = KindOf(ctx);
  if (inter_.Set(kind, event, ctx.block_idx)) return;
  // A full counter: the other cores may not have had their turn to wait yet (on the hardware they
  // run at the same time), so let them run once before calling it an overflow.
  YieldCore(ctx);
  if (inter_.Set(kind, event, ctx.block_idx)) return;
  AbortCore(ctx, line, "system.set_cross_core",
            "INTER_BLOCK event " + std::to_string(event) + " already has " +
                std::to_string(InterBlockFlags::kMaxPending) +
                " rounds of sets that not every core has waited for; the hardware counter holds at most 15");
}

void ResidentLaunch::WaitInterBlock(PtoCoreCtx& ctx, int line, int pipe, int event) {
  CheckInterBlockEvent(ctx, line, "system.wait_cross_core", event);
  const int kind = KindOf(ctx);
  Core& core = CoreOf(&ctx);
  if (!inter_.Ready(kind, event, ctx.block_idx)) {
    if (core.mixed) {
      core.mixed->WaitCrossCore(ctx, line, pipe, event, PTO_SYNC_INTER_BLOCK);  // returns once Ready
    } else {
      Slot& slot = *slots_[size_t(core.block)];
      slot.flag_event = event;
      slot.flag_line = line;
      slot.flag_pipe = pipe;
      while (!inter_.Ready(kind, event, ctx.block_idx)) {
        slot.fiber.Suspend();
        if (cancelled_) throw Cancelled{};
      }
      slot.flag_event = -1;
    }
  }
  inter_.Consume(kind, event, ctx.block_idx);
}

bool ResidentLaunch::InterBlockReady(const PtoCoreCtx& ctx, int event) const {
  return inter_.Ready(KindOf(ctx), event, ctx.block_idx);
}

std::string ResidentLaunch::DescribeInterBlockWait(const PtoCoreCtx& ctx, int event) const {
  return inter_.DescribeWait(KindOf(ctx), event, ctx.block_idx);
}

}  // namespace pypto_pro::runtime
