// Sanitizer mode: the exact byte regions and the access log, the pipe synchronisation model (vector
// clocks, flags, mutexes, barriers, cross-core flags), findings and the report; then a sanitized
// add kernel end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/runtime/fault.h"
#include "pypto_pro/runtime/stream.h"
#include "runtime/access_log.h"
#include "runtime/pipe_sync.h"
#include "runtime/sanitizer.h"
#include "runtime/sanitizer_findings.h"

namespace pypto_pro {
namespace {

using runtime::san::Access;
using runtime::san::AccessLog;
using runtime::san::CoreSync;
using runtime::san::CrossCoreClocks;
using runtime::san::Findings;
using runtime::san::Kind;
using runtime::san::Region;
using runtime::san::ThreadOf;
using runtime::san::VectorClock;

constexpr int kMTE1 = 0, kMTE2 = 1, kMTE3 = 2, kM = 3, kV = 4, kS = 5, kAll = 7;

// A 2-D window of a row-major array of `row_bytes` rows: `rows` x `width` bytes from (r0, byte c0).
Region Window(int64_t row_bytes, int64_t r0, int64_t c0, int64_t rows, int64_t width) {
  return Region::Make(uintptr_t(0x10000 + r0 * row_bytes + c0), rows, row_bytes, 1, 0, width);
}

// ---- regions ----

TEST(SanitizerRegion, NeighbouringWindowsOfOneRowDoNotIntersect) {
  // Two 128-byte column tiles side by side in 2048-byte rows: same rows, disjoint bytes.
  EXPECT_FALSE(Intersects(Window(2048, 0, 0, 128, 128), Window(2048, 0, 128, 128, 128)));
  EXPECT_TRUE(Intersects(Window(2048, 0, 0, 128, 128), Window(2048, 0, 127, 128, 128)));
  // Row tiles: rows 0..63 and 64..127.
  EXPECT_FALSE(Intersects(Window(2048, 0, 0, 64, 2048), Window(2048, 64, 0, 64, 2048)));
  EXPECT_TRUE(Intersects(Window(2048, 0, 0, 65, 2048), Window(2048, 64, 0, 64, 2048)));
  // A window that ends left of another one in the last row only.
  EXPECT_FALSE(Intersects(Window(1000, 3, 500, 10, 100), Window(1000, 12, 600, 1, 4)));
  EXPECT_TRUE(Intersects(Window(1000, 3, 500, 10, 100), Window(1000, 12, 599, 1, 4)));
}

TEST(SanitizerRegion, ContiguousRowsAndRunsMerge) {
  Region full = Region::Make(0x1000, 16, 64, 1, 0, 64);  // 16 full rows: one run of 1 KiB
  EXPECT_EQ(full.rows, 1);
  EXPECT_EQ(full.width, 1024);
  EXPECT_EQ(full.hi - full.lo, 1024u);
  Region runs = Region::Make(0x1000, 2, 100, 8, 4, 4);  // 8 adjacent 4-byte runs: one 32-byte run per row
  EXPECT_EQ(runs.runs, 1);
  EXPECT_EQ(runs.width, 32);
  EXPECT_TRUE(Region::Make(0x1000, 0, 64, 1, 0, 64).empty());
  EXPECT_FALSE(Intersects(Region::Make(0x1000, 0, 64, 1, 0, 64), full));
}

TEST(SanitizerRegion, TransposedWindowsAreExact) {
  // A transposed load: 4 rows along one axis (stride 2 bytes), 4 columns along rows of 64 bytes.
  Region transposed = Region::Make(0x2000, 4, 2, 4, 64, 2);
  EXPECT_TRUE(Intersects(transposed, Region::Make(0x2000 + 64 + 4, 1, 0, 1, 0, 2)));    // element (2, 1)
  EXPECT_FALSE(Intersects(transposed, Region::Make(0x2000 + 64 + 8, 1, 0, 1, 0, 56)));   // right of it
  EXPECT_FALSE(Intersects(transposed, Region::Make(0x2000 + 4 * 64, 1, 0, 1, 0, 64)));  // the row below
  EXPECT_TRUE(Intersects(transposed, Region::Make(0x2000 + 3 * 64, 4, 64, 1, 0, 8)));
}

// ---- the access log ----

Access At(const Region& r, int thread, runtime::san::Clock clock, bool write, int line) {
  Access a;
  a.region = r;
  a.thread = thread;
  a.clock = clock;
  a.write = write;
  a.line = line;
  a.memory = 1;
  return a;
}

std::vector<int> Conflicts(AccessLog& log, const Access& a, const VectorClock& now) {
  std::vector<int> lines;
  const VectorClock* population[] = {&now};
  log.Record(a, now, population, 1, [&](const Access& before) { lines.push_back(before.line); });
  return lines;
}

TEST(SanitizerAccessLog, ConflictsNeedAnotherUnorderedThreadAndAWrite) {
  AccessLog log;
  const Region tile = Window(256, 0, 0, 32, 256);
  VectorClock mte2, v;
  mte2.at[kMTE2] = 1;
  v.at[kV] = 1;
  EXPECT_TRUE(Conflicts(log, At(tile, kMTE2, 1, true, 10), mte2).empty());
  EXPECT_TRUE(Conflicts(log, At(tile, kMTE2, 1, true, 11), mte2).empty());  // the same pipe: in order
  EXPECT_EQ(Conflicts(log, At(tile, kV, 1, false, 12), v), (std::vector<int>{11}));  // read-after-write
  VectorClock v_after = v;
  v_after.at[kMTE2] = 1;  // V acquired what MTE2 released after its writes
  EXPECT_TRUE(Conflicts(log, At(tile, kV, 1, false, 13), v_after).empty());
  // Reads never conflict with reads; another window of the tile does not conflict at all.
  VectorClock s;
  s.at[kS] = 1;
  EXPECT_TRUE(Conflicts(log, At(Window(256, 32, 0, 1, 256), kS, 1, true, 14), s).empty());
}

TEST(SanitizerAccessLog, RepeatedAccessesReplaceTheirOlderTwin) {
  AccessLog log;
  const Region tile = Window(256, 0, 0, 32, 256);
  VectorClock v;
  for (runtime::san::Clock c = 1; c <= 50; ++c) {
    v.at[kV] = c;
    Conflicts(log, At(tile, kV, c, true, 20), v);
  }
  EXPECT_EQ(log.size(), 1u);
  VectorClock mte3;
  mte3.at[kMTE3] = 1;
  mte3.at[kV] = 49;  // knows V up to clock 49, not the last write
  EXPECT_EQ(Conflicts(log, At(tile, kMTE3, 1, false, 21), mte3), (std::vector<int>{20}));
}

TEST(SanitizerAccessLog, AccessesEveryPipeKnowsAreDropped) {
  AccessLog log;
  VectorClock mte2, v;
  for (int i = 0; i < 200; ++i) {
    mte2.at[kMTE2] = runtime::san::Clock(i + 1);
    v = mte2;  // V is always ordered after MTE2's accesses
    v.at[kV] = 1;
    const VectorClock* population[] = {&mte2, &v};
    log.Record(At(Window(64, i, 0, 1, 64), kMTE2, mte2.at[kMTE2], true, 30), mte2, population, 2,
               [](const Access&) { FAIL() << "no conflict expected"; });
  }
  EXPECT_LT(log.size(), 100u);  // pruned as it grew
}

// ---- pipe synchronisation ----

struct Core {
  CoreSync sync;
  Findings findings;
  explicit Core(int slot = 0) { sync.Reset(slot); }
  // Whether `pipe` is ordered after everything `before` has done so far.
  bool Ordered(int before, int pipe) const {
    return sync.ClockOf(pipe).Knows(sync.Thread(before), sync.Epoch(before));
  }
};

TEST(SanitizerPipes, NothingIsOrderedAtTheStart) {
  Core c;
  EXPECT_FALSE(c.Ordered(kMTE2, kV));
  EXPECT_TRUE(c.Ordered(kV, kV));
}

TEST(SanitizerPipes, FlagsOrderTheSetPipeBeforeTheWaitPipe) {
  Core c;
  runtime::san::Clock before = c.sync.Epoch(kMTE2);
  c.sync.FlagSet(10, kMTE2, kV, 0);
  EXPECT_FALSE(c.sync.ClockOf(kV).Knows(c.sync.Thread(kMTE2), before));
  c.sync.FlagWait(11, kMTE2, kV, 0);
  EXPECT_TRUE(c.sync.ClockOf(kV).Knows(c.sync.Thread(kMTE2), before));
  EXPECT_FALSE(c.Ordered(kMTE2, kV));  // MTE2's accesses after the set are not
  EXPECT_FALSE(c.Ordered(kV, kMTE2));  // and the flag orders one way only
  c.sync.Finish(c.findings);
  EXPECT_TRUE(c.findings.empty());
}

TEST(SanitizerPipes, UnbalancedFlagsAreReportedAtTheEnd) {
  Core c;
  c.sync.FlagSet(10, kMTE2, kV, 1);    // never waited for
  c.sync.FlagWait(12, kV, kMTE3, 2);   // never set
  c.sync.FlagWait(13, kMTE3, kMTE2, 3);
  c.sync.FlagSet(14, kMTE3, kMTE2, 3);  // set after its wait in program order: balanced at the end
  c.sync.Finish(c.findings);
  ASSERT_EQ(c.findings.size(), 2u);
  std::vector<std::pair<std::string, int>> found = {{c.findings.at(0).kind, c.findings.at(0).line},
                                                    {c.findings.at(1).kind, c.findings.at(1).line}};
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<std::pair<std::string, int>>{{"FLAG_NEVER_SET", 12}, {"FLAG_NEVER_WAITED", 10}}));
}

