#include "pypto_pro/support/text.h"

#include <cstdio>

namespace pypto_pro {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace pypto_pro
