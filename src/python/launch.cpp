// kernel[stream, block_dim(, tiling_key)(, datatype)](*args): the launch path and the compile
// sequence of a kernel object. A launch reads and validates its arguments against the kernel
// signature (jit/signature.h), builds its compile-signature key, looks the instance up
// (jit/instance_cache.h) and fills the launcher slots in the one slot order. The first launch of a
// signature asks the front end to parse the binding its key decodes to (the only call into
// Python) and does the rest here: artefact names, environment, passes, codegen, the host
// compiler, warnings. Everything runs with the GIL held unless a comment says otherwise.
#include <pybind11/stl.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "bindings.h"
#include "captures.h"
#include "kernel_schema.h"
#include "pypto_pro/support/source_line.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/jit/artefacts.h"
#include "pypto_pro/jit/instance.h"
#include "pypto_pro/jit/instance_cache.h"
#include "pypto_pro/runtime/device.h"
#include "pypto_pro/runtime/profile.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/config.h"
#include "pypto_pro/support/error.h"
#include "pypto_pro/support/float_env.h"
#include "tensor_args.h"

namespace pypto_pro::python {

namespace {

// A launch runs exactly block_dim blocks (also more than the arch has cores), up to the hardware
// launcher's limit.
constexpr int64_t kMaxBlockDim = 65535;
constexpr const char* kArchEnv = "PYPTOPRO_JIT_ARCH";

// What the brackets selected besides stream and block_dim.
struct Selection {
  uint64_t tiling_key = 0;
  uint8_t dtypes[jit::kMaxDatatypeEntries] = {};
};

// What a tensor argument allows a kernel that writes it (bits of Launch's tensor_access).
constexpr uint8_t kReadOnly = 1, kRequiresGrad = 2, kGradLeaf = 4;

// The rank when a torch.distributed process group is active (instance names carry it).
std::optional<int> DistributedRank() {
  PyObject* modules = PySys_GetObject("modules");  // borrowed
  PyObject* dist = modules ? PyDict_GetItemString(modules, "torch.distributed") : nullptr;
  if (!dist) return std::nullopt;
  try {
    py::object d = py::reinterpret_borrow<py::object>(dist);
    if (d.attr("is_available")().cast<bool>() && d.attr("is_initialized")().cast<bool>()) {
      return d.attr("get_rank")().cast<int>();
    }
  } catch (const py::error_already_set&) {
  }
  return std::nullopt;
}

py::object DtypeName(ir::DataType dtype) { return py::str(std::string(ir::Name(dtype))); }

// The compile progress line (docs/jit.md#compile-progress): on a terminal (or with PYPTO_PRO_PROGRESS=1,
// never with 0) one line on stderr says which kernel is compiling and how many compiled so far, and is
// cleared when the compile ends; pipes and CI logs see nothing unless asked.
class CompileProgress {
 public:
  CompileProgress(const std::string& kernel, const std::filesystem::path& dir) {
    if (!Enabled()) return;
    active_ = true;
    const int n = ++Started();
    line_ = "compiling kernel '" + kernel + "' (" + dir.parent_path().filename().string() + "/" +
            dir.filename().string() + ") [" + std::to_string(n) + " compile" + (n == 1 ? "" : "s") + " this run]";
    Write("\r\x1b[Kpypto_pro: " + line_);
  }
  // CompileOptions::building_device_code: the wait before this compile, once per machine.
  static void BuildingDeviceCode(void* self) {
    auto* progress = static_cast<CompileProgress*>(self);
    if (!progress->active_) return;
    progress->Write("\r\x1b[Kpypto_pro: building the device code all kernels share (once per compiler, CPU and "
                    "pypto_pro version, ~15 s; `python -m pypto_pro cache warm` builds it ahead), then " +
                    progress->line_);
  }
  ~CompileProgress() {
    if (active_) Write("\r\x1b[K");
  }
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;

 private:
  static bool Enabled() {
    const std::string mode = GetEnv("PYPTO_PRO_PROGRESS");
    if (mode == "1") return true;
    if (mode == "0") return false;
    return ::isatty(2) != 0;  // auto
  }
  static std::atomic<int>& Started() {
    static std::atomic<int> started{0};
    return started;
  }
  static void Write(const std::string& text) { [[maybe_unused]] ssize_t n = ::write(2, text.data(), text.size()); }

