// The arch models (docs/device.md#arch-models): core counts and local-memory capacities per compile target.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/hw_tables.h"

namespace pypto_pro {

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
