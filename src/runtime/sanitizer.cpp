#include "sanitizer.h"
#include "pypto_pro/support/text.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>

#include "core.h"
#include "profile_recorder.h"
#include "pypto_pro/hw_tables.h"

namespace pypto_pro::runtime {

namespace {

using san::BlockState;
using san::CoreState;
using san::Kind;

// The launches running now, found by their argument block (each queued launch has its own).
std::mutex& LaunchesMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::vector<SanitizerLaunch*>& Launches() {
  static std::vector<SanitizerLaunch*>* launches = new std::vector<SanitizerLaunch*>();
  return *launches;
}

SanitizerLaunch* FindLaunch(const void* args) {
  std::lock_guard<std::mutex> lock(LaunchesMutex());
  for (SanitizerLaunch* l : Launches()) {
    if (l->args() == args) return l;
  }
  return nullptr;
}

// The block state of the calling host thread (and of every fiber on it).
BlockState& ThreadBlock() {
  thread_local std::unique_ptr<BlockState> block;
  if (!block) block = std::make_unique<BlockState>();
  return *block;
}

CoreState* StateOf(PtoCoreCtx* ctx) { return static_cast<CoreState*>(CoreOf(ctx).sanitizer); }


// Byte masks of `pipes` (see PtoSanitizerApi::begin) for one kind of core.
struct PipeMasks {
  uint32_t tile, gm;
};
PipeMasks MasksFor(uint32_t pipes, bool aic) {
  const uint32_t shift = aic ? 16 : 0;
  return {pipes >> shift & 0xff, pipes >> (shift + 8) & 0xff};
}

// A new logical block on this thread: every core of it starts knowing nothing, and the GM log's
// population holds every pipe any of its cores may touch GM with, begun or not.
void ResetBlock(BlockState& b, SanitizerLaunch& launch, const Core& core, uint32_t pipes) {
  b.launch = &launch;
  b.launch_id = launch.id();
  b.block = core.block;
  b.cores = core.mixed ? san::kCoreSlots : 1;
  b.gm.Clear();
  b.gm_population.clear();
  b.cross.Clear();
  b.cut_short = false;
  for (int s = 0; s < b.cores; ++s) {
    CoreState& c = b.core[s];
    const bool aic = core.mixed ? s == 0 : core.desc->kind == PTO_KERNEL_CUBE;
    const PipeMasks masks = MasksFor(pipes, aic);
    c.block = &b;
    c.slot = s;
    c.findings.desc = core.desc;
    c.sync.Reset(s);
    c.arena.Clear();
    c.decls.clear();
    c.ended = false;
    c.tile_population.clear();
    for (int p = 0; p < san::kPipeAll; ++p) {
      if (masks.tile >> p & 1) c.tile_population.push_back(&c.sync.ClockOf(p));
      if (masks.gm >> p & 1) b.gm_population.push_back(&c.sync.ClockOf(p));
    }
  }
  if (!core.mixed) return;
  // The moves that cross cores reach the peers' tiles: the AIC's fixpipe the AIVs' UB, the AIVs'
  // MTE3 the AIC's L1 (bit ALL of the writing core's tile byte).
  const uint32_t reaches_peer = 1u << san::kPipeAll;
  for (int s = 1; s < b.cores; ++s) {
    if (MasksFor(pipes, true).tile & reaches_peer) {
      b.core[s].tile_population.push_back(&b.core[0].sync.ClockOf(int(hw::Pipe::kFIX)));
    }
    if (MasksFor(pipes, false).tile & reaches_peer) {
      b.core[0].tile_population.push_back(&b.core[s].sync.ClockOf(int(hw::Pipe::kMTE3)));
    }
  }
}

void Flush(CoreState& c, SanitizerLaunch& launch, san::Findings& findings, const std::string& core_name) {
  if (!findings.empty()) launch.Add(findings.Take(c.block->block, core_name));
}

// ---- the callbacks ----

void Begin(PtoCoreCtx* ctx, const void* args, uint32_t pipes) {
  Core& core = CoreOf(ctx);
  SanitizerLaunch* launch = FindLaunch(args);
  if (!launch) {
    core.sanitizer = nullptr;
    ProfileLaunch* profile = ProfileLaunch::Find(args);
    core.profile = profile ? profile->Events(core.block, core.slot) : nullptr;
    core.profile_cap = profile ? profile->Cap() : 0;
    return;
  }
  BlockState& b = ThreadBlock();
  if (b.launch_id != launch->id() || b.block != core.block) ResetBlock(b, *launch, core, pipes);
  CoreState& c = b.core[core.slot];
  c.name = CoreName(*ctx);
  core.sanitizer = &c;
}

void End(PtoCoreCtx* ctx, int32_t completed) {
  CoreOf(ctx).profile = nullptr;
  CoreState* c = StateOf(ctx);
  if (!c) return;
  CoreOf(ctx).sanitizer = nullptr;
  BlockState& b = *c->block;
  SanitizerLaunch& launch = *b.launch;
  c->ended = true;
  if (!completed) b.cut_short = true;
  // Called from the kernel's scope guard, maybe while a fault unwinds it: nothing may escape.
  try {
    if (!b.cut_short) c->sync.Finish(c->findings);
    Flush(*c, launch, c->findings, c->name);
    const bool all_ended = std::all_of(b.core, b.core + b.cores, [](const CoreState& s) { return s.ended; });
    if (b.cores == san::kCoreSlots && all_ended && !b.cut_short) {
      san::Findings by_slot[san::kCoreSlots];
      b.cross.Finish(by_slot);
      for (int s = 0; s < b.cores; ++s) Flush(b.core[s], launch, by_slot[s], b.core[s].name);
    }
  } catch (...) {
    // Out of memory while formatting findings: the core's checks are lost, the process is not.
  }
}

Kind OutOfBoundsKind(const PtoSanAccess& a) { return a.memory == 0 ? Kind::kGmOutOfBounds : Kind::kTileOutOfBounds; }

std::string OutOfBoundsMessage(const PtoSanAccess& a) {
  const char* op = a.fault.op ? a.fault.op : "?";
  return "pl." + std::string(op) + ": " + FormatFaultDetail(a.fault) + " (the op was skipped)";
}

// "tile 'ta' (Vec bytes [0x0, 0x8000))" / "GM tensor 'x' (bytes [0x100, 0x200) of it)".
std::string Where(const san::Access& a) {
  std::string name = a.name ? a.name : "?";
  std::string range = "[" + Hex(a.region.lo - a.origin) + ", " + Hex(a.region.hi - a.origin) + ")";
  if (a.memory == 0) return "GM tensor '" + name + "' (bytes " + range + " of it)";
  if (a.memory == PTO_MEM_SSBUF) return "struct '" + name + "' (SSBUF bytes " + range + ")";
  return "tile '" + name + "' (" + std::string(hw::MemoryName(a.memory)) + " bytes " + range + ")";
}

std::string RaceMessage(const CoreState& c, const san::Access& now, bool now_reads, const san::Access& before) {
  const int before_slot = before.thread / san::kPipes, before_pipe = before.thread % san::kPipes;
  const int now_pipe = now.thread % san::kPipes;
  const std::string kind = before.write ? (now_reads ? "read-after-write" : "write-after-write") : "write-after-read";
  std::string other = std::string(hw::PipeName(before_pipe));
  if (before_slot != c.slot) other = c.block->core[before_slot].name + " " + other;
  return kind + ": " + std::string(hw::PipeName(now_pipe)) + (now_reads ? " reads " : " writes ") + Where(now) + " that " + other +
         (before.write ? " wrote" : " read") + " at " + c.findings.LineRef(before.line) +
         (before.name && now.name && std::string(before.name) != now.name ? " (as '" + std::string(before.name) + "')"
                                                                           : "") +
         ", and no flag, mutex or barrier orders " + other + " before " + std::string(hw::PipeName(now_pipe));
}

int32_t OnAccess(PtoCoreCtx* ctx, int32_t line, int32_t pipe, const PtoSanAccess* accesses, int32_t count) {
  if (CoreOf(ctx).profile) return 1;  // profile mode checks nothing: the op runs (and faults) as in a plain kernel
  CoreState* c = StateOf(ctx);
  bool in_bounds = true;
  for (int32_t i = 0; i < count; ++i) {
    const PtoSanAccess& a = accesses[i];
    if (a.in_bounds) continue;
    in_bounds = false;
    if (c) c->findings.Add(OutOfBoundsKind(a), line, [&] { return OutOfBoundsMessage(a); });
  }
  if (!in_bounds || !c || pipe < 0 || pipe >= san::kPipeAll) return in_bounds;
  BlockState& b = *c->block;
  const san::VectorClock& now = c->sync.ClockOf(pipe);
  for (int32_t i = 0; i < count; ++i) {
    const PtoSanAccess& a = accesses[i];
    san::Access rec;
    rec.region = san::Region::Make(reinterpret_cast<uintptr_t>(a.base), a.rows, a.row_stride, a.runs, a.run_stride,
                                   a.width);
    if (rec.region.empty()) continue;
    rec.thread = c->sync.Thread(pipe);
    rec.clock = c->sync.Epoch(pipe);
    rec.write = a.mode & PTO_SAN_WRITE;
    rec.line = line;
    rec.memory = a.memory;
    // A move that crosses cores touches the peer core's memory: its log, counted from its arena.
    // The SSBUF is the block's, shared by its cores like GM: its accesses go to the block's GM log.
    const bool shared = a.memory == 0 || a.memory == PTO_MEM_SSBUF;
    const int peer = !shared && a.peer > 0 && a.peer - 1 < b.cores ? a.peer - 1 : -1;
    rec.origin = reinterpret_cast<uintptr_t>(shared || peer >= 0 ? a.origin : ctx->mem[a.memory]);
    rec.name = a.name;
    const bool reads = a.mode & PTO_SAN_READ;
    auto race = [&](const san::Access& before) {
      c->findings.Add(Kind::kPipeRace, line, [&] { return RaceMessage(*c, rec, reads, before); });
    };
    if (shared) {
      b.gm.Record(rec, now, b.gm_population.data(), int(b.gm_population.size()), race);
    } else {
      CoreState& owner = peer >= 0 ? b.core[peer] : *c;
      owner.arena.Record(rec, now, owner.tile_population.data(), int(owner.tile_population.size()), race);
    }
  }
  return 1;
}

}  // namespace

void SanitizerBarrierArrive(PtoCoreCtx& ctx, san::VectorClock& barrier) {
  // The barrier is issued by the scalar unit: it carries what the scalar pipe knows, not the work
  // still in flight on the other pipes (a bar_all before it makes the scalar pipe know all of it).
  if (san::CoreState* c = StateOf(&ctx)) barrier.Join(c->sync.Release(int(hw::Pipe::kS)));
}

void SanitizerBarrierLeave(PtoCoreCtx& ctx, const san::VectorClock& barrier) {
  if (san::CoreState* c = StateOf(&ctx)) {
    for (int p = 0; p < san::kPipes; ++p) c->sync.Acquire(p, barrier);
  }
}

namespace {

// Profile mode: one event for the performance model (runtime/perf_model.cpp).
void Record(PtoCoreCtx* ctx, const ProfileEvent& e) {
  Core& core = CoreOf(ctx);
  if (core.profile->size() < core.profile_cap) core.profile->push_back(e);
}

void RecordSync(PtoCoreCtx* ctx, int32_t line, int32_t event, int32_t pipe, int32_t other, uint32_t id) {
  ProfileEvent e;
  e.pipe = uint8_t(pipe);
  e.other = uint8_t(other);
  e.line = line;
  e.id = id;
  switch (event & ~PTO_SAN_AUTO_MUTEX) {
    case PTO_SAN_FLAG_SET: e.kind = ProfileEvent::kFlagSet; break;
    case PTO_SAN_FLAG_WAIT: e.kind = ProfileEvent::kFlagWait; break;
    case PTO_SAN_LOCK: e.kind = ProfileEvent::kLock; break;
    case PTO_SAN_UNLOCK: e.kind = ProfileEvent::kUnlock; break;
    case PTO_SAN_BARRIER: e.kind = ProfileEvent::kBarrier; break;
    case PTO_SAN_CROSS_SET: e.kind = ProfileEvent::kCrossSet; break;
    case PTO_SAN_CROSS_WAIT: e.kind = ProfileEvent::kCrossWait; break;
    // The unit flag between the cube and the fixpipe: a flag of its own (id 64, beyond the event ids).
    case PTO_SAN_UNIT_SET: e.kind = ProfileEvent::kFlagSet, e.id = 64; break;
    case PTO_SAN_UNIT_WAIT: e.kind = ProfileEvent::kFlagWait, e.id = 64; break;
    default: return;
  }
  Record(ctx, e);
}

void OnWork(PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t op_class, int64_t units, int32_t dtype,
            const char* op) {
  if (!CoreOf(ctx).profile) return;
  ProfileEvent e;
  e.kind = ProfileEvent::kOp;
  e.pipe = uint8_t(pipe);
  e.op_class = OpClass(std::clamp<int32_t>(op_class, 0, int32_t(OpClass::kCount) - 1));
  e.dtype = uint8_t(dtype);
  e.line = line;
  e.units = units;
  e.name = op;
  Record(ctx, e);
}

void OnSync(PtoCoreCtx* ctx, int32_t line, int32_t event, int32_t pipe, int32_t other, uint32_t id) {
  if (CoreOf(ctx).profile) return RecordSync(ctx, line, event, pipe, other, id);
  CoreState* c = StateOf(ctx);
  if (!c || pipe < 0 || pipe >= san::kPipes || other < 0 || other >= san::kPipes) return;
  const bool automatic = event & PTO_SAN_AUTO_MUTEX;
  switch (event & ~PTO_SAN_AUTO_MUTEX) {
    case PTO_SAN_FLAG_SET: c->sync.FlagSet(line, pipe, other, int(id)); break;
    case PTO_SAN_FLAG_WAIT: c->sync.FlagWait(line, other, pipe, int(id)); break;
    case PTO_SAN_LOCK: c->sync.Lock(line, pipe, id, automatic, c->findings); break;
    case PTO_SAN_UNLOCK: c->sync.Unlock(line, pipe, id, automatic, c->findings); break;
    case PTO_SAN_BARRIER: c->sync.Barrier(pipe); break;
    case PTO_SAN_CROSS_SET: c->block->cross.Set(c->sync, line, pipe, id); break;
    case PTO_SAN_CROSS_WAIT: c->block->cross.Wait(c->sync, pipe, id); break;
    case PTO_SAN_UNIT_SET: c->sync.UnitSet(pipe, other); break;
    case PTO_SAN_UNIT_WAIT: c->sync.UnitWait(pipe, other); break;
    default: break;
  }
}

std::string SlotText(const san::TileDecl& d, size_t slot) {
  const std::string range = "[" + Hex(d.addrs[slot]) + ", " + Hex(uint64_t(d.addrs[slot]) + d.bytes) + ")";
  const std::string memory(hw::MemoryName(d.memory));
  return "'" + std::string(d.name ? d.name : "?") + "'" + (d.addrs.size() > 1 ? " slot " + std::to_string(slot) : "") +
         " (" + memory + " " + range + ")";
}

bool Overlap(uint32_t a, uint32_t b, uint32_t bytes_a, uint32_t bytes_b) {
  return uint64_t(a) < uint64_t(b) + bytes_b && uint64_t(b) < uint64_t(a) + bytes_a;
}

void OnDeclare(PtoCoreCtx* ctx, int32_t line, const char* name, int32_t decl, int32_t memory, const uint32_t* addrs,
               int32_t slots, uint32_t bytes) {
  CoreState* c = StateOf(ctx);
  if (!c) return;
  san::TileDecl d;
  d.decl = decl;
  d.line = line;
  d.memory = memory;
  d.name = name;
  d.addrs.assign(addrs, addrs + slots);
  d.bytes = bytes;
  auto report = [&](const std::string& message) {
    c->findings.Add(Kind::kTileOverlap, line, [&] { return message; });
  };
  for (size_t i = 0; i < d.addrs.size(); ++i) {
    for (size_t j = i + 1; j < d.addrs.size(); ++j) {
      if (Overlap(d.addrs[i], d.addrs[j], bytes, bytes)) {
        report(SlotText(d, i) + " and " + SlotText(d, j) + " share bytes");
      }
    }
  }
  c->decls.erase(std::remove_if(c->decls.begin(), c->decls.end(), [&](const san::TileDecl& o) { return o.decl == decl; }),
                 c->decls.end());
  for (const san::TileDecl& o : c->decls) {
    if (o.memory != memory) continue;
    for (size_t i = 0; i < d.addrs.size(); ++i) {
      for (size_t j = 0; j < o.addrs.size(); ++j) {
        // The same bytes seen as two tile types (a [32, 1] column and a [1, 32] row) is a view, not a clash.
        const bool view = d.addrs[i] == o.addrs[j] && bytes == o.bytes;
        if (!view && Overlap(d.addrs[i], o.addrs[j], bytes, o.bytes)) {
          report(SlotText(d, i) + " shares bytes with " + SlotText(o, j) + ", declared at " +
                 c->findings.LineRef(o.line) + " and still live");
        }
      }
    }
  }
  c->decls.push_back(std::move(d));
}

void OnBadShape(PtoCoreCtx* ctx, int32_t line, const PtoFaultDetail* detail) {
  if (CoreOf(ctx).profile && detail) {  // profile mode: the fault a plain kernel's pl.set_validshape raises
    AbortCore(*ctx, line, "set_validshape", FormatFaultDetail(*detail));
  }
  CoreState* c = StateOf(ctx);
  if (!c || !detail) return;
  c->findings.Add(Kind::kTileOutOfBounds, line, [&] {
    return "pl.set_validshape: " + FormatFaultDetail(*detail) + " (the valid shape was left as it was)";
  });
}

std::atomic<uint64_t> next_launch_id{1};

}  // namespace

const PtoSanitizerApi kSanitizerApi = {&Begin, &End, &OnAccess, &OnSync, &OnDeclare, &OnBadShape, &OnWork};

SanitizerLaunch::SanitizerLaunch(const PtoKernelDesc& desc, const void* args) : desc_(desc), args_(args) {
  if (!desc.sanitizer_report) return;
  id_ = next_launch_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(LaunchesMutex());
  Launches().push_back(this);
}

SanitizerLaunch::~SanitizerLaunch() {
  if (!id_) return;
  std::lock_guard<std::mutex> lock(LaunchesMutex());
  auto& all = Launches();
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
}

void SanitizerLaunch::Add(std::vector<SanitizerFinding> findings) {
  for (SanitizerFinding& f : findings) {
    f.kernel = desc_.name ? desc_.name : "?";
    f.file = SourceFile(desc_, f.line);
    f.line = LineNumber(f.line);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  san::MergeFindings(findings_, std::move(findings));
}

std::optional<FaultInfo> SanitizerLaunch::Finish(std::optional<FaultInfo> fault) {
  if (!id_) return fault;
  std::vector<SanitizerFinding> findings;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    findings.swap(findings_);
  }
  std::sort(findings.begin(), findings.end(), [](const SanitizerFinding& a, const SanitizerFinding& b) {
    return a.line != b.line ? a.line < b.line : a.kind < b.kind;
  });
  const std::string report = desc_.sanitizer_report;
  const std::string kernel = desc_.name ? desc_.name : "?";
  const std::string dir = report.substr(0, report.find_last_of('/'));
  {
    static std::mutex* file_mutex = new std::mutex();  // launches on several streams append in turn
    std::lock_guard<std::mutex> lock(*file_mutex);
    std::ofstream(report, std::ios::app) << FormatSanitizerReport(kernel, dir, findings);
  }
  if (findings.empty()) return fault;
  if (!fault) fault.emplace();
  fault->kernel = kernel;
  fault->source_file = desc_.source_file ? desc_.source_file : "?";
  fault->findings = std::move(findings);
  fault->report = report;
  return fault;
}

}  // namespace pypto_pro::runtime