  bool active_ = false;
  std::string line_;
};

class Kernel {
 public:
  // options: {fn, arch (None: PYPTOPRO_JIT_ARCH at the first launch), auto_mutex, sanitizer,
  // compile_timeout (None: PYPTO_PRO_COMPILE_TIMEOUT), pipeline (None or (preload, sync_only))}.
  // parse_fn(binding) -> (ir.Function, captures).
  Kernel(std::string name, const py::list& params, const py::dict& schema, py::object parse_fn, py::object bind_fn,
         const py::dict& options)
      : name_(std::move(name)),
        schema_(ParseKernelSchema(name_, params, schema)),
        parse_fn_(std::move(parse_fn)),
        bind_fn_(std::move(bind_fn)),
        fn_(options["fn"]) {
    if (!options["arch"].is_none()) arch_ = options["arch"].cast<std::string>();
    auto_mutex_ = options["auto_mutex"].cast<bool>();
    sanitizer_ = options["sanitizer"].cast<bool>();
    if (!options["compile_timeout"].is_none()) compile_timeout_ = options["compile_timeout"].cast<double>();
    if (!options["cache"].is_none()) persistent_cache_ = options["cache"].cast<bool>();
    if (!options["debug"].is_none()) debug_ = options["debug"].cast<bool>();
    if (options.contains("pipeline") && !options["pipeline"].is_none()) {
      const auto [preload, sync_only] = options["pipeline"].cast<std::pair<int, bool>>();
      pipeline_ = passes::PipelineOptions{preload, sync_only};
    }
  }

  const std::string& name() const { return name_; }
  const KernelSchema& schema() const { return schema_; }
  bool has_tiling_key() const { return schema_.tiling_key != nullptr; }
  bool has_datatype() const { return schema_.sig.datatype.has_value(); }
  bool requires_dicts() const { return has_tiling_key() || has_datatype(); }
  py::object arch() const { return arch_ ? py::object(py::str(*arch_)) : py::object(py::none()); }

  std::string LaunchForm() const {
    std::string form = "kernel[stream, block_dim";
    if (has_tiling_key()) form += ", tiling_key_dict";
    if (has_datatype()) form += ", datatype_dict";
    return form + "](...)" + (requires_dicts() ? "" : " or kernel[block_dim](...)");
  }

  uint64_t ParseTilingKey(py::handle key) { return schema_.tiling_key->Pack(key); }
  void ParseDatatype(py::handle dict, Selection& sel) const { python::ParseDatatype(schema_, dict, sel.dtypes); }

