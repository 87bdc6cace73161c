#include "pypto_pro/runtime/fault.h"

#include <sstream>

namespace pypto_pro::runtime {

std::string FaultInfo::Format() const {
  std::ostringstream os;
  if (deadlock) {
    os << "kernel '" << kernel << "' deadlocked in block " << block << ": " << message;
    if (other_faults > 0) os << "\n(" << other_faults << " more fault(s) since the last synchronize)";
    return os.str();
  }
  os << "kernel '" << kernel << "' faulted in block " << block << " (" << core << ") at " << source_file << ":"
     << line;
  if (!op.empty()) os << " in pl." << op;
  os << ": " << message;
  if (other_faults > 0) os << " (" << other_faults << " more fault(s) since the last synchronize)";
  return os.str();
}

}  // namespace pypto_pro::runtime
