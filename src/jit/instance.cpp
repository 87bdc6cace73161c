#include "pypto_pro/jit/instance.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <cerrno>
#include <map>
#include <set>
#include <mutex>
#include <thread>
#include <sstream>

#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/codegen/python_writer.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/launcher_slots.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/jit/artefacts.h"
#include "pypto_pro/jit/compiler.h"
#include "pypto_pro/jit/tier0.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/config.h"
#include "pypto_pro/support/fork.h"
#include "pypto_pro/support/sha256.h"
#include "pypto_pro/support/text.h"

#ifndef PYPTO_PRO_DEVICE_INCLUDE_DIR
#error "the build must define PYPTO_PRO_DEVICE_INCLUDE_DIR"
#endif

namespace pypto_pro::jit {

namespace fs = std::filesystem;

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The device headers kernels include: PYPTO_PRO_DEVICE_INCLUDE, else those installed with the
// package (device_include/ next to the library this code is linked into: pip install), else the
// checkout's this was built from.
std::string DeviceIncludeDir() {
  std::string dir = GetEnv("PYPTO_PRO_DEVICE_INCLUDE");
  if (!dir.empty()) return dir;
  static const std::string found = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&DeviceIncludeDir), &info) && info.dli_fname) {
      const fs::path installed = fs::path(info.dli_fname).parent_path() / "device_include";
      std::error_code ec;
      if (fs::is_regular_file(installed / "pypto_pro" / "device.h", ec)) return installed.string();
    }
    return std::string(PYPTO_PRO_DEVICE_INCLUDE_DIR);
  }();
  return found;
}

std::vector<std::string> SplitFlags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  for (std::string flag; in >> flag;) out.push_back(flag);
  return out;
}

// Concurrent compiles (several signatures, several kernels) are bounded by the core count: more
// compiler processes than cores only add memory pressure. The wait for a slot is interruptible, and
// a forked child starts with every slot free (compiles of the parent's other threads are not its own).
class CompileSlots {
 public:
  CompileSlots() { ResetInForkedChild(&mutex_); }
  bool Acquire(bool (*interrupted)()) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (generation_ != ForkGeneration()) {
          generation_ = ForkGeneration();
          free_ = Capacity();
        }
        if (free_ > 0) {
          --free_;
          return true;
        }
      }
      if (interrupted && interrupted()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // compiles take 100+ ms
    }
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation_ == ForkGeneration()) ++free_;
  }

 private:
  static int Capacity() { return std::max(1, int(std::thread::hardware_concurrency())); }
  std::mutex mutex_;
  uint64_t generation_ = ForkGeneration();
  int free_ = Capacity();
};

ProcessResult RunCompilerBounded(const std::vector<std::string>& cmd, const fs::path& dir, double timeout,
                                 const CompileOptions& options) {
  bool (*interrupted)() = options.interrupted;
  static CompileSlots* slots = new CompileSlots();
  if (!slots->Acquire(interrupted)) {
    ProcessResult result;
    result.interrupted = true;
    return result;
  }
  struct Release {
    ~Release() { slots->Release(); }
  } release;
  return RunProcess(cmd, dir, timeout, interrupted, options.environment);
}

// The files one compile leaves in an instance directory; a published set replaces all of them.
bool IsInstanceFile(const std::string& name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name == "kernel.cpp" || name == "call_kernel.cpp" || name == "compile.log" ||
         name == "pipeline_generated.py" || ends_with("_tiling.h") ||
         (name.rfind("ir_", 0) == 0 && ends_with(".txt")) || (name.rfind("call_kernel_", 0) == 0 && ends_with(".so"));
}

// A directory of one compile inside the instance directory: its sources and library, invisible to
// every other compile until Publish() moves them in. Removed with whatever is left in it.
class PrivateDir {
 public:
  // Absolute paths: a compile in the background must not follow the process's later chdir.
  explicit PrivateDir(const fs::path& instance_dir)
      : instance_dir_(fs::absolute(instance_dir)), path_(instance_dir_ / (".build" + TempSuffix())) {
    CreateArtefactDir(path_);
  }
  ~PrivateDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  const fs::path& path() const { return path_; }

  void Write(const std::string& name, const std::string& content) { WriteFileAtomic(path_ / name, content); }

  // Moves `names` into the instance directory as one set, under a lock of that directory, and
  // removes the files of an earlier instance the set does not have: readers of the directory find
  // one complete instance, never the sources of one and the library of another. `copy`: copies
  // instead (the sources published at once while they compile in the background).
  void Publish(const std::vector<std::string>& names, const std::string& library, bool copy = false) {
    int fd = ::open(instance_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw ArtefactDirError("cannot open " + instance_dir_.string(), instance_dir_);
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }  // closing releases the lock
    } unlock{fd};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(instance_dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (IsInstanceFile(name) && std::find(names.begin(), names.end(), name) == names.end()) {
        fs::remove(entry.path(), ec);
      }
    }
    // The library last: a directory with a library always has its sources.
    for (const std::string& name : names) {
      if (name != library) Move(name, copy);
    }
    if (!library.empty()) Move(library, copy);
  }

 private:
  void Move(const std::string& name, bool copy) {
    std::error_code ec;
    if (copy) {  // a private copy renamed into place: readers see a whole file
      const fs::path temp = instance_dir_ / (".tmp" + TempSuffix() + "_" + name);
      fs::copy_file(path_ / name, temp, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(temp, instance_dir_ / name, ec);
      std::error_code ignored;
      if (ec) fs::remove(temp, ignored);
    } else {
      fs::rename(path_ / name, instance_dir_ / name, ec);
    }
    if (ec) throw ArtefactDirError("cannot move " + name + " into " + instance_dir_.string() + ": " + ec.message(),
                                   instance_dir_);
  }

  fs::path instance_dir_;
  fs::path path_;
};

