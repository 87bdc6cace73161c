// The runtime side of PtoCoreCtx::api: what device code calls to fault, print, assert and
// synchronise with the other cores of its block.
#include <pthread.h>

#include <cstdio>
#include <sstream>

#include "core.h"
#include "kernel_dump.h"
#include "launch_control.h"
#include "mixed_block.h"
#include "resident_launch.h"
#include "sanitizer.h"

namespace pypto_pro::runtime {

namespace {

bool IsMixed(const PtoCoreCtx& ctx) { return static_cast<const Core*>(ctx.runtime)->mixed != nullptr; }

void FaultCallback(PtoCoreCtx* ctx, int32_t line, const PtoFaultDetail* detail) {
  FaultInfo info = CoreFault(*ctx, line);
  info.op = detail && detail->op ? detail->op : "";
  info.message = detail ? FormatFaultDetail(*detail) : "fault";
  throw KernelAbort{std::move(info)};
}

// loc=True: the text starts with the kernel's file:line.
std::string LocatedText(PtoCoreCtx* ctx, int32_t line, const char* fmt, const PtoArg* args, int32_t nargs,
                        int32_t flags) {
  std::string text;
  if (flags & PTO_PRINT_LOC) text = SourceWhere(*CoreOf(ctx).desc, line) + ": ";
  return text + FormatKernelText(fmt, args, nargs);
}

void PrintCallback(PtoCoreCtx* ctx, int32_t line, const char* fmt, const PtoArg* args, int32_t nargs,
                   int32_t flags) {
  CoreOf(ctx).output.Write(OutputPrefix(*ctx), LocatedText(ctx, line, fmt, args, nargs, flags));
}

// PYPTO_PRO_ASSERT=raise as the launching thread read it (SetSubmitAssertMode); print without one.
bool AssertRaises(PtoCoreCtx* ctx) {
  const LaunchControl* control = CoreOf(ctx).control;
  return control != nullptr && control->assert_raises;
}

// A failed pl.pto_assert prints "file:line: Assertion failed: <condition>[: <message>]" on the core's
// output and the kernel goes on, as on the NPU; PYPTO_PRO_ASSERT=raise makes it the block's fault.
void AssertCallback(PtoCoreCtx* ctx, int32_t line, const char* condition, const char* fmt, const PtoArg* args,
                    int32_t nargs, int32_t flags) {
  const std::string message = FormatKernelText(fmt, args, nargs);
  const std::string what = std::string("Assertion failed: ") + (condition ? condition : "?") +
                           (message.empty() ? "" : ": " + message);
  if (AssertRaises(ctx)) {
    AbortCore(*ctx, line, "pto_assert", what);
  }
  (void)flags;  // the line is always given: loc=True adds nothing an assertion does not print anyway
  CoreOf(ctx).output.Write(OutputPrefix(*ctx), SourceWhere(*CoreOf(ctx).desc, line) + ": " + what + "\n");
}

[[noreturn]] void NotMixed(PtoCoreCtx* ctx, int32_t line, const char* op) {
  AbortCore(*ctx, line, op, "cross-core flags need a mixed kernel (both pl.section_cube() and pl.section_vector())");
}

// INTER_BLOCK pairs every core of one kind of the launch (the resident launch's counters); the other
// modes the cores of a mixed block.
void SetCrossCoreCallback(PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode) {
  Core& core = CoreOf(ctx);
  if (mode == PTO_SYNC_INTER_BLOCK && core.resident) return core.resident->SetInterBlock(*ctx, line, event_id);
  if (!core.mixed) NotMixed(ctx, line, "system.set_cross_core");
  core.mixed->SetCrossCore(*ctx, line, pipe, event_id, mode);
}

void WaitCrossCoreCallback(PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode) {
  Core& core = CoreOf(ctx);
  if (mode == PTO_SYNC_INTER_BLOCK && core.resident) return core.resident->WaitInterBlock(*ctx, line, pipe, event_id);
  if (!core.mixed) NotMixed(ctx, line, "system.wait_cross_core");
  core.mixed->WaitCrossCore(*ctx, line, pipe, event_id, mode);
}

void PollCallback(PtoCoreCtx* ctx, int32_t line) {
  ctx->poll_seen = *ctx->poll_word;
  Core& core = CoreOf(ctx);
  if (!core.control || CheckLaunch(*core.control) == CancelReason::kNone) return;
  FaultInfo info = CoreFault(*ctx, line);
  info.cancel = core.control->cancelled();
  info.message = core.control->Describe();
  throw KernelAbort{std::move(info)};
}

uint8_t* PeerMemoryCallback(PtoCoreCtx* ctx, int32_t peer, int32_t memory) {
  Core& core = CoreOf(ctx);
  if (!core.mixed || memory <= 0 || memory >= PTO_MEM_COUNT) return nullptr;
  return core.mixed->PeerMemory(peer, memory);
}

int64_t SubmitUnavailable(void*, const PtoKernelDesc*, const void*, uint32_t, uint32_t) { return -1; }

void SyncAllCallback(PtoCoreCtx* ctx, int32_t line, int32_t core_type, int32_t soft, int64_t participants) {
  Core& core = CoreOf(ctx);
  if (!core.resident) AbortCore(*ctx, line, "system.sync_all", "internal error: the launch is not resident");
  core.resident->SyncAll(*ctx, line, core_type, soft != 0, participants);
}

// pl.dump_data: the window printed on the core's output, and saved as .npy in the kernel's dumps/.
void DumpCallback(PtoCoreCtx* ctx, int32_t line, const PtoDump* dump) {
  Core& core = CoreOf(ctx);
  const std::string location = (dump->flags & PTO_PRINT_LOC) ? SourceWhere(*core.desc, line) + ": " : "";
  std::string text = FormatDump(*dump, location);
  if (core.desc->dump_dir) {
    const std::string error = WriteDump(core.desc->dump_dir, *dump, core.desc->name ? core.desc->name : "?",
                                        core.block, CoreName(*ctx), LineNumber(line));
    if (!error.empty()) text += "dump_data: " + error + "\n";
  }
  core.output.Write(OutputPrefix(*ctx), text);
}

// Whether an output is still untouched (FreshBuffers; launches without a stream's control: no).
int32_t FreshMemoryCallback(PtoCoreCtx* ctx, const void* lo, int64_t bytes) {
  LaunchControl* control = CoreOf(ctx).control;
  return control && control->fresh.Fresh(lo, bytes);
}

// Cores cannot launch kernels.
const PtoRuntimeApi kCoreApi = {PTO_ABI_VERSION,     &SubmitUnavailable,    &FaultCallback,
                                &PrintCallback,      &AssertCallback,       &SetCrossCoreCallback,
                                &WaitCrossCoreCallback, &kSanitizerApi, &PollCallback,
                                &PeerMemoryCallback, &SyncAllCallback,      &DumpCallback,
                                &FreshMemoryCallback};

}  // namespace

std::string FormatFaultDetail(const PtoFaultDetail& d) {
  std::ostringstream os;
  os << (d.message ? d.message : "fault");
  auto list = [&](const int64_t* v) {
    os << "[";
    for (int i = 0; i < d.rank && i < PTO_FAULT_MAX_RANK; ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  };
  if (d.rank > 0) {
    if (d.tensor) os << ": tensor '" << d.tensor << "' of shape ";
    else os << ": size ";
    list(d.shape);
    os << ", offsets ";
    list(d.offsets);
    os << ", window ";
    list(d.extent);
  }
  return os.str();
}

std::string CoreName(const PtoCoreCtx& ctx) {
  if (ctx.core_type == PTO_CORE_AIC) return IsMixed(ctx) ? "AIC" : "AIC " + std::to_string(ctx.block_idx);
  return "AIV " + std::to_string(IsMixed(ctx) ? ctx.subblock_idx : ctx.block_idx);
}

void NameThreadAfterCore(const PtoKernelDesc& desc, const PtoCoreCtx& ctx, int block) {
  if (!(desc.flags & PTO_KERNEL_FLAG_DEBUG)) return;
  char name[16];  // Linux keeps 15 characters of a thread's name
  const bool aic = ctx.core_type == PTO_CORE_AIC;
  if (IsMixed(ctx) && !aic) {
    std::snprintf(name, sizeof name, "block%d/AIV%d", block, int(ctx.subblock_idx));
  } else {
    std::snprintf(name, sizeof name, "block%d/%s", block, aic ? "AIC" : "AIV");
  }
  pthread_setname_np(pthread_self(), name);
}

DebugThreadName::DebugThreadName(const PtoKernelDesc& desc) {
  active_ = (desc.flags & PTO_KERNEL_FLAG_DEBUG) && pthread_getname_np(pthread_self(), saved_, sizeof saved_) == 0;
}

DebugThreadName::~DebugThreadName() {
  if (active_) pthread_setname_np(pthread_self(), saved_);
}

std::string OutputPrefix(const PtoCoreCtx& ctx) {
  std::string prefix = "[block " + std::to_string(static_cast<const Core*>(ctx.runtime)->block);
  prefix += ctx.core_type == PTO_CORE_AIC ? " AIC" : " AIV";
  if (IsMixed(ctx) && ctx.core_type == PTO_CORE_AIV) prefix += " " + std::to_string(ctx.subblock_idx);
  return prefix + "] ";
}

std::string SourceFile(const PtoKernelDesc& desc, int line) {
  const int file = LineFile(line);
  const char* name = file > 0 && file < desc.source_file_count ? desc.source_files[file] : desc.source_file;
  return name ? name : "?";
}

std::string SourceWhere(const PtoKernelDesc& desc, int line) {
  return SourceFile(desc, line) + ":" + std::to_string(LineNumber(line));
}

std::string LineRef(const PtoKernelDesc& desc, int line) {
  if (LineFile(line) == 0) return "line " + std::to_string(line);
  return SourceWhere(desc, line);
}

FaultInfo CoreFault(const PtoCoreCtx& ctx, int line) {
  FaultInfo info;
  info.line = LineNumber(line);
  info.source_file = SourceFile(*static_cast<const Core*>(ctx.runtime)->desc, line);
  info.block = static_cast<const Core*>(ctx.runtime)->block;
  info.core = CoreName(ctx);
  return info;
}

void AbortCore(const PtoCoreCtx& ctx, int line, const char* op, std::string message) {
  FaultInfo info = CoreFault(ctx, line);
  info.op = op;
  info.message = std::move(message);
  throw KernelAbort{std::move(info)};
}

const PtoRuntimeApi& CoreApi() { return kCoreApi; }

}  // namespace pypto_pro::runtime
