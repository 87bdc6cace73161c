// The pipes of one simulated core as sanitizer mode models them: a vector clock per pipe, and the
// synchronisation that orders pipes (docs/device.md#sanitizer-mode):
//  - sync_src(A -> B, e) releases A's clock into flag (A, B, e); sync_dst(A -> B, e) makes B acquire
//    the oldest pending set of that flag (flags count, like the hardware's);
//  - a mutex remembers what its holders released: lock acquires it, unlock adds the pipe's clock;
//  - a barrier on pipe X orders X's earlier instructions before everything after it; bar_all
//    orders every pipe's;
//  - cross-core flags (CrossCoreClocks) carry the setting pipe's clock to the waiting core.
// The simulator runs each core in program order, so a wait whose set comes later in program order
// finds nothing to acquire: it is counted, and left unbalanced at the end it is FLAG_NEVER_SET.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "sanitizer_findings.h"
#include "vector_clock.h"

namespace pypto_pro::runtime::san {

class CoreSync {
 public:
  static constexpr int kMutexes = 32;
  static constexpr int kEvents = 16;

  // A core in slot `slot` of its block (0 unless mixed) at the start of the kernel: no pipe knows
  // anything of another.
  void Reset(int slot);

  int slot() const { return slot_; }
  int Thread(int pipe) const { return ThreadOf(slot_, pipe); }
  const VectorClock& ClockOf(int pipe) const { return clocks_[pipe]; }
  // The epoch of `pipe`'s next access.
  Clock Epoch(int pipe) const { return clocks_[pipe].at[Thread(pipe)]; }

  // What `pipe` has done so far, for another pipe to acquire; its later accesses get a new epoch.
  VectorClock Release(int pipe);
  void Acquire(int pipe, const VectorClock& clock) { clocks_[pipe].Join(clock); }

  void FlagSet(int line, int set_pipe, int wait_pipe, int event);
  void FlagWait(int line, int set_pipe, int wait_pipe, int event);
  // Locks / unlocks every mutex id of the bit set `ids` on `pipe`.
  void Lock(int line, int pipe, uint32_t ids, bool automatic, Findings& findings);
  void Unlock(int line, int pipe, uint32_t ids, bool automatic, Findings& findings);
  void Barrier(int pipe);
  // The unit flag of matmul / store phase=: a level, not a count. A Final op on `pipe` publishes what
  // `pipe` has done to `other`; every phase= op on `pipe` acquires what `other` last published.
  void UnitSet(int pipe, int other);
  void UnitWait(int pipe, int other);
  // The end of the kernel: mutexes still held, flags set and never waited for or waited and never set.
  void Finish(Findings& findings);

 private:
  struct Mutex {
    uint32_t holders = 0;     // bit per pipe
    int lock_line[kPipes] = {};
    VectorClock released;     // joined on every unlock
  };
  struct Flag {
    struct Set {
      VectorClock clock;
      int line;
    };
    std::vector<Set> pending;       // sets not waited for yet, oldest first
    std::vector<int> unset_waits;   // lines of waits that found no set, oldest first
  };
  static int FlagKey(int set_pipe, int wait_pipe, int event) { return (set_pipe * kPipes + wait_pipe) * kEvents + event; }

  int slot_ = 0;
  VectorClock clocks_[kPipes];
  Mutex mutexes_[kMutexes];
  std::map<int, Flag> flags_;  // ordered: end-of-kernel findings come in a stable order
  VectorClock unit_[kPipes];   // what each pipe last published through the unit flag
};

// The cross-core flags of a mixed block (INTRA_BLOCK): the AIC's set reaches both AIVs, an AIV's set
// reaches the AIC, whose wait takes one set from each AIV. Each pending set carries its clock.
// INTER_BLOCK: a core's r-th wait acquires the r-th set of every core of its kind in the block (the
// AIC alone, or both AIVs); the cores of other blocks are not compared with this block's.
class CrossCoreClocks {
 public:
  void Clear();
  // `id`: the event id | the sync mode << 8 (the hook's encoding); routed like CrossCoreFlags.
  void Set(CoreSync& from, int line, int pipe, uint32_t id);
  void Wait(CoreSync& to, int pipe, uint32_t id);
  // Sets never waited for, reported on the setting core's findings (indexed by slot).
  void Finish(Findings* findings_by_slot);

 private:
  struct Signal {
    VectorClock clock;
    int line;
  };
  // Indexed by CrossCoreFlags' directions (AIC -> AIV 0/1, AIV 0/1 -> AIC, AIV 0 -> 1, AIV 1 -> 0).
  std::vector<Signal> queues_[6][CoreSync::kEvents];
  // INTER_BLOCK, per core slot and event: the clocks of its sets from round `first` on, and its waits.
  struct Rounds {
    std::deque<VectorClock> sets;
    uint32_t first = 0;
    uint32_t waits = 0;
  };
  Rounds rounds_[kCoreSlots][CoreSync::kEvents];
};

}  // namespace pypto_pro::runtime::san