// The device headers' names and contents as one digest: a kernel compiled against other headers never reuses a library.
std::string DeviceHeadersDigest() {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(DeviceIncludeDir(), ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  // Each file's contents by std::hash (GB/s; SHA-256 of the ~300 KB took 1.7 ms of a cached new
  // process's first launch), names and those hashes by SHA-256. An accidental collision between two
  // versions of a file is a 2^-64 chance.
  std::string all;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream content;  // whole-buffer reads: a third of the time of a character iterator
    content << in.rdbuf();
    all += file.string() + '\0' + std::to_string(std::hash<std::string_view>{}(content.view())) + '\0';
  }
  return Sha256Hex(all);
}

}  // namespace

std::vector<std::string> CompilerCommand(bool debug) {
  // -O1: a first launch is mostly compile time; the device code's hot loops are explicit 16-lane
  // vectors and need no vectoriser, and gemm.h asks for -O3 itself (its register tile needs it).
  // -fwrapv: scalar int arithmetic wraps like the device's; -ffp-contract=off: a * b + c rounds twice,
  // as two device ops do (fused ops use explicit FMAs); -march=native: the JIT runs where it compiles.
  std::vector<std::string> cmd = {GetEnv("PYPTO_PRO_CXX"), "-std=c++20", "-O1", "-march=native", "-fPIC",
                                  "-shared", "-pipe", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", "-fvisibility=hidden",
                                  "-I" + DeviceIncludeDir()};
  if (debug) {  // what a debugger needs: no optimisation, full debug information
    cmd[2] = "-O0";
    cmd.insert(cmd.begin() + 3, "-g");
  }
  for (std::string& flag : SplitFlags(GetEnv("PYPTO_PRO_CXXFLAGS"))) cmd.push_back(std::move(flag));
  return cmd;
}

// The pipeline_generated.py artefact: the kernel after the pipeline pass as a plain kernel (the
// decorator's other options kept; auto_mutex still orders the pipes within each core).
std::string PipelineGeneratedPython(const ir::Function& func, const CompileOptions& options) {
  codegen::PythonKernelOptions py;
  py.header = {
      "pipeline_generated.py: kernel '" + func.name + "' of " + func.source_file + " as pl.jit(pipeline=",
      "pl.pipeline.PipelineConfig(preload=" + std::to_string(options.pipeline->preload) +
          ", sync_only=" + (options.pipeline->sync_only ? "True" : "False") +
          ")) scheduled it, written by pypto_pro (docs/language.md#pipeline).",
      "A plain kernel: the stages in the order the cores run them, every cross-core flag written out.",
      "The constants of this compile instance (TilingKey fields, datatype, STATIC dims) are folded in.",
      "Launch it like the original: " + func.name + "_generated[stream, block_dim](<the same arguments>); its",
      "own name keeps its artefacts apart from the original's, so this file survives its compiles."};
  py.function_name = func.name + "_generated";
  py.decorator_args = std::string("auto_mutex=") + (options.auto_mutex ? "True" : "False") + ", arch=" +
                      QuotedLiteral(options.arch);
  return codegen::KernelAsPython(func, py);
}

namespace {

// ---- libraries without a compile (docs/jit.md#persistent-cache) ----

// Libraries this process has loaded, by name (the hash of everything that shapes their code): a
// kernel object made again from the same function reuses its library instead of compiling it again.
struct LoadedLibrary {
  void* handle = nullptr;
  fs::path path;  // where it was published (copied into a new instance directory from there)
};
std::mutex& LoadedMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::map<std::string, LoadedLibrary>& Loaded() {
  static auto* loaded = new std::map<std::string, LoadedLibrary>();
  return *loaded;
}

// Copies `from` to `to` (a new file); false when that fails (the caller compiles instead).
bool CopyLibrary(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  return fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec) && !ec;
}

// Keeps `library` in the cache as `cached`: a copy under a private name, renamed into place, so
// processes sharing the cache only ever see complete libraries (the same name is the same code,
// whoever renames last).
void StoreInCache(const fs::path& library, const fs::path& cached) {
  const fs::path temp = cached.parent_path() / (".tmp" + TempSuffix() + ".so");
  std::error_code ec;
  if (!fs::copy_file(library, temp, ec) || ec) {
    fs::remove(temp, ec);
    throw ArtefactDirError("cannot write the kernel cache " + cached.parent_path().string() + ": " + ec.message(),
                           cached.parent_path());
  }
  fs::rename(temp, cached, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw ArtefactDirError("cannot write the kernel cache " + cached.parent_path().string(), cached.parent_path());
  }
}

}  // namespace

fs::path DefaultCacheDir() {
  const std::string configured = GetEnv("PYPTO_PRO_CACHE_DIR");
  if (!configured.empty()) return fs::absolute(configured);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "pypto_pro";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "pypto_pro";
}

namespace {

// The compiler's identity without running it (`--version` costs a new process milliseconds of its
// first launch): the file PATH resolves it to, with its size and modification time, which a
// package upgrade changes (ccache identifies compilers the same way by default). "" when not found.
std::string CompilerIdentity(const std::string& compiler) {
  fs::path found;
  if (compiler.find('/') != std::string::npos) {
    found = compiler;
  } else {
    const char* path_env = std::getenv("PATH");
    std::stringstream dirs(path_env ? path_env : "/bin:/usr/bin");  // execvp's default
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const fs::path candidate = fs::path(dir.empty() ? "." : dir) / compiler;
      if (::access(candidate.c_str(), X_OK) == 0) {
        found = candidate;
        break;
      }
    }
  }
  std::error_code ec;
  const fs::path real = found.empty() ? fs::path() : fs::canonical(found, ec);
  struct stat st {};
  if (real.empty() || ec || ::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return real.string() + '\0' + std::to_string(st.st_size) + '\0' + std::to_string(st.st_mtim.tv_sec) + '.' +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

std::string HostFingerprint() {
  static std::mutex mutex;
  static std::map<std::string, std::string> by_compiler;
  const std::string compiler = GetEnv("PYPTO_PRO_CXX");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = by_compiler.find(compiler);
  if (it != by_compiler.end()) return it->second;
  const std::string identity = CompilerIdentity(compiler);
  std::string flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      flags = line;
      break;
    }
  }
  return by_compiler[compiler] = identity.empty() ? "" : Sha256Hex(identity + '\0' + flags).substr(0, 12);
}

