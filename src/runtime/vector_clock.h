// Vector clocks over the pipes of a logical block, for sanitizer mode's happens-before model.
//
// On the hardware every pipe of a core (MTE1, MTE2, MTE3, M, V, S, FIX) runs its own instruction
// queue, so each pipe is a thread here: a mixed block's AIC, AIV 0 and AIV 1 give 3 x 8 threads
// (the 8th pipe number, ALL, never runs an op and stays unused). Clocks follow FastTrack: a thread
// ticks its own entry when it releases (sets a flag, unlocks a mutex, drains at a barrier, signals
// the other cores), and an access is the epoch (thread, own entry). An earlier access at epoch
// (u, c) happens before thread t's current instruction iff c <= clock_t[u].
#pragma once

#include <array>
#include <cstdint>

#include "pypto_pro/hw_tables.h"

namespace pypto_pro::runtime::san {

inline constexpr int kPipes = int(hw::Pipe::kCount);
inline constexpr int kPipeS = int(hw::Pipe::kS);
inline constexpr int kPipeAll = int(hw::Pipe::kALL);
inline constexpr int kCoreSlots = 3;  // a mixed block: AIC, AIV 0, AIV 1; other kernels use slot 0
inline constexpr int kThreads = kPipes * kCoreSlots;

using Clock = uint32_t;

inline constexpr int ThreadOf(int slot, int pipe) { return slot * kPipes + pipe; }

struct VectorClock {
  std::array<Clock, kThreads> at{};

  void Join(const VectorClock& other) {
    for (int t = 0; t < kThreads; ++t) at[t] = at[t] < other.at[t] ? other.at[t] : at[t];
  }
  // Whether an access at epoch (thread, clock) happens before this clock's owner.
  bool Knows(int thread, Clock clock) const { return clock <= at[thread]; }
};

}  // namespace pypto_pro::runtime::san
