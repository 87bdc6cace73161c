// The op families that make up the registry; each file adds its entries (internal to src/ir).
#pragma once

#include <string_view>
#include <vector>

#include "pypto_pro/hw_tables.h"
#include "pypto_pro/ir/op_registry.h"

namespace pypto_pro::ir {

// A table of hw_tables.h as the choices of an enum option (pipes, round modes, sync modes).
template <size_t N>
std::vector<std::string_view> Choices(const char* const (&table)[N]) {
  return std::vector<std::string_view>(std::begin(table), std::end(table));
}

void AddTransferOps(std::vector<OpDef>& ops);  // ops_transfer.cpp: load/store, move
void AddVectorOps(std::vector<OpDef>& ops);    // ops_vector.cpp: compute on Vec tiles
void AddCubeOps(std::vector<OpDef>& ops);      // ops_cube.cpp: matmul
void AddSyncOps(std::vector<OpDef>& ops);      // ops_sync.cpp: flags, mutexes, barriers, cross-core flags
void AddDebugOps(std::vector<OpDef>& ops);     // ops_debug.cpp: printf, pto_assert
void AddTileOps(std::vector<OpDef>& ops);      // ops_tile.cpp: tile descriptors, element writes
void AddRegisterOps(std::vector<OpDef>& ops);  // ops_registers.cpp: the vector mask, CTRL
void AddSsbufOps(std::vector<OpDef>& ops);     // ops_ssbuf.cpp: ssbuf_store / ssbuf_load

}  // namespace pypto_pro::ir
