// Structural and type checks of a kernel's IR. Runs after parsing and after every pass; a failure
// is a CompileDiagnostic pointing at the offending source line.
#pragma once

#include <string>
#include <vector>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

void Verify(const Function& func);

// Which cores run the kernel: from its sections, or from the memories its ops touch when it has
// none (a kernel without sections that uses Vec tiles is a vector kernel).
KernelKind KernelKindOf(const Function& func);

// Which parameters (by index) some op writes: the GM tensors a launch must be allowed to modify.
std::vector<bool> WrittenParams(const Function& func);

// The memory spaces of the tile operands of an op statement, in operand order.
std::vector<MemorySpace> TileMemories(const StmtNode& op_stmt);

// The kind of core that executes an op: one entry per tile operand, decided by its memory; a move
// has one entry, the core that owns its pipe (Acc -> Vec is the cube core's fixpipe writing UB,
// Vec -> Mat the vector core's MTE3 writing L1).
struct CoreSide {
  bool cube = false;
  bool is_move = false;
  std::string what;  // for messages: "a Mat tile", "a move from Vec to Mat (pipe MTE3)"
};
std::vector<CoreSide> CoreSides(const StmtNode& op_stmt);

}  // namespace pypto_pro::ir
