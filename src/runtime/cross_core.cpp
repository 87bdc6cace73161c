#include "cross_core.h"

#include <cstring>

namespace pypto_pro::runtime {

void CrossCoreFlags::Clear() {
  std::memset(to_aiv_, 0, sizeof to_aiv_);
  std::memset(to_aic_, 0, sizeof to_aic_);
}

int CrossCoreFlags::Set(int core, int event) {
  if (core == kAic) {
    for (int aiv = 0; aiv < 2; ++aiv) {
      if (to_aiv_[aiv][event] >= kMaxPending) return kAiv0 + aiv;
    }
    ++to_aiv_[0][event];
    ++to_aiv_[1][event];
    return -1;
  }
  uint8_t& counter = to_aic_[core - kAiv0][event];
  if (counter >= kMaxPending) return kAic;
  ++counter;
  return -1;
}

bool CrossCoreFlags::CanWait(int core, int event) const {
  if (core == kAic) return to_aic_[0][event] > 0 && to_aic_[1][event] > 0;
  return to_aiv_[core - kAiv0][event] > 0;
}

bool CrossCoreFlags::TryWait(int core, int event) {
  if (!CanWait(core, event)) return false;
  if (core == kAic) {
    --to_aic_[0][event];
    --to_aic_[1][event];
  } else {
    --to_aiv_[core - kAiv0][event];
  }
  return true;
}

std::string CrossCoreFlags::DescribeWait(int core, int event) const {
  const std::string id = std::to_string(event);
  if (core == kAic) {
    return "AIV 0 and AIV 1 to set event " + id + " (pending sets: AIV 0 " + std::to_string(to_aic_[0][event]) +
           ", AIV 1 " + std::to_string(to_aic_[1][event]) + ")";
  }
  return "the AIC to set event " + id + " (pending sets: " + std::to_string(to_aiv_[core - kAiv0][event]) + ")";
}

const char* CrossCoreFlags::Name(int core) {
  static const char* const kNames[kCores] = {"AIC", "AIV 0", "AIV 1"};
  return kNames[core];
}

}  // namespace pypto_pro::runtime
