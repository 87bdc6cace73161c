// The performance model (docs/profiler.md): what a launch's recorded program would cost on the
// NPU. A profiling launch records, per core and in program order, every op (its pipe and its work)
// and every synchronisation event; ModelLaunch schedules the ops on their pipes by the arch's cost
// model, ordered only where the program orders them (same pipe, flags, mutexes, barriers, cross-core
// flags), and places the blocks on the arch's cores in waves.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pypto_pro/hw_tables.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::runtime {

// What an op's work is counted in (ProfileEvent::units).
enum class OpClass : uint8_t {
  kScalar,         // a scalar-pipe op: one unit
  kTransferGm,     // bytes moved between GM and a local memory
  kTransferLocal,  // bytes moved between local memories (L1 -> L0, L0C -> UB, UB -> L1, UB -> UB)
  kVector,         // bytes of the widest operand
  kVectorSlow,     // the same, for exp / log / sqrt / division
  kMatmul,         // multiply-accumulates (M x K x N); `dtype` the inputs'
  kCount
};
const char* Name(OpClass c);

struct ProfileEvent {
  enum Kind : uint8_t {
    kOp,
    kFlagSet,    // pipe sets flag `id` for pipe `other` (sync_src)
    kFlagWait,   // pipe waits for flag `id` from pipe `other` (sync_dst)
    kLock,       // pipe takes the mutexes of bit set `id`
    kUnlock,     // and releases them
    kBarrier,    // pipe (every pipe for ALL) drains
    kCrossSet,   // pipe signals cross-core event `id & 0xff` with sync mode `id >> 8`
    kCrossWait,  // pipe waits for it
    kSyncAll,    // pl.system.sync_all: barrier kind `id` (runtime's numbering), opening when `units` cores arrived
  };
  Kind kind = kOp;
  uint8_t pipe = 0;   // hw::Pipe
  uint8_t other = 0;  // flags: the other pipe
  OpClass op_class = OpClass::kScalar;
  uint8_t dtype = 0;  // matmul: the inputs' hw::DataType
  int32_t line = 0;
  uint32_t id = 0;
  int64_t units = 0;
  const char* name = nullptr;  // kOp: "pl.load" (a string of the kernel's library)
};

// The kernel kinds of PtoKernelDesc: a block is one AIV, one AIC, or an AIC with two AIVs.
enum class BlockShape : uint8_t { kVector, kCube, kMixed };

struct ModelledOp {
  int block = 0;
  int core = 0;  // slot in the block: 0 (the AIC of a mixed block), 1 and 2 its AIVs
  int physical = 0;  // the arch's core the block ran on
  uint8_t pipe = 0;
  OpClass op_class = OpClass::kScalar;
  int line = 0;
  int64_t start = 0, end = 0;  // cycles from the launch's start
  int64_t units = 0;
  int name = -1;  // index into LaunchProfile::names
};

// A cross-core flag: set on one core, taken by a wait on another.
struct ModelledFlow {
  int block = 0;
  int from_core = 0, to_core = 0;
  uint8_t from_pipe = 0, to_pipe = 0;
  int64_t set_at = 0, taken_at = 0;
  int set_line = 0, wait_line = 0;
  uint32_t id = 0;
};

// A pipe held up by a wait: from when it was free until the wait let it go.
struct ModelledStall {
  int block = 0, core = 0;
  uint8_t pipe = 0;
  int64_t from = 0, until = 0;
  int line = 0;          // the wait's line
  std::string reason;    // "waits for flag 2 from MTE2 set at line 14"
};

struct LaunchProfile {
  std::string arch;
  double clock_ghz = 1;
  BlockShape shape = BlockShape::kVector;
  int block_dim = 0;
  int physical_slots = 0;  // blocks the arch runs at once
  int waves = 0;
  int64_t cycles = 0;      // the launch's modelled length
  // Summed over every core: cycles each pipe was busy, and the cores that ran (for busy %).
  std::array<int64_t, size_t(hw::Pipe::kCount)> busy{};
  std::array<int64_t, size_t(hw::Pipe::kCount)> pipe_cores{};  // cores whose kind has the pipe, summed over blocks
  int64_t gm_bytes = 0;
  double flops = 0;        // the cube's: 2 x its multiply-accumulates
  bool truncated = false;  // events past the recording limit were dropped: the model covers a prefix
  std::vector<std::string> names;  // the ops' names ("pl.load")
  std::vector<ModelledOp> ops;
  std::vector<ModelledFlow> flows;
  std::vector<ModelledStall> stalls;

  double Microseconds() const { return double(cycles) / (clock_ghz * 1e3); }
};

// `blocks[b][slot]`: block b's events per core slot (1 slot, or 3 for a mixed block: AIC, AIV 0, AIV 1).
// `source_files` name the files of the events' encoded lines in stall reasons (index 0: the kernel's).
LaunchProfile ModelLaunch(const ArchModel& arch, BlockShape shape,
                          const std::vector<std::vector<std::vector<ProfileEvent>>>& blocks,
                          const std::vector<std::string>& source_files = {});

// A modelled launch, as pypto_pro.profiler reads it.
struct ProfileRecord {
  std::string kernel;
  std::vector<std::string> source_files;  // what the ops' encoded lines refer to (support/source_line.h)
  LaunchProfile profile;
};

// Whether launches record now (pypto_pro.profiler.profile() is open): the launch path then uses
// each kernel's profiling instance.
void SetProfiling(bool on);
bool Profiling();
// The launches modelled since the last call, oldest first.
std::vector<ProfileRecord> TakeProfiles();

// The cycles one op costs on its pipe when `gm_share` bytes per cycle of GM bandwidth are its.
int64_t OpCycles(const CostModel& cost, const ProfileEvent& op, double gm_share);

}  // namespace pypto_pro::runtime
