#include "pypto_pro/jit/instance.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <semaphore>
#include <thread>
#include <sstream>

#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/jit/artefacts.h"
#include "pypto_pro/jit/compiler.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/config.h"
#include "pypto_pro/support/sha256.h"

#ifndef PYPTO_PRO_DEVICE_INCLUDE_DIR
#error "the build must define PYPTO_PRO_DEVICE_INCLUDE_DIR"
#endif

namespace pypto_pro::jit {

namespace fs = std::filesystem;

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string DeviceIncludeDir() {
  std::string dir = GetEnv("PYPTO_PRO_DEVICE_INCLUDE");
  return dir.empty() ? std::string(PYPTO_PRO_DEVICE_INCLUDE_DIR) : dir;
}

std::vector<std::string> SplitFlags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  for (std::string flag; in >> flag;) out.push_back(flag);
  return out;
}

// Concurrent compiles (several signatures, several kernels) are bounded by the core count: more
// compiler processes than cores only add memory pressure.
ProcessResult RunCompilerBounded(const std::vector<std::string>& cmd, const fs::path& dir, double timeout) {
  static std::counting_semaphore<1024> slots(std::clamp<ptrdiff_t>(std::thread::hardware_concurrency(), 1, 1024));
  slots.acquire();
  struct Release {
    ~Release() { slots.release(); }
  } release;
  return RunProcess(cmd, dir, timeout);
}

// SHA-256 over the device headers' names and contents (a few dozen KiB: well under a millisecond).
std::string DeviceHeadersDigest() {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(DeviceIncludeDir(), ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    all += file.string() + '\0' + std::string(std::istreambuf_iterator<char>(in), {}) + '\0';
  }
  return Sha256Hex(all);
}

}  // namespace

std::vector<std::string> CompilerCommand() {
  // -O1: a first launch is mostly compile time; the device code's hot loops are explicit 16-lane
  // vectors and need no vectoriser, and gemm.h asks for -O3 itself (its register tile needs it).
  // -fwrapv: scalar int arithmetic wraps like the device's; -ffp-contract=off: a * b + c rounds twice,
  // as two device ops do (fused ops use explicit FMAs); -march=native: the JIT runs where it compiles.
  std::vector<std::string> cmd = {GetEnv("PYPTO_PRO_CXX"), "-std=c++20", "-O1", "-march=native", "-fPIC",
                                  "-shared", "-pipe", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", "-fvisibility=hidden",
                                  "-I" + DeviceIncludeDir()};
  for (std::string& flag : SplitFlags(GetEnv("PYPTO_PRO_CXXFLAGS"))) cmd.push_back(std::move(flag));
  return cmd;
}

