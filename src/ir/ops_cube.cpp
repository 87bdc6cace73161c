// The cube unit: matmul on Left x Right into Acc, pipe M (LANGUAGE.md section 5).
#include "op_tables.h"

namespace pypto_pro::ir {

void AddCubeOps(std::vector<OpDef>&) {}

}  // namespace pypto_pro::ir