namespace {

// ---- device code precompiled once (docs/jit.md#precompiled-device-headers-and-routines) ----

// Where the device code precompiled for `cmd` lives: pch/<hash of the compiler's identity and the
// CPU's features, the flags and the device headers' contents> of the cache directory; "" with
// PYPTO_PRO_PCH=0 or no compiler found.
fs::path PrecompiledDir(const std::vector<std::string>& cmd, const std::string& headers_digest) {
  if (!GetEnvFlag("PYPTO_PRO_PCH")) return {};
  const std::string host = HostFingerprint();
  if (host.empty()) return {};
  std::string key = host + '\0' + headers_digest + '\0';
  for (const std::string& part : cmd) key += part + '\0';
  return DefaultCacheDir() / "pch" / Sha256Hex(key).substr(0, 16);
}

// `target` if it exists, else built by `argv` plus "-o <a private name>" and renamed into place
// (concurrent processes see a whole file or none); false when it cannot be built or stored. `run`:
// the compiler run when one was needed (interrupted or out of time, it stops the kernel's compile
// as its own would).
bool EnsurePrecompiled(const fs::path& target, std::vector<std::string> argv, const CompileOptions& options,
                       double seconds_left, ProcessResult& run) {
  std::error_code ec;
  if (fs::is_regular_file(target, ec)) return true;
  fs::create_directories(target.parent_path(), ec);
  if (ec) return false;
  const fs::path temp = target.parent_path() / (".tmp" + TempSuffix() + target.extension().string());
  argv.insert(argv.end(), {"-o", temp.string()});
  run = RunCompilerBounded(argv, target.parent_path(), seconds_left, options);
  if (run.started && !run.timed_out && !run.interrupted && run.exit_code == 0 && fs::is_regular_file(temp, ec)) {
    fs::rename(temp, target, ec);
    if (!ec) return true;
  }
  fs::remove(temp, ec);
  return false;
}

// Whether `dir` (a PrecompiledDir) holds pypto_pro/precompiled.h.gch (device.h and all it includes)
// for the kernel compile `cmd`, built now if missing (~0.1 s). Parsing the headers is ~30 ms of every
// kernel compile; g++ reads a precompiled header instead where the compiled file's first #include
// names it and the .gch sits in an include directory searched before the headers' own. g++ checks a
// precompiled header against the compile's options itself and parses the header when they differ:
// it changes speed, never code.
bool EnsurePrecompiledHeader(const fs::path& dir, const std::vector<std::string>& cmd, const CompileOptions& options,
                             double seconds_left, ProcessResult& run) {
  std::vector<std::string> argv;
  for (const std::string& part : cmd) {
    if (part != "-shared") argv.push_back(part);
  }
  argv.insert(argv.end(), {"-x", "c++-header", DeviceIncludeDir() + "/pypto_pro/precompiled.h"});
  return EnsurePrecompiled(dir / "pypto_pro" / "precompiled.h.gch", argv, options, seconds_left, run);
}

// What a kernel that calls the routines library (instead of compiling them) is compiled with.
constexpr const char* kExternRoutines = "-DPTO_EXTERN_ROUTINES";

// A set of precompiled device code (a PrecompiledDir) that no compile used for this long is removed
// when another set is built: one ~10 MB set per compiler, flags and header version would pile up.
// A set's modification time is its last use (EnsurePrecompiledRoutines touches it).
constexpr auto kUnusedSetLifetime = std::chrono::hours(24 * 30);

// Removes the sets beside `dir` unused for kUnusedSetLifetime. A process still running with one
// keeps what it loaded (unlinked files stay mapped); its next compile builds the set again.
void RemoveUnusedSets(const fs::path& dir) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(dir.parent_path(), ec)) {
    std::error_code entry_ec;
    if (entry.path() == dir || !entry.is_directory(entry_ec)) continue;
    const auto used = fs::last_write_time(entry.path(), entry_ec);
    if (!entry_ec && now - used > kUnusedSetLifetime) fs::remove_all(entry.path(), entry_ec);
  }
}

// The stop flag of the routines library's part compiles on this thread (EnsurePrecompiledRoutines).
thread_local const std::atomic<bool>* tls_stop_parts = nullptr;

// `dir`/libpto_routines.so built with the kernels' `cmd` if missing, or "" when it cannot be: the
// GEMM, GM <-> tile transfers, moves, common vector ops of every element type and the tier-0 executor
// (device_include/pypto_pro/routines/). A kernel compiled with -DPTO_EXTERN_ROUTINES and linked to it
// calls them there instead of compiling them (~65 ms of the add example's compile, ~170 ms of the
// matmul example's). Each .cpp file of the directory is one part, compiled concurrently (as many at
// a time as compile slots; 22-25 s of compiler time here, 11-14 s on two CPUs) and then linked; the
// library is renamed into place whole. `run`: the first compiler run that failed or was stopped.
fs::path EnsurePrecompiledRoutines(const fs::path& dir, const std::vector<std::string>& cmd,
                                   const CompileOptions& options, double seconds_left, ProcessResult& run) {
  const fs::path lib = dir / "libpto_routines.so";
  std::error_code ec;
  if (fs::is_regular_file(lib, ec)) {
    fs::last_write_time(dir, fs::file_time_type::clock::now(), ec);  // used now (RemoveUnusedSets)
    return lib;
  }
  std::vector<fs::path> parts;
  for (const auto& entry : fs::directory_iterator(fs::path(DeviceIncludeDir()) / "pypto_pro" / "routines", ec)) {
    if (entry.path().extension() == ".cpp") parts.push_back(entry.path());
  }
  std::sort(parts.begin(), parts.end());
  const fs::path objects = dir / (".routines" + TempSuffix());
  fs::create_directories(objects, ec);
  if (ec || parts.empty()) return {};
  RemoveUnusedSets(dir);
  if (options.building_device_code) options.building_device_code(options.building_device_code_context);
  struct RemoveObjects {
    const fs::path& path;
    ~RemoveObjects() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } remove_objects{objects};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_left);
  auto left = [&] { return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count(); };
  std::vector<std::string> link = cmd;
  std::vector<ProcessResult> runs(parts.size());
  {
    // Only this thread may poll `interrupted` (Python sees signals on its main thread): it stops the
    // part compiles through their own flag.
    std::atomic<bool> stop{false};
    std::atomic<size_t> finished{0};
    CompileOptions part_options = options;
    part_options.interrupted = [] { return tls_stop_parts != nullptr && tls_stop_parts->load(); };
    std::vector<std::thread> compiles;
    for (size_t i = 0; i < parts.size(); ++i) {
      std::vector<std::string> argv;
      for (const std::string& flag : cmd) {
        if (flag != "-shared") argv.push_back(flag);
      }
      const std::string object = (objects / (parts[i].stem().string() + ".o")).string();
      argv.insert(argv.end(), {"-c", parts[i].string(), "-o", object});
      link.push_back(object);
      compiles.emplace_back([&, i, argv = std::move(argv)] {
        tls_stop_parts = &stop;
        runs[i] = RunCompilerBounded(argv, objects, left(), part_options);
        ++finished;
      });
    }
    while (finished < parts.size()) {
      if (options.interrupted && options.interrupted()) stop = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (std::thread& compile : compiles) compile.join();
  }
  for (const ProcessResult& part : runs) {
    if (!part.started || part.timed_out || part.interrupted || part.exit_code != 0) {
      run = part;
      return {};
    }
  }
  link.push_back("-Wl,-z,defs");  // a routine a part calls but no part defines fails here, not at a dlopen
  return EnsurePrecompiled(lib, link, options, left(), run) ? lib : fs::path();
}

