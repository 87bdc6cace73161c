// The shadow of sanitizer mode: the tile and GM accesses of a logical block that some pipe may
// still race with. Each access is kept exactly (a strided pattern of byte runs, as the op touched
// them), not as granules, so two pipes working on neighbouring bytes of one tensor row or tile never
// look like a race. An access leaves the log once every pipe that can still touch that memory is
// ordered after it: with double-buffered tile groups that takes a couple of iterations, which keeps
// the log short and every check a handful of comparisons.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vector_clock.h"

namespace pypto_pro::runtime::san {

// Bytes touched: `rows` rows `row_stride` apart, each `runs` runs of `width` bytes `run_stride`
// apart, starting at `base`. Normalised so that contiguous runs and rows are merged.
struct Region {
  uintptr_t base = 0;
  int64_t rows = 0, row_stride = 0;
  int64_t runs = 0, run_stride = 0;
  int64_t width = 0;
  uintptr_t lo = 0, hi = 0;  // bounding interval [lo, hi)

  static Region Make(uintptr_t base, int64_t rows, int64_t row_stride, int64_t runs, int64_t run_stride,
                     int64_t width);
  bool empty() const { return lo == hi; }
  bool operator==(const Region& o) const {
    return base == o.base && rows == o.rows && row_stride == o.row_stride && runs == o.runs &&
           run_stride == o.run_stride && width == o.width;
  }
};

// Whether some byte belongs to both regions (exact, not by bounding interval).
bool Intersects(const Region& a, const Region& b);

struct Access {
  Region region;
  int thread = 0;  // ThreadOf(core slot, pipe)
  Clock clock = 0;
  bool write = false;
  int line = 0;
  int memory = 0;                  // 0: GM, else the tile's memory
  uintptr_t origin = 0;            // the tensor's data or the arena's base
  const char* name = nullptr;      // tensor parameter or tile variable
};

class AccessLog {
 public:
  // Calls `conflict(earlier)` for each logged access that overlaps `a`, is on another thread, is not
  // ordered before `now` (the accessing thread's clock) and is a write or meets a write. Then logs
  // `a`, replacing an older access of the same thread, kind and bytes (which it covers in every
  // future check). `population` holds the threads that can still reach this memory: once the log
  // has grown, accesses all of them are ordered after are dropped.
  template <typename OnConflict>
  void Record(const Access& a, const VectorClock& now, const VectorClock* const* population, int count,
              OnConflict conflict) {
    Access* same = nullptr;
    for (Access& e : entries_) {
      if (e.region.hi <= a.region.lo || a.region.hi <= e.region.lo) continue;
      if (e.thread == a.thread) {
        if (e.write == a.write && e.region == a.region) same = &e;
        continue;
      }
      if ((e.write || a.write) && !now.Knows(e.thread, e.clock) && Intersects(e.region, a.region)) conflict(e);
    }
    if (same) {
      same->clock = a.clock;
      same->line = a.line;
      same->name = a.name;
      return;
    }
    entries_.push_back(a);
    if (entries_.size() > limit_) Prune(population, count);
  }

  void Clear();
  size_t size() const { return entries_.size(); }

  // Past this many live accesses the oldest are forgotten (a kernel whose pipes never synchronise
  // would otherwise make every check walk all of its history).
  static constexpr size_t kMaxEntries = 4096;

 private:
  void Prune(const VectorClock* const* population, int count);

  static constexpr size_t kFirstLimit = 64;
  std::vector<Access> entries_;
  size_t limit_ = kFirstLimit;
};

}  // namespace pypto_pro::runtime::san
