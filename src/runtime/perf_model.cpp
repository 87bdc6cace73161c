// The scheduler of the performance model (include/pypto_pro/runtime/profile.h, docs/profiler.md).
#include "pypto_pro/runtime/profile.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "cross_core.h"
#include "pypto_pro/support/source_line.h"

namespace pypto_pro::runtime {

namespace {

using hw::Pipe;
constexpr int kPipes = int(Pipe::kCount);
constexpr int kAll = int(Pipe::kALL);

const char* PipeName(int p) { return hw::kPipeNames[p]; }

double PipeBytesPerCycle(const CostModel& c, int pipe) {
  switch (Pipe(pipe)) {
    case Pipe::kMTE2: return c.mte2_bytes_per_cycle;
    case Pipe::kMTE3: return c.mte3_bytes_per_cycle;
    case Pipe::kMTE1: return c.mte1_bytes_per_cycle;
    case Pipe::kFIX: return c.fix_bytes_per_cycle;
    default: return c.vector_bytes_per_cycle;
  }
}

// A flag set: when, where.
struct Signal {
  int64_t at = 0;
  int line = 0;
  int core = 0;
  uint8_t pipe = 0;
};

// One core's walk through its events.
struct CoreWalk {
  const std::vector<ProfileEvent>* events = nullptr;
  int block = 0, slot = 0;  // which core of which block
  bool aic = false;
  std::array<uint32_t, 16> inter_sets{}, inter_waits{};  // INTER_BLOCK rounds set and taken, per event
  std::array<int, 6> barriers{};  // sync_all arrivals so far, per barrier kind
  bool at_barrier = false;  // arrived at its next sync_all, which has not opened yet
  size_t next = 0;
  int64_t issue = 0;  // when the scalar unit issues the next instruction
  std::array<int64_t, kPipes> free{};  // when each pipe may start its next op
  std::array<Signal, 32> mutex_free{};  // when each mutex was last released, by which pipe at which line
  std::map<uint32_t, std::deque<Signal>> flags;  // (src pipe, dst pipe, id) -> sets not yet waited for
};

// A core to schedule: its block, its slot in the block, its events.
struct CoreRef {
  int block = 0, slot = 0;
  const std::vector<ProfileEvent>* events = nullptr;
  bool aic = false;
};

constexpr uint32_t kInterBlock = uint32_t(hw::CrossCoreSyncMode::kINTER_BLOCK);

// Schedules cores from time 0: the cores of one block, or (a launch with pl.system.sync_all, whose
// blocks are all resident) every core of the launch.
class Scheduler {
 public:
  Scheduler(const CostModel& cost, double gm_share, const std::vector<std::string>& files, LaunchProfile& out)
      : cost_(cost), gm_share_(gm_share), files_(files), out_(out) {}

  // Returns the length in cycles.
  int64_t Run(const std::vector<CoreRef>& cores) {
    walks_.resize(cores.size());
    for (size_t c = 0; c < cores.size(); ++c) {
      walks_[c].events = cores[c].events;
      walks_[c].block = cores[c].block;
      walks_[c].slot = cores[c].slot;
      walks_[c].aic = cores[c].aic;
      ++kind_cores_[cores[c].aic ? 1 : 0];
    }
    // Round-robin until every core is through (a core stops at a cross-core wait whose set has not
    // been scheduled yet; the recorded program ran, so some other core always makes progress).
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t c = 0; c < walks_.size(); ++c) {
        while (walks_[c].next < walks_[c].events->size()) {
          if (!Step(int(c), (*walks_[c].events)[walks_[c].next])) break;
          ++walks_[c].next;
          progress = true;
        }
      }
    }
    int64_t end = 0;
    for (const CoreWalk& w : walks_) {
      end = std::max(end, w.issue);
      for (int64_t f : w.free) end = std::max(end, f);
    }
    return end;
  }