TEST(SanitizerPipes, MutexesOrderSuccessiveHolders) {
  Core c;
  runtime::san::Clock load = c.sync.Epoch(kMTE2);
  c.sync.Lock(20, kMTE2, 1u << 4, true, c.findings);
  c.sync.Unlock(20, kMTE2, 1u << 4, true, c.findings);
  c.sync.Lock(21, kV, 1u << 4 | 1u << 5, true, c.findings);
  EXPECT_TRUE(c.sync.ClockOf(kV).Knows(c.sync.Thread(kMTE2), load));
  c.sync.Unlock(21, kV, 1u << 4 | 1u << 5, true, c.findings);
  c.sync.Finish(c.findings);
  EXPECT_TRUE(c.findings.empty());
}

TEST(SanitizerPipes, MutexMisuse) {
  Core c;
  c.sync.Unlock(30, kV, 1u << 3, false, c.findings);  // never locked
  c.sync.Lock(31, kMTE2, 1u << 7, false, c.findings);
  c.sync.Lock(32, kMTE2, 1u << 7, false, c.findings);  // locked again: the lock at 31 has no unlock
  c.sync.Unlock(33, kMTE2, 1u << 7, false, c.findings);
  c.sync.Lock(34, kM, 1u << 9, false, c.findings);     // never unlocked
  c.sync.Finish(c.findings);
  ASSERT_EQ(c.findings.size(), 3u);
  EXPECT_EQ(c.findings.at(0).kind, "MUTEX_UNLOCK_BEFORE_LOCK");
  EXPECT_EQ(c.findings.at(0).line, 30);
  EXPECT_EQ(c.findings.at(1).kind, "UNPAIRED_MUTEX_LOCK");
  EXPECT_EQ(c.findings.at(1).line, 31);
  EXPECT_EQ(c.findings.at(2).kind, "UNPAIRED_MUTEX_LOCK");
  EXPECT_EQ(c.findings.at(2).line, 34);
  EXPECT_NE(c.findings.at(2).message.find("never unlocked"), std::string::npos) << c.findings.at(2).message;
}