  void Launch(PyStream& stream, int64_t block_dim, const Selection& sel, PyObject* const* args, Py_ssize_t nargs,
              PyObject* kwargs) {
    // Scalar arguments and constants become fp32 here and in the compile a first launch runs (its
    // background compile thread inherits this), as the device rounds them, flush-to-zero or not.
    const DeviceFloatEnvironment ieee;
    const std::vector<jit::ParamSpec>& params = schema_.sig.params;
    py::object bound;
    if ((kwargs && PyDict_GET_SIZE(kwargs) > 0) || nargs != Py_ssize_t(params.size())) {
      // Keywords, defaults or a wrong count: the Python front end binds (and reports) them.
      py::tuple pos(nargs);
      for (Py_ssize_t i = 0; i < nargs; ++i) pos[i] = py::reinterpret_borrow<py::object>(args[i]);
      bound = bind_fn_(pos, kwargs ? py::reinterpret_borrow<py::object>(kwargs) : py::object(py::dict()));
      args = &PyTuple_GET_ITEM(bound.ptr(), 0);
      nargs = PyTuple_GET_SIZE(bound.ptr());
      if (nargs != Py_ssize_t(params.size())) throw py::type_error(name_ + "(): argument binding failed");
    }

    uint64_t slots[jit::kMaxParams + jit::kMaxParams * kMaxRank];
    uint8_t tensor_param[jit::kMaxParams], tensor_access[jit::kMaxParams];  // per tensor slot
    TilingBuffer tiling;  // this launch's own: another thread may launch while this one compiles
    int n_dyn = 0;
    jit::SignatureKey key;
    if (has_tiling_key()) key.Push(int64_t(sel.tiling_key));
    if (has_datatype()) {
      for (size_t i = 0; i < schema_.sig.datatype->params.size(); ++i) key.Push(sel.dtypes[i]);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const jit::ParamSpec& p = params[i];
      const int slot = schema_.param_slot[i];
      PyObject* obj = args[i];
      ArgName arg{name_, p.name};
      if (p.kind == jit::ParamKind::kScalar) {
        slots[slot] = ReadScalar(p, obj, arg);
        continue;
      }
      if (p.kind == jit::ParamKind::kTiling) {
        slots[slot] = PackTiling(p, schema_.py_params[i], obj, arg, tiling);
        continue;
      }
      TensorView view;
      if (p.kind == jit::ParamKind::kPtr) {
        ReadPtrArgument(p, obj, arg, sel, view);
        int64_t elements = 1;
        for (int d = 0; d < view.ndim; ++d) elements *= view.shape[d];
        slots[schema_.bytes_slot[i]] = uint64_t(elements * ir::Bytes(view.dtype));
        tensor_param[slot] = uint8_t(i);  // pointers share the tensors' slots, in parameter order
        tensor_access[slot] = uint8_t((view.read_only ? kReadOnly : 0) | (view.requires_grad ? kRequiresGrad : 0) |
                                      (view.is_leaf ? kGradLeaf : 0));
        slots[slot] = view.data;
        continue;
      }
      if (!ReadTensor(obj, view, arg)) {
        ArgError(true, arg.str() + " must be a torch.Tensor or numpy.ndarray, got " + TypeName(obj));
      }
      ir::DataType expected = p.dt_entry >= 0 ? ir::DataType(sel.dtypes[p.dt_entry]) : p.dtype;
      if (!view.dtype_known || view.dtype != expected) {
        std::string actual = py::str(py::handle(obj).attr("dtype")).cast<std::string>();
        ArgError(true, arg.str() + " expects dtype " + std::string(ir::Name(expected)) + " (pl." +
                           std::string(ir::Info(expected).pl_name) + ")" +
                           (p.dt_entry >= 0 ? " as its datatype dict says" : "") + ", got " + actual);
      }
      const bool rest = p.HasRest();
      const int declared = p.DeclaredRank();
      if (rest ? view.ndim < declared : view.ndim != declared) {
        ArgError(true, arg.str() + " expects a " + (rest ? "tensor of at least " : "") + std::to_string(declared) +
                           "-D" + (rest ? " dims" : " tensor") + ", got " + std::to_string(view.ndim) +
                           "-D with shape " + ShapeText(view));
      }
      if (rest) key.Push(view.ndim - declared);
      for (int d = 0; d < view.ndim; ++d) {
        int64_t spec = d < declared ? p.dims[size_t(d)] : jit::kStaticDim, actual = view.shape[d];
        if (spec > 0 && actual != spec) {
          ArgError(true, arg.str() + " dim " + std::to_string(d) + " must be " + std::to_string(spec) +
                             " (fixed in its annotation), got " + std::to_string(actual) + " in shape " +
                             ShapeText(view));
        }
        if (spec == jit::kStaticDim) key.Push(actual);
        if (spec == jit::kDynamicDim) {
          if (actual > INT32_MAX) {
            ArgError(false, arg.str() + " dim " + std::to_string(d) + " is " + std::to_string(actual) +
                                "; DYNAMIC dims are int32 (at most 2147483647)");
          }
          slots[schema_.dynamic_slot[size_t(n_dyn++)]] = uint64_t(actual);
        }
      }
      if (!IsRowMajor(view)) {
        ArgError(false, arg.str() + " must be contiguous (row-major) with shape " + ShapeText(view) +
                            "; pass .contiguous() / np.ascontiguousarray()");
      }
      tensor_param[slot] = uint8_t(i);  // tensors take the first slots, in parameter order
      tensor_access[slot] = uint8_t((view.read_only ? kReadOnly : 0) | (view.requires_grad ? kRequiresGrad : 0) |
                                    (view.is_leaf ? kGradLeaf : 0));
      slots[slot] = view.data;
    }

    if (!captures_.empty() && !captures_.Current(name_)) {
      cache_.Clear();
      profile_cache_.Clear();
      cache_.CountStale();
      signatures_ = py::list();
    }
    // Inside pypto_pro.profiler.profile(): the signature's profiling instance, whose launches record
    // for the performance model (a sanitizer-mode kernel keeps its own checks).
    const bool profile = !sanitizer_ && runtime::Profiling();
    jit::Instance* inst = (profile ? profile_cache_ : cache_).Lookup(key);
    if (!inst) {
      runtime::Device::Get();  // reads and checks the device's environment variables (ValueError)
      inst = Compile(key, profile);
    }
    for (int t : inst->written_tensors) {
      if (tensor_access[t]) RefuseWrite(params[tensor_param[t]], tensor_access[t]);
    }
    if (inst->has_assert) {  // read here, with the GIL (Python's setenv holds it), not by a core
      const std::string mode = GetEnv("PYPTO_PRO_ASSERT");
      if (mode != "print" && mode != "raise") {
        throw std::invalid_argument("environment variable PYPTO_PRO_ASSERT must be print or raise, got '" + mode + "'");
      }
      runtime::SetSubmitAssertMode(mode == "raise" ? runtime::AssertMode::kRaise : runtime::AssertMode::kPrint);
    }
    int64_t seq = jit::Launch(*inst, uint32_t(block_dim), stream.stream().handle(), slots);  // copies the TilingData bytes
    if (seq <= 0) throw std::runtime_error(name_ + ": the runtime refused the launch (ABI mismatch)");
    stream.KeepAlive(uint64_t(seq), args, size_t(nargs));
  }