 private:
  // Holds pipe `p` of core `c` until `until` (a wait), noting the stall when it costs anything.
  // "line 14" in the kernel's own file, "helpers.py:14" in another module's helper.
  std::string Where(int line) const {
    const int file = LineFile(line);
    if (file == 0 || size_t(file) >= files_.size()) return "line " + std::to_string(LineNumber(line));
    const std::string& path = files_[size_t(file)];
    return path.substr(path.rfind('/') + 1) + ":" + std::to_string(LineNumber(line));
  }

  void Hold(int c, int p, int64_t until, int line, const std::string& reason) {
    CoreWalk& w = walks_[size_t(c)];
    const int64_t ready = std::max(w.free[size_t(p)], w.issue);
    if (until > ready) out_.stalls.push_back({w.block, w.slot, uint8_t(p), ready, until, line, reason});
    w.free[size_t(p)] = std::max(ready, until);
    if (p == int(Pipe::kS)) w.issue = w.free[size_t(p)];
  }

  bool Step(int c, const ProfileEvent& e) {
    CoreWalk& w = walks_[size_t(c)];
    const int p = e.pipe < kPipes ? e.pipe : int(Pipe::kS);
    switch (e.kind) {
      case ProfileEvent::kOp: {
        const int64_t start = std::max(w.issue, w.free[size_t(p)]);
        const int64_t end = start + OpCycles(cost_, e, gm_share_);
        w.free[size_t(p)] = end;
        if (p == int(Pipe::kS)) w.issue = end;
        out_.ops.push_back({w.block, w.slot, 0, uint8_t(p), e.op_class, e.line, start, end, e.units, NameIndex(e.name)});
        if (e.op_class == OpClass::kTransferGm) out_.gm_bytes += e.units;
        if (e.op_class == OpClass::kMatmul) out_.flops += 2.0 * double(e.units);
        break;
      }
      case ProfileEvent::kFlagSet: {
        const int64_t at = std::max(w.issue, w.free[size_t(p)]);
        w.free[size_t(p)] = at;
        w.flags[FlagKey(e.pipe, e.other, e.id)].push_back({at, e.line, w.slot, e.pipe});
        break;
      }
      case ProfileEvent::kFlagWait: {
        auto& queue = w.flags[FlagKey(e.other, e.pipe, e.id)];
        if (queue.empty()) break;  // a wait the recorded run never matched: nothing to wait for
        const Signal s = queue.front();
        queue.pop_front();
        Hold(c, p, s.at, e.line,
             "waits for flag " + std::to_string(e.id) + " from " + PipeName(e.other) + " set at " +
                 Where(s.line));
        break;
      }
      case ProfileEvent::kLock:
        for (int id = 0; id < 32; ++id) {
          const Signal& released = w.mutex_free[size_t(id)];
          if (e.id >> id & 1u && released.line) {
            Hold(c, p, released.at, e.line,
                 "waits for mutex " + std::to_string(id) + " released by " + PipeName(released.pipe) + " at " +
                     Where(released.line));
          }
        }
        break;
      case ProfileEvent::kUnlock: {
        const int64_t at = std::max(w.issue, w.free[size_t(p)]);
        for (int id = 0; id < 32; ++id) {
          if (e.id >> id & 1u) w.mutex_free[size_t(id)] = {at, e.line, c, e.pipe};
        }
        break;
      }
      case ProfileEvent::kBarrier:
        if (e.pipe == kAll) {
          int64_t at = w.issue;
          for (int64_t f : w.free) at = std::max(at, f);
          w.free.fill(at);
          w.issue = at;
        }
        break;
      case ProfileEvent::kCrossSet: {
        if (e.id >> 8 == kInterBlock) {  // a round of every core of its kind in the launch
          const int64_t at = std::max(w.issue, w.free[size_t(p)]);
          w.free[size_t(p)] = at;
          auto& rounds = inter_[w.aic ? 1 : 0][e.id & 15];
          const uint32_t r = w.inter_sets[e.id & 15]++;
          if (rounds.size() <= r) rounds.resize(r + 1);
          ++rounds[r].arrived;
          if (at >= rounds[r].at) rounds[r].at = at, rounds[r].line = e.line;
          break;
        }
        const auto route = CrossCoreFlags::RouteOf(true, w.slot, int(e.id >> 8), int(e.id & 0xff));
        const int64_t at = std::max(w.issue, w.free[size_t(p)]);
        w.free[size_t(p)] = at;
        Cross& cross = cross_[w.block];
        for (int d = 0; d < route.count; ++d) cross[route.dirs[d]][route.event].push_back({at, e.line, w.slot, e.pipe});
        break;
      }
      case ProfileEvent::kCrossWait: {
        if (e.id >> 8 == kInterBlock) {  // the round is complete when every core of the kind has set it
          auto& rounds = inter_[w.aic ? 1 : 0][e.id & 15];
          const uint32_t r = w.inter_waits[e.id & 15];
          if (rounds.size() <= r || rounds[r].arrived < kind_cores_[w.aic ? 1 : 0]) return false;
          ++w.inter_waits[e.id & 15];
          Hold(c, p, rounds[r].at, e.line,
               "waits for INTER_BLOCK event " + std::to_string(e.id & 15) + " from every core, the last set at " +
                   Where(rounds[r].line));
          break;
        }
        const auto route = CrossCoreFlags::RouteOf(false, w.slot, int(e.id >> 8), int(e.id & 0xff));
        Cross& cross = cross_[w.block];
        for (int d = 0; d < route.count; ++d) {
          if (cross[route.dirs[d]][route.event].empty()) return false;  // its set is not scheduled yet
        }
        int64_t at = 0;
        int line = 0;
        for (int d = 0; d < route.count; ++d) {
          const Signal s = cross[route.dirs[d]][route.event].front();
          cross[route.dirs[d]][route.event].pop_front();
          at = std::max(at, s.at);
          line = s.line;
          out_.flows.push_back({w.block, s.core, w.slot, s.pipe, e.pipe, s.at, 0, s.line, e.line, e.id & 0xff});
        }
        Hold(c, p, at, e.line,
             "waits for cross-core event " + std::to_string(e.id & 0xff) + " set at " + Where(line));
        const int64_t taken = walks_[size_t(c)].free[size_t(p)];
        for (size_t f = out_.flows.size() - size_t(route.count); f < out_.flows.size(); ++f) out_.flows[f].taken_at = taken;
        break;
      }
      case ProfileEvent::kSyncAll: {
        // Barrier kind `id` opens when `units` cores have arrived: each core's n-th arrival at a kind
        // belongs to its n-th opening.
        auto& openings = openings_[size_t(std::min<uint32_t>(e.id, 5))];
        const size_t n = size_t(w.barriers[std::min<uint32_t>(e.id, 5)]);
        if (openings.size() <= n) openings.resize(n + 1);
        Opening& open = openings[n];
        if (!w.at_barrier) {
          w.at_barrier = true;
          ++open.arrived;
          if (w.issue >= open.at) open.at = w.issue, open.line = e.line;
        }
        if (open.arrived < std::max<int64_t>(e.units, 1)) return false;  // others have not arrived yet
        w.at_barrier = false;
        ++w.barriers[std::min<uint32_t>(e.id, 5)];
        Hold(c, int(Pipe::kS), open.at, e.line,
             "waits at pl.system.sync_all for the last core, which arrived at " +
                 Where(open.line));
        break;
      }
    }
    w.issue += cost_.scalar_cycles;
    return true;
  }