// What is left of compile_timeout, which bounds all the compiler runs of one compile together.
double SecondsLeft(const CompileOptions& options, std::chrono::steady_clock::time_point start) {
  return options.timeout_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Throws what a stopped compiler run means for the kernel's compile: CompileInterrupted or
// CompileTimeout.
void ThrowIfStopped(const ProcessResult& run, const ir::Function& func, const Instance& inst,
                    const CompileOptions& options) {
  if (run.interrupted) throw CompileInterrupted("compiling kernel '" + func.name + "' was interrupted");
  if (run.timed_out) {
    std::ostringstream msg;
    msg << "compiling kernel '" << func.name << "' took longer than its compile_timeout of " << options.timeout_seconds
        << " s and was stopped; instance directory: " << inst.dir.string();
    throw CompileTimeout(msg.str(), func.name, inst.dir, options.timeout_seconds);
  }
}

// Runs the host compiler on the private directory's sources into `so_name`; throws CompileFailure
// (publishing the sources and compile.log), CompileTimeout or CompileInterrupted.
// `link`: what follows the source on the command line (the routines library); `precompiled`: the
// PrecompiledDir whose header this compile reads, or "". compile_timeout bounds all the compiler runs
// of the compile together, from `start`.
void CompileLibrary(const ir::Function& func, const std::shared_ptr<Instance>& inst, PrivateDir& build,
                    std::vector<std::string> cmd, const std::vector<std::string>& link, const fs::path& precompiled,
                    const std::string& so_name, std::vector<std::string>& published, const CompileOptions& options,
                    std::chrono::steady_clock::time_point start) {
  auto compile = [&](const std::vector<std::string>& argv) {
    return RunCompilerBounded(argv, build.path(), SecondsLeft(options, start), options);
  };
  ProcessResult run;
  const bool with_header =
      !precompiled.empty() && EnsurePrecompiledHeader(precompiled, cmd, options, SecondsLeft(options, start), run);
  const fs::path pch = with_header ? precompiled : fs::path();
  cmd.push_back("-o");
  cmd.push_back(so_name);
  cmd.push_back("call_kernel.cpp");
  cmd.insert(cmd.end(), link.begin(), link.end());
  // The precompiled headers' directory goes before the device headers' own. A compile that fails
  // with it runs again without: a damaged .gch (g++ rejects only mismatched ones quietly) is removed
  // when the headers alone compile, and a real error is reported as the headers alone give it.
  if (run.interrupted || run.timed_out) {
    // building the precompiled headers was stopped: so is this compile
  } else if (!pch.empty()) {
    std::vector<std::string> with_pch = cmd;
    with_pch.insert(std::find(with_pch.begin(), with_pch.end(), "-I" + DeviceIncludeDir()), "-I" + pch.string());
    run = compile(with_pch);
    if (run.started && !run.timed_out && !run.interrupted && run.exit_code != 0) {
      run = compile(cmd);
      std::error_code ec;
      if (run.started && run.exit_code == 0) fs::remove(pch / "pypto_pro" / "precompiled.h.gch", ec);
    }
  } else {
    run = compile(cmd);
  }
  ThrowIfStopped(run, func, *inst, options);
  std::error_code ec;
  const bool wrote_library = run.started && run.exit_code == 0 && fs::is_regular_file(build.path() / so_name, ec);
  if (!wrote_library) {
    std::ostringstream msg;
    if (run.started && run.exit_code == 0) {
      msg << "the host compiler '" << cmd[0] << "' exited with code 0 on kernel '" << func.name
          << "' but wrote no library (" << so_name << "); check PYPTO_PRO_CXX and PYPTO_PRO_CXXFLAGS";
    } else {
      msg << "the host compiler failed on kernel '" << func.name << "' (exit code " << run.exit_code << ")";
    }
    msg << "; see " << (inst->dir / "kernel.cpp").string() << " and " << (inst->dir / "compile.log").string()
        << "\n" << run.output;
    build.Write("compile.log", run.output);
    published.push_back("compile.log");
    build.Publish(published, "");  // the sources the compiler saw, for the user to read
    throw CompileFailure(msg.str(), func.name, inst->dir, run.output);
  }
}

// What compiling, loading and publishing one library needs after codegen: done at once, or in the
// background while launches run on the tier-0 executor.
struct LibraryJob {
  ir::Function func;
  std::shared_ptr<Instance> inst;
  std::unique_ptr<PrivateDir> build;
  std::vector<std::string> cmd, link, published;
  fs::path precompiled, cached;
  std::string so_name;
  CompileOptions options;
  std::chrono::steady_clock::time_point start;
  double routines_ms = 0;
  void* handle = nullptr;  // the library loaded before in this process (reused), or null
};

void CompileAndStore(LibraryJob& job) {
  CompileLibrary(job.func, job.inst, *job.build, job.cmd, job.link, job.precompiled, job.so_name, job.published,
                 job.options, job.start);
  if (!job.cached.empty()) StoreInCache(job.build->path() / job.so_name, job.cached);
}

// dlopen, the ABI check and the publication of the instance's files; sets launch and desc. Returns
// the milliseconds it took (the load phase).
double LoadAndPublish(LibraryJob& job) {
  const auto t0 = std::chrono::steady_clock::now();
  Instance& inst = *job.inst;
  const std::string& so_name = job.so_name;
  // Loaded from the private directory: the library is this compile's whatever is published later.
  // A debug build is loaded where it is published: a debugger reopens the library by its path.
  fs::path load_from = fs::absolute(job.build->path() / so_name);
  if (job.options.debug) {
    job.published.push_back(so_name);
    job.build->Publish(job.published, so_name);
    load_from = inst.library;
  }
  void* handle = job.handle ? job.handle : ::dlopen(load_from.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = ::dlerror();
    throw CompileFailure("cannot load " + load_from.string() + ": " + (err ? err : "?"), job.func.name, inst.dir, "");
  }
  // Never dlclose: queued launches may still point into the library.
  auto launch = reinterpret_cast<PackedLauncher>(::dlsym(handle, "call_kernel_packed"));
  auto get_desc = reinterpret_cast<const PtoKernelDesc* (*)()>(::dlsym(handle, "pypto_kernel_desc"));
  if (!launch || !get_desc || !get_desc() || get_desc()->abi_version != PTO_ABI_VERSION) {
    throw CompileFailure(inst.library.string() + " is not a pypto_pro kernel library of ABI version " +
                             std::to_string(PTO_ABI_VERSION),
                         job.func.name, inst.dir, "");
  }
  if (!job.options.debug) {
    job.published.push_back(so_name);
    job.build->Publish(job.published, so_name);
  }
  {
    std::lock_guard<std::mutex> lock(LoadedMutex());
    Loaded()[so_name] = LoadedLibrary{handle, inst.library};
  }
  inst.launch = launch;  // read by launches only once `compiled` says so
  inst.desc = get_desc();
  return MsSince(t0);
}

// ---- tier-0 (docs/jit.md#tier-0-first-launches) ----

// PYPTO_PRO_TIER0: 0 off; 1 until the library is loaded; always: every launch (the library is still
// compiled and published), for tests and for comparing the two.
enum class Tier0Mode { kOff, kOn, kAlways };
Tier0Mode ReadTier0Mode() {
  const std::string value = GetEnv("PYPTO_PRO_TIER0");
  if (value == "always") return Tier0Mode::kAlways;
  try {
    return GetEnvFlag("PYPTO_PRO_TIER0") ? Tier0Mode::kOn : Tier0Mode::kOff;
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("environment variable PYPTO_PRO_TIER0 must be 1, 0 or always, got '" + value + "'");
  }
}

// The tier-0 executor's entry in the routines library `lib` (loaded once per library), or null.
PtoKernelEntry Tier0Entry(const fs::path& lib) {
  static std::mutex mutex;
  static auto* entries = new std::map<std::string, PtoKernelEntry>();
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = entries->emplace(lib.string(), nullptr);
  if (fresh) {
    // Never closed: tier-0 launches and every kernel library linked to it use it.
    if (void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      it->second = reinterpret_cast<PtoKernelEntry>(::dlsym(handle, "pto_tier0_entry"));
    }
  }
  return it->second;
}

// PtoKernelDesc::outputs of a tier-0 launch (its arguments: a PtoT0Args): the written tensors' buffers.
int32_t Tier0Outputs(const void* raw_args, PtoRange* out, int32_t max) {
  const PtoT0Args& args = *static_cast<const PtoT0Args*>(raw_args);
  int32_t n = 0;
  for (int32_t i = 0; i < args.program->num_tensors && n < max; ++i) {
    const PtoT0Tensor& t = args.program->tensors[i];
    if (!t.written) continue;
    int64_t bytes = t.elem_bytes;
    for (int32_t k = 0; k < t.rank; ++k) {
      bytes *= t.dims[k] >= 0 ? t.dims[k] : int64_t(int32_t(args.slots[-1 - t.dims[k]]));
    }
    out[n++] = PtoRange{reinterpret_cast<const void*>(args.slots[t.slot]), bytes};
  }
  return n;
}

// Makes `inst` launch `program` on the executor of `routines` until its library is compiled; false
// when that executor cannot be loaded (the launch then waits for the compile).
bool StartTier0(Instance& inst, std::unique_ptr<Tier0Program> program, const ir::Function& func,
                const fs::path& routines, const std::string& arch, Tier0Mode mode) {
  if (routines.empty()) return false;
  const PtoKernelEntry entry = Tier0Entry(routines);
  if (!entry) return false;
  // Kept for the life of the process: queued launches point at it, as at a library never closed.
  Tier0Program* p = program.release();
  p->source_files.push_back(p->names.emplace_back(func.source_file).c_str());
  for (const std::string& file : func.other_files) p->source_files.push_back(p->names.emplace_back(file).c_str());
  const uint32_t kind = inst.kind == ir::KernelKind::kCube    ? PTO_KERNEL_CUBE
                        : inst.kind == ir::KernelKind::kMixed ? PTO_KERNEL_MIXED
                                                              : PTO_KERNEL_VECTOR;
  const uint32_t flags = ir::NeedsResidentBlocks(func) ? PTO_KERNEL_FLAG_RESIDENT : 0u;
  inst.tier0_desc = PtoKernelDesc{PTO_ABI_VERSION, kind, p->names.emplace_back(func.name).c_str(),
                                  p->source_files[0], p->names.emplace_back(arch).c_str(), entry, nullptr, flags,
                                  nullptr, p->source_files.data(), int32_t(p->source_files.size()), &Tier0Outputs};
  inst.tier0 = p;
  inst.tier0_always = mode == Tier0Mode::kAlways;
  inst.stats.tier0 = true;
  inst.compiled.store(false, std::memory_order_release);
  inst.background_done = false;
  return true;
}

// The background compiles of this process: how many run, and what stopped those that failed.
struct Background {
  std::mutex mutex;
  std::condition_variable done;
  int running = 0;
  uint64_t generation = ForkGeneration();  // a forked child has none of its parent's threads
  std::vector<std::pair<std::weak_ptr<Instance>, std::string>> failures;
  std::set<std::string> in_flight;  // the libraries being compiled, by name
};
Background& Backgrounds() {
  static auto* b = [] {
    auto* made = new Background();
    ResetInForkedChild(&made->mutex);  // a background thread of the parent may hold it at the fork
    return made;
  }();
  return *b;
}

void StartBackground(LibraryJob job) {
  Background& bg = Backgrounds();
  {
    std::lock_guard<std::mutex> lock(bg.mutex);
    if (bg.generation != ForkGeneration()) {  // a forked child: its parent's compiles are not its own
      bg.generation = ForkGeneration();
      bg.running = 0;
      bg.failures.clear();
      bg.in_flight.clear();
    }
    ++bg.running;
    bg.in_flight.insert(job.so_name);
  }
  std::thread([job = std::make_shared<LibraryJob>(std::move(job))]() mutable {
    const std::shared_ptr<Instance> keep = job->inst;
    const std::string so_name = job->so_name;
    Instance& inst = *keep;
    std::string failure;
    try {
      const auto t0 = std::chrono::steady_clock::now();
      CompileAndStore(*job);
      const double compile_ms = MsSince(t0) + job->routines_ms;
      const double load_ms = LoadAndPublish(*job);
      std::lock_guard<std::mutex> lock(inst.mutex);
      inst.stats.compile_ms = compile_ms;
      inst.stats.load_ms = load_ms;
      inst.background_done = true;
      if (!inst.tier0_always) inst.compiled.store(true, std::memory_order_release);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(inst.mutex);
      inst.background_error = std::current_exception();
      inst.background_done = true;
      failure = "kernel '" + inst.kernel_name + "': " + e.what();
    }
    job.reset();  // the private build directory goes before the count does
    Background& bg = Backgrounds();
    std::lock_guard<std::mutex> lock(bg.mutex);
    if (!failure.empty()) bg.failures.emplace_back(keep, failure);
    bg.in_flight.erase(so_name);
    --bg.running;
    bg.done.notify_all();
  }).detach();
}

void WaitUntilNotCompiling(const std::string& so_name) {
  Background& bg = Backgrounds();
  std::unique_lock<std::mutex> lock(bg.mutex);
  bg.done.wait(lock, [&] { return bg.generation != ForkGeneration() || !bg.in_flight.count(so_name); });
}

}  // namespace