  py::dict CacheInfo() const {
    py::dict d;
    d["compiles"] = cache_.compiles();
    d["hits"] = cache_.hits();
    d["misses"] = cache_.misses();
    d["stale"] = cache_.stale();  // times a changed global or closure variable dropped the instances
    d["instances"] = cache_.size();
    return d;
  }

  py::list Instances() const {
    py::list out;
    for (const auto& inst : cache_.in_order()) out.append(py::cast(inst));
    return out;
  }

  py::list Signatures() const { return py::list(signatures_); }

 private:
  // The argument of a pl.Ptr[dtype] parameter: a numpy array or CPU torch tensor, row-major
  // contiguous, whose whole buffer the kernel's views may use. Its dtype is the pointer's (the
  // datatype dict's for a datatype= parameter); a pl.Ptr[pl.DT_UINT8] (a byte pointer, as the public
  // examples pass workspaces and data of any dtype) takes a buffer of any dtype the language has.
  void ReadPtrArgument(const jit::ParamSpec& p, PyObject* obj, const ArgName& arg, const Selection& sel,
                       TensorView& view) const {
    // (a pointer whose annotation names its datatype variable has no dtype of its own here)
    const std::string what = arg.str() + (p.dt_entry >= 0 ? std::string(" (a pl.Ptr)")
                                                          : " (a pl.Ptr[pl." + std::string(ir::Info(p.dtype).pl_name) +
                                                                "])");
    if (!ReadTensor(obj, view, arg)) {
      ArgError(true, what + " must be a torch.Tensor or numpy.ndarray whose buffer the kernel uses, got " +
                         TypeName(obj));
    }
    const bool by_dict = p.dt_entry >= 0;
    const ir::DataType expected = by_dict ? ir::DataType(sel.dtypes[p.dt_entry]) : p.dtype;
    const bool bytes = !by_dict && p.dtype == ir::DataType::kUInt8;
    if (!view.dtype_known || (!bytes && view.dtype != expected)) {
      std::string actual = py::str(py::handle(obj).attr("dtype")).cast<std::string>();
      ArgError(true, what + " expects a buffer of " +
                         (bytes ? std::string("a dtype the language has (a pl.DT_* dtype)")
                                : "dtype " + std::string(ir::Name(expected)) + " (pl." +
                                      std::string(ir::Info(expected).pl_name) + ")") +
                         (by_dict ? " as its datatype dict says" : "") + ", got " + actual);
    }
    if (!IsRowMajor(view)) {
      ArgError(false, what + " must be contiguous (row-major) with shape " + ShapeText(view) +
                          "; pass .contiguous() / np.ascontiguousarray()");
    }
  }

