// Kernel faults: what a failing device-side check reports, and the error synchronize() raises.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace pypto_pro::runtime {

// Why a launch was stopped before its end.
enum class CancelReason : int {
  kNone = 0,
  kInterrupt,      // Ctrl-C in a synchronize that waited for it
  kSyncTimeout,    // synchronize(timeout=) ran out
  kKernelTimeout,  // it ran longer than PYPTO_PRO_KERNEL_TIMEOUT
};

// One defect a sanitizer-mode launch found (docs/device.md#sanitizer-mode): every hit of one kind at
// one source line, over all blocks and cores of the launch.
struct SanitizerFinding {
  std::string kind;     // "PIPE_RACE", "GM_OUT_OF_BOUNDS", ...
  std::string message;  // what happened, as of the first hit
  std::string hint;     // one line on how to fix it
  std::string kernel;
  std::string file;
  int line = 0;
  int hits = 1;
  int block = -1;       // where it was first hit
  std::string core;     // "AIV 3", "AIC", "AIV 1" (of `block` in a mixed kernel)
};

struct FaultInfo {
  std::string kernel;       // kernel name
  std::string source_file;  // the kernel's Python file
  int line = 0;             // source line of the faulting op
  int block = -1;           // block index within the launch
  std::string core;         // "AIV 3" / "AIC 0"
  std::string op;           // "load_tile"
  std::string message;      // what went wrong, with offsets/shape when it was a GM access
  int other_faults = 0;     // further blocks of the same launch that faulted
  bool deadlock = false;    // every unfinished core of `block` waited; `message` lists them
  CancelReason cancel = CancelReason::kNone;  // stopped by Ctrl-C or a timeout, at `line`
  std::string epilogue;     // said after the location ("; 2 queued launches were cancelled")
  // Sanitizer mode: what the launch's checks found and the report file they were appended to. The
  // fields above then describe a fault only when the launch also faulted (`message` is set).
  std::vector<SanitizerFinding> findings;
  std::string report;

  std::string Format() const;  // one readable paragraph
  bool timeout() const { return cancel == CancelReason::kSyncTimeout || cancel == CancelReason::kKernelTimeout; }
};

// Thrown by Stream::Synchronize for the first fault (or deadlock) since the last synchronisation.
class KernelFaultError : public std::runtime_error {
 public:
  explicit KernelFaultError(FaultInfo info) : std::runtime_error(info.Format()), info_(std::move(info)) {}
  const FaultInfo& info() const { return info_; }

 private:
  FaultInfo info_;
};

// A sanitizer-mode launch found defects: info().findings lists them.
class SanitizerError : public KernelFaultError {
 public:
  using KernelFaultError::KernelFaultError;
};

// Throws the error `info` calls for: SanitizerError when it carries findings, else KernelFaultError.
[[noreturn]] void ThrowFault(FaultInfo info);

}  // namespace pypto_pro::runtime
