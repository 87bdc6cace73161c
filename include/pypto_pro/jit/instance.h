// A compiled kernel instance: the pipeline from verified IR to a loaded call_kernel library.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/jit/compiler.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::jit {

// call_kernel_packed: every launcher argument as one 64-bit slot (tensors, scalars, DYNAMIC dims).
using PackedLauncher = int64_t (*)(uint32_t block_dim, void* stream, const uint64_t* slots);

struct CompileOptions {
  std::string arch = "a5";
  std::filesystem::path instance_dir;
  double timeout_seconds = 600;
  bool auto_mutex = true;
  bool sanitizer = false;  // instrument the kernel; launches append to <instance_dir>/pypto_sanitizer_report.txt
  bool profile = false;    // instrument the kernel for the performance model (pypto_pro.profiler)
  bool debug = false;      // -O0 -g with #line directives to the Python source (docs/jit.md#debugging)
  // The persistent cache (docs/jit.md#persistent-cache): a library compiled before, by any process,
  // is taken from here instead of compiling, and a new one is kept here. Empty: off.
  std::filesystem::path cache_dir;
  bool dump_ir = false;
  std::optional<passes::PipelineOptions> pipeline;  // pl.jit(pipeline=...)
  // More files to write, by path relative to instance_dir (e.g. "../datatype.json").
  std::vector<std::pair<std::string, std::string>> extra_files;
  // Polled while the compile waits (for a compiler slot, for the compiler): true stops it, the
  // compiler's process group is killed and BuildInstance throws CompileInterrupted.
  bool (*interrupted)() = nullptr;
  // The compilers' environment, taken when the compile was asked for (CaptureEnvironment); null: the
  // process's at each compiler run.
  Environment environment;
  // Called on the compiling thread when this compile starts building the precompiled routines
  // library, which it waits for (once per compiler, CPU and device headers; the progress line says so).
  void (*building_device_code)(void* context) = nullptr;
  void* building_device_code_context = nullptr;
};

// Milliseconds spent in each phase of the first launch of one signature.
struct CompileStats {
  double parse_ms = 0;  // the front end parsing the binding (measured by the launch path)
  double passes_ms = 0;
  double codegen_ms = 0;
  double write_ms = 0;
  double compile_ms = 0;
  double load_ms = 0;
  // Where the library came from without compiling: "" (compiled), "process" (the same code loaded
  // before in this process) or "cache" (the persistent cache).
  std::string reused;
  // The library compiles in the background while launches run on the tier-0 executor
  // (docs/jit.md#tier-0-first-launches); compile_ms and load_ms are that compile's once it is done.
  bool tier0 = false;
  // Why a library compiled here ran no launch on the tier-0 executor ("" when one did, or when the
  // library was reused): what the executor does not run, or what turned it off.
  std::string tier0_refused;
};

struct Tier0Program;

struct Instance {
  std::string kernel_name;
  std::filesystem::path dir;
  std::filesystem::path library;
  ir::KernelKind kind = ir::KernelKind::kVector;
  int num_slots = 0;  // launcher arguments after blockDim and stream
  // The tensor parameters some op of this instance writes, as indices among the tensor parameters
  // (the order of their launcher slots): a launch must be allowed to modify them.
  std::vector<int> written_tensors;
  bool has_assert = false;  // some pl.pto_assert: its launches pass PYPTO_PRO_ASSERT (SetSubmitAssertMode)
  std::filesystem::path sanitizer_report;  // sanitizer mode only
  std::vector<std::pair<Span, std::string>> warnings;  // what the passes warned about, for the front end
  PackedLauncher launch = nullptr;  // set once `compiled` (at once, unless a background compile runs)
  const PtoKernelDesc* desc = nullptr;
  CompileStats stats;  // compile_ms and load_ms under `mutex` while a background compile runs

  // Tier-0 (docs/jit.md#tier-0-first-launches): until the background compile has loaded the library,
  // launches run `tier0` on the routines library's executor (`tier0_desc`).
  std::atomic<bool> compiled{true};
  const Tier0Program* tier0 = nullptr;
  bool tier0_always = false;  // PYPTO_PRO_TIER0=always: launches keep to tier-0
  bool background_done = true;  // under `mutex`
  PtoKernelDesc tier0_desc{};
  mutable std::mutex mutex;
  std::exception_ptr background_error;  // what stopped the background compile (rethrown by launches)
  bool error_reported = false;          // it was raised to the user (else it is printed at exit)

  CompileStats Stats() const {
    std::lock_guard<std::mutex> lock(mutex);
    return stats;
  }
};

// Submits one launch of `inst`: its library's launcher, or its tier-0 program while that library
// compiles; rethrows what stopped a background compile.
int64_t Launch(Instance& inst, uint32_t block_dim, void* stream, const uint64_t* slots);

// Waits for `inst`'s background compile (if any) and rethrows what stopped it.
void WaitCompiled(Instance& inst);

// Waits for every background compile of this process (at exit: the artefacts are complete when the
// interpreter ends); returns the messages of those that failed and were never raised to the user.
std::vector<std::string> WaitForBackgroundCompiles();

// The host compiler failed; the instance directory keeps kernel.cpp and compile.log.
class CompileFailure : public std::runtime_error {
 public:
  CompileFailure(std::string message, std::string kernel, std::filesystem::path dir, std::string log)
      : std::runtime_error(std::move(message)), kernel(std::move(kernel)), dir(std::move(dir)), log(std::move(log)) {}
  std::string kernel;
  std::filesystem::path dir;
  std::string log;
};

// The compiler ran past its limit and was killed.
class CompileTimeout : public std::runtime_error {
 public:
  CompileTimeout(std::string message, std::string kernel, std::filesystem::path dir, double limit)
      : std::runtime_error(std::move(message)), kernel(std::move(kernel)), dir(std::move(dir)), limit(limit) {}
  std::string kernel;
  std::filesystem::path dir;
  double limit;
};

// CompileOptions::interrupted fired (Ctrl-C): the compiler was killed, nothing was published.
class CompileInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Passes (verifier after each), codegen, atomic artefact writes, compile, dlopen. Throws
// CompileDiagnostic for IR errors, CompileFailure / CompileTimeout for the host compiler.
std::shared_ptr<Instance> BuildInstance(ir::Function func, const CompileOptions& options);

// The compiler command line (without the output and input file names), for tests and docs; a debug
// build's compiles with -O0 -g instead of -O1.
std::vector<std::string> CompilerCommand(bool debug = false);

// The precompiled device code of plain kernels (the routines library and the headers,
// docs/jit.md#precompiled-device-headers-and-routines) for the configured compiler and flags, built
// now if missing: what the first compile on a machine builds otherwise. `built` says whether
// anything was. Returns their directory, or "" when precompiling is off (PYPTO_PRO_PCH=0) or the
// cache directory cannot be written; throws std::runtime_error with the compiler's output when the
// compiler fails or takes longer than `timeout_seconds`.
std::filesystem::path PrepareDeviceCode(double timeout_seconds, const Environment& environment, bool& built);

// The persistent cache's directory when only pl.jit(cache=True) asks for it: PYPTO_PRO_CACHE_DIR,
// else $XDG_CACHE_HOME/pypto_pro, else ~/.cache/pypto_pro.
std::filesystem::path DefaultCacheDir();
// What a cached library's name adds to its code's hash: the compiler's identity (the file PATH
// resolves PYPTO_PRO_CXX to, its size and modification time) and the host CPU's features (kernels are
// built with -march=native). "" when the compiler is not found.
std::string HostFingerprint();

}  // namespace pypto_pro::jit