  // A tensor the instance writes that must not be written: the refusal numpy or torch itself gives.
  [[noreturn]] void RefuseWrite(const jit::ParamSpec& p, uint8_t access) const {
    const std::string what = name_ + "(): argument '" + p.name + "'";
    if (access & kReadOnly) {
      ArgError(false, what + " is a read-only array (numpy writeable=False: a bytes buffer, a read-only mapping, "
                             "...) but the kernel writes it; pass a writable array, e.g. a copy");
    }
    if (access & kGradLeaf) {
      throw std::runtime_error(what + ": a leaf Variable that requires grad is being used in an in-place operation "
                                      "(the kernel writes it); launch under torch.no_grad() or pass a tensor that "
                                      "does not require grad");
    }
    throw std::runtime_error(what + " requires grad, but autograd cannot see the kernel writing it; launch under "
                                    "torch.no_grad() or pass a tensor that does not require grad");
  }

  std::string ResolveArch() {
    if (!arch_) {
      const std::string arch = GetEnv(kArchEnv);
      if (!FindArch(arch)) {
        throw py::value_error(std::string(kArchEnv) + "='" + arch + "' is not a known arch; known: " +
                              ArchNamesJoined());
      }
      arch_ = arch;
    }
    return *arch_;
  }

  // One compile per signature even when threads race; different signatures compile in parallel
  // (the host compiler runs with the GIL released). Waiting for another thread's compile of the same
  // signature is interruptible.
  jit::Instance* Compile(const jit::SignatureKey& key, bool profile) {
    jit::InstanceCache& cache = profile ? profile_cache_ : cache_;
    std::shared_ptr<std::timed_mutex> mutex = cache.CompileLock(key);
    bool (*interrupted)() = PythonWaitOptions(-1).interrupted;
    bool locked = false;
    {
      py::gil_scoped_release release;
      while (!(locked = mutex->try_lock_for(std::chrono::milliseconds(20)))) {
        if (interrupted && interrupted()) break;
      }
    }
    if (!locked) RaiseInterrupted();
    std::unique_lock<std::timed_mutex> lock(*mutex, std::adopt_lock);
    if (jit::Instance* done = cache.Lookup(key)) return done;
    cache.CountMiss();

    const std::string arch = ResolveArch();
    const jit::Binding binding = jit::DecodeKey(schema_.sig, key);
    py::module_::import("pypto_pro.language.parser");  // imported on the first compile; not part of parse_ms
    const auto t0 = std::chrono::steady_clock::now();
    py::tuple parsed = parse_fn_(BindingDict(binding));
    const double parse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const std::shared_ptr<ir::Function> func = parsed[0].cast<const PyFunction&>().func;

    jit::InstanceKey where;
    where.kernel_name = name_;
    where.arch = arch;
    where.static_signature = binding.StaticSignature();
    where.datatype_json = binding.DatatypeJson();
    where.tiling_key = binding.tiling_key;
    where.sanitizer = sanitizer_;
    where.profile = profile;
    const bool debug = debug_ ? *debug_ : GetEnvFlag("PYPTO_PRO_DEBUG");
    where.debug = debug;
    if (std::optional<int> rank = DistributedRank()) {  // one simulated device per process: device 0
      where.device = 0;
      where.rank = *rank;
    }
    jit::CompileOptions options;
    options.arch = arch;
    options.instance_dir = jit::InstanceDir(where);
    options.timeout_seconds = compile_timeout_ ? *compile_timeout_ : GetEnvSeconds("PYPTO_PRO_COMPILE_TIMEOUT", false);
    options.auto_mutex = auto_mutex_;
    options.sanitizer = sanitizer_;
    options.profile = profile;
    options.debug = debug;
    options.pipeline = pipeline_;
    if (persistent_cache_ ? *persistent_cache_ : !GetEnv("PYPTO_PRO_CACHE_DIR").empty()) {
      options.cache_dir = jit::DefaultCacheDir();
    }
    options.dump_ir = GetEnvFlag("PYPTO_PRO_DUMP_IR");
    if (!binding.datatype.empty()) options.extra_files.emplace_back("../datatype.json", binding.DatatypeFile());
    options.interrupted = interrupted;
    options.environment = jit::CaptureEnvironment();  // with the GIL, which Python's setenv holds too
    std::shared_ptr<jit::Instance> inst;
    {
      CompileProgress progress(name_, options.instance_dir);  // cleared before anything else is printed
      options.building_device_code = &CompileProgress::BuildingDeviceCode;
      options.building_device_code_context = &progress;
      try {
        ir::Function copy = *func;  // passes transform a copy
        py::gil_scoped_release release;
        inst = jit::BuildInstance(std::move(copy), options);
      } catch (const CompileDiagnostic& diag) {
        RaiseLocated(diag, *func);
      }
    }
    inst->stats.parse_ms = parse_ms;
    Warn(*inst, *func);
    for (py::handle capture : parsed[1]) captures_.Add(py::reinterpret_borrow<py::tuple>(capture));
    if (!profile) signatures_.append(SignatureDict(binding, *inst));  // the profiler's instances are its own
    LogCompiled(*inst);
    if (debug) TellHowToDebug(*func);
    cache.Insert(key, inst);
    return inst.get();
  }

