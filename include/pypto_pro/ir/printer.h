// Python-like text of the IR, for dumps (PYPTO_PRO_DUMP_IR) and golden tests.
#pragma once

#include <string>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

std::string Print(const Expr& expr);
std::string Print(const Stmt& stmt, int indent = 0);
std::string Print(const Function& func);

}  // namespace pypto_pro::ir
