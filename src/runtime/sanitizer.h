// Sanitizer mode in the runtime (docs/device.md#sanitizer-mode): the callbacks instrumented
// kernels make (PtoSanitizerApi), the state they keep per core and per logical block, and the
// launch that collects the findings, appends them to the report file and hands them to the stream.
//
// State lives with the host thread that runs a block: the cores of one mixed block run as fibers on
// one thread and share its block state (GM accesses, cross-core flags); a vector or cube kernel's
// block is one core. A core finds its launch through the launch's argument block, so the block
// scheduler needs no sanitizer code of its own; the plain path pays one branch per launch.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "access_log.h"
#include "pipe_sync.h"
#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"
#include "sanitizer_findings.h"

namespace pypto_pro::runtime {

class SanitizerLaunch;

namespace san {

struct BlockState;

// A tile group (or tile) placed on the core: its slots' byte ranges.
struct TileDecl {
  int decl = 0;  // which declaration of the kernel (a loop may run one several times)
  int line = 0;
  int memory = 0;
  const char* name = nullptr;
  std::vector<uint32_t> addrs;
  uint32_t bytes = 0;
};

struct CoreState {
  BlockState* block = nullptr;
  int slot = 0;
  std::string name;  // "AIV 3", "AIC", "AIV 1"
  CoreSync sync;
  AccessLog arena;   // this core's tile accesses
  Findings findings;
  std::vector<TileDecl> decls;
  std::vector<const VectorClock*> tile_population;  // the pipes that may touch this core's tiles
  bool ended = false;
};

struct BlockState {
  SanitizerLaunch* launch = nullptr;  // valid while the launch runs
  uint64_t launch_id = 0;             // 0: none yet (a later launch may reuse the address)
  int block = -1;
  int cores = 1;        // 3 in a mixed block
  CoreState core[kCoreSlots];
  AccessLog gm;         // GM accesses of every core of the block
  std::vector<const VectorClock*> gm_population;
  CrossCoreClocks cross;
  bool cut_short = false;  // a core ended with a fault: the end-of-kernel checks mean nothing
};

}  // namespace san

// The sanitizer side of one launch; Device::Run makes one per launch. A plain kernel's is inert.
class SanitizerLaunch {
 public:
  SanitizerLaunch(const PtoKernelDesc& desc, const void* args);
  ~SanitizerLaunch();
  SanitizerLaunch(const SanitizerLaunch&) = delete;
  SanitizerLaunch& operator=(const SanitizerLaunch&) = delete;

  // After every block has run: appends the launch's section to the report file and, when something
  // was found, returns `fault` (made if there was none) carrying the findings.
  std::optional<FaultInfo> Finish(std::optional<FaultInfo> fault);

  // One core's findings; called by the cores as they end.
  void Add(std::vector<SanitizerFinding> findings);
  uint64_t id() const { return id_; }
  const void* args() const { return args_; }

 private:
  const PtoKernelDesc& desc_;
  const void* args_;
  uint64_t id_ = 0;  // 0: not a sanitizer-mode kernel
  std::mutex mutex_;
  std::vector<SanitizerFinding> findings_;  // guarded by mutex_
};

// pl.system.sync_all in sanitizer mode: an arriving core publishes what its scalar pipe knows into
// `barrier` (work in flight on other pipes is not covered: a bar_all before the barrier is); once the
// barrier opens, every pipe of a leaving core acquires all of it. Nothing outside sanitizer mode.
// (Clocks only order accesses within a block, where they are compared.)
void SanitizerBarrierArrive(PtoCoreCtx& ctx, san::VectorClock& barrier);
void SanitizerBarrierLeave(PtoCoreCtx& ctx, const san::VectorClock& barrier);

// The callbacks of PtoRuntimeApi::sanitizer.
extern const PtoSanitizerApi kSanitizerApi;

// The report section of one launch (the text appended to pypto_sanitizer_report.txt).
std::string FormatSanitizerReport(const std::string& kernel, const std::string& dir,
                                  const std::vector<SanitizerFinding>& findings);

}  // namespace pypto_pro::runtime
