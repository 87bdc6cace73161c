// The text sanitizer mode appends to pypto_sanitizer_report.txt, one section per launch.
#include <sstream>

#include "sanitizer.h"

namespace pypto_pro::runtime {

std::string FormatSanitizerReport(const std::string& kernel, const std::string& dir,
                                  const std::vector<SanitizerFinding>& findings) {
  std::ostringstream os;
  os << "===== kernel '" << kernel << "' (" << dir << ") =====\n";
  os << "PyPTO Sanitizer: " << findings.size() << " issue(s) detected\n";
  const size_t n = findings.size();
  for (size_t i = 0; i < n; ++i) {
    const SanitizerFinding& f = findings[i];
    os << "[" << i + 1 << "/" << n << "] " << f.kind << ": " << f.message << " (" << f.hits << " hit"
       << (f.hits == 1 ? "" : "s") << ", first on " << f.core << " of block " << f.block << ") at " << f.file << ":"
       << f.line << "\n";
    os << "    Hint: " << f.hint << "\n";
  }
  return os.str();
}

}  // namespace pypto_pro::runtime
