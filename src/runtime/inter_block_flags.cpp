#include "inter_block_flags.h"

#include <algorithm>

namespace pypto_pro::runtime {

void InterBlockFlags::Reset(int aivs, int aics) {
  for (int k = 0; k < kKinds; ++k) {
    const size_t n = size_t(k == kAiv ? aivs : aics);
    for (Event& e : events_[k]) {
      e.sets.assign(n, 0);
      e.waits.assign(n, 0);
    }
  }
}

uint32_t InterBlockFlags::MinSets(const Event& e) const {
  return e.sets.empty() ? 0 : *std::min_element(e.sets.begin(), e.sets.end());
}

bool InterBlockFlags::Set(int kind, int event, int who) {
  Event& e = events_[kind][event];
  const uint32_t oldest_wait = *std::min_element(e.waits.begin(), e.waits.end());
  if (e.sets[size_t(who)] + 1 - oldest_wait > uint32_t(kMaxPending)) return false;
  ++e.sets[size_t(who)];
  return true;
}

bool InterBlockFlags::Ready(int kind, int event, int who) const {
  const Event& e = events_[kind][event];
  return MinSets(e) > e.waits[size_t(who)];
}

void InterBlockFlags::Consume(int kind, int event, int who) { ++events_[kind][event].waits[size_t(who)]; }

bool InterBlockFlags::InFlight(int kind, int event) const {
  const Event& e = events_[kind][event];
  if (e.sets.empty()) return false;
  return *std::max_element(e.sets.begin(), e.sets.end()) > *std::min_element(e.waits.begin(), e.waits.end());
}

std::string InterBlockFlags::DescribeWait(int kind, int event, int who) const {
  const Event& e = events_[kind][event];
  const uint32_t round = e.waits[size_t(who)] + 1;
  const char* name = kind == kAiv ? "AIV" : "AIC";
  std::string missing;
  int count = 0;
  for (size_t p = 0; p < e.sets.size(); ++p) {
    if (e.sets[p] >= round) continue;
    if (++count <= 8) missing += std::string(missing.empty() ? "" : ", ") + name + " " + std::to_string(p);
  }
  if (count > 8) missing += " and " + std::to_string(count - 8) + " more";
  return std::string("every ") + name + " of the launch to set event " + std::to_string(event) + " (round " +
         std::to_string(round) + "): " + missing + (count == 1 ? " has" : " have") + " not";
}

}  // namespace pypto_pro::runtime
