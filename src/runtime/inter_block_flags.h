// The INTER_BLOCK cross-core flags of a resident launch (pl.system.set_cross_core / wait_cross_core
// with sync_mode=INTER_BLOCK): every AIV of the launch, or every AIC, synchronises with all the others
// of its kind; AICs and AIVs never pair in this mode. Per kind and event id each participating core
// counts its sets and its waits: a core's r-th wait returns once every core of its kind has made its
// r-th set (the hardware gathers the sets of all cores of the kind before it raises each core's
// counter), and a counter holds at most 15 pending rounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pypto_pro::runtime {

class InterBlockFlags {
 public:
  static constexpr int kEvents = 16;
  static constexpr int kMaxPending = 15;
  static constexpr int kAiv = 0, kAic = 1, kKinds = 2;

  // A launch with `aivs` AIVs and `aics` AICs taking part (either may be 0), nothing set.
  void Reset(int aivs, int aics);
  int Participants(int kind) const { return int(events_[kind][0].sets.size()); }

  // Core `who` (its index among the cores of `kind`) sets `event`; false when that would leave more
  // than 15 rounds pending (nothing changes then).
  bool Set(int kind, int event, int who);
  // Whether `who`'s next wait for `event` can return, and taking it.
  bool Ready(int kind, int event, int who) const;
  void Consume(int kind, int event, int who);
  // Rounds of `event` set by some core and not yet waited for by every core of `kind`.
  bool InFlight(int kind, int event) const;
  // What `who`'s next wait still needs: "every AIV of the launch to set event 3 (round 1): AIV 2,
  // AIV 5 have not".
  std::string DescribeWait(int kind, int event, int who) const;
  uint32_t Round(int kind, int event, int who) const { return events_[kind][event].waits[size_t(who)] + 1; }

 private:
  struct Event {
    std::vector<uint32_t> sets, waits;  // per participating core
  };
  uint32_t MinSets(const Event& e) const;
  Event events_[kKinds][kEvents];
};

}  // namespace pypto_pro::runtime
