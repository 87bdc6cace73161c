#include "pipe_sync.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cross_core.h"
#include "pypto_pro/hw_tables.h"

namespace pypto_pro::runtime::san {

namespace {

std::string FlagText(const char* op, int set_pipe, int wait_pipe, int event) {
  return std::string("pl.system.") + op + "(set_pipe=" + std::string(hw::PipeName(set_pipe)) + ", wait_pipe=" + std::string(hw::PipeName(wait_pipe)) +
         ", event_id=" + std::to_string(event) + ")";
}

std::string MutexText(int pipe, int id, bool automatic) {
  return "mutex " + std::to_string(id) + " on " + std::string(hw::PipeName(pipe)) + (automatic ? " (auto_mutex)" : "");
}

}  // namespace

void CoreSync::Reset(int slot) {
  slot_ = slot;
  for (int p = 0; p < kPipes; ++p) {
    clocks_[p] = VectorClock{};
    clocks_[p].at[Thread(p)] = 1;
  }
  for (Mutex& m : mutexes_) m = Mutex{};
  flags_.clear();
  for (VectorClock& u : unit_) u = VectorClock{};
}

VectorClock CoreSync::Release(int pipe) {
  VectorClock released = clocks_[pipe];
  ++clocks_[pipe].at[Thread(pipe)];
  return released;
}

void CoreSync::FlagSet(int line, int set_pipe, int wait_pipe, int event) {
  Flag& flag = flags_[FlagKey(set_pipe, wait_pipe, event)];
  VectorClock released = Release(set_pipe);
  if (!flag.unset_waits.empty()) {
    // Settles a wait that ran before it in program order; that wait ordered nothing here.
    flag.unset_waits.erase(flag.unset_waits.begin());
    return;
  }
  flag.pending.push_back({released, line});
}

void CoreSync::UnitSet(int pipe, int) { unit_[pipe] = Release(pipe); }

void CoreSync::UnitWait(int pipe, int other) { Acquire(pipe, unit_[other]); }

void CoreSync::FlagWait(int line, int set_pipe, int wait_pipe, int event) {
  Flag& flag = flags_[FlagKey(set_pipe, wait_pipe, event)];
  if (flag.pending.empty()) {
    flag.unset_waits.push_back(line);
    return;
  }
  Acquire(wait_pipe, flag.pending.front().clock);
  flag.pending.erase(flag.pending.begin());
}

void CoreSync::Lock(int line, int pipe, uint32_t ids, bool automatic, Findings& findings) {
  const uint32_t bit = 1u << pipe;
  for (int id = 0; id < kMutexes; ++id) {
    if (!(ids >> id & 1)) continue;
    Mutex& m = mutexes_[id];
    if (m.holders & bit) {
      const int first = m.lock_line[pipe];
      findings.Add(Kind::kUnpairedMutexLock, first, [&] {
        return MutexText(pipe, id, false) + " is locked here and locked again at " + findings.LineRef(line) +
               (automatic ? " (auto_mutex)" : "") + " before any unlock";
      });
    }
    Acquire(pipe, m.released);
    m.holders |= bit;
    m.lock_line[pipe] = line;
  }
}

void CoreSync::Unlock(int line, int pipe, uint32_t ids, bool automatic, Findings& findings) {
  const uint32_t bit = 1u << pipe;
  for (int id = 0; id < kMutexes; ++id) {
    if (!(ids >> id & 1)) continue;
    Mutex& m = mutexes_[id];
    if (!(m.holders & bit)) {
      findings.Add(Kind::kMutexUnlockBeforeLock, line, [&] {
        return MutexText(pipe, id, automatic) + " is unlocked while " + std::string(hw::PipeName(pipe)) +
               " does not hold it (never locked, or already unlocked)";
      });
      continue;
    }
    m.released.Join(clocks_[pipe]);
    m.holders &= ~bit;
  }
  ++clocks_[pipe].at[Thread(pipe)];
}

void CoreSync::Barrier(int pipe) {
  if (pipe == kPipeAll) {
    VectorClock all;
    for (const VectorClock& c : clocks_) all.Join(c);
    for (int p = 0; p < kPipes; ++p) {
      clocks_[p] = all;
      ++clocks_[p].at[Thread(p)];
    }
    return;
  }
  for (int p = 0; p < kPipes; ++p) {
    if (p != pipe) clocks_[p].Join(clocks_[pipe]);
  }
  ++clocks_[pipe].at[Thread(pipe)];
}

void CoreSync::Finish(Findings& findings) {
  for (int id = 0; id < kMutexes; ++id) {
    const Mutex& m = mutexes_[id];
    for (int p = 0; p < kPipes; ++p) {
      if (!(m.holders >> p & 1)) continue;
      findings.Add(Kind::kUnpairedMutexLock, m.lock_line[p], [&] {
        return MutexText(p, id, false) + " is locked here and never unlocked before the kernel ends";
      });
    }
  }
  for (const auto& [key, flag] : flags_) {
    const int event = key % kEvents, wait_pipe = key / kEvents % kPipes, set_pipe = key / kEvents / kPipes;
    for (const Flag::Set& set : flag.pending) {
      findings.Add(Kind::kFlagNeverWaited, set.line, [&] {
        return FlagText("sync_src", set_pipe, wait_pipe, event) +
               " sets a flag that no sync_dst waits for before the kernel ends";
      });
    }
    for (int line : flag.unset_waits) {
      findings.Add(Kind::kFlagNeverSet, line, [&] {
        return FlagText("sync_dst", set_pipe, wait_pipe, event) +
               " waits for a flag that no sync_src set before it (on the hardware it waits forever)";
      });
    }
  }
}

void CrossCoreClocks::Clear() {
  for (auto& direction : queues_) {
    for (auto& queue : direction) queue.clear();
  }
  for (auto& slot : rounds_) {
    for (Rounds& r : slot) r = Rounds{};
  }
}

namespace {

// The slots of a block whose cores are of the same kind as `slot`'s: the AIC (or a vector- or
// cube-only kernel's one core) alone, or both AIVs.
std::pair<int, int> SameKindSlots(int slot) { return slot == 0 ? std::pair{0, 0} : std::pair{1, 2}; }

}  // namespace

void CrossCoreClocks::Set(CoreSync& from, int line, int pipe, uint32_t id) {
  if (int(id >> 8) == PTO_SYNC_INTER_BLOCK) {
    const int event = int(id & 0xff);
    if (event < 0 || event >= CoreSync::kEvents) return;  // the runtime faults the core
    rounds_[from.slot()][event].sets.push_back(from.Release(pipe));
    return;
  }
  const CrossCoreFlags::Route route = CrossCoreFlags::RouteOf(true, from.slot(), int(id >> 8), int(id & 0xff));
  if (route.error) return;  // the runtime faults the core
  VectorClock released = from.Release(pipe);
  for (int i = 0; i < route.count; ++i) queues_[route.dirs[i]][route.event].push_back({released, line});
}

void CrossCoreClocks::Wait(CoreSync& to, int pipe, uint32_t id) {
  if (int(id >> 8) == PTO_SYNC_INTER_BLOCK) {
    const int event = int(id & 0xff);
    if (event < 0 || event >= CoreSync::kEvents) return;
    const uint32_t round = rounds_[to.slot()][event].waits++;
    const auto [lo, hi] = SameKindSlots(to.slot());
    uint32_t done = UINT32_MAX;  // the rounds every core of the kind has waited for
    for (int p = lo; p <= hi; ++p) {
      Rounds& r = rounds_[p][event];
      if (round >= r.first && round - r.first < r.sets.size()) to.Acquire(pipe, r.sets[round - r.first]);
      done = std::min(done, r.waits);
    }
    for (int p = lo; p <= hi; ++p) {  // forget the rounds all of them have taken
      Rounds& r = rounds_[p][event];
      while (r.first < done && !r.sets.empty()) r.sets.pop_front(), ++r.first;
    }
    return;
  }
  const CrossCoreFlags::Route route = CrossCoreFlags::RouteOf(false, to.slot(), int(id >> 8), int(id & 0xff));
  if (route.error) return;
  for (int i = 0; i < route.count; ++i) {
    std::vector<Signal>& queue = queues_[route.dirs[i]][route.event];
    if (queue.empty()) continue;  // the runtime only returns from a wait that had its set
    to.Acquire(pipe, queue.front().clock);
    queue.erase(queue.begin());
  }
}

void CrossCoreClocks::Finish(Findings* findings_by_slot) {
  for (int direction = 0; direction < CrossCoreFlags::kDirections; ++direction) {
    const int setter = CrossCoreFlags::Sender(direction);
    const int receiver = CrossCoreFlags::Receiver(direction);
    for (int event = 0; event < CoreSync::kEvents; ++event) {
      for (const Signal& set : queues_[direction][event]) {
        findings_by_slot[setter].Add(Kind::kFlagNeverWaited, set.line, [&] {
          return "pl.system.set_cross_core(event_id=" + std::to_string(event) + ") signals " +
                 (receiver == CrossCoreFlags::kAic ? std::string("the AIC") : CrossCoreFlags::Name(receiver)) +
                 ", which never waits for it before the kernel ends";
        });
      }
    }
  }
}

}  // namespace pypto_pro::runtime::san
