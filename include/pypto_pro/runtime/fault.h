// Kernel faults: what a failing device-side check reports, and the error synchronize() raises.
#pragma once

#include <stdexcept>
#include <string>

namespace pypto_pro::runtime {

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

  std::string Format() const;  // one readable paragraph
};

// Thrown by Stream::Synchronize for the first fault (or deadlock) since the last synchronisation.
class KernelFaultError : public std::runtime_error {
 public:
  explicit KernelFaultError(FaultInfo info) : std::runtime_error(info.Format()), info_(std::move(info)) {}
  const FaultInfo& info() const { return info_; }

 private:
  FaultInfo info_;
};

}  // namespace pypto_pro::runtime