  // What the parser specialises on: {static_dims: {tensor: [values]}, tiling_key: {field: value},
  // datatype: {param: dtype name}, variables: {datatype variable: dtype name}}.
  static py::dict BindingDict(const jit::Binding& b) {
    py::dict d, statics, tiling, datatype, variables;
    for (const auto& [name, dims] : b.static_dims) statics[py::str(name)] = py::cast(dims);
    for (const auto& [name, value] : b.tiling_values) tiling[py::str(name)] = py::int_(value);
    for (const auto& [param, dtype] : b.datatype) datatype[py::str(param)] = DtypeName(dtype);
    for (const auto& [var, dtype] : b.variables) variables[py::str(var)] = DtypeName(dtype);
    d["static_dims"] = statics;
    d["tiling_key"] = tiling;
    d["datatype"] = datatype;
    d["variables"] = variables;
    return d;
  }

  // kernel.signatures(): what each instance was specialised on.
  py::dict SignatureDict(const jit::Binding& b, const jit::Instance& inst) const {
    py::dict d, statics;
    d["dir"] = py::str(inst.dir.string());
    for (const auto& [name, dims] : b.static_dims) {
      if (!dims.empty()) statics[py::str(name)] = py::cast(dims);
    }
    d["static_dims"] = statics;
    d["tiling_key"] = b.tiling_key ? py::object(schema_.tiling_key->ValuesOf(*b.tiling_key)) : py::object(py::none());
    if (b.datatype.empty()) {
      d["datatype"] = py::none();
    } else {
      py::dict datatype;
      for (const auto& [param, dtype] : b.datatype) {
        PyObject* object = DTypeObject(dtype);  // registered by the front end for every pl.DT_*
        datatype[py::str(param)] = object ? py::reinterpret_borrow<py::object>(object) : DtypeName(dtype);
      }
      d["datatype"] = datatype;
    }
    return d;
  }

  // A diagnostic of the passes as the front end's located error (file, line, caret, hint).
  [[noreturn]] void RaiseLocated(const CompileDiagnostic& diag, const ir::Function& func) const {
    const int line = diag.span().line;
    py::object error = py::module_::import("pypto_pro.language.diagnostics")
                           .attr("from_core")(ErrorKindName(diag.kind()), diag.what(), LineNumber(line),
                                              diag.span().col, diag.hint(), name_, fn_,
                                              LineFileName(line, func.source_file, func.other_files));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    throw py::error_already_set();
  }

  // The passes' warnings (overlapping tiles) as TileOverlapWarning at the kernel's source lines.
  void Warn(const jit::Instance& inst, const ir::Function& func) const {
    if (inst.warnings.empty()) return;
    py::object category = py::module_::import("pypto_pro.errors").attr("TileOverlapWarning");
    py::object module = fn_.attr("__module__");
    for (const auto& [span, message] : inst.warnings) {
      const std::string text = "kernel '" + name_ + "': " + message;
      py::module_::import("warnings").attr("warn_explicit")(
          text, category, LineFileName(span.line, func.source_file, func.other_files), LineNumber(span.line), module);
    }
  }

