// The performance model's scheduler on hand-made event streams: it overlaps pipes exactly where the
// program's synchronisation allows, and only there (docs/profiler.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "pypto_pro/runtime/profile.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/source_line.h"

namespace pypto_pro::runtime {
namespace {

using hw::Pipe;
using Events = std::vector<ProfileEvent>;

constexpr int64_t kTile = 32 * 1024;  // bytes of one 32 KiB tile

ProfileEvent Op(Pipe pipe, OpClass c, int64_t units, int line = 1) {
  ProfileEvent e;
  e.kind = ProfileEvent::kOp;
  e.pipe = uint8_t(pipe);
  e.op_class = c;
  e.units = units;
  e.line = line;
  return e;
}

ProfileEvent Flag(bool set, Pipe from, Pipe to, uint32_t id, int line = 1) {
  ProfileEvent e;
  e.kind = set ? ProfileEvent::kFlagSet : ProfileEvent::kFlagWait;
  e.pipe = uint8_t(set ? from : to);
  e.other = uint8_t(set ? to : from);
  e.id = id;
  e.line = line;
  return e;
}

// z = x + y over `n` tiles: loads on MTE2, the add on V, the store on MTE3, with the flags a correct
// kernel needs. `slots` 1: one set of tiles, so the next loads wait for the add to have read them;
// 2: double-buffered, the next loads go to the other slots. `drop_wait`: leave out the V wait for
// the loads (the race the sanitizer reports).
Events AddKernel(int n, int slots, bool drop_wait = false) {
  Events e;
  for (int s = 0; s < slots; ++s) e.push_back(Flag(true, Pipe::kV, Pipe::kMTE2, uint32_t(s)));    // slots start free
  for (int s = 0; s < slots; ++s) e.push_back(Flag(true, Pipe::kMTE3, Pipe::kV, uint32_t(4 + s)));
  for (int i = 0; i < n; ++i) {
    const uint32_t s = uint32_t(i % slots);
    e.push_back(Flag(false, Pipe::kV, Pipe::kMTE2, s, 10));  // the add has read this slot
    e.push_back(Op(Pipe::kMTE2, OpClass::kTransferGm, kTile, 11));
    e.push_back(Op(Pipe::kMTE2, OpClass::kTransferGm, kTile, 12));
    e.push_back(Flag(true, Pipe::kMTE2, Pipe::kV, 8 + s, 13));
    if (!drop_wait) e.push_back(Flag(false, Pipe::kMTE2, Pipe::kV, 8 + s, 14));
    e.push_back(Flag(false, Pipe::kMTE3, Pipe::kV, 4 + s, 15));  // the store has read the out slot
    e.push_back(Op(Pipe::kV, OpClass::kVector, kTile, 16));
    e.push_back(Flag(true, Pipe::kV, Pipe::kMTE2, s, 17));
    e.push_back(Flag(true, Pipe::kV, Pipe::kMTE3, 12 + s, 18));
    e.push_back(Flag(false, Pipe::kV, Pipe::kMTE3, 12 + s, 19));
    e.push_back(Op(Pipe::kMTE3, OpClass::kTransferGm, kTile, 20));
    e.push_back(Flag(true, Pipe::kMTE3, Pipe::kV, 4 + s, 21));
  }
  return e;
}

LaunchProfile Model(const std::vector<Events>& blocks, BlockShape shape = BlockShape::kVector,
                    const char* arch = "a5") {
  std::vector<std::vector<Events>> per_block;
  for (const Events& e : blocks) per_block.push_back({e});
  return ModelLaunch(*FindArch(arch), shape, per_block);
}

// Cycles during which some op of pipe `a` and some op of pipe `b` run at once.
int64_t Overlap(const LaunchProfile& p, Pipe a, Pipe b) {
  int64_t total = 0;
  for (const ModelledOp& x : p.ops) {
    if (x.pipe != uint8_t(a)) continue;
    for (const ModelledOp& y : p.ops) {
      if (y.pipe != uint8_t(b) || y.block != x.block) continue;
      total += std::max<int64_t>(0, std::min(x.end, y.end) - std::max(x.start, y.start));
    }
  }
  return total;
}

TEST(PerfModel, SingleBufferedAddSerialisesLoadsAndAddDoubleBufferedOverlaps) {
  const LaunchProfile single = Model({AddKernel(8, 1)});
  const LaunchProfile dbl = Model({AddKernel(8, 2)});
  EXPECT_EQ(Overlap(single, Pipe::kMTE2, Pipe::kV), 0);
  EXPECT_GT(Overlap(dbl, Pipe::kMTE2, Pipe::kV), 0);
  EXPECT_LT(dbl.cycles, single.cycles);
  // The same work either way: equal busy cycles, higher busy % when it overlaps.
  EXPECT_EQ(dbl.busy[size_t(Pipe::kMTE2)], single.busy[size_t(Pipe::kMTE2)]);
  EXPECT_EQ(dbl.busy[size_t(Pipe::kV)], single.busy[size_t(Pipe::kV)]);
  EXPECT_EQ(single.gm_bytes, 8 * 3 * kTile);
  // The loads of iteration i + 1 wait for the add of iteration i: a stall naming the flag's line.
  const bool named = std::any_of(single.stalls.begin(), single.stalls.end(), [](const ModelledStall& s) {
    return s.pipe == uint8_t(Pipe::kMTE2) && s.line == 10 && s.reason == "waits for flag 0 from V set at line 17";
  });
  EXPECT_TRUE(named);
}

TEST(PerfModel, StallReasonsNameAnotherModulesFileByItsName) {
  // The V op and its set come from a helper in another module (file 1 of the kernel's files).
  Events e = AddKernel(2, 1);
  for (ProfileEvent& ev : e) {
    if (ev.line == 17) ev.line = (1 << pypto_pro::kLineFileShift) | 7;
  }
  const LaunchProfile p = ModelLaunch(*FindArch("a5"), BlockShape::kVector, {{e}},
                                      {"/work/kernel.py", "/work/lib/helpers.py"});
  const bool named = std::any_of(p.stalls.begin(), p.stalls.end(), [](const ModelledStall& s) {
    return s.reason == "waits for flag 0 from V set at helpers.py:7";
  });
  EXPECT_TRUE(named);
}

TEST(PerfModel, AMissingWaitLetsThePipesOverlapWhereTheSanitizerReportsTheRace) {
  const LaunchProfile ordered = Model({AddKernel(1, 1)});
  const LaunchProfile racy = Model({AddKernel(1, 1, /*drop_wait=*/true)});
  EXPECT_EQ(Overlap(ordered, Pipe::kMTE2, Pipe::kV), 0);
  EXPECT_GT(Overlap(racy, Pipe::kMTE2, Pipe::kV), 0);  // the add starts before its inputs are loaded
  EXPECT_LT(racy.cycles, ordered.cycles);
}

TEST(PerfModel, MatmulTimeFollowsTheCubeRateOfItsDtype) {
  const CostModel& cost = FindArch("a5")->cost;
  ProfileEvent mm = Op(Pipe::kM, OpClass::kMatmul, 128 * 128 * 128);
  mm.dtype = uint8_t(hw::DataType::kFP16);
  const int64_t fp16 = OpCycles(cost, mm, 1e9);
  mm.dtype = uint8_t(hw::DataType::kFP32);
  const int64_t fp32 = OpCycles(cost, mm, 1e9);
  EXPECT_EQ(fp16, cost.local_latency + 128 * 128 * 128 / 4096);
  EXPECT_GT(fp32, fp16);
}

TEST(PerfModel, BlocksBeyondTheCoreCountRunInWaves) {
  const ArchModel& a5 = *FindArch("a5");
  auto run = [&](int blocks) {
    std::vector<Events> b(size_t(blocks), Events{Op(Pipe::kV, OpClass::kVector, kTile)});
    return Model(b);
  };
  const LaunchProfile one = run(1), full = run(a5.aiv_cores), twice = run(2 * a5.aiv_cores);
  EXPECT_EQ(full.cycles, one.cycles);  // every block on its own core: the same time
  EXPECT_EQ(full.waves, 1);
  EXPECT_EQ(twice.cycles, 2 * one.cycles);
  EXPECT_EQ(twice.waves, 2);
  // Memory-bound blocks share the GM bandwidth: more of them at once take longer each.
  auto load = [&](int blocks) {
    std::vector<Events> b(size_t(blocks), Events{Op(Pipe::kMTE2, OpClass::kTransferGm, 1 << 20)});
    return Model(b).cycles;
  };
  EXPECT_GT(load(a5.aiv_cores), load(1));
  // Cores loading and storing at once still share one chip's bandwidth: the launch's GM rate fits it.
  std::vector<Events> both(size_t(a5.aiv_cores), Events{Op(Pipe::kMTE2, OpClass::kTransferGm, 1 << 20),
                                                        Op(Pipe::kMTE3, OpClass::kTransferGm, 1 << 20)});
  const LaunchProfile p = Model(both);
  EXPECT_LE(double(p.gm_bytes) / double(p.cycles), a5.cost.gm_bytes_per_cycle * 1.01);
  EXPECT_GT(double(p.gm_bytes) / double(p.cycles), a5.cost.gm_bytes_per_cycle * 0.8);
}

TEST(PerfModel, CrossCoreFlagsOrderTheCoresAndBecomeFlows) {
  // A mixed block: the AIC computes and sets event 3 (INTRA_BLOCK) after its fixpipe move; both AIVs
  // wait for it before their vector op.
  const uint32_t intra = uint32_t(hw::CrossCoreSyncMode::kINTRA_BLOCK) << 8;
  ProfileEvent set;
  set.kind = ProfileEvent::kCrossSet;
  set.pipe = uint8_t(Pipe::kFIX);
  set.id = 3 | intra;
  set.line = 30;
  ProfileEvent wait = set;
  wait.kind = ProfileEvent::kCrossWait;
  wait.pipe = uint8_t(Pipe::kV);
  wait.line = 40;
  ProfileEvent mm = Op(Pipe::kM, OpClass::kMatmul, 64 * 64 * 64, 28);
  mm.dtype = uint8_t(hw::DataType::kFP16);
  const Events aic = {mm, Op(Pipe::kFIX, OpClass::kTransferLocal, 16384, 29), set};
  const Events aiv = {wait, Op(Pipe::kV, OpClass::kVector, 8192, 41)};
  const LaunchProfile p = ModelLaunch(*FindArch("a5"), BlockShape::kMixed, {{aic, aiv, aiv}});
  ASSERT_EQ(p.flows.size(), 2u);
  int64_t fix_end = 0;
  for (const ModelledOp& op : p.ops) {
    if (op.pipe == uint8_t(Pipe::kFIX)) fix_end = op.end;
  }
  for (const ModelledOp& op : p.ops) {
    if (op.pipe == uint8_t(Pipe::kV)) EXPECT_GE(op.start, fix_end);  // after the data is there
  }
  EXPECT_EQ(p.flows[0].set_line, 30);
  EXPECT_EQ(p.flows[0].wait_line, 40);
  EXPECT_EQ(p.flows[0].from_core, 0);
  EXPECT_EQ(p.flows[1].to_core, 2);
  EXPECT_DOUBLE_EQ(p.flops, 2.0 * 64 * 64 * 64);
}

}  // namespace
}  // namespace pypto_pro::runtime
