// Facts about a kernel's IR that the verifier, the passes, the code generator and the launcher
// all ask for: which cores run it, which parameters it writes, where each op executes.
#pragma once

#include <string>
#include <vector>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

// Which cores run the kernel: from its sections, or from the memories its ops touch when it has
// none (a kernel without sections that uses Vec tiles is a vector kernel).
KernelKind KernelKindOf(const Function& func);

// Whether every block of a launch must be resident at once: the kernel calls pl.system.sync_all or
// uses INTER_BLOCK cross-core flags (PTO_KERNEL_FLAG_RESIDENT).
bool NeedsResidentBlocks(const Function& func);
// Which parameters (by index) some op writes: the GM tensors a launch must be allowed to modify.
std::vector<bool> WrittenParams(const Function& func);

// The memory spaces of the tile operands of an op statement, in operand order.
std::vector<MemorySpace> TileMemories(const StmtNode& op_stmt);

// The memories of the cube core (everything but Vec and GM).
bool IsCubeMemory(MemorySpace m);

// The kind of core that executes an op: one entry per tile operand, decided by its memory; a move
// has one entry, the core that owns its pipe (Acc -> Vec is the cube core's fixpipe writing UB,
// Vec -> Mat the vector core's MTE3 writing L1).
struct CoreSide {
  bool cube = false;
  bool is_move = false;
  std::string what;  // for messages: "a Mat tile", "a move from Vec to Mat (pipe MTE3)"
};
std::vector<CoreSide> CoreSides(const StmtNode& op_stmt);

// Where a move writes when its data path crosses the cores of a mixed block: Acc -> Vec into the
// AIVs' UB (the AIC's fixpipe), Vec -> Mat into the AIC's L1 (an AIV's MTE3). kNone for every other
// op and path; outside mixed kernels no path crosses.
enum class CrossCoreWrite : uint8_t { kNone, kToVectorCores, kToCubeCore };
CrossCoreWrite CrossCoreWriteOf(const StmtNode& op_stmt);

// How a tile -> tile move places its source in its destination (docs/language.md#data-movement):
//   kCopy       the source's valid window at the destination's top-left;
//   kTranspose  the same, transposed: NZ <-> ZN tiles of swapped, non-square shapes;
//   kExtract    offset= on a source at least as large as the destination: the destination's valid
//               window read from the source at the offset;
//   kInsert     pl.insert, or offset= on a source that fits inside the destination (and no fixpipe
//               option): the source's valid window written into the destination at the offset;
//   kExtractTransposed  offset= between NZ and ZN tiles where only the transposed destination fits
//               the source: the transposed destination window read at the offset (source coordinates).
// The device's move functions derive the same from the tile types (cube_ops.h).
// How a tile -> tile move relates its tiles: a copy of the source's window; the transposed copy of an
// NZ <-> ZN move of swapped shapes; an extract of the destination's window at an offset (transposed
// between NZ and ZN tiles where only the transposed window fits); an insert of the source's window
// at an offset. UB -> L1 (Vec -> Mat) is always an insert, which copies the NZ source's fractal bytes
// as they are: into a ZN tile that is the transposed window (kInsertTransposed).
enum class MoveForm : uint8_t { kCopy, kTranspose, kExtract, kInsert, kExtractTransposed, kInsertTransposed };
MoveForm MoveFormOf(const StmtNode& move_stmt);
bool FitsInside(const TileType& inner, const TileType& outer);  // <= in both dims
bool TransposedLayouts(const TileType& a, const TileType& b);   // one NZ, the other ZN
// Tiles whose bytes are not in row-major order on the NPU: NZ/ZN (fractal) and DN tiles of more than
// one row and column. The simulator keeps every tile in logical row-major order, so two tile types
// read the same bytes as the same elements only if neither is reordered or they are the same view.
bool ReorderedBytes(const TileType& t);
bool SameView(const TileType& a, const TileType& b);  // same dtype, shape and layout

// Whether every option of an op statement is at its default (no order=, atomic=, relu, scale, phase).
bool DefaultOptions(const StmtNode& op_stmt);
// Whether an expression reads a tile element (tile[i, j], pl.getval).
bool ReadsTileElement(const Expr& e);
// Whether the slots of two tile declarations (make_tile / make_tile_group vars) may share bytes.
bool DeclarationsMayOverlap(const VarNode& a, const VarNode& b);

}  // namespace pypto_pro::ir