TEST(SanitizerPipes, BarriersDrainOnePipeOrAll) {
  Core c;
  c.sync.Barrier(kMTE2);
  runtime::san::Clock mte2_before = c.sync.ClockOf(kV).at[c.sync.Thread(kMTE2)];
  EXPECT_GT(mte2_before, 0u);
  EXPECT_FALSE(c.Ordered(kV, kMTE2));  // bar_mte2 orders MTE2's past before everyone, not the reverse
  c.sync.Barrier(kAll);
  for (int a : {kMTE1, kMTE2, kMTE3, kM, kV}) {
    for (int b : {kMTE1, kMTE2, kMTE3, kM, kV}) {
      if (a != b) EXPECT_TRUE(c.sync.ClockOf(b).Knows(c.sync.Thread(a), c.sync.Epoch(a) - 1)) << a << " " << b;
    }
  }
}

TEST(SanitizerPipes, CrossCoreFlagsCarryClocksBetweenCores) {
  Core aic(0), aiv0(1), aiv1(2);
  CrossCoreClocks cross;
  // The hook's id: the event | the sync mode << 8.
  auto intra = [](uint32_t event) { return event | uint32_t(PTO_SYNC_INTRA_BLOCK) << 8; };
  runtime::san::Clock fix = aic.sync.Epoch(6);
  cross.Set(aic.sync, 40, 6, intra(0));  // FIX
  cross.Wait(aiv0.sync, kMTE2, intra(0));
  EXPECT_TRUE(aiv0.sync.ClockOf(kMTE2).Knows(ThreadOf(0, 6), fix));
  EXPECT_FALSE(aiv1.sync.ClockOf(kMTE2).Knows(ThreadOf(0, 6), fix));
  // Both AIVs signal; the AIC's wait takes one set from each.
  runtime::san::Clock v0 = aiv0.sync.Epoch(kMTE3), v1 = aiv1.sync.Epoch(kMTE3);
  cross.Set(aiv0.sync, 50, kMTE3, intra(1));
  cross.Set(aiv1.sync, 50, kMTE3, intra(1));
  cross.Wait(aic.sync, kMTE2, intra(1));
  EXPECT_TRUE(aic.sync.ClockOf(kMTE2).Knows(ThreadOf(1, kMTE3), v0));
  EXPECT_TRUE(aic.sync.ClockOf(kMTE2).Knows(ThreadOf(2, kMTE3), v1));
  // UNICAST_BLOCK: the AIC's event 16 + 4 is AIV 1's event 4, and AIV 0 learns nothing from it.
  const uint32_t unicast = uint32_t(PTO_SYNC_UNICAST_BLOCK) << 8;
  runtime::san::Clock m = aic.sync.Epoch(kMTE2);
  cross.Set(aic.sync, 60, kMTE2, (16 + 4) | unicast);
  cross.Wait(aiv0.sync, 6, 4 | unicast);
  cross.Wait(aiv1.sync, 6, 4 | unicast);
  EXPECT_FALSE(aiv0.sync.ClockOf(6).Knows(ThreadOf(0, kMTE2), m));
  EXPECT_TRUE(aiv1.sync.ClockOf(6).Knows(ThreadOf(0, kMTE2), m));
  Findings by_slot[3];
  cross.Finish(by_slot);  // AIV 1 never took the AIC's event 0
  EXPECT_EQ(by_slot[0].size(), 1u);
  EXPECT_EQ(by_slot[0].at(0).kind, "FLAG_NEVER_WAITED");
  EXPECT_EQ(by_slot[0].at(0).line, 40);
  EXPECT_NE(by_slot[0].at(0).message.find("AIV 1"), std::string::npos) << by_slot[0].at(0).message;
}