  // A debug build: how to run the script under gdb with a breakpoint at the kernel's first line.
  void TellHowToDebug(const ir::Function& func) const {
    py::module_ sys = py::module_::import("sys");
    py::module_ shlex = py::module_::import("shlex");
    std::string args;
    for (py::handle a : py::list(sys.attr("argv"))) args += " " + shlex.attr("quote")(a).cast<std::string>();
    int line = 0;  // the kernel's first op in its own file
    ir::ForEachStmt(func.body, [&](const ir::StmtNode& st) {
      if (!line && st.kind == ir::StmtKind::kOp && st.span.line > 0 && LineFile(st.span.line) == 0) {
        line = LineNumber(st.span.line);
      }
    });
    const std::string where = func.source_file + ":" + std::to_string(line);
    const std::string message = "pypto_pro: kernel '" + name_ + "' is a debug build (-O0 -g, its blocks one at a time "
                                "on one thread, lines of " + func.source_file + "); to step through it:\n  gdb -ex "
                                "'set breakpoint pending on' -ex " + shlex.attr("quote")("break " + where).cast<std::string>() +
                                " --args " + sys.attr("executable").cast<std::string>() + args + "\n";
    sys.attr("stderr").attr("write")(message);
  }

  void LogCompiled(const jit::Instance& inst) const {
    // Nobody can have asked for debug records before logging is imported, and importing it costs a
    // cached new process's first launch ~5 ms.
    py::object logging = py::reinterpret_steal<py::object>(PyImport_GetModule(py::str("logging").ptr()));
    if (!logging) {
      PyErr_Clear();
      return;
    }
    static py::object* log = new py::object(logging.attr("getLogger")("pypto_pro.jit"));
    if (!log->attr("isEnabledFor")(10).cast<bool>()) return;  // logging.DEBUG
    const jit::CompileStats s = inst.Stats();
    char stats[256];
    if (s.tier0) {  // compile and load are the background compile's, still running
      std::snprintf(stats, sizeof stats, "parse %.1f ms, passes %.1f ms, codegen %.1f ms, write %.1f ms; the library "
                    "compiles in the background, launches run on the tier-0 executor until it is loaded",
                    s.parse_ms, s.passes_ms, s.codegen_ms, s.write_ms);
    } else {
      std::snprintf(stats, sizeof stats, "parse %.1f ms, passes %.1f ms, codegen %.1f ms, write %.1f ms, compile %.1f "
                    "ms, load %.1f ms", s.parse_ms, s.passes_ms, s.codegen_ms, s.write_ms, s.compile_ms, s.load_ms);
    }
    log->attr("debug")("compiled %s in %s: %s", name_, inst.dir.string(), stats);
  }

