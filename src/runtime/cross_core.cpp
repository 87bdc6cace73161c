#include "cross_core.h"

#include <cstring>

namespace pypto_pro::runtime {

namespace {

constexpr int kAicToAiv0 = 0, kAiv0ToAic = 2, kAiv0ToAiv1 = 4;

}  // namespace

CrossCoreFlags::Route CrossCoreFlags::RouteOf(bool set, int core, int mode, int event) {
  Route r;
  r.event = event;
  const bool aic = core == kAic;
  const int aiv = core - kAiv0;  // 0 or 1 on an AIV
  const int limit = mode == PTO_SYNC_UNICAST_BLOCK && aic ? 2 * kEvents : kEvents;
  if (event < 0 || event >= limit) {
    r.error = limit == kEvents
                  ? "event_id is out of range [0, 15]"
                  : "event_id is out of range [0, 31] (UNICAST_BLOCK on the AIC: 0..15 AIV 0, 16..31 AIV 1)";
    return r;
  }
  switch (mode) {
    case PTO_SYNC_INTRA_BLOCK:
      if (aic) {
        r.dirs[0] = set ? kAicToAiv0 : kAiv0ToAic;
        r.dirs[1] = r.dirs[0] + 1;
        r.count = 2;
      } else {
        r.dirs[0] = set ? kAiv0ToAic + aiv : kAicToAiv0 + aiv;
        r.count = 1;
      }
      return r;
    case PTO_SYNC_UNICAST_BLOCK:
      if (aic) {
        const int to = event / kEvents;
        r.event = event % kEvents;
        r.dirs[0] = set ? kAicToAiv0 + to : kAiv0ToAic + to;
      } else {
        r.dirs[0] = set ? kAiv0ToAic + aiv : kAicToAiv0 + aiv;
      }
      r.count = 1;
      return r;
    case PTO_SYNC_INTER_SUBBLOCK:
      if (aic) {
        r.error = "sync_mode=INTER_SUBBLOCK pairs the two AIVs of a block; the AIC takes no part (INTRA_BLOCK or "
                  "UNICAST_BLOCK reach it)";
        return r;
      }
      r.dirs[0] = set ? kAiv0ToAiv1 + aiv : kAiv0ToAiv1 + (1 - aiv);
      r.count = 1;
      return r;
    default:
      r.error = "sync_mode INTER_BLOCK pairs every AIV or AIC of the launch, not the cores of a block";
      return r;
  }
}

void CrossCoreFlags::Clear() { std::memset(pending_, 0, sizeof pending_); }

int CrossCoreFlags::Set(const Route& route) {
  for (int i = 0; i < route.count; ++i) {
    if (pending_[route.dirs[i]][route.event] >= kMaxPending) return Receiver(route.dirs[i]);
  }
  for (int i = 0; i < route.count; ++i) ++pending_[route.dirs[i]][route.event];
  return -1;
}

bool CrossCoreFlags::CanWait(const Route& route) const {
  for (int i = 0; i < route.count; ++i) {
    if (pending_[route.dirs[i]][route.event] == 0) return false;
  }
  return true;
}

bool CrossCoreFlags::TryWait(const Route& route) {
  if (!CanWait(route)) return false;
  for (int i = 0; i < route.count; ++i) --pending_[route.dirs[i]][route.event];
  return true;
}

int CrossCoreFlags::PendingSets(int event) const {
  int n = 0;
  for (const auto& direction : pending_) n += direction[event];
  return n;
}

std::string CrossCoreFlags::DescribeWait(const Route& route) const {
  const std::string id = std::to_string(route.event);
  std::string who, counts;
  for (int i = 0; i < route.count; ++i) {
    const int d = route.dirs[i];
    who += std::string(i ? " and " : "") + Name(Sender(d));
    counts += std::string(i ? ", " : "") + (route.count > 1 ? std::string(Name(Sender(d))) + " " : "") +
              std::to_string(pending_[d][route.event]);
  }
  const bool aic_sends = route.count > 0 && Sender(route.dirs[0]) == kAic;
  return (aic_sends ? "the AIC" : who) + " to set event " + id + " (pending sets: " + counts + ")";
}

const char* CrossCoreFlags::Name(int core) {
  static const char* const kNames[kCores] = {"AIC", "AIV 0", "AIV 1"};
  return kNames[core];
}

int CrossCoreFlags::Sender(int d) { return d < 2 ? kAic : d < 4 ? kAiv0 + (d - 2) : kAiv0 + (d - 4); }
int CrossCoreFlags::Receiver(int d) { return d < 2 ? kAiv0 + d : d < 4 ? kAic : kAiv1 - (d - 4); }

}  // namespace pypto_pro::runtime