// ---- findings and the report ----

TEST(SanitizerFindings, CollapsePerKindAndLine) {
  Findings f;
  int built = 0;
  for (int i = 0; i < 5; ++i) {
    f.Add(Kind::kPipeRace, 7, [&] {
      ++built;
      return std::string("race");
    });
  }
  f.Add(Kind::kGmOutOfBounds, 7, [] { return std::string("oob"); });
  EXPECT_EQ(built, 1);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f.at(0).hits, 5);
  EXPECT_EQ(f.at(0).hint, runtime::san::Hint(Kind::kPipeRace));

  std::vector<runtime::SanitizerFinding> launch;
  runtime::san::MergeFindings(launch, f.Take(9, "AIV 9"));
  Findings g;
  g.Add(Kind::kPipeRace, 7, [] { return std::string("race in block 2"); });
  runtime::san::MergeFindings(launch, g.Take(2, "AIV 2"));
  ASSERT_EQ(launch.size(), 2u);
  EXPECT_EQ(launch[0].hits, 6);
  EXPECT_EQ(launch[0].block, 2);  // the lowest block describes it, whatever order blocks finish in
  EXPECT_EQ(launch[0].message, "race in block 2");
}

TEST(SanitizerReport, SectionFormat) {
  runtime::SanitizerFinding f;
  f.kind = "PIPE_RACE";
  f.message = "read-after-write: ...";
  f.hint = "order the pipes";
  f.file = "k.py";
  f.line = 12;
  f.hits = 3;
  f.block = 0;
  f.core = "AIV 0";
  EXPECT_EQ(runtime::FormatSanitizerReport("k", "/b/k__a5__sanitizer/tk_none", {f}),
            "===== kernel 'k' (/b/k__a5__sanitizer/tk_none) =====\n"
            "PyPTO Sanitizer: 1 issue(s) detected\n"
            "[1/1] PIPE_RACE: read-after-write: ... (3 hits, first on AIV 0 of block 0) at k.py:12\n"
            "    Hint: order the pipes\n");
  EXPECT_EQ(runtime::FormatSanitizerReport("k", "/d", {}),
            "===== kernel 'k' (/d) =====\nPyPTO Sanitizer: 0 issue(s) detected\n");
}