  std::string name_;
  KernelSchema schema_;
  py::object parse_fn_;
  py::object bind_fn_;
  py::object fn_;  // the kernel's Python function, for located errors and warnings
  std::optional<std::string> arch_;
  bool auto_mutex_ = true;
  std::optional<passes::PipelineOptions> pipeline_;
  bool sanitizer_ = false;
  std::optional<double> compile_timeout_;
  std::optional<bool> persistent_cache_;  // pl.jit(cache=): None follows PYPTO_PRO_CACHE_DIR
  std::optional<bool> debug_;             // pl.jit(debug=): None follows PYPTO_PRO_DEBUG
  jit::InstanceCache cache_;  // guarded by the GIL (its compile locks are waited on without it)
  jit::InstanceCache profile_cache_;  // the instances launched inside pypto_pro.profiler.profile()
  CaptureWatch captures_;
  py::list signatures_;
};

PyStream& ResolveStream(py::handle stream) {
  if (stream.is_none()) return CurrentPyStream();
  if (!py::isinstance<PyStream>(stream)) {
    throw py::type_error("the stream in kernel[stream, block_dim] must be a pypto_pro.runtime.Stream or None, got " +
                         TypeName(stream.ptr()));
  }
  return *stream.cast<PyStream*>();
}

int64_t ResolveBlockDim(py::handle bd) {
  if (!PyLong_Check(bd.ptr()) || PyBool_Check(bd.ptr())) {
    throw py::value_error("block_dim must be a positive int, got " + py::repr(bd).cast<std::string>() + " (" +
                          TypeName(bd.ptr()) + ")");
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(bd.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && v <= 0)) {
    throw py::value_error("block_dim must be a positive int, got " + py::repr(bd).cast<std::string>());
  }
  if (overflow > 0 || v > kMaxBlockDim) {
    throw py::value_error("block_dim must be at most " + std::to_string(kMaxBlockDim) +
                          " (the device's launch limit), got " + py::repr(bd).cast<std::string>());
  }
  return v;
}

// kernel[...] bound to its stream, block_dim and selection.
struct Launcher {
  py::object kernel;         // keeps the kernel alive
  Kernel* impl;
  py::object stream_object;  // keeps the stream alive (kernel[Stream(), n] is common)
  PyStream* stream;
  int64_t block_dim;
  Selection selection;
};

Launcher MakeLauncher(py::object self, py::handle key) {
  Kernel& k = self.cast<Kernel&>();
  size_t expected = 2 + (k.has_tiling_key() ? 1 : 0) + (k.has_datatype() ? 1 : 0);
  if (!PyTuple_Check(key.ptr())) {
    if (k.requires_dicts()) {
      throw py::value_error("kernel '" + k.name() + "': a launch takes " + k.LaunchForm() + ", got kernel[" +
                            py::repr(key).cast<std::string>() + "]");
    }
    return Launcher{self, &k, py::none(), &CurrentPyStream(), ResolveBlockDim(key), {}};
  }
  size_t n = size_t(PyTuple_GET_SIZE(key.ptr()));
  if (n != expected) {
    throw py::value_error("kernel '" + k.name() + "': a launch takes " + k.LaunchForm() + ", got " +
                          std::to_string(n) + " entries in the brackets");
  }
  py::handle stream = PyTuple_GET_ITEM(key.ptr(), 0);
  PyStream& s = ResolveStream(stream);
  Launcher l{self, &k, py::reinterpret_borrow<py::object>(stream), &s,
             ResolveBlockDim(PyTuple_GET_ITEM(key.ptr(), 1)), {}};
  size_t next = 2;
  if (k.has_tiling_key()) l.selection.tiling_key = k.ParseTilingKey(PyTuple_GET_ITEM(key.ptr(), next++));
  if (k.has_datatype()) k.ParseDatatype(PyTuple_GET_ITEM(key.ptr(), next++), l.selection);
  return l;
}

}  // namespace

void BindLaunch(py::module_& m) {
  BindKernelSchema(m);
  m.def("torch_fast_path", &TorchFastPath, "True when torch tensors are read through libtorch (torch imported).");
  m.def("register_dtype_object", [](py::handle obj, const std::string& name) {
    auto dt = ir::DataTypeFromName(name);
    if (!dt) throw py::value_error("unknown dtype " + name);
    RegisterDTypeObject(obj.ptr(), *dt);
  });

  py::class_<Kernel>(m, "KernelBase", py::dynamic_attr())
      .def(py::init<std::string, const py::list&, const py::dict&, py::object, py::object, const py::dict&>(),
           py::arg("name"), py::arg("params"), py::arg("schema"), py::arg("parse_fn"), py::arg("bind_fn"),
           py::arg("options"))
      .def("__getitem__", &MakeLauncher)
      .def("__call__",
           [](py::object self, py::args args, py::kwargs kwargs) {
             Kernel& k = self.cast<Kernel&>();
             if (k.requires_dicts()) {
               throw py::value_error("kernel '" + k.name() + "' has a tiling_key or datatype schema: launch it as " +
                                     k.LaunchForm());
             }
             k.Launch(CurrentPyStream(), 1, Selection{}, &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()),
                      kwargs.ptr());
           })
      .def_property_readonly("arch", &Kernel::arch,
                             "The arch it compiles for; None until the first launch resolves PYPTOPRO_JIT_ARCH.")
      .def_property_readonly("tiling_key", [](const Kernel& k) -> py::object {
        return k.schema().tiling_key ? py::cast(k.schema().tiling_key) : py::object(py::none());
      }, "The TilingKey schema (pack, unpack, enumerate_valid), or None.")
      .def("_cache_info", &Kernel::CacheInfo)
      .def("_instances", &Kernel::Instances)
      .def("_signatures", &Kernel::Signatures);

  py::class_<Launcher>(m, "Launcher").def("__call__", [](Launcher& l, py::args args, py::kwargs kwargs) {
    l.impl->Launch(*l.stream, l.block_dim, l.selection, &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()),
                   kwargs.ptr());
  });
}

}  // namespace pypto_pro::python
