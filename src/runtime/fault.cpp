#include "pypto_pro/runtime/fault.h"

#include <sstream>

namespace pypto_pro::runtime {

namespace {

std::string FormatFindings(const FaultInfo& f) {
  std::ostringstream os;
  os << "kernel '" << f.kernel << "': the sanitizer found " << f.findings.size() << " issue(s)";
  if (!f.report.empty()) os << " (report: " << f.report << ")";
  os << ":";
  for (const SanitizerFinding& s : f.findings) {
    os << "\n  " << s.kind << ": " << s.message << " at " << s.file << ":" << s.line;
  }
  return os.str();
}

}  // namespace

std::string FaultInfo::Format() const {
  std::ostringstream os;
  if (!findings.empty()) {
    os << FormatFindings(*this);
    if (message.empty()) return os.str();
    os << "\nthe launch also faulted: ";
  }
  if (deadlock) {
    os << "kernel '" << kernel << "' deadlocked in block " << block << ": " << message;
    if (other_faults > 0) os << "\n(" << other_faults << " more fault(s) since the last synchronize)";
    return os.str();
  }
  if (kernel.empty()) {  // about the stream, not one launch (a fork, a timeout with nothing running)
    os << message << epilogue;
    if (other_faults > 0) os << " (" << other_faults << " more fault(s) since the last synchronize)";
    return os.str();
  }
  if (cancel != CancelReason::kNone) {
    os << "kernel '" << kernel << "' " << message;
    if (line > 0) os << " at " << source_file << ":" << line << " (block " << block << ", " << core << ")";
    os << epilogue;
    if (other_faults > 0) os << " (" << other_faults << " more fault(s) since the last synchronize)";
    return os.str();
  }
  os << "kernel '" << kernel << "' faulted in block " << block << " (" << core << ") at " << source_file << ":"
     << line;
  if (!op.empty()) os << " in pl." << op;
  os << ": " << message;
  if (other_faults > 0) os << " (" << other_faults << " more fault(s) since the last synchronize)";
  return os.str();
}

void ThrowFault(FaultInfo info) {
  if (!info.findings.empty()) throw SanitizerError(std::move(info));
  throw KernelFaultError(std::move(info));
}

}  // namespace pypto_pro::runtime
