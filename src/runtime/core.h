// What the runtime keeps about the simulated core behind a PtoCoreCtx (PtoCoreCtx::runtime points
// at its Core), and the callbacks device code reaches through PtoCoreCtx::api.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "kernel_printf.h"
#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"
#include "pypto_pro/runtime/profile.h"
#include "pypto_pro/support/float_env.h"
#include "pypto_pro/support/source_line.h"

namespace pypto_pro::runtime {

class MixedBlock;
class ResidentLaunch;
struct LaunchControl;
namespace san {
struct CoreState;
}

struct Core {
  const PtoKernelDesc* desc = nullptr;
  int block = 0;                // the logical block (the same on the three cores of a mixed block)
  MixedBlock* mixed = nullptr;  // the block's fibers and cross-core flags; null unless mixed
  int slot = 0;                 // within a mixed block: 0 = AIC, 1 = AIV 0, 2 = AIV 1
  KernelOutput output;          // pl.printf text of this core not printed yet
  san::CoreState* sanitizer = nullptr;  // sanitizer mode: this core's checks (sanitizer.h)
  std::vector<ProfileEvent>* profile = nullptr;  // profile mode: where this core records (profile_recorder.h)
  size_t profile_cap = 0;                        // and how many events it may
  LaunchControl* control = nullptr;     // what can stop the launch (launch_control.h); may be null
  ResidentLaunch* resident = nullptr;   // a launch whose blocks are all resident (pl.system.sync_all)
};

inline Core& CoreOf(PtoCoreCtx* ctx) { return *static_cast<Core*>(ctx->runtime); }

// "AIV 3" / "AIC 0" in a vector- or cube-only kernel (block 3 is AIV 3); "AIC", "AIV 0" and
// "AIV 1" in a mixed kernel, whose fault reports name the logical block separately.
std::string CoreName(const PtoCoreCtx& ctx);
// The prefix of the core's printed lines: "[block 3 AIV] ", "[block 3 AIV 1] ".
std::string OutputPrefix(const PtoCoreCtx& ctx);
// Debug builds: names the calling thread after the core it is about to run ("block3/AIV1",
// "block3/AIC"), so gdb's `info threads` and a stopped frame say which core they are; restored by
// DebugThreadName's destructor at the end of the launch. A no-op for other builds.
void NameThreadAfterCore(const PtoKernelDesc& desc, const PtoCoreCtx& ctx, int block);
class DebugThreadName {
 public:
  explicit DebugThreadName(const PtoKernelDesc& desc);
  ~DebugThreadName();
  DebugThreadName(const DebugThreadName&) = delete;
  DebugThreadName& operator=(const DebugThreadName&) = delete;

 private:
  bool active_ = false;
  char saved_[16] = {};
};
// "GM access out of bounds: tensor 'x' of shape [...], offsets [...], window [...]".
std::string FormatFaultDetail(const PtoFaultDetail& detail);
// Where a line the kernel handed the runtime lies (support/source_line.h): its file; "file:line";
// "line N" in the kernel's own file, else "file:N".
std::string SourceFile(const PtoKernelDesc& desc, int line);
std::string SourceWhere(const PtoKernelDesc& desc, int line);
std::string LineRef(const PtoKernelDesc& desc, int line);
// A fault of the core at `line`, with its block, core, file and line filled in.
FaultInfo CoreFault(const PtoCoreCtx& ctx, int line);

// Thrown by the runtime callbacks through the kernel's frames; caught where the core's program
// started (the block loop of a plain kernel, the core's fiber in a mixed one).
struct KernelAbort {
  FaultInfo info;
};

// Ends the core's program with a fault of `op` at `line`.
[[noreturn]] void AbortCore(const PtoCoreCtx& ctx, int line, const char* op, std::string message);

// The callbacks of PtoCoreCtx::api: faults, printf, asserts, cross-core flags (not submit).
const PtoRuntimeApi& CoreApi();

// No launch of a block on its own thread unwinds it from outside.
struct NotUnwound {};

// Runs the core's program to its end and flushes its printed text: a fault it raised (KernelAbort)
// or an internal error becomes `fault`; `Unwound`, thrown when the launch abandons the core (a
// fiber resumed only to unwind), ends it quietly.
template <typename Unwound>
void RunCoreProgram(const PtoKernelDesc& desc, const void* args, PtoCoreCtx& ctx, Core& core,
                    std::optional<FaultInfo>& fault) {
  const DeviceFloatEnvironment ieee;  // a fiber's own: swapcontext switches the control word too
  try {
    desc.entry(&ctx, args);
  } catch (KernelAbort& abort) {
    fault = std::move(abort.info);
  } catch (const Unwound&) {
  } catch (const std::exception& e) {
    fault = CoreFault(ctx, 0);
    fault->message = std::string("internal error: ") + e.what();
  } catch (...) {
    fault = CoreFault(ctx, 0);
    fault->message = "internal error: an unknown exception left the kernel";
  }
  // The kernel's streaming stores (device_include/pypto_pro/numeric.h, StreamStore) are weakly
  // ordered: published here, before the block's end reaches another thread.
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
  if (!core.output.empty()) core.output.Flush(OutputPrefix(ctx));
}

}  // namespace pypto_pro::runtime
