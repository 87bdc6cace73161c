// The arch models (docs/device.md#arch-models): core counts and local-memory capacities per compile target.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/hw_tables.h"

namespace pypto_pro {

// What work costs on each pipe of one core, for the performance model (docs/profiler.md#cost-model,
// which gives each figure's public source or says it is an assumption). Cycles of the core clock.
struct CostModel {
  double clock_ghz;
  double gm_bytes_per_cycle;     // the chip's GM (HBM) bandwidth, shared by the cores moving data at once
  double mte2_bytes_per_cycle;   // one core's GM -> local memory
  double mte3_bytes_per_cycle;   // one core's UB -> GM (and UB -> L1 on a5)
  double mte1_bytes_per_cycle;   // L1 -> L0A / L0B
  double fix_bytes_per_cycle;    // L0C -> GM / UB through the fixpipe
  double vector_bytes_per_cycle; // V: bytes of an op's widest operand per cycle
  double vector_slow_factor;     // exp, log, sqrt, division: this many times slower
  double cube_macs_fp16;         // M: multiply-accumulates per cycle, fp16/bf16 inputs
  double cube_macs_fp32;         // fp32 inputs
  double cube_macs_int8;         // int8 inputs
  int gm_latency;                // fixed cycles of an MTE2 / MTE3 / FIX instruction that reaches GM
  int local_latency;             // fixed cycles of an MTE1 / FIX-to-UB / V / M instruction
  int scalar_cycles;             // a scalar op, and issuing any instruction
};

struct ArchModel {
  std::string_view name;   // "a5"
  std::string_view model;  // "Ascend 950 (DAV_3510)"
  int aic_cores;
  int aiv_cores;
  // The cube core's fixpipe writes the vector cores' UB and the vector cores write the cube core's
  // L1 (a5); without these paths (a3, a2) data between them goes through GM.
  bool cube_vector_local_paths;
  // Bytes of each local memory, indexed by hw::MemorySpace (DDR = 0: unbounded host memory).
  std::array<uint32_t, size_t(hw::MemorySpace::kCount)> capacity;
  // Bytes of a block's SuperScalar buffer (pl.ssbuf_store / ssbuf_load); 0: the arch has none.
  uint32_t ssbuf_bytes;
  CostModel cost;

  uint32_t Capacity(hw::MemorySpace m) const { return capacity[size_t(m)]; }
};

// Byte alignment a tile address must have in memory `m` (Vec/Mat 32, Left/Right 512, Acc 64).
uint32_t TileAlignment(hw::MemorySpace m);

// nullptr when unknown.
const ArchModel* FindArch(std::string_view name);
const ArchModel& DefaultArch();
std::vector<std::string_view> ArchNames();
std::string ArchNamesJoined();  // "a5, a3, a2" for messages

}  // namespace pypto_pro
