// A logical block of a mixed kernel: the programs of its AIC and its two AIVs run as fibers on one
// host thread, each core with its own local memories, sharing the block's cross-core flags. A core
// that waits for a flag not yet set suspends and the next core that can run continues; when every
// unfinished core waits, nothing can ever set a flag again and the block fails with a deadlock
// report instead of hanging.
#pragma once

#include <optional>

#include "arena.h"
#include "core.h"
#include "cross_core.h"
#include "pypto_pro/runtime/fiber.h"

namespace pypto_pro::runtime {

class MixedBlock {
 public:
  MixedBlock();
  MixedBlock(const MixedBlock&) = delete;
  MixedBlock& operator=(const MixedBlock&) = delete;

  // The fibers and arenas the mixed blocks of the calling thread run on (made on first use).
  static MixedBlock& ForThisThread();

  // Runs logical block `block` of a launch of `blocks` to its end. Returns the first fault of its
  // cores (a failed check or pl.pto_assert), or a deadlock report.
  std::optional<FaultInfo> Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch, int block,
                               int blocks, LaunchControl* control, uint64_t launch_id);

  // The same in steps, for a resident launch that interleaves all its blocks (pl.system.sync_all):
  // Start() sets the cores up (their Core::resident = `resident`); each Step() runs every core that
  // can run until it waits or ends. `ran` / `unfinished` say whether any core ran / is not done;
  // `fault` is the first fault. Cancel() unwinds what is left.
  struct StepResult {
    bool ran = false, unfinished = false;
    std::optional<FaultInfo> fault;
  };
  void Start(const PtoKernelDesc& desc, const void* args, const ArchModel& arch, int block, int blocks,
             LaunchControl* control, ResidentLaunch* resident, uint64_t launch_id);
  StepResult Step();
  void Cancel();
  // The deadlock report of the block's cross-core waits; a core waiting at a barrier says so.
  FaultInfo DeadlockReport() const;
  bool AnyAtBarrier() const;
  bool Unfinished() const;  // a core of the block has not ended

  // pl.system.sync_all on a core of this block: suspends it until *generation changes.
  void WaitAtBarrier(PtoCoreCtx& ctx, int line, const uint64_t* generation);

  // The arena base of memory `memory` of core `peer` (PTO_PEER_*); nullptr for no such core.
  uint8_t* PeerMemory(int peer, int memory) {
    static_assert(PTO_PEER_AIC == CrossCoreFlags::kAic && PTO_PEER_AIV1 == CrossCoreFlags::kAiv1);
    return peer >= 0 && peer < CrossCoreFlags::kCores ? slots_[peer].ctx.mem[memory] : nullptr;
  }

  // The cross-core callbacks of the block's cores; called on the core's fiber. An INTER_BLOCK wait
  // (made by the resident launch, which keeps those counters) returns once the launch says it may.
  void SetCrossCore(PtoCoreCtx& ctx, int line, int pipe, int event, int mode);
  void WaitCrossCore(PtoCoreCtx& ctx, int line, int pipe, int event, int mode);
  // Lets the other cores run once.
  void Yield(PtoCoreCtx& ctx) { Suspend(SlotOf(ctx)); }
  // Sets of `event` in the block that no wait has taken yet.
  int PendingSets(int event) const { return flags_.PendingSets(event); }

 private:
  struct Wait {
    int line = 0;
    int pipe = 0;
    int event = 0;
    int mode = PTO_SYNC_INTRA_BLOCK;
  };
  struct Slot {
    MixedBlock* owner = nullptr;
    int index = 0;  // CrossCoreFlags::kAic, kAiv0, kAiv1
    Fiber fiber;
    Arena arena;
    PtoCoreCtx ctx{};
    Core core;
    bool waiting = false;  // suspended in a wait whose flag is not set yet
    Wait wait;
    const uint64_t* barrier = nullptr;  // at a sync_all barrier: its generation counter
    uint64_t barrier_generation = 0;    // ... which was this when the core arrived
    int barrier_line = 0;
    std::optional<FaultInfo> fault;
  };
  // Unwinds a suspended core when its block is abandoned.
  struct Cancelled {};

  static void Program(void* slot);
  Slot& SlotOf(PtoCoreCtx& ctx) { return slots_[CoreOf(&ctx).slot]; }
  // Suspends the core; throws Cancelled when the block was abandoned meanwhile.
  void Suspend(Slot& slot);
  // Whether the wait `slot` is suspended in can return now.
  bool WaitCanReturn(const Slot& slot) const;
  // The route of a set or wait of the calling core; a fault at `line` when the mode or id cannot be used.
  CrossCoreFlags::Route RouteFor(PtoCoreCtx& ctx, int line, const char* op, bool set, int event, int mode);
  Slot slots_[CrossCoreFlags::kCores];
  alignas(8) uint8_t ssbuf_[PTO_SSBUF_BYTES];  // the block's SSBUF, shared by its three cores
  CrossCoreFlags flags_;
  const PtoKernelDesc* desc_ = nullptr;
  const void* args_ = nullptr;
  int block_ = 0;
  bool cancelled_ = false;
};

}  // namespace pypto_pro::runtime
