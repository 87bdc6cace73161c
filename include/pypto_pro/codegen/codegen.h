// Code generation: kernel.cpp (device code for the simulated cores) and call_kernel.cpp (the host
// launcher exporting call_kernel) from a verified, transformed kernel IR.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pypto_pro/ir/op_registry.h"
#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::codegen {

struct GeneratedSources {
  std::string kernel_cpp;
  std::string call_kernel_cpp;
  std::string tiling_header_name;  // "<Class>_tiling.h" when the kernel takes TilingData, else empty
  std::string tiling_header;
  ir::KernelKind kind = ir::KernelKind::kVector;
};

struct CodegenOptions {
  // Sanitizer mode (docs/device.md#sanitizer-mode): instrument every op, tile declaration and element
  // read, each launch appending its findings to this file. Empty: a plain kernel.
  std::string sanitizer_report;
  // Where pl.dump_data writes its .npy files (an absolute directory); empty: the kernel has none.
  std::string dump_dir;
  // Profile mode (docs/profiler.md): the sanitizer's hooks, recording for the performance model.
  bool profile = false;
  // Debug mode (docs/jit.md#debugging): #line directives mapping the kernel's code to its Python lines.
  bool debug = false;
};

GeneratedSources Generate(const ir::Function& func, const ArchModel& arch, const CodegenOptions& options = {});

// Every option of the op's device function in declaration order, each the IR's value or its default
// (dispatch and operand keywords select other ops and are not among them).
std::vector<std::pair<const ir::KwargSpec*, ir::Attr>> OpOptions(const ir::StmtNode& s);

// The fractal (NZ/ZN) tiles without compact=1 an op moves, each with the fault message of the run-time
// check that its window is whole (kernel.cpp checks them before the op; so does the tier-0 executor).
std::vector<std::pair<ir::Expr, std::string>> CompactWindowChecks(const ir::StmtNode& s);

// C++ storage type of a dtype in device code ("pto::half", "float", ...).
std::string DeviceType(ir::DataType dtype);

}  // namespace pypto_pro::codegen
