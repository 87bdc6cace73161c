// The launch side of the generated code: the KernelArgs struct kernel.cpp reads its parameters
// from, and call_kernel.cpp, whose call_kernel / call_kernel_packed fill it. Both follow the one
// launcher-slot order of ir/launcher_slots.h, as the launch path does.
#pragma once

#include <string>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::codegen {

std::string ArgsStruct(const ir::Function& func);
std::string LauncherSource(const ir::Function& func);

}  // namespace pypto_pro::codegen