  int NameIndex(const char* name) {
    if (!name) return -1;
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    auto known = std::find(out_.names.begin(), out_.names.end(), name);
    const int index = int(known - out_.names.begin());
    if (known == out_.names.end()) out_.names.emplace_back(name);
    names_[name] = index;
    return index;
  }

  static uint32_t FlagKey(uint8_t src, uint8_t dst, uint32_t id) { return uint32_t(src) << 16 | uint32_t(dst) << 8 | id; }

  const CostModel& cost_;
  double gm_share_;
  const std::vector<std::string>& files_;  // the kernel's source files (index 0: its own)
  LaunchProfile& out_;
  std::vector<CoreWalk> walks_;
  std::map<const char*, int> names_;  // by the library's string
  using Cross = std::array<std::array<std::deque<Signal>, CrossCoreFlags::kEvents * 2>, CrossCoreFlags::kDirections>;
  std::map<int, Cross> cross_;  // per block: cross-core sets not yet waited for, per direction and event
  // sync_all: per barrier kind, each opening (generation) in order: arrivals so far, the last arrival.
  struct Opening {
    int64_t arrived = 0;
    int64_t at = 0;
    int line = 0;
  };
  std::array<std::vector<Opening>, 6> openings_;
  std::array<std::array<std::vector<Opening>, 16>, 2> inter_;  // INTER_BLOCK rounds, per kind (AIV, AIC) and event
  std::array<int64_t, 2> kind_cores_{};  // cores of each kind being scheduled
};

}  // namespace