// ---- end to end ----

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::shared_ptr<jit::Instance> CompileSanitized(const ir::Function& func, const std::string& tag, bool auto_mutex) {
  jit::CompileOptions options;
  options.instance_dir = test_util::FreshTempDir(tag);
  options.sanitizer = true;
  options.auto_mutex = auto_mutex;
  return jit::BuildInstance(func, options);
}

TEST(SanitizerCodegen, PlainKernelsCarryNoHooks) {
  test_util::AddKernel k = test_util::MakeAddKernel();
  ir::Function func = k.func;
  passes::RunPipeline(func, passes::PassContext{});
  EXPECT_EQ(codegen::Generate(func, DefaultArch()).kernel_cpp.find("pto::san"), std::string::npos);
  codegen::CodegenOptions options;
  options.sanitizer_report = "/tmp/report.txt";
  const std::string code = codegen::Generate(func, DefaultArch(), options).kernel_cpp;
  EXPECT_NE(code.find("#include \"pypto_pro/sanitizer.h\""), std::string::npos) << code;
  EXPECT_NE(code.find("pto::san::CoreScope sanitizer(ctx, raw_args, "), std::string::npos) << code;
  EXPECT_NE(code.find("if (pto::san::Op(ctx, " + std::to_string(test_util::kLineAdd) +
                      ", pto::kPipeV, {pto::san::Rect(*v_ta, pto::san::kRead, 0, 0, (*v_tc).valid_rows, "),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("pto::san::AutoMutex(ctx, " + std::to_string(test_util::kLineAdd) +
                      ", PTO_SAN_LOCK, pto::kPipeV, *v_tc, *v_ta, *v_tb)"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("&KernelEntry, \"/tmp/report.txt\", 0u, nullptr, kSourceFiles, 1, &KernelOutputs};"), std::string::npos) << code;
}

TEST(SanitizerEndToEnd, AddWithoutAutoMutexRacesAndWithItIsClean) {
  const ir::Function func = test_util::MakeAddKernel({.name = "add_sanitized"}).func;
  const int32_t rows = 256, cols = 256;
  std::vector<float> x(size_t(rows) * cols, 1.0f), y(x.size(), 2.0f), z(x.size(), 0.0f);
  std::vector<uint64_t> slots = test_util::AddKernelSlots(x.data(), y.data(), z.data(), rows, cols);
  runtime::Stream stream;

  auto racy = CompileSanitized(func, "add_racy", /*auto_mutex=*/false);
  EXPECT_EQ(racy->sanitizer_report.filename(), "pypto_sanitizer_report.txt");
  jit::Launch(*racy, 2, stream.handle(), slots.data());  // 4 tiles per block: each group slot is used twice
  try {
    stream.Synchronize();
    FAIL() << "no sanitizer error";
  } catch (const runtime::SanitizerError& e) {
    const std::vector<runtime::SanitizerFinding>& found = e.info().findings;
    ASSERT_FALSE(found.empty());
    std::vector<int> lines;
    for (const runtime::SanitizerFinding& f : found) {
      EXPECT_EQ(f.kind, "PIPE_RACE");
      EXPECT_EQ(f.kernel, "add_sanitized");
      EXPECT_EQ(f.file, "add.py");
      lines.push_back(f.line);
    }
    // V reads what MTE2 loaded; MTE3 stores what V wrote; the next loads overwrite what V read.
    EXPECT_NE(std::find(lines.begin(), lines.end(), test_util::kLineAdd), lines.end());
    EXPECT_NE(std::find(lines.begin(), lines.end(), test_util::kLineStore), lines.end());
    EXPECT_NE(std::find(lines.begin(), lines.end(), test_util::kLineLoadX), lines.end());
    EXPECT_EQ(e.info().report, racy->sanitizer_report.string());
  }
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](float v) { return v == 3.0f; }));  // races skip nothing
  const std::string report = ReadText(racy->sanitizer_report);
  EXPECT_EQ(report.rfind("===== kernel 'add_sanitized' (", 0), 0u) << report;
  EXPECT_NE(report.find("] PIPE_RACE: "), std::string::npos) << report;

  auto clean = CompileSanitized(func, "add_clean", /*auto_mutex=*/true);
  std::fill(z.begin(), z.end(), 0.0f);
  jit::Launch(*clean, 4, stream.handle(), slots.data());
  EXPECT_NO_THROW(stream.Synchronize());
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](float v) { return v == 3.0f; }));
  EXPECT_NE(ReadText(clean->sanitizer_report).find("PyPTO Sanitizer: 0 issue(s) detected"), std::string::npos);
}

}  // namespace
}  // namespace pypto_pro
