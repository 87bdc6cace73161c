#include "pypto_pro/support/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace pypto_pro {

const std::vector<EnvVarSpec>& EnvVarTable() {
  static const std::vector<EnvVarSpec> table = {
      {"PYPTOPRO_JIT_ARCH", "a5",
       "Compile target used when @pl.jit has no arch=: a5 (Ascend 950), a3 or a2 (Ascend 910B/C)."},
      {"ASCEND_WORK_PATH", "",
       "When set, JIT artefacts go to $ASCEND_WORK_PATH/PYPTO_PRO/build/ instead of ./build/."},
      {"PYPTO_PRO_NUM_THREADS", "0",
       "Host threads that run kernel blocks; 0 = all cores of the machine."},
      {"PYPTO_PRO_DUMP_IR", "0",
       "1 = write the IR after parsing and after every pass into the instance directory (ir_*.txt)."},
      {"PYPTO_PRO_CXX", "g++", "Host C++ compiler used to build kernels."},
      {"PYPTO_PRO_CXXFLAGS", "", "Extra flags appended to the kernel compile command."},
      {"PYPTO_PRO_COMPILE_TIMEOUT", "600",
       "Compile time limit in seconds for kernels without compile_timeout=."},
      {"PYPTO_PRO_KERNEL_TIMEOUT", "0",
       "Seconds one launch may run before it is cancelled and raises pypto_pro.KernelTimeout; 0 = no limit."},
      {"PYPTO_PRO_DEVICE_INCLUDE", "",
       "Directory of the device headers kernel.cpp includes; empty = the ones of this checkout."},
      {"PYPTO_PRO_ASSERT", "print",
       "What a failed pl.pto_assert does: print (the NPU's behaviour: a line on stdout, the kernel goes on) or "
       "raise (the block ends with a pypto_pro.KernelFault carrying the message)."},
      {"PYPTO_PRO_CACHE_DIR", "",
       "When set, compiled kernel libraries are kept in this directory and reused across processes "
       "(pl.jit(cache=False) opts a kernel out; cache=True uses ~/.cache/pypto_pro when this is unset)."},
      {"PYPTO_PRO_DEBUG", "0",
       "1 = kernels without debug= build for debugging: -O0 -g, #line directives to their Python lines, "
       "blocks one at a time on one thread, and a gdb command line printed at the compile."},
      {"PYPTO_PRO_INTERPRET", "0",
       "1 = kernels declared without interpret= (and without datatype=) run in the interpreter: their "
       "Python on the host with numpy tiles, for pdb; nothing compiles."},
      {"PYPTO_PRO_PROGRESS", "auto",
       "The compile progress line on stderr: auto (only when stderr is a terminal), 1 (always), 0 (never)."},
      {"PYPTO_PRO_FUSE_ROWS", "1",
       "0 = run every op as written; 1 = the fusion passes: load -> op -> store runs from GM to GM, runs of "
       "row-local vector ops strip by strip, element-wise ops of one window in one pass, matmuls reading the "
       "Mat tile a move would copy into L0 or the GM window a load would copy into it (the same results, "
       "docs/device.md#direct-runs)."},
      {"PYPTO_PRO_PCH", "1",
       "0 = every kernel compile parses the device headers and compiles the GEMM and GM transfers inline; "
       "1 = both come precompiled, built once per compiler, flags and headers into the cache directory's "
       "pch/ (the same code, less compile time)."},
      {"PYPTO_PRO_TIER0", "1",
       "0 = a first launch waits for its kernel's library; 1 = a kernel the tier-0 executor runs "
       "launches at once on it while the library compiles in the background (the same results); always = "
       "every launch of such a kernel runs on the tier-0 executor (the library is still built)."},
      {"PYPTO_PRO_TRACEBACK", "short",
       "full = a kernel's parse error keeps the parser's frames in its traceback (short: it ends at the "
       "launch, the message pointing at the kernel's line)."},
      {"PYPTO_PRO_TORCH_ATTRIBUTE_PATH", "0",
       "1 = read torch tensors through Python attributes even when libpypto_torch_args.so is built."},
  };
  return table;
}

static const EnvVarSpec& Lookup(std::string_view name) {
  const auto& table = EnvVarTable();
  auto it = std::find_if(table.begin(), table.end(), [&](const EnvVarSpec& s) { return s.name == name; });
  if (it == table.end()) throw std::logic_error("undeclared environment variable " + std::string(name));
  return *it;
}

std::string GetEnv(std::string_view name) {
  const EnvVarSpec& spec = Lookup(name);
  const char* value = std::getenv(std::string(name).c_str());
  if (value != nullptr && value[0] != '\0') return value;
  return std::string(spec.default_value);
}

long GetEnvInt(std::string_view name) {
  std::string value = GetEnv(name);
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || parsed < 0 || errno == ERANGE) {
    throw std::invalid_argument("environment variable " + std::string(name) +
                                " must be a non-negative integer, got '" + value + "'");
  }
  return parsed;
}

double GetEnvSeconds(std::string_view name, bool zero_allowed) {
  std::string value = GetEnv(name);
  char* end = nullptr;
  double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(parsed) || parsed < 0 || (parsed == 0 && !zero_allowed)) {
    throw std::invalid_argument("environment variable " + std::string(name) + " must be a number of seconds " +
                                (zero_allowed ? ">= 0 (0 = no limit)" : "> 0") + ", got '" + value + "'");
  }
  return parsed;
}

bool GetEnvFlag(std::string_view name) {
  std::string value = GetEnv(name);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  throw std::invalid_argument("environment variable " + std::string(name) +
                              " must be 1/true/yes/on or 0/false/no/off, got '" + GetEnv(name) + "'");
}

}  // namespace pypto_pro
