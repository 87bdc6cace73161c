// The fibers mixed kernels run on, and the logical-block scheduler on top of them: cross-core
// flags, deadlock reports, faults and printf, driven by small synthetic kernels written directly
// against the C ABI (no compiler involved).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/device.h"
#include "pypto_pro/runtime/fiber.h"

namespace pypto_pro {
namespace {

using runtime::Device;
using runtime::FaultInfo;
using runtime::Fiber;

// ---- fibers ----

struct Trace {
  std::vector<std::string> events;
  Fiber* fiber = nullptr;
};

void TwoSteps(void* raw) {
  auto* t = static_cast<Trace*>(raw);
  t->events.push_back("a1");
  t->fiber->Suspend();
  t->events.push_back("a2");
}

TEST(Fiber, SuspendAndResumeInterleaveWithTheCaller) {
  Fiber fiber;
  Trace t{{}, &fiber};
  fiber.Start(&TwoSteps, &t);
  EXPECT_FALSE(fiber.started());  // nothing has run yet
  fiber.Resume();
  t.events.push_back("main");
  EXPECT_TRUE(fiber.started());
  fiber.Resume();
  EXPECT_TRUE(fiber.idle());
  EXPECT_EQ(t.events, (std::vector<std::string>{"a1", "main", "a2"}));
}

TEST(Fiber, StacksAreReusedAfterTheFunctionReturns) {
  Fiber fiber;
  for (int round = 0; round < 1000; ++round) {
    Trace t{{}, &fiber};
    fiber.Start(&TwoSteps, &t);
    fiber.Resume();
    fiber.Resume();
    ASSERT_TRUE(fiber.idle());
    ASSERT_EQ(t.events.size(), 2u);
  }
}

struct Thrower {
  Fiber* fiber = nullptr;
  std::string caught;
};

void ThrowAcrossASuspension(void* raw) {
  auto* t = static_cast<Thrower*>(raw);
  try {
    t->fiber->Suspend();  // frames below the throw live on this fiber's stack only
    throw std::runtime_error("thrown on the fiber");
  } catch (const std::exception& e) {
    t->caught = e.what();
  }
}

TEST(Fiber, ExceptionsUnwindInsideTheFiber) {
  Fiber a, b;
  Thrower ta{&a, ""}, tb{&b, ""};
  a.Start(&ThrowAcrossASuspension, &ta);
  b.Start(&ThrowAcrossASuspension, &tb);
  a.Resume();
  b.Resume();
  b.Resume();  // b throws and catches while a is suspended in the middle of its own try block
  a.Resume();
  EXPECT_EQ(ta.caught, "thrown on the fiber");
  EXPECT_EQ(tb.caught, "thrown on the fiber");
  EXPECT_TRUE(a.idle() && b.idle());
}

TEST(Fiber, DiscardDropsAFiberThatNeverRan) {
  Fiber fiber;
  Trace t{{}, &fiber};
  fiber.Start(&TwoSteps, &t);
  fiber.Discard();
  EXPECT_TRUE(fiber.idle());
  EXPECT_TRUE(t.events.empty());
  EXPECT_THROW(fiber.Resume(), std::logic_error);
}

// ---- mixed blocks: synthetic kernels ----

constexpr int kFix = 6, kMte2 = 1, kMte3 = 2, kMte1 = 0;

void Set(PtoCoreCtx* ctx, int line, int pipe, int event) {
  ctx->api->set_cross_core(ctx, line, pipe, event, PTO_SYNC_INTRA_BLOCK);
}
void Wait(PtoCoreCtx* ctx, int line, int pipe, int event) {
  ctx->api->wait_cross_core(ctx, line, pipe, event, PTO_SYNC_INTRA_BLOCK);
}

PtoKernelDesc MixedDesc(const char* name, PtoKernelEntry entry) {
  return PtoKernelDesc{PTO_ABI_VERSION, PTO_KERNEL_MIXED, name, "synthetic.py", "a5", entry};
}

// GM of the handshake kernel: the AIC of block b writes data[b], then signals; each AIV copies
// what it read into seen[2b + s] and reports its identity; then the AIVs signal back and the AIC
// records that it saw both.
struct HandshakeArgs {
  int32_t* data;
  int32_t* seen;
  int32_t* identity;  // per AIV: block_idx, block_num, subblock_idx, subblock_num
  int32_t* acks;
};

void Handshake(PtoCoreCtx* ctx, const void* raw) {
  const auto& a = *static_cast<const HandshakeArgs*>(raw);
  if (ctx->core_type == PTO_CORE_AIC) {
    a.data[ctx->block_idx] = 1000 + ctx->block_idx;
    Set(ctx, 10, kFix, 3);
    Wait(ctx, 12, kMte1, 5);
    a.acks[ctx->block_idx] = 1;
    return;
  }
  Wait(ctx, 20, kMte2, 3);
  int32_t* id = a.identity + 4 * ctx->block_idx;
  id[0] = ctx->block_idx;
  id[1] = ctx->block_num;
  id[2] = ctx->subblock_idx;
  id[3] = ctx->subblock_num;
  a.seen[ctx->block_idx] = a.data[ctx->block_idx / ctx->subblock_num];
  Set(ctx, 25, kMte3, 5);
}

TEST(MixedBlocks, FlagsOrderTheCoresOfEveryBlock) {
  PtoKernelDesc desc = MixedDesc("handshake", &Handshake);
  for (uint32_t blocks : {1u, 2u, 7u, 24u, 32u, 40u}) {
    const uint32_t launched = blocks;  // never truncated: 40 logical blocks run in waves on a5's 32 AICs
    std::vector<int32_t> data(40, -1), seen(80, -1), identity(4 * 80, -1), acks(40, 0);
    HandshakeArgs args{data.data(), seen.data(), identity.data(), acks.data()};
    std::optional<FaultInfo> fault = Device::Get().Run(desc, &args, blocks);
    ASSERT_FALSE(fault) << fault->Format();
    for (uint32_t b = 0; b < 40; ++b) EXPECT_EQ(acks[b], b < launched ? 1 : 0) << "block " << b;
    for (uint32_t v = 0; v < 2 * launched; ++v) {
      EXPECT_EQ(seen[v], int32_t(1000 + v / 2)) << "AIV " << v;
      EXPECT_EQ(identity[4 * v + 0], int32_t(v));
      EXPECT_EQ(identity[4 * v + 1], int32_t(launched));  // logical blocks, also on the AIVs
      EXPECT_EQ(identity[4 * v + 2], int32_t(v % 2));
      EXPECT_EQ(identity[4 * v + 3], 2);
    }
  }
}

void WaitFirst(PtoCoreCtx* ctx, const void*) {
  if (ctx->core_type == PTO_CORE_AIC) {
    Wait(ctx, 7, kFix, 1);
    Set(ctx, 8, kFix, 0);
  } else {
    Wait(ctx, 15, kMte2, 0);
    Set(ctx, 16, kMte3, 1);
  }
}

TEST(MixedBlocks, EveryCoreWaitingIsADeadlockReport) {
  PtoKernelDesc desc = MixedDesc("wait_first", &WaitFirst);
  std::optional<FaultInfo> fault = Device::Get().Run(desc, nullptr, 3);
  ASSERT_TRUE(fault);
  EXPECT_TRUE(fault->deadlock);
  EXPECT_EQ(fault->kernel, "wait_first");
  EXPECT_EQ(fault->core, "AIC");
  EXPECT_EQ(fault->line, 7);
  // The launch stops after the first deadlocked block; blocks already running on other pool threads
  // may deadlock too, at most one per thread.
  EXPECT_LT(fault->other_faults, Device::Get().num_threads());
  const std::string b = std::to_string(fault->block);
  EXPECT_EQ(fault->message,
            "every unfinished core of block " + b + " waits for a cross-core flag that no other core will set:\n"
            "  AIC of block " + b + " at synthetic.py:7: pl.system.wait_cross_core(pipe=FIX, event_id=1) waits for "
            "AIV 0 and AIV 1 to set event 1 (pending sets: AIV 0 0, AIV 1 0)\n"
            "  AIV 0 of block " + b + " at synthetic.py:15: pl.system.wait_cross_core(pipe=MTE2, event_id=0) waits "
            "for the AIC to set event 0 (pending sets: 0)\n"
            "  AIV 1 of block " + b + " at synthetic.py:15: pl.system.wait_cross_core(pipe=MTE2, event_id=0) waits "
            "for the AIC to set event 0 (pending sets: 0)");
  EXPECT_EQ(fault->Format().rfind("kernel 'wait_first' deadlocked in block " + b + ": every unfinished core", 0), 0u)
      << fault->Format();

  // The fibers of the abandoned block were unwound: the next launch on the same threads works.
  PtoKernelDesc good = MixedDesc("handshake", &Handshake);
  std::vector<int32_t> data(32), seen(64), identity(256), acks(32);
  HandshakeArgs args{data.data(), seen.data(), identity.data(), acks.data()};
  EXPECT_FALSE(Device::Get().Run(good, &args, 24));
  EXPECT_EQ(seen[47], 1023);
}

// The AIC's wait needs a set from each AIV: one is not enough.
void OnlyAiv0Signals(PtoCoreCtx* ctx, const void*) {
  if (ctx->core_type == PTO_CORE_AIC) {
    Wait(ctx, 30, kFix, 4);
  } else if (ctx->subblock_idx == 0) {
    Set(ctx, 31, kMte3, 4);
  }
}

TEST(MixedBlocks, TheAicWaitsForBothAivs) {
  PtoKernelDesc desc = MixedDesc("one_aiv", &OnlyAiv0Signals);
  std::optional<FaultInfo> fault = Device::Get().Run(desc, nullptr, 1);
  ASSERT_TRUE(fault);
  ASSERT_TRUE(fault->deadlock);
  EXPECT_EQ(fault->message,
            "every unfinished core of block 0 waits for a cross-core flag that no other core will set:\n"
            "  AIC of block 0 at synthetic.py:30: pl.system.wait_cross_core(pipe=FIX, event_id=4) waits for "
            "AIV 0 and AIV 1 to set event 4 (pending sets: AIV 0 1, AIV 1 0)\n"
            "  AIV 0 of block 0 has finished\n"
            "  AIV 1 of block 0 has finished");
}

// Flags count: two sets are two waits' worth, and the AIC's set reaches each AIV.
void Counting(PtoCoreCtx* ctx, const void* raw) {
  auto* order = static_cast<std::vector<int>*>(const_cast<void*>(raw));
  if (ctx->core_type == PTO_CORE_AIC) {
    Set(ctx, 1, kFix, 2);
    Set(ctx, 2, kFix, 2);
    order->push_back(100);
    Wait(ctx, 3, kFix, 9);
    order->push_back(101);
  } else {
    Wait(ctx, 5, kMte2, 2);
    Wait(ctx, 6, kMte2, 2);
    order->push_back(ctx->subblock_idx);
    Set(ctx, 7, kMte3, 9);
  }
}

TEST(MixedBlocks, SetsCountAndTheScheduleIsDeterministic) {
  PtoKernelDesc desc = MixedDesc("counting", &Counting);
  std::vector<int> order;
  EXPECT_FALSE(Device::Get().Run(desc, &order, 1));
  EXPECT_EQ(order, (std::vector<int>{100, 0, 1, 101}));
}

void Overflow(PtoCoreCtx* ctx, const void*) {
  if (ctx->core_type != PTO_CORE_AIC) return;
  for (int i = 0; i < 16; ++i) Set(ctx, 40, kFix, 0);
}

TEST(MixedBlocks, SixteenPendingSetsOverflowTheCounter) {
  PtoKernelDesc desc = MixedDesc("overflow", &Overflow);
  std::optional<FaultInfo> fault = Device::Get().Run(desc, nullptr, 1);
  ASSERT_TRUE(fault);
  EXPECT_FALSE(fault->deadlock);
  EXPECT_EQ(fault->core, "AIC");
  EXPECT_EQ(fault->op, "system.set_cross_core");
  EXPECT_EQ(fault->message,
            "event 0 already has 15 pending sets that AIV 0 has not waited for; the hardware counter holds at most 15");
}

// A fault on one core abandons the block: its partner, suspended in a wait, is unwound.
void AivFaults(PtoCoreCtx* ctx, const void*) {
  if (ctx->core_type == PTO_CORE_AIC) {
    Wait(ctx, 50, kFix, 0);
    return;
  }
  PtoFaultDetail d{};
  d.op = "load";
  d.message = "GM access out of bounds";
  if (ctx->subblock_idx == 1) ctx->api->fault(ctx, 52, &d);
  Wait(ctx, 53, kMte2, 1);
}

TEST(MixedBlocks, AFaultAbandonsTheBlockAndNamesTheCore) {
  PtoKernelDesc desc = MixedDesc("aiv_faults", &AivFaults);
  for (int round = 0; round < 50; ++round) {
    std::optional<FaultInfo> fault = Device::Get().Run(desc, nullptr, 5);
    ASSERT_TRUE(fault);
    EXPECT_FALSE(fault->deadlock);
    EXPECT_EQ(fault->core, "AIV 1");
    EXPECT_EQ(fault->line, 52);
    // Blocks already running on other threads may fault too; they are only counted.
    const std::string expected = "kernel 'aiv_faults' faulted in block " + std::to_string(fault->block) +
                                 " (AIV 1) at synthetic.py:52 in pl.load: GM access out of bounds";
    EXPECT_EQ(fault->Format().substr(0, expected.size()), expected);
  }
}

// Each core has its own local memories: the two AIVs write different values at the same UB
// address, the other one runs in between, and each reads back its own.
void OwnArenas(PtoCoreCtx* ctx, const void* raw) {
  auto* out = static_cast<int32_t*>(const_cast<void*>(raw));
  if (ctx->core_type == PTO_CORE_AIC) {
    Wait(ctx, 1, kFix, 1);
    Set(ctx, 2, kFix, 0);
    return;
  }
  int32_t* ub = reinterpret_cast<int32_t*>(ctx->mem[1]);
  *ub = 10 + ctx->subblock_idx;
  Set(ctx, 3, kMte3, 1);
  Wait(ctx, 4, kMte2, 0);  // the other AIV writes its UB meanwhile
  out[ctx->block_idx] = *ub;
}

TEST(MixedBlocks, EveryCoreHasItsOwnLocalMemory) {
  PtoKernelDesc desc = MixedDesc("arenas", &OwnArenas);
  std::vector<int32_t> out(8, -1);
  EXPECT_FALSE(Device::Get().Run(desc, out.data(), 4));
  for (int v = 0; v < 8; ++v) EXPECT_EQ(out[size_t(v)], 10 + v % 2);
}

void Prints(PtoCoreCtx* ctx, const void*) {
  PtoArg minus_one{};
  minus_one.kind = PTO_ARG_INT;
  minus_one.bits = 32;
  minus_one.value.i = -1;
  PtoArg half{};
  half.kind = PTO_ARG_FLOAT;
  half.bits = 32;
  half.value.f = 0.5;
  if (ctx->core_type == PTO_CORE_AIC) {
    const PtoArg args[] = {minus_one, minus_one, minus_one, half};
    ctx->api->print(ctx, 3, "d=%d u=%u x=%x f=%.2f %%\n", args, 4, 0);
    Set(ctx, 4, kFix, 0);
    return;
  }
  Wait(ctx, 6, kMte2, 0);
  ctx->api->print(ctx, 7, "sub %d", &minus_one, 1, PTO_PRINT_LOC);
  ctx->api->print(ctx, 8, " and more", nullptr, 0, 0);  // continues the line; the core's end ends it
}

TEST(MixedBlocks, PrintfLinesArePrefixedWithTheirCore) {
  PtoKernelDesc desc = MixedDesc("prints", &Prints);
  testing::internal::CaptureStdout();
  std::optional<FaultInfo> fault = Device::Get().Run(desc, nullptr, 1);
  std::string out = testing::internal::GetCapturedStdout();
  ASSERT_FALSE(fault);
  EXPECT_EQ(out,
            "[block 0 AIC] d=-1 u=4294967295 x=ffffffff f=0.50 %\n"
            "[block 0 AIV 0] synthetic.py:7: sub -1 and more\n"
            "[block 0 AIV 1] synthetic.py:7: sub -1 and more\n");
}

}  // namespace
}  // namespace pypto_pro