const char* Name(OpClass c) {
  switch (c) {
    case OpClass::kScalar: return "scalar";
    case OpClass::kTransferGm: return "GM transfer";
    case OpClass::kTransferLocal: return "local transfer";
    case OpClass::kVector: return "vector";
    case OpClass::kVectorSlow: return "vector (transcendental)";
    case OpClass::kMatmul: return "matmul";
    case OpClass::kCount: break;
  }
  return "?";
}

int64_t OpCycles(const CostModel& cost, const ProfileEvent& op, double gm_share) {
  const double units = double(std::max<int64_t>(op.units, 0));
  switch (op.op_class) {
    case OpClass::kScalar: return cost.scalar_cycles;
    case OpClass::kTransferGm: {
      const double rate = std::min(PipeBytesPerCycle(cost, op.pipe), gm_share);
      return cost.gm_latency + int64_t(std::ceil(units / rate));
    }
    case OpClass::kTransferLocal:
      return cost.local_latency + int64_t(std::ceil(units / PipeBytesPerCycle(cost, op.pipe)));
    case OpClass::kVector: return cost.local_latency + int64_t(std::ceil(units / cost.vector_bytes_per_cycle));
    case OpClass::kVectorSlow:
      return cost.local_latency + int64_t(std::ceil(units * cost.vector_slow_factor / cost.vector_bytes_per_cycle));
    case OpClass::kMatmul: {
      const hw::DataType t = hw::DataType(op.dtype);
      const double macs = t == hw::DataType::kFP32 ? cost.cube_macs_fp32
                          : (t == hw::DataType::kInt8 || t == hw::DataType::kUInt8) ? cost.cube_macs_int8
                                                                                   : cost.cube_macs_fp16;
      return cost.local_latency + int64_t(std::ceil(units / macs));
    }
    case OpClass::kCount: break;
  }
  return cost.scalar_cycles;
}

