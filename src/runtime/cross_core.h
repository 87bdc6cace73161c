// The cross-core flags of one logical block of a mixed kernel (pl.system.set_cross_core and
// wait_cross_core with sync_mode INTRA_BLOCK). Each event id is a counter per direction and AIV,
// as on the hardware: the AIC's set raises the counter of each AIV, an AIV's set raises its counter
// towards the AIC; a wait consumes one pending set, the AIC's wait one from each AIV.
#pragma once

#include <cstdint>
#include <string>

namespace pypto_pro::runtime {

class CrossCoreFlags {
 public:
  static constexpr int kEvents = 16;
  // The hardware counter holds 15 pending sets: a 16th set before a wait is a kernel error.
  static constexpr int kMaxPending = 15;
  // The cores of a logical block.
  static constexpr int kAic = 0, kAiv0 = 1, kAiv1 = 2, kCores = 3;

  void Clear();
  // A set by `core`. Returns -1, or the receiving core whose counter is already full.
  int Set(int core, int event);
  bool CanWait(int core, int event) const;
  // Consumes what a wait of `core` needs; false (and nothing consumed) when it is not there yet.
  bool TryWait(int core, int event);
  // What a wait of `core` still needs: "the AIC to set event 2 (0 pending)".
  std::string DescribeWait(int core, int event) const;

  static const char* Name(int core);  // "AIC", "AIV 0", "AIV 1"

 private:
  uint8_t to_aiv_[2][kEvents] = {};  // pending sets of the AIC, per receiving AIV
  uint8_t to_aic_[2][kEvents] = {};  // pending sets of each AIV towards the AIC
};

}  // namespace pypto_pro::runtime
