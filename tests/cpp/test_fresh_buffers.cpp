// Fresh outputs (docs/device.md#memory): the runtime's look at whether a GM buffer's pages were
// ever touched, looked at before a launch's blocks start, and the faulting in of untouched outputs.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "runtime/launch_control.h"

namespace pypto_pro::runtime {
namespace {

// An anonymous mapping of `bytes`, unmapped at the end of the test.
struct Mapping {
  explicit Mapping(size_t n) : bytes(n) {
    data = static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  ~Mapping() { ::munmap(data, bytes); }
  size_t bytes;
  char* data;
};

constexpr size_t kBuffer = size_t(8) << 20;

TEST(FreshBuffers, UntouchedPagesAreSeenAsSuchUntilWritten) {
  Mapping m(kBuffer);
  ASSERT_NE(m.data, MAP_FAILED);
  m.data[0] = 1;  // an allocator's header at the start does not count
  EXPECT_TRUE(Untouched(m.data, int64_t(kBuffer)));
  std::memset(m.data, 0, kBuffer);
  EXPECT_FALSE(Untouched(m.data, int64_t(kBuffer)));
  ASSERT_EQ(::madvise(m.data, kBuffer, MADV_DONTNEED), 0);  // given back: fresh again
  EXPECT_TRUE(Untouched(m.data, int64_t(kBuffer)));
  // Half the sampled middle written: most pages are not fresh any more only past the half.
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::memset(m.data + kBuffer / 2 - 32 * page, 1, 31 * page);
  EXPECT_TRUE(Untouched(m.data, int64_t(kBuffer)));
  std::memset(m.data + kBuffer / 2 - 32 * page, 1, 33 * page);
  EXPECT_FALSE(Untouched(m.data, int64_t(kBuffer)));
}

TEST(FreshBuffers, SmallOrUnmappedBuffersAreNotFresh) {
  Mapping m(kBuffer);
  ASSERT_NE(m.data, MAP_FAILED);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  EXPECT_FALSE(Untouched(m.data, int64_t(64 * page)));  // too small to sample
  EXPECT_FALSE(Untouched(nullptr, int64_t(kBuffer)));   // mincore fails: not fresh
}

// A kernel whose outputs are the ranges in `ranges` (its "arguments").
struct Outputs {
  PtoRange ranges[4];
  int32_t count = 0;
};
int32_t OutputsOf(const void* args, PtoRange* out, int32_t max) {
  const Outputs& o = *static_cast<const Outputs*>(args);
  int32_t n = 0;
  for (; n < o.count && n < max; ++n) out[n] = o.ranges[n];
  return n;
}
const PtoKernelDesc kDesc = {PTO_ABI_VERSION, PTO_KERNEL_VECTOR, "fresh", "synthetic.py", "a5", nullptr, nullptr,
                             0u, nullptr, nullptr, 0, &OutputsOf};

TEST(FreshBuffers, UntouchedOutputsAreFaultedInWithTheirContents) {
  Mapping a(kBuffer + 100), b(kBuffer);
  ASSERT_NE(a.data, MAP_FAILED);
  ASSERT_NE(b.data, MAP_FAILED);
  std::memset(b.data, 1, kBuffer);
  char* lo = a.data + 100;  // not page-aligned, like a tensor after an allocator's header
  const Outputs outputs{{{lo, int64_t(kBuffer)}, {b.data, int64_t(kBuffer)}}, 2};
  LaunchControl control;
  control.fresh.Prepare(kDesc, &outputs);
  ASSERT_TRUE(Untouched(lo, int64_t(kBuffer)));              // Prepare only looks
  EXPECT_FALSE(control.fresh.Fresh(lo, int64_t(kBuffer)));  // faulted in: stored into like any other
  EXPECT_FALSE(Untouched(lo, int64_t(kBuffer)));
  unsigned char resident[kBuffer / 4096 + 2];
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  ASSERT_EQ(::mincore(a.data, kBuffer + 100, resident), 0);
  for (size_t i = 0; i < (kBuffer + 100 + page - 1) / page; ++i) ASSERT_TRUE(resident[i] & 1) << "page " << i;
  for (size_t i = 0; i < kBuffer; ++i) ASSERT_EQ(lo[i], 0) << i;  // (anonymous memory: zeros, as before)
  EXPECT_FALSE(control.fresh.Fresh(b.data, int64_t(kBuffer)));  // touched: nothing to do
  for (size_t i = 0; i < kBuffer; i += 4096) ASSERT_EQ(b.data[i], 1);
}

TEST(FreshBuffers, OnlyTheLaunchsLargeUntouchedOutputsAreFresh) {
  Mapping a(kBuffer), small(kBuffer), other(kBuffer);
  ASSERT_NE(a.data, MAP_FAILED);
  const Outputs outputs{{{a.data, int64_t(kBuffer)}, {small.data, int64_t(PTO_STREAMING_STORE_BYTES - 1)}}, 2};
  LaunchControl control;
  control.fresh.Prepare(kDesc, &outputs);
  EXPECT_FALSE(control.fresh.Fresh(small.data, int64_t(PTO_STREAMING_STORE_BYTES - 1)));  // not streamed to anyway
  EXPECT_FALSE(control.fresh.Fresh(other.data, int64_t(kBuffer)));  // not an output the kernel named
  EXPECT_TRUE(Untouched(small.data, int64_t(kBuffer)) && Untouched(other.data, int64_t(kBuffer)));  // left alone
  control.Reset(Clock::time_point::max(), 0, false);  // a launch of a kernel naming none: nothing fresh
  EXPECT_FALSE(control.fresh.Fresh(a.data, int64_t(kBuffer)));
  EXPECT_TRUE(Untouched(a.data, int64_t(kBuffer)));
}

TEST(FreshBuffers, OutputsThatCannotBeFaultedInStayFresh) {
  // A read-only mapping cannot be faulted in writable: the launch's stores (which would fault) are
  // left to the caches, the answer is the same for every core of the launch.
  void* ro = ::mmap(nullptr, kBuffer, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  const Outputs outputs{{{ro, int64_t(kBuffer)}}, 1};
  LaunchControl control;
  control.fresh.Prepare(kDesc, &outputs);
  EXPECT_TRUE(control.fresh.Fresh(ro, int64_t(kBuffer)));
  EXPECT_TRUE(control.fresh.Fresh(ro, int64_t(kBuffer)));
  control.fresh.Prepare(kDesc, &outputs);  // the next launch looks again
  EXPECT_TRUE(control.fresh.Fresh(ro, int64_t(kBuffer)));
  ::munmap(ro, kBuffer);
}

}  // namespace
}  // namespace pypto_pro::runtime
