// A launch of a kernel that calls pl.system.sync_all (a barrier of every block of the launch) or uses
// INTER_BLOCK cross-core flags (every AIV, or every AIC, of the launch signals all the others), which
// the hardware can only pass when all of its blocks are resident on cores at once. Here every block runs
// as fibers on the launching thread, each core with its own local memories (a mixed kernel's
// blocks as MixedBlocks, interleaved); a core that reaches a barrier suspends until every core of
// the barrier's kind (AIV_ONLY, AIC_ONLY or MIX) has, and when nothing can run while cores wait,
// the launch fails with a deadlock report instead of hanging. A block_dim above what the arch can
// hold resident (its cores of the kernel's kind; a mixed block needs an AIC) is refused before
// anything runs (docs/device.md#execution).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arena.h"
#include "core.h"
#include "inter_block_flags.h"
#include "mixed_block.h"
#include "vector_clock.h"
#include "pypto_pro/runtime/fiber.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::runtime {

class ResidentLaunch {
 public:
  // The fibers and arenas of the calling thread's resident launches (grown on demand).
  static ResidentLaunch& ForThisThread();

  // Runs every block of the launch to its end; the first fault, or a deadlock report.
  std::optional<FaultInfo> Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch, int blocks,
                               LaunchControl* control, uint64_t launch_id);

  // pl.system.sync_all(core_type=) on a core's fiber (0 AIV_ONLY, 1 AIC_ONLY, 2 MIX); `soft`: its
  // SOFT form, a barrier of its own, held by `participants` cores (0: every core of core_type).
  void SyncAll(PtoCoreCtx& ctx, int line, int core_type, bool soft, int64_t participants);

  // set_cross_core / wait_cross_core with sync_mode=INTER_BLOCK on a core's fiber.
  void SetInterBlock(PtoCoreCtx& ctx, int line, int event);
  void WaitInterBlock(PtoCoreCtx& ctx, int line, int pipe, int event);
  // Whether the core's next INTER_BLOCK wait for `event` can return, and what it still needs.
  bool InterBlockReady(const PtoCoreCtx& ctx, int event) const;
  std::string DescribeInterBlockWait(const PtoCoreCtx& ctx, int event) const;

 private:
  // HARD barriers AIV_ONLY, AIC_ONLY, MIX, then the SOFT ones: separate barriers.
  static constexpr int kBarrierKinds = 6;
  struct Slot {
    ResidentLaunch* owner = nullptr;
    Fiber fiber;
    Arena arena;
    PtoCoreCtx ctx{};
    Core core;
    int barrier = -1;  // the barrier kind it waits at, -1 when running
    uint64_t generation = 0;
    int flag_event = -1;  // the INTER_BLOCK event it waits for, -1 when not waiting
    int flag_line = 0, flag_pipe = 0;
    std::optional<FaultInfo> fault;
    alignas(8) uint8_t ssbuf[PTO_SSBUF_BYTES];  // the block's SSBUF (a vector- or cube-only block is one core)
  };
  struct Cancelled {};

  static void Program(void* slot);
  std::optional<FaultInfo> RunSingle(const ArchModel& arch, LaunchControl* control);
  std::optional<FaultInfo> RunMixed(const ArchModel& arch, LaunchControl* control);
  // How many cores a barrier of `kind` waits for in this launch.
  int Participants(int kind) const;
  FaultInfo BarrierDeadlock(const std::string& who_waits, const std::string& others) const;
  // The report when no core of a vector- or cube-only launch can run.
  FaultInfo SingleDeadlock() const;
  // Lets the other cores run once (a full flag counter may drain meanwhile).
  void YieldCore(PtoCoreCtx& ctx);
  // A HARD barrier uses cross-core event ids 11..14 itself: one of them still in flight is an error.
  void CheckBarrierEventIds(PtoCoreCtx& ctx, int line) const;
  static int KindOf(const PtoCoreCtx& ctx);

  std::vector<std::unique_ptr<Slot>> slots_;         // vector- and cube-only kernels: a core per block
  std::vector<std::unique_ptr<MixedBlock>> mixed_;   // mixed kernels: a MixedBlock per block
  const PtoKernelDesc* desc_ = nullptr;
  const void* args_ = nullptr;
  int blocks_ = 0;
  uint64_t launch_id_ = 0;
  int arrived_[kBarrierKinds] = {};
  int64_t expected_[kBarrierKinds] = {};  // the participants the barrier's first arrival named
  uint64_t generation_[kBarrierKinds] = {};
  int line_[kBarrierKinds] = {};
  InterBlockFlags inter_;
  bool cancelled_ = false;
  // Sanitizer mode: per block and barrier kind, what its cores published arriving at the open
  // barrier and at the last one that opened (SanitizerBarrierArrive / Leave).
  std::vector<std::array<san::VectorClock, kBarrierKinds>> arriving_, opened_;
};

}  // namespace pypto_pro::runtime
