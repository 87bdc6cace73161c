#include "access_log.h"

#include <algorithm>

namespace pypto_pro::runtime::san {

namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Whether rows [base + i * stride, + width) for i < n meet [s, e). Offsets are relative to one
// origin, so they may be negative.
bool RowsHit(int64_t base, int64_t n, int64_t stride, int64_t width, int64_t s, int64_t e) {
  if (n <= 0) return false;
  if (n == 1 || stride == 0) return base < e && s < base + width;
  // The first row that ends after s, and whether it starts before e.
  const int64_t first = std::max<int64_t>(0, FloorDiv(s - width - base, stride) + 1);
  return first < n && base + first * stride < e;
}

// Whether `r` (offsets from `origin`) has a byte in [s, e).
bool Hits(const Region& r, uintptr_t origin, int64_t s, int64_t e) {
  const int64_t base = int64_t(r.base - origin);
  if (r.runs == 1) return RowsHit(base, r.rows, r.row_stride, r.width, s, e);
  const int64_t span = (r.runs - 1) * r.run_stride + r.width;
  int64_t row = r.row_stride == 0 ? 0 : std::max<int64_t>(0, FloorDiv(s - span - base, r.row_stride) + 1);
  for (; row < r.rows; ++row) {
    const int64_t start = base + row * r.row_stride;
    if (start >= e) break;
    if (RowsHit(start, r.runs, r.run_stride, r.width, s, e)) return true;
    if (r.row_stride == 0) break;
  }
  return false;
}

}  // namespace

Region Region::Make(uintptr_t base, int64_t rows, int64_t row_stride, int64_t runs, int64_t run_stride,
                    int64_t width) {
  Region r;
  r.base = r.lo = r.hi = base;
  if (rows <= 0 || runs <= 0 || width <= 0) return r;
  if (runs == 1 || run_stride == width) {
    width *= runs;
    runs = 1;
    run_stride = width;
  }
  if (rows == 1) row_stride = 0;
  if (runs == 1 && row_stride == width) {
    width *= rows;
    rows = 1;
    row_stride = 0;
  }
  r.rows = rows;
  r.row_stride = row_stride;
  r.runs = runs;
  r.run_stride = run_stride;
  r.width = width;
  r.hi = base + uintptr_t((rows - 1) * row_stride + (runs - 1) * run_stride + width);
  return r;
}

bool Intersects(const Region& a, const Region& b) {
  if (a.empty() || b.empty() || a.hi <= b.lo || b.hi <= a.lo) return false;
  // Walk the runs of the region that has fewer and test each against the other.
  const Region& walk = a.rows * a.runs <= b.rows * b.runs ? a : b;
  const Region& other = &walk == &a ? b : a;
  const uintptr_t origin = std::min(a.lo, b.lo);
  const int64_t base = int64_t(walk.base - origin);
  for (int64_t row = 0; row < walk.rows; ++row) {
    for (int64_t run = 0; run < walk.runs; ++run) {
      const int64_t s = base + row * walk.row_stride + run * walk.run_stride;
      if (Hits(other, origin, s, s + walk.width)) return true;
    }
  }
  return false;
}

void AccessLog::Clear() {
  entries_.clear();
  limit_ = kFirstLimit;
}

void AccessLog::Prune(const VectorClock* const* population, int count) {
  // What every thread that can still touch this memory knows of each thread.
  VectorClock known;
  if (count > 0) {
    known = *population[0];
    for (int i = 1; i < count; ++i) {
      for (int t = 0; t < kThreads; ++t) known.at[t] = std::min(known.at[t], population[i]->at[t]);
    }
  }
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const Access& e) { return known.Knows(e.thread, e.clock); }),
                 entries_.end());
  if (entries_.size() > kMaxEntries) entries_.erase(entries_.begin(), entries_.end() - kMaxEntries / 2);
  limit_ = std::max(kFirstLimit, 2 * entries_.size());
}

}  // namespace pypto_pro::runtime::san