fs::path PrepareDeviceCode(double timeout_seconds, const Environment& environment, bool& built) {
  std::vector<std::string> cmd = CompilerCommand();
  const fs::path dir = PrecompiledDir(cmd, DeviceHeadersDigest());
  built = false;
  if (dir.empty()) return {};
  CompileOptions options;
  options.timeout_seconds = timeout_seconds;
  options.environment = environment;
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  built = !fs::is_regular_file(dir / "libpto_routines.so", ec) ||
          !fs::is_regular_file(dir / "pypto_pro" / "precompiled.h.gch", ec);
  auto check = [&](const ProcessResult& run, const char* what) {
    if (run.timed_out) {
      throw std::runtime_error(std::string("building the precompiled ") + what + " took longer than " +
                               std::to_string(int(timeout_seconds)) + " s and was stopped");
    }
    if (run.started && run.exit_code != 0) {
      throw std::runtime_error(std::string("the host compiler failed on the precompiled ") + what + ":\n" + run.output);
    }
    if (!run.started && !run.output.empty()) throw std::runtime_error(run.output);
  };
  ProcessResult run;
  const fs::path routines = EnsurePrecompiledRoutines(dir, cmd, options, SecondsLeft(options, start), run);
  check(run, "routines");
  if (routines.empty()) return {};
  cmd.push_back(kExternRoutines);  // as a kernel compile reads the headers (CompileLibrary)
  run = ProcessResult();
  const bool header = EnsurePrecompiledHeader(dir, cmd, options, SecondsLeft(options, start), run);
  check(run, "headers");
  return header ? dir : fs::path();
}

