// Structural and type checks of a kernel's IR. Runs after parsing and after every pass; a failure
// is a CompileDiagnostic pointing at the offending source line.
#pragma once

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

void Verify(const Function& func);

}  // namespace pypto_pro::ir
