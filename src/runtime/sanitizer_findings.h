// What sanitizer mode reports: the finding kinds with their one-line hints, and a list that keeps
// one finding per (kind, source line) with a hit count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/fault.h"

namespace pypto_pro::runtime::san {

enum class Kind : uint8_t {
  kGmOutOfBounds,
  kTileOutOfBounds,
  kTileOverlap,
  kMutexUnlockBeforeLock,
  kUnpairedMutexLock,
  kPipeRace,
  kFlagNeverWaited,  // a sync_src / set_cross_core nobody waited for by the end of the kernel
  kFlagNeverSet,     // a sync_dst that found no flag set before it
};

const char* KindName(Kind kind);  // "PIPE_RACE"
const char* Hint(Kind kind);

class Findings {
 public:
  // One more hit of `kind` at `line`; `message()` (a std::string) is built for the first hit only,
  // so a defect inside a loop costs a lookup per hit.
  template <typename Message>
  void Add(Kind kind, int line, Message message) {
    for (Entry& e : entries_) {
      if (e.kind == kind && e.finding.line == line) {
        ++e.finding.hits;
        return;
      }
    }
    Entry e;
    e.kind = kind;
    e.finding.kind = KindName(kind);
    e.finding.hint = Hint(kind);
    e.finding.line = line;
    e.finding.message = message();
    entries_.push_back(std::move(e));
  }

  // "line N" for a line of the kernel's file, "file:N" for one of a helper from another module.
  std::string LineRef(int line) const;
  const PtoKernelDesc* desc = nullptr;  // the kernel the lines belong to

  // Hands the findings over in order of first hit, placed on `core` of `block`, and clears the list.
  std::vector<SanitizerFinding> Take(int block, const std::string& core);
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  const SanitizerFinding& at(size_t i) const { return entries_[i].finding; }

 private:
  struct Entry {
    Kind kind;
    SanitizerFinding finding;
  };
  std::vector<Entry> entries_;
};

// Adds `from` (one core's findings) to `into` (a launch's): hits of one (kind, line) add up, and the
// hit of the lowest block keeps its message and place.
void MergeFindings(std::vector<SanitizerFinding>& into, std::vector<SanitizerFinding> from);

}  // namespace pypto_pro::runtime::san