int64_t Launch(Instance& inst, uint32_t block_dim, void* stream, const uint64_t* slots) {
  if (__builtin_expect(inst.compiled.load(std::memory_order_acquire), 1)) return inst.launch(block_dim, stream, slots);
  {
    std::lock_guard<std::mutex> lock(inst.mutex);
    if (inst.background_error) {
      inst.error_reported = true;
      std::rethrow_exception(inst.background_error);
    }
  }
  if (inst.compiled.load(std::memory_order_acquire)) return inst.launch(block_dim, stream, slots);
  // The program, the launcher's slots, the TilingData's bytes: a PtoT0Args (the launch queue copies it;
  // the slot of the TilingData, a pointer to the caller's bytes, becomes their offset from slots[0]).
  const PtoT0Program& program = inst.tier0->program;
  const int tiling_words = program.tiling_slot >= 0 ? (program.tiling_bytes + 7) / 8 : 0;
  const int words = 1 + inst.num_slots + tiling_words;
  constexpr int kInline = 64;
  uint64_t inline_args[kInline];
  std::vector<uint64_t> heap_args;
  uint64_t* args = inline_args;
  if (words > kInline) {
    heap_args.resize(size_t(words));
    args = heap_args.data();
  }
  args[0] = uint64_t(reinterpret_cast<uintptr_t>(&program));
  for (int i = 0; i < inst.num_slots; ++i) args[1 + i] = slots[i];
  if (tiling_words > 0) {
    args[words - 1] = 0;  // the last word's padding
    std::memcpy(args + 1 + inst.num_slots, reinterpret_cast<const void*>(slots[program.tiling_slot]),
                size_t(program.tiling_bytes));
    args[1 + program.tiling_slot] = uint64_t(inst.num_slots) * sizeof(uint64_t);
  }
  return static_cast<PtoStreamHandle*>(stream)->api->submit(stream, &inst.tier0_desc, args,
                                                            uint32_t(sizeof(uint64_t) * size_t(words)), block_dim);
}

