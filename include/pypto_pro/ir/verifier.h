// Structural and type checks of a kernel's IR. Runs after parsing and after every pass; a failure
// is a CompileDiagnostic pointing at the offending source line.
#pragma once

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

void Verify(const Function& func);

// Which cores run the kernel: from its sections, or from the memories its ops touch when it has
// none (a kernel without sections that uses Vec tiles is a vector kernel).
KernelKind KernelKindOf(const Function& func);

// The memory spaces of the tile operands of an op statement, in operand order.
std::vector<MemorySpace> TileMemories(const StmtNode& op_stmt);

}  // namespace pypto_pro::ir
