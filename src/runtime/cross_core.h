// The cross-core flags of one logical block of a mixed kernel (pl.system.set_cross_core and
// wait_cross_core). Each event id is a counter per direction, as on the hardware; a wait consumes
// one pending set. Which counters a set raises and a wait needs is the sync mode's route:
//   INTRA_BLOCK     the AIC's set raises the counter of both AIVs, an AIV's set its counter towards
//                   the AIC; the AIC's wait needs one from each AIV;
//   UNICAST_BLOCK   the AIC talks to one AIV: its event ids 0..15 are AIV 0's, 16..31 AIV 1's (the
//                   AIVs use 0..15); the AIC's wait needs a set of that one AIV;
//   INTER_SUBBLOCK  AIV 0 and AIV 1 signal each other; the AIC takes no part.
// INTER_BLOCK (all AIVs or all AICs of the launch) is the resident launch's (inter_block_flags.h).
#pragma once

#include <cstdint>
#include <string>

#include "pypto_pro/abi.h"

namespace pypto_pro::runtime {

class CrossCoreFlags {
 public:
  static constexpr int kEvents = 16;
  // The hardware counter holds 15 pending sets: a 16th set before a wait is a kernel error.
  static constexpr int kMaxPending = 15;
  // The cores of a logical block.
  static constexpr int kAic = 0, kAiv0 = 1, kAiv1 = 2, kCores = 3;
  // Counter directions: AIC -> AIV 0 / 1, AIV 0 / 1 -> AIC, AIV 0 -> AIV 1, AIV 1 -> AIV 0.
  static constexpr int kDirections = 6;

  // The counters a set or wait of `core` with `mode` and `event` touches: up to two directions and
  // the counter's event id. `error` says why there are none (a mode the core cannot use, an id out
  // of its range).
  struct Route {
    int dirs[2] = {-1, -1};
    int count = 0;
    int event = 0;
    const char* error = nullptr;
  };
  static Route RouteOf(bool set, int core, int mode, int event);

  void Clear();
  // A set along `route`. Returns -1, or the receiving core whose counter is already full.
  int Set(const Route& route);
  bool CanWait(const Route& route) const;
  // Consumes what a wait along `route` needs; false (and nothing consumed) when it is not there yet.
  bool TryWait(const Route& route);
  // Pending sets of `event` in every direction.
  int PendingSets(int event) const;
  // What a wait along `route` still needs: "the AIC to set event 2 (0 pending)".
  std::string DescribeWait(const Route& route) const;

  static const char* Name(int core);  // "AIC", "AIV 0", "AIV 1"
  static int Sender(int direction);
  static int Receiver(int direction);

 private:
  uint8_t pending_[kDirections][kEvents] = {};
};

}  // namespace pypto_pro::runtime
