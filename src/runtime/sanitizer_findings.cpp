#include "sanitizer_findings.h"

#include <algorithm>

namespace pypto_pro::runtime::san {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kGmOutOfBounds: return "GM_OUT_OF_BOUNDS";
    case Kind::kTileOutOfBounds: return "TILE_OUT_OF_BOUNDS";
    case Kind::kTileOverlap: return "TILE_OVERLAP";
    case Kind::kMutexUnlockBeforeLock: return "MUTEX_UNLOCK_BEFORE_LOCK";
    case Kind::kUnpairedMutexLock: return "UNPAIRED_MUTEX_LOCK";
    case Kind::kPipeRace: return "PIPE_RACE";
    case Kind::kFlagNeverWaited: return "FLAG_NEVER_WAITED";
    case Kind::kFlagNeverSet: return "FLAG_NEVER_SET";
  }
  return "?";
}

const char* Hint(Kind kind) {
  switch (kind) {
    case Kind::kGmOutOfBounds:
      return "keep the offsets plus the tile's valid window inside the tensor's shape (pl.set_validshape for tails)";
    case Kind::kTileOutOfBounds:
      return "keep element offsets and valid shapes inside the tile's declared shape";
    case Kind::kTileOverlap:
      return "give each live tile and tile-group slot its own bytes: move the address or shrink the shape";
    case Kind::kMutexUnlockBeforeLock:
      return "unlock a mutex on the pipe that locked it, after the lock (pl.system.mutex_lock first)";
    case Kind::kUnpairedMutexLock:
      return "pair every pl.system.mutex_lock with a mutex_unlock on the same pipe before locking it again";
    case Kind::kPipeRace:
      return "order the two pipes with pl.system.sync_src/sync_dst, a TileGroup mutex (auto_mutex) or a barrier";
    case Kind::kFlagNeverWaited:
      return "wait for every flag you set (sync_dst / wait_cross_core) before the kernel ends";
    case Kind::kFlagNeverSet:
      return "set the flag (sync_src) before the pipe waits for it; prime buffer-free flags before the loop";
  }
  return "";
}

std::vector<SanitizerFinding> Findings::Take(int block, const std::string& core) {
  std::vector<SanitizerFinding> out;
  out.reserve(entries_.size());
  for (Entry& e : entries_) {
    e.finding.block = block;
    e.finding.core = core;
    out.push_back(std::move(e.finding));
  }
  entries_.clear();
  return out;
}

void MergeFindings(std::vector<SanitizerFinding>& into, std::vector<SanitizerFinding> from) {
  for (SanitizerFinding& f : from) {
    auto same = std::find_if(into.begin(), into.end(),
                             [&](const SanitizerFinding& g) { return g.kind == f.kind && g.line == f.line; });
    if (same == into.end()) {
      into.push_back(std::move(f));
      continue;
    }
    // Blocks finish in any order: the lowest block's hit is the one described, so reports repeat.
    const int hits = same->hits + f.hits;
    if (f.block < same->block) *same = std::move(f);
    same->hits = hits;
  }
}

}  // namespace pypto_pro::runtime::san