namespace {

// The launch with every resident core's GM transfers at `gm_share` bytes per cycle (or its pipe's
// rate, if lower).
LaunchProfile Place(const ArchModel& arch, BlockShape shape, const std::vector<std::string>& files,
                    const std::vector<std::vector<std::vector<ProfileEvent>>>& blocks, double gm_share) {
  LaunchProfile out;
  out.arch = std::string(arch.name);
  out.clock_ghz = arch.cost.clock_ghz;
  out.shape = shape;
  out.block_dim = int(blocks.size());
  out.physical_slots = shape == BlockShape::kVector ? arch.aiv_cores : arch.aic_cores;
  const int slots = std::max(out.physical_slots, 1);
  out.waves = (out.block_dim + slots - 1) / slots;
  auto refs = [&](size_t b) {
    std::vector<CoreRef> cores;
    for (size_t c = 0; c < blocks[b].size(); ++c) {
      const bool aic = shape == BlockShape::kCube || (shape == BlockShape::kMixed && c == 0);
      cores.push_back({int(b), int(c), &blocks[b][c], aic});
    }
    return cores;
  };
  // pl.system.sync_all or INTER_BLOCK flags: every block on a core of its own at once, one schedule.
  bool resident = false;
  for (const auto& block : blocks) {
    for (const auto& core : block) {
      resident = resident || std::any_of(core.begin(), core.end(), [](const ProfileEvent& e) {
                   return e.kind == ProfileEvent::kSyncAll ||
                          ((e.kind == ProfileEvent::kCrossSet || e.kind == ProfileEvent::kCrossWait) &&
                           e.id >> 8 == kInterBlock);
                 });
    }
  }
  if (resident) {
    std::vector<CoreRef> all;
    for (size_t b = 0; b < blocks.size(); ++b) {
      for (const CoreRef& r : refs(b)) all.push_back(r);
    }
    out.cycles = Scheduler(arch.cost, gm_share, files, out).Run(all);
    out.waves = 1;
    for (ModelledOp& op : out.ops) {
      op.physical = op.block % slots;
      out.busy[op.pipe] += op.end - op.start;
    }
  }
  std::vector<int64_t> slot_free(size_t(slots), 0);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!resident) {
      // The block goes to the core that is free first (blocks of one length fill the cores in waves).
      const size_t slot = size_t(std::min_element(slot_free.begin(), slot_free.end()) - slot_free.begin());
      const int64_t start = slot_free[slot];
      const size_t first_op = out.ops.size(), first_flow = out.flows.size(), first_stall = out.stalls.size();
      const int64_t length = Scheduler(arch.cost, gm_share, files, out).Run(refs(b));
      for (size_t i = first_op; i < out.ops.size(); ++i) {
        ModelledOp& op = out.ops[i];
        op.start += start, op.end += start, op.physical = int(slot);
        out.busy[op.pipe] += op.end - op.start;
      }
      for (size_t i = first_flow; i < out.flows.size(); ++i) out.flows[i].set_at += start, out.flows[i].taken_at += start;
      for (size_t i = first_stall; i < out.stalls.size(); ++i) out.stalls[i].from += start, out.stalls[i].until += start;
      slot_free[slot] = start + length;
      out.cycles = std::max(out.cycles, start + length);
    }
    static constexpr Pipe kAicPipes[] = {Pipe::kMTE1, Pipe::kMTE2, Pipe::kM, Pipe::kFIX, Pipe::kS};
    static constexpr Pipe kAivPipes[] = {Pipe::kMTE2, Pipe::kMTE3, Pipe::kV, Pipe::kS};
    for (size_t c = 0; c < blocks[b].size(); ++c) {
      const bool aic = shape == BlockShape::kCube || (shape == BlockShape::kMixed && c == 0);
      if (aic) {
        for (Pipe p : kAicPipes) out.pipe_cores[size_t(p)] += 1;
      } else {
        for (Pipe p : kAivPipes) out.pipe_cores[size_t(p)] += 1;
      }
    }
  }
  return out;
}

}  // namespace

LaunchProfile ModelLaunch(const ArchModel& arch, BlockShape shape,
                          const std::vector<std::vector<std::vector<ProfileEvent>>>& blocks,
                          const std::vector<std::string>& source_files) {
  // GM bandwidth is shared: each core resident at once starts with an equal share of the chip's; a
  // core moving data on two pipes at once (MTE2 and MTE3) can still ask for more than the chip has,
  // so the share is lowered until the launch's GM rate fits it.
  const int slots = std::max(shape == BlockShape::kVector ? arch.aiv_cores : arch.aic_cores, 1);
  const int resident = std::min(int(blocks.size()), slots) * (shape == BlockShape::kMixed ? 3 : 1);
  double share = arch.cost.gm_bytes_per_cycle / std::max(resident, 1);
  LaunchProfile out = Place(arch, shape, source_files, blocks, share);
  for (int round = 0; round < 8 && out.cycles > 0; ++round) {
    const double rate = double(out.gm_bytes) / double(out.cycles);
    if (rate <= arch.cost.gm_bytes_per_cycle * 1.001) break;
    share *= arch.cost.gm_bytes_per_cycle / rate;
    out = Place(arch, shape, source_files, blocks, share);
  }
  return out;
}

}  // namespace pypto_pro::runtime