std::shared_ptr<Instance> BuildInstance(ir::Function func, const CompileOptions& options) {
  const ArchModel* arch = FindArch(options.arch);
  if (!arch) {
    Fail(ErrorKind::kValue, {}, "unknown arch '" + options.arch + "'; known: " + ArchNamesJoined());
  }
  auto inst = std::make_shared<Instance>();
  inst->kernel_name = func.name;
  inst->dir = options.instance_dir;
  fs::create_directories(inst->dir);

  auto t0 = std::chrono::steady_clock::now();
  passes::PassContext ctx;
  ctx.arch = arch;
  ctx.auto_mutex = options.auto_mutex;
  int dump_index = 0;
  passes::RunPipeline(func, ctx, [&](std::string_view pass, const ir::Function& f) {
    if (!options.dump_ir) return;
    WriteFileAtomic(inst->dir / ("ir_" + std::to_string(dump_index++) + "_" + std::string(pass) + ".txt"),
                    ir::Print(f));
  });
  inst->stats.passes_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  codegen::CodegenOptions codegen_options;
  if (options.sanitizer) {
    // Each process starts its own report: instances are never shared between processes.
    inst->sanitizer_report = fs::absolute(inst->dir / "pypto_sanitizer_report.txt");
    codegen_options.sanitizer_report = inst->sanitizer_report.string();
    std::error_code ignored;
    fs::remove(inst->sanitizer_report, ignored);
  }
  codegen::GeneratedSources sources = codegen::Generate(func, *arch, codegen_options);
  inst->kind = sources.kind;
  inst->num_slots = int(func.params.size()) + func.NumDynamicDims();
  const std::vector<bool> written = ir::WrittenParams(func);
  for (size_t p = 0, tensor = 0; p < func.params.size(); ++p) {
    if (!func.params[p]->type.IsTensor()) continue;
    if (written[p]) inst->written_tensors.push_back(int(tensor));
    ++tensor;
  }
  inst->stats.codegen_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  WriteFileAtomic(inst->dir / "kernel.cpp", sources.kernel_cpp);
  WriteFileAtomic(inst->dir / "call_kernel.cpp", sources.call_kernel_cpp);
  if (!sources.tiling_header_name.empty()) {
    WriteFileAtomic(inst->dir / sources.tiling_header_name, sources.tiling_header);
  }
  for (const auto& [relative, content] : options.extra_files) WriteFileAtomic(inst->dir / relative, content);
  std::vector<std::string> cmd = CompilerCommand();
  // The library's name covers everything that shapes its code, device headers included: a kernel
  // compiled against other headers (another checkout, an edited header) must not reuse the name of
  // one already loaded in this process or written by another.
  std::string fingerprint = sources.kernel_cpp + '\0' + sources.call_kernel_cpp + '\0' + sources.tiling_header + '\0' +
                            DeviceHeadersDigest() + '\0';
  for (const std::string& part : cmd) fingerprint += part + ' ';
  std::string so_name = "call_kernel_" + Sha256Hex(fingerprint).substr(0, 12) + ".so";
  inst->library = fs::absolute(inst->dir / so_name);
  inst->stats.write_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  std::string tmp_name = so_name + TempSuffix();
  cmd.push_back("-o");
  cmd.push_back(tmp_name);
  cmd.push_back("call_kernel.cpp");
  ProcessResult run = RunCompilerBounded(cmd, inst->dir, options.timeout_seconds);
  inst->stats.compile_ms = MsSince(t0);
  std::error_code ignored;
  if (run.timed_out) {
    fs::remove(inst->dir / tmp_name, ignored);
    std::ostringstream msg;
    msg << "compiling kernel '" << func.name << "' took longer than its compile_timeout of " << options.timeout_seconds
        << " s and was stopped; instance directory: " << inst->dir.string();
    throw CompileTimeout(msg.str(), func.name, inst->dir, options.timeout_seconds);
  }
  if (!run.started || run.exit_code != 0) {
    fs::remove(inst->dir / tmp_name, ignored);
    WriteFileAtomic(inst->dir / "compile.log", run.output);
    std::ostringstream msg;
    msg << "the host compiler failed on kernel '" << func.name << "' (exit code " << run.exit_code
        << "); see " << (inst->dir / "kernel.cpp").string() << " and " << (inst->dir / "compile.log").string()
        << "\n" << run.output;
    throw CompileFailure(msg.str(), func.name, inst->dir, run.output);
  }
  fs::rename(inst->dir / tmp_name, inst->library);
  fs::remove(inst->dir / "compile.log", ignored);  // a log of an earlier failed attempt would mislead

  t0 = std::chrono::steady_clock::now();
  void* handle = ::dlopen(inst->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = ::dlerror();
    throw CompileFailure("cannot load " + inst->library.string() + ": " + (err ? err : "?"), func.name, inst->dir, "");
  }
  // Never dlclose: queued launches may still point into the library.
  inst->launch = reinterpret_cast<PackedLauncher>(::dlsym(handle, "call_kernel_packed"));
  auto get_desc = reinterpret_cast<const PtoKernelDesc* (*)()>(::dlsym(handle, "pypto_kernel_desc"));
  if (!inst->launch || !get_desc || !get_desc() || get_desc()->abi_version != PTO_ABI_VERSION) {
    throw CompileFailure(inst->library.string() + " is not a pypto_pro kernel library of ABI version " +
                             std::to_string(PTO_ABI_VERSION),
                         func.name, inst->dir, "");
  }
  inst->desc = get_desc();
  inst->stats.load_ms = MsSince(t0);
  return inst;
}

}  // namespace pypto_pro::jit
