// A launch of a kernel that calls pl.system.sync_all: a barrier of every block of the launch, which
// the hardware can only pass when all of them are resident on cores at once. Here every block runs
// as a fiber on the launching thread, each with its own local memories; a block that reaches the
// barrier suspends until all have, and when the blocks that have not finished all wait while
// another has ended without reaching it, the launch fails with a deadlock report instead of
// hanging. A block_dim above the arch's cores of the kernel's kind (they could not all be resident)
// is refused before anything runs. Vector- and cube-only kernels (docs/device.md#execution).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "arena.h"
#include "core.h"
#include "pypto_pro/runtime/fiber.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::runtime {

class ResidentLaunch {
 public:
  // The fibers and arenas of the calling thread's resident launches (grown on demand).
  static ResidentLaunch& ForThisThread();

  // Runs every block of the launch to its end; the first fault, or a deadlock report.
  std::optional<FaultInfo> Run(const PtoKernelDesc& desc, const void* args, const ArchModel& arch, int blocks,
                               LaunchControl* control);

  // pl.system.sync_all on a block's fiber.
  void SyncAll(PtoCoreCtx& ctx, int line);

 private:
  struct Slot {
    ResidentLaunch* owner = nullptr;
    Fiber fiber;
    Arena arena;
    PtoCoreCtx ctx{};
    Core core;
    bool waiting = false;  // at the barrier of generation `generation`
    uint64_t generation = 0;
    int line = 0;
    std::optional<FaultInfo> fault;
  };
  struct Cancelled {};

  static void Program(void* slot);
  FaultInfo DeadlockReport(int blocks) const;
  void Cancel(int blocks);

  std::vector<std::unique_ptr<Slot>> slots_;
  const PtoKernelDesc* desc_ = nullptr;
  const void* args_ = nullptr;
  int blocks_ = 0;
  int arrived_ = 0;          // blocks waiting at the current barrier
  uint64_t generation_ = 0;  // barriers passed
  bool cancelled_ = false;
};

}  // namespace pypto_pro::runtime
