// Fresh outputs (docs/device.md#memory): the runtime's look at whether a GM buffer's pages
// were ever touched, remembered per launch and buffer.
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

TEST(FreshBuffers, OneAnswerPerLaunchAndBuffer) {
  Mapping a(kBuffer), b(kBuffer);
  ASSERT_NE(a.data, MAP_FAILED);
  ASSERT_NE(b.data, MAP_FAILED);
  std::memset(b.data, 0, kBuffer);
  LaunchControl control;
  EXPECT_TRUE(control.fresh.Fresh(a.data, int64_t(kBuffer)));
  EXPECT_FALSE(control.fresh.Fresh(b.data, int64_t(kBuffer)));
  std::memset(a.data, 0, kBuffer);  // a core of the launch wrote it: the others get the first answer
  EXPECT_TRUE(control.fresh.Fresh(a.data, int64_t(kBuffer)));
  control.Reset(Clock::time_point::max(), 0, false);  // the next launch looks again
  EXPECT_FALSE(control.fresh.Fresh(a.data, int64_t(kBuffer)));
}

TEST(FreshBuffers, BuffersPastTheTableAreNotFresh) {
  Mapping m(kBuffer * 2);
  ASSERT_NE(m.data, MAP_FAILED);
  LaunchControl control;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(control.fresh.Fresh(m.data + i * page, int64_t(kBuffer)));
  EXPECT_FALSE(control.fresh.Fresh(m.data + 16 * page, int64_t(kBuffer)));  // not remembered, not looked at
  EXPECT_TRUE(control.fresh.Fresh(m.data + 3 * page, int64_t(kBuffer)));   // the remembered ones still are
}

}  // namespace
}  // namespace pypto_pro::runtime
