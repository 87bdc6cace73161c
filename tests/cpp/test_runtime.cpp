#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/runtime/fault.h"
#include "pypto_pro/runtime/stream.h"

namespace pypto_pro {
namespace {

using runtime::KernelFaultError;
using runtime::Stream;

// The add kernel whose row loop runs to x.shape[0] // 64 + 1: with 200 rows its last row tile
// (rows 192..255) starts inside x and ends past it. Compiled once per test process.
const std::shared_ptr<jit::Instance>& CompiledOverrunKernel() {
  static const std::shared_ptr<jit::Instance> inst =
      test_util::Compile(test_util::MakeAddKernel({.name = "add_overrun", .extra_row_tiles = 1}).func, "add_overrun");
  return inst;
}

// Small integers: every sum below is exact in fp32.
struct Buffers {
  int32_t rows, cols;
  std::vector<float> x, y, z;
  Buffers(int32_t r, int32_t c) : rows(r), cols(c), x(size_t(r) * c), y(x.size()), z(x.size(), -1.0f) {
    for (size_t n = 0; n < x.size(); ++n) {
      x[n] = float(int(n % 101) - 50);
      y[n] = float(int(n % 13) + 1);
    }
  }
  std::vector<uint64_t> Slots() { return test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols); }
  // Elements of z (in rows [0, upto)) that differ from x + y.
  size_t WrongSums(int32_t upto) const {
    size_t wrong = 0;
    for (size_t n = 0; n < size_t(upto) * cols; ++n) wrong += z[n] != x[n] + y[n] ? 1 : 0;
    return wrong;
  }
};

TEST(StreamFaults, OutOfBoundsLoadIsReportedAtSynchronize) {
  const auto& overrun = CompiledOverrunKernel();
  const auto& add = test_util::CompiledAddKernel();
  Stream stream;
  Buffers buf(200, 512);
  std::vector<uint64_t> slots = buf.Slots();

  // 8 blocks: block b takes row tile b, so only block 3 (rows 192..255) runs past x.
  jit::Launch(*overrun, 8, stream.handle(), slots.data());
  try {
    stream.Synchronize();
    FAIL() << "no kernel fault";
  } catch (const KernelFaultError& e) {
    const runtime::FaultInfo& info = e.info();
    EXPECT_EQ(info.kernel, "add_overrun");
    EXPECT_EQ(info.source_file, "add.py");
    EXPECT_EQ(info.block, 3);
    EXPECT_EQ(info.core, "AIV 3");
    EXPECT_GT(info.line, 0);
    EXPECT_EQ(info.line, test_util::kLineLoadX);
    EXPECT_EQ(info.op, "load_tile");
    EXPECT_NE(info.message.find("out of bounds"), std::string::npos) << info.message;
    EXPECT_EQ(info.message,
              "GM access out of bounds: tensor 'x' of shape [200, 512], offsets [192, 0], window [64, 128]");
    EXPECT_EQ(info.other_faults, 0);
    EXPECT_EQ(std::string(e.what()),
              "kernel 'add_overrun' faulted in block 3 (AIV 3) at add.py:10 in pl.load_tile: " + info.message);
  }

  // The fault was cleared: the stream is usable and a good launch computes the right sums.
  EXPECT_NO_THROW(stream.Synchronize());
  Buffers good(256, 512);
  std::vector<uint64_t> good_slots = good.Slots();
  jit::Launch(*add, 8, stream.handle(), good_slots.data());
  EXPECT_NO_THROW(stream.Synchronize());
  EXPECT_EQ(good.WrongSums(good.rows), 0u);
}

TEST(StreamFaults, FaultCorruptsNothingAndLaterFaultsAreCounted) {
  const auto& overrun = CompiledOverrunKernel();
  Stream stream;
  Buffers buf(200, 512);
  std::vector<uint64_t> slots = buf.Slots();

  // One block: row tiles 0..2 complete, then the load of tile 3 faults before writing anything.
  jit::Launch(*overrun, 1, stream.handle(), slots.data());
  jit::Launch(*overrun, 1, stream.handle(), slots.data());
  try {
    stream.Synchronize();
    FAIL() << "no kernel fault";
  } catch (const KernelFaultError& e) {
    EXPECT_EQ(e.info().block, 0);
    EXPECT_EQ(e.info().core, "AIV 0");
    EXPECT_EQ(e.info().other_faults, 1);
    EXPECT_NE(std::string(e.what()).find("(1 more fault(s) since the last synchronize)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(buf.WrongSums(192), 0u);
  EXPECT_TRUE(std::all_of(buf.z.begin() + 192 * 512, buf.z.end(), [](float v) { return v == -1.0f; }));
  EXPECT_NO_THROW(stream.Synchronize());
}

TEST(StreamOrder, LaunchesRunInSubmissionOrder) {
  const auto& add = test_util::CompiledAddKernel();
  Stream stream;
  constexpr int32_t rows = 128, cols = 256;
  constexpr int kLaunches = 12;
  Buffers buf(rows, cols);
  std::vector<float> p(buf.x.size(), 0.0f), q(buf.x.size(), 0.0f);
  // p = x + y, q = p + y, p = q + y, ...: only in-order execution ends with x + 12 y.
  std::vector<std::vector<uint64_t>> slots;
  slots.push_back(test_util::AddKernelSlots(buf.x.data(), buf.y.data(), p.data(), rows, cols));
  for (int n = 1; n < kLaunches; ++n) {
    float* src = n % 2 ? p.data() : q.data();
    float* dst = n % 2 ? q.data() : p.data();
    slots.push_back(test_util::AddKernelSlots(src, buf.y.data(), dst, rows, cols));
  }
  uint64_t before = stream.submitted();
  for (const auto& s : slots) jit::Launch(*add, 2, stream.handle(), s.data());
  EXPECT_EQ(stream.submitted(), before + kLaunches);
  stream.Synchronize();
  EXPECT_EQ(stream.completed(), stream.submitted());
  const std::vector<float>& last = kLaunches % 2 ? p : q;
  for (size_t n = 0; n < last.size(); ++n) {
    ASSERT_EQ(last[n], buf.x[n] + kLaunches * buf.y[n]) << "element " << n;
  }
}

TEST(StreamOrder, BlockDimIsClampedToTheCores) {
  const auto& add = test_util::CompiledAddKernel();
  Stream stream;
  for (uint32_t block_dim : {0u, 1000u}) {
    Buffers buf(256, 512);
    std::vector<uint64_t> slots = buf.Slots();
    jit::Launch(*add, block_dim, stream.handle(), slots.data());
    stream.Synchronize();
    EXPECT_EQ(buf.WrongSums(buf.rows), 0u) << "block_dim " << block_dim;
  }
}

TEST(StreamOrder, DestroyingAStreamFinishesItsQueue) {
  const auto& add = test_util::CompiledAddKernel();
  Buffers buf(256, 512);
  std::vector<uint64_t> slots = buf.Slots();
  {
    Stream stream;
    jit::Launch(*add, 4, stream.handle(), slots.data());
  }
  EXPECT_EQ(buf.WrongSums(buf.rows), 0u);
}

TEST(Events, RecordCompletesWithATimestamp) {
  Stream stream;
  auto event = std::make_shared<runtime::EventState>();
  EXPECT_EQ(event->seq, 0u);
  auto before = std::chrono::steady_clock::now();
  uint64_t seq = stream.Record(event);
  EXPECT_GT(seq, 0u);
  EXPECT_EQ(event->seq, seq);
  EXPECT_EQ(event->stream, &stream);
  stream.WaitFor(seq);
  EXPECT_TRUE(event->completed.load());
  EXPECT_GE(event->when, before);
  EXPECT_LE(event->when, std::chrono::steady_clock::now());
  EXPECT_GE(stream.completed(), seq);
}

TEST(Events, EventAfterALaunchMeansTheLaunchIsDone) {
  const auto& add = test_util::CompiledAddKernel();
  Stream stream;
  Buffers buf(256, 512);
  std::vector<uint64_t> slots = buf.Slots();
  auto start = std::make_shared<runtime::EventState>();
  auto end = std::make_shared<runtime::EventState>();
  stream.Record(start);
  jit::Launch(*add, 8, stream.handle(), slots.data());
  uint64_t end_seq = stream.Record(end);
  EXPECT_EQ(end_seq, start->seq + 2);
  stream.WaitFor(end_seq);
  ASSERT_TRUE(end->completed.load());
  EXPECT_TRUE(start->completed.load());
  EXPECT_LE(start->when, end->when);
  EXPECT_EQ(buf.WrongSums(buf.rows), 0u);

  // Recording again moves the event to the new point of the queue.
  auto first_when = end->when;
  uint64_t again = stream.Record(end);
  EXPECT_GT(again, end_seq);
  stream.Synchronize();
  EXPECT_TRUE(end->completed.load());
  EXPECT_EQ(end->seq, again);
  EXPECT_GE(end->when, first_when);
}

TEST(Streams, AllListsLiveStreamsOnly) {
  auto contains = [](Stream* s) {
    std::vector<Stream*> all = Stream::All();
    return std::find(all.begin(), all.end(), s) != all.end();
  };
  EXPECT_TRUE(contains(&Stream::Default()));
  auto stream = std::make_unique<Stream>();
  Stream* raw = stream.get();
  EXPECT_TRUE(contains(raw));
  stream.reset();
  EXPECT_FALSE(contains(raw));
  EXPECT_TRUE(contains(&Stream::Default()));
}

}  // namespace
}  // namespace pypto_pro

#include "pypto_pro/runtime/device.h"

namespace pypto_pro {
namespace {

// Block 0 waits (up to `patience`) for block 1 to start and records whether it did.
struct OverlapArgs {
  std::atomic<int> started{0};
  std::atomic<bool> overlapped{false};
  std::chrono::milliseconds patience{0};
  std::chrono::milliseconds hold{0};  // how long block 0 still runs once it has seen block 1 start
};

void WaitForTheOtherBlock(PtoCoreCtx* ctx, const void* raw) {
  auto& args = *static_cast<OverlapArgs*>(const_cast<void*>(raw));
  args.started.fetch_add(1);
  if (ctx->block_idx != 0) return;
  const auto until = std::chrono::steady_clock::now() + args.patience;
  while (std::chrono::steady_clock::now() < until) {
    if (args.started.load() == 2) {
      args.overlapped = true;
      std::this_thread::sleep_for(args.hold);
      return;
    }
  }
}

TEST(DeviceThreads, AKernelWhoseLastLaunchWasLongSharesItsBlocksFromTheStart) {
  runtime::Device& device = runtime::Device::Get();
  if (device.num_threads() < 2) GTEST_SKIP() << "one host thread: nothing to share";
  static const PtoKernelDesc desc{PTO_ABI_VERSION, PTO_KERNEL_VECTOR, "two_long_blocks", "synthetic.py", "a5",
                           &WaitForTheOtherBlock};
  // First launch: no helper until a block ends, so block 0 waits alone (50 ms: a long launch).
  OverlapArgs first;
  first.patience = std::chrono::milliseconds(50);
  ASSERT_FALSE(device.Run(desc, &first, 2));
  EXPECT_FALSE(first.overlapped);
  // The next launch offers its blocks at once: a helper runs block 1 while block 0 waits.
  OverlapArgs second;
  second.patience = std::chrono::seconds(30);
  ASSERT_FALSE(device.Run(desc, &second, 2));
  EXPECT_TRUE(second.overlapped);
}

// Each kernel's descriptor sits at the same offset of its own page-aligned .so: two such kernels
// launched in turn must both keep their long-launch mark (a table indexed by the pointer's low bits
// made each evict the other, and every launch ran at one thread's speed).
TEST(DeviceThreads, TwoLongKernelsLaunchedInTurnBothShareTheirBlocks) {
  runtime::Device& device = runtime::Device::Get();
  if (device.num_threads() < 2) GTEST_SKIP() << "one host thread: nothing to share";
  alignas(4096) static const PtoKernelDesc first{PTO_ABI_VERSION, PTO_KERNEL_VECTOR, "long_a", "synthetic.py", "a5",
                                                 &WaitForTheOtherBlock};
  alignas(4096) static const PtoKernelDesc second{PTO_ABI_VERSION, PTO_KERNEL_VECTOR, "long_b", "synthetic.py",
                                                  "a5", &WaitForTheOtherBlock};
  for (const PtoKernelDesc* desc : {&first, &second}) {  // each launch long once
    OverlapArgs args;
    args.patience = std::chrono::milliseconds(50);
    ASSERT_FALSE(device.Run(*desc, &args, 2));
  }
  for (int round = 0; round < 2; ++round) {
    for (const PtoKernelDesc* desc : {&first, &second}) {
      OverlapArgs args;
      args.patience = std::chrono::seconds(30);
      args.hold = std::chrono::milliseconds(5);  // stays a long launch
      ASSERT_FALSE(device.Run(*desc, &args, 2));
      EXPECT_TRUE(args.overlapped) << desc->name << " in round " << round;
    }
  }
}

}  // namespace
}  // namespace pypto_pro

#include "runtime/long_launches.h"

namespace pypto_pro {
namespace {

TEST(LongLaunches, RemembersEveryKernelOfAPageAlignedFamily) {
  auto table = std::make_unique<runtime::LongLaunches>();
  // Addresses 4 KiB apart, as descriptors of different kernel .so files are.
  alignas(4096) static PtoKernelDesc descs[16 * 4096 / sizeof(PtoKernelDesc)];
  auto desc = [](int i) { return &descs[size_t(i) * 4096 / sizeof(PtoKernelDesc)]; };
  for (int i = 0; i < 16; ++i) EXPECT_FALSE(table->Contains(desc(i)));
  for (int i = 0; i < 16; ++i) table->Note(desc(i), true);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(table->Contains(desc(i))) << i;
  table->Note(desc(3), false);  // a short launch clears the mark, and only its own
  EXPECT_FALSE(table->Contains(desc(3)));
  EXPECT_TRUE(table->Contains(desc(4)));
  table->Note(desc(3), true);
  EXPECT_TRUE(table->Contains(desc(3)));
}

TEST(LongLaunches, AFullTableForgetsSomeKernelsButNeverInventsOne) {
  auto table = std::make_unique<runtime::LongLaunches>();
  static PtoKernelDesc descs[3 * runtime::LongLaunches::kSlots];
  for (auto& d : descs) table->Note(&d, true);
  int remembered = 0;
  for (auto& d : descs) remembered += table->Contains(&d);
  EXPECT_GE(remembered, int(runtime::LongLaunches::kSlots) / 2);
  EXPECT_LE(remembered, int(runtime::LongLaunches::kSlots));
  PtoKernelDesc stranger{};
  EXPECT_FALSE(table->Contains(&stranger));
}

}  // namespace
}  // namespace pypto_pro