void WaitCompiled(Instance& inst) {
  Background& bg = Backgrounds();
  std::unique_lock<std::mutex> lock(bg.mutex);
  bg.done.wait(lock, [&] {
    if (bg.generation != ForkGeneration()) return true;
    std::lock_guard<std::mutex> inst_lock(inst.mutex);
    return inst.background_done;
  });
  lock.unlock();
  std::lock_guard<std::mutex> inst_lock(inst.mutex);
  if (inst.background_error) {
    inst.error_reported = true;
    std::rethrow_exception(inst.background_error);
  }
}

std::vector<std::string> WaitForBackgroundCompiles() {
  Background& bg = Backgrounds();
  std::unique_lock<std::mutex> lock(bg.mutex);
  bg.done.wait(lock, [&] { return bg.generation != ForkGeneration() || bg.running == 0; });
  std::vector<std::string> unreported;
  for (auto& [weak, message] : std::exchange(bg.failures, {})) {
    const std::shared_ptr<Instance> inst = weak.lock();
    if (!inst) continue;
    std::lock_guard<std::mutex> inst_lock(inst->mutex);
    if (!inst->error_reported) unreported.push_back(std::move(message));
  }
  return unreported;
}

namespace {

}  // namespace

std::shared_ptr<Instance> BuildInstance(ir::Function func, const CompileOptions& options) {
  const ArchModel* arch = FindArch(options.arch);
  if (!arch) {
    Fail(ErrorKind::kValue, {}, "unknown arch '" + options.arch + "'; known: " + ArchNamesJoined());
  }
  auto inst = std::make_shared<Instance>();
  inst->kernel_name = func.name;
  inst->dir = options.instance_dir;
  CreateArtefactDir(inst->dir);

  auto t0 = std::chrono::steady_clock::now();
  passes::PassContext ctx;
  ctx.arch = arch;
  ctx.auto_mutex = options.auto_mutex;
  ctx.pipeline = options.pipeline ? &*options.pipeline : nullptr;
  ctx.fuse_rows = !options.sanitizer && !options.profile && GetEnvFlag("PYPTO_PRO_FUSE_ROWS");
  std::vector<passes::CompileWarning> warnings;
  ctx.warnings = &warnings;
  std::vector<std::pair<std::string, std::string>> ir_dumps;  // written with the sources
  std::string pipeline_python;  // pipeline_generated.py: the kernel as the pipeline pass left it
  // The kernel before fuse_rows and auto_mutex, for its tier-0 program (docs/jit.md#tier-0-first-launches).
  const Tier0Mode tier0_mode = ReadTier0Mode();
  const bool try_tier0 = !options.sanitizer && !options.profile && !options.debug && tier0_mode != Tier0Mode::kOff;
  std::optional<ir::Function> before_fusion;
  passes::RunPipeline(func, ctx, [&](std::string_view pass, const ir::Function& f) {
    if (options.pipeline && pass == "cv_pipeline") pipeline_python = PipelineGeneratedPython(f, options);
    if (try_tier0 && pass == "cv_pipeline") before_fusion = f;
    if (!options.dump_ir) return;
    ir_dumps.emplace_back("ir_" + std::to_string(ir_dumps.size()) + "_" + std::string(pass) + ".txt", ir::Print(f));
  });
  inst->stats.passes_ms = MsSince(t0);
  for (passes::CompileWarning& w : warnings) inst->warnings.emplace_back(w.span, std::move(w.message));

  t0 = std::chrono::steady_clock::now();
  codegen::CodegenOptions codegen_options;
  if (options.sanitizer) {
    // Each process starts its own report: instances are never shared between processes.
    inst->sanitizer_report = fs::absolute(inst->dir / "pypto_sanitizer_report.txt");
    codegen_options.sanitizer_report = inst->sanitizer_report.string();
    std::error_code ignored;
    fs::remove(inst->sanitizer_report, ignored);
  }
  codegen_options.dump_dir = fs::absolute(inst->dir / "dumps").string();
  codegen_options.profile = options.profile;
  codegen_options.debug = options.debug;
  codegen::GeneratedSources sources = codegen::Generate(func, *arch, codegen_options);
  inst->kind = sources.kind;
  inst->num_slots = int(ir::LauncherSlots(func).size());
  const std::vector<bool> written = ir::WrittenParams(func);
  for (size_t p = 0, tensor = 0; p < func.params.size(); ++p) {  // tensors and pointers: the first slots
    if (!func.params[p]->type.IsTensor() && !func.params[p]->type.IsPtr()) continue;
    if (written[p]) inst->written_tensors.push_back(int(tensor));
    ++tensor;
  }
  ir::ForEachStmt(func.body, [&](const ir::StmtNode& s) {
    inst->has_assert |= s.kind == ir::StmtKind::kOp && s.op->name == "pto_assert";
  });
  inst->stats.codegen_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  // Everything this compile reads and writes lives in a directory of its own until it is done, so a
  // compile of another kernel of the same name (another process, another thread) never reads these
  // sources or loads this library; the finished set is then moved into the instance directory.
  auto build = std::make_unique<PrivateDir>(inst->dir);
  std::vector<std::string> published = {"kernel.cpp", "call_kernel.cpp"};
  build->Write("kernel.cpp", sources.kernel_cpp);
  build->Write("call_kernel.cpp", sources.call_kernel_cpp);
  if (!sources.tiling_header_name.empty()) {
    build->Write(sources.tiling_header_name, sources.tiling_header);
    published.push_back(sources.tiling_header_name);
  }
  if (!pipeline_python.empty()) {
    build->Write("pipeline_generated.py", pipeline_python);
    published.push_back("pipeline_generated.py");
  }
  for (const auto& [name, content] : ir_dumps) {
    build->Write(name, content);
    published.push_back(name);
  }
  for (const auto& [relative, content] : options.extra_files) WriteFileAtomic(inst->dir / relative, content);
  std::vector<std::string> cmd = CompilerCommand(options.debug);
  const std::string headers_digest = DeviceHeadersDigest();
  const auto compile_start = std::chrono::steady_clock::now();
  // What a plain kernel's library links: the C runtime only (no libstdc++: plain device code uses none
  // of it, and leaving it out is a quarter of the link's time), every symbol resolved at link time
  // rather than at dlopen. Instrumented and debug builds keep g++'s default (the sanitizer's core
  // scope uses std::uncaught_exceptions). Then the precompiled routines (the library, named by its
  // path) when there are any; the compile reads the precompiled header made with them, both in one
  // PrecompiledDir of the flags.
  std::vector<std::string> link;
  if (!options.sanitizer && !options.profile && !options.debug) {
    link = {"-nodefaultlibs", "-lc", "-lm", "-lgcc", "-Wl,--no-undefined"};
  }
  fs::path precompiled = PrecompiledDir(cmd, headers_digest);
  fs::path routines_lib;
  if (!precompiled.empty()) {
    ProcessResult run;
    const fs::path routines =
        EnsurePrecompiledRoutines(precompiled, cmd, options, SecondsLeft(options, compile_start), run);
    ThrowIfStopped(run, func, *inst, options);
    if (routines.empty()) {
      precompiled.clear();
    } else {
      cmd.push_back(kExternRoutines);
      link.push_back(routines.string());
      routines_lib = routines;
    }
  }
  const double routines_ms = MsSince(compile_start);  // a compile's time (once per machine), not the writes'
  // The library's name covers everything that shapes its code, device headers included: a kernel
  // compiled against other headers (another checkout, an edited header) must not reuse the name of
  // one already loaded in this process or written by another.
  std::string fingerprint = sources.kernel_cpp + '\0' + sources.call_kernel_cpp + '\0' + sources.tiling_header + '\0' +
                            headers_digest + '\0';
  for (const std::string& part : cmd) fingerprint += part + ' ';
  for (const std::string& part : link) fingerprint += part + ' ';
  const std::string so_name = "call_kernel_" + Sha256Hex(fingerprint).substr(0, 12) + ".so";
  inst->library = fs::absolute(inst->dir / so_name);
  inst->stats.write_ms = MsSince(t0) - routines_ms;

  t0 = std::chrono::steady_clock::now();
  // The library without compiling: the same code loaded before in this process, or the persistent
  // cache's copy (built for this compiler and CPU).
  LibraryJob job;
  job.inst = inst;
  job.so_name = so_name;
  WaitUntilNotCompiling(so_name);  // the same code compiling in the background: its library is reused
  void* handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(LoadedMutex());
    auto it = Loaded().find(so_name);
    if (it != Loaded().end() && CopyLibrary(it->second.path, build->path() / so_name)) {
      handle = it->second.handle;
      inst->stats.reused = "process";
    }
  }
  if (!options.cache_dir.empty()) {
    CreateArtefactDir(options.cache_dir);
    const std::string host = HostFingerprint();
    if (!host.empty()) job.cached = options.cache_dir / (so_name.substr(0, so_name.size() - 3) + "_" + host + ".so");
  }
  if (!handle && !job.cached.empty() && fs::is_regular_file(job.cached) &&
      CopyLibrary(job.cached, build->path() / so_name)) {
    inst->stats.reused = "cache";
  }
  job.func = std::move(func);
  job.build = std::move(build);
  job.cmd = std::move(cmd);
  job.link = std::move(link);
  job.published = std::move(published);
  job.precompiled = precompiled;
  job.options = options;
  job.options.building_device_code = nullptr;  // (the progress line is the launching call's)
  job.start = compile_start;
  job.routines_ms = routines_ms;
  job.handle = handle;
  // Nothing to reuse: a kernel the tier-0 executor runs launches on it at once while its library
  // compiles in the background; any other waits for the compile, and its stats say why.
  // PYPTO_PRO_TIER0=always runs a reused library's launches on the executor too (the tests compare the two).
  std::unique_ptr<Tier0Program> tier0;
  std::string& refused = inst->stats.tier0_refused;
  const bool reused = !inst->stats.reused.empty();
  if (before_fusion && (!reused || tier0_mode == Tier0Mode::kAlways)) {
    tier0 = CompileTier0(*before_fusion, &refused);
  } else if (!before_fusion) {
    refused = options.sanitizer ? "a sanitizer instance" : options.profile ? "a profile instance"
              : options.debug   ? "a debug instance"
                                : "PYPTO_PRO_TIER0=0";
  }
  const bool started =
      tier0 && StartTier0(*inst, std::move(tier0), job.func, routines_lib, options.arch, tier0_mode);
  if (started || reused) refused.clear();  // (a reused library waited for nothing)
  else if (refused.empty()) refused = "the executor could not be loaded";
  if (started && reused) {  // the library is here already: loaded now, the launches stay on the executor
    inst->stats.load_ms = LoadAndPublish(job);
    std::lock_guard<std::mutex> lock(inst->mutex);
    inst->background_done = true;
    return inst;
  }
  if (started) {
    job.options.interrupted = nullptr;  // Python's signals are the launching thread's to check
    job.build->Publish(job.published, "", /*copy=*/true);  // the sources are readable at once
    inst->stats.compile_ms = routines_ms;
    StartBackground(std::move(job));
    return inst;
  }
  if (inst->stats.reused.empty()) CompileAndStore(job);
  inst->stats.compile_ms = MsSince(t0) + routines_ms;
  inst->stats.load_ms = LoadAndPublish(job);
  return inst;
}
}  // namespace pypto_pro::jit
