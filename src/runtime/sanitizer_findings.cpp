#include "sanitizer_findings.h"

#include <algorithm>

#include "core.h"

namespace pypto_pro::runtime::san {

std::string Findings::LineRef(int line) const {
  if (desc) return runtime::LineRef(*desc, line);
  return "line " + std::to_string(line);
}

namespace {

// Per Kind, in its order: the report's name and what to do about it.
struct KindRow {
  const char* name;
  const char* hint;
};
constexpr KindRow kKinds[] = {
    {"GM_OUT_OF_BOUNDS",
     "keep the offsets plus the tile's valid window inside the tensor's shape (pl.set_validshape for tails)"},
    {"TILE_OUT_OF_BOUNDS", "keep element offsets and valid shapes inside the tile's declared shape"},
    {"TILE_OVERLAP", "give each live tile and tile-group slot its own bytes: move the address or shrink the shape"},
    {"MUTEX_UNLOCK_BEFORE_LOCK",
     "unlock a mutex on the pipe that locked it, after the lock (pl.system.mutex_lock first)"},
    {"UNPAIRED_MUTEX_LOCK",
     "pair every pl.system.mutex_lock with a mutex_unlock on the same pipe before locking it again"},
    {"PIPE_RACE", "order the two pipes with pl.system.sync_src/sync_dst, a TileGroup mutex (auto_mutex) or a barrier"},
    {"FLAG_NEVER_WAITED", "wait for every flag you set (sync_dst / wait_cross_core) before the kernel ends"},
    {"FLAG_NEVER_SET", "set the flag (sync_src) before the pipe waits for it; prime buffer-free flags before the loop"},
};
static_assert(sizeof kKinds / sizeof *kKinds == size_t(Kind::kFlagNeverSet) + 1, "one row per Kind");

}  // namespace

const char* KindName(Kind kind) { return kKinds[size_t(kind)].name; }
const char* Hint(Kind kind) { return kKinds[size_t(kind)].hint; }

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
