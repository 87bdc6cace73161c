// The launch hot path: kernel[stream, block_dim](*args) reads tensor metadata, validates it,
// looks the compiled instance up by integer key, packs the launcher slots and enqueues, in C++.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <unordered_map>

#include "bindings.h"
#include "pypto_pro/jit/instance.h"

namespace pypto_pro::python {

namespace {

constexpr int kMaxRank = 8;
constexpr int kMaxArgs = 64;

struct ParamSpec {
  std::string name;
  bool is_tensor = true;
  ir::DataType dtype = ir::DataType::kFP32;
  std::vector<int64_t> dims;  // > 0 fixed, -1 STATIC, -2 DYNAMIC
};

// The integer key of a compile signature: the values of the STATIC dims, in parameter order.
struct SignatureKey {
  int64_t values[16];
  int count = 0;
  std::vector<int64_t> overflow;
  void Push(int64_t v) {
    if (count < 16) values[count] = v;
    else overflow.push_back(v);
    ++count;
  }
  bool operator==(const SignatureKey& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count && i < 16; ++i) {
      if (values[i] != o.values[i]) return false;
    }
    return overflow == o.overflow;
  }
};
struct SignatureHash {
  size_t operator()(const SignatureKey& k) const {
    uint64_t h = 1469598103934665603ull ^ uint64_t(k.count);
    for (int i = 0; i < k.count && i < 16; ++i) h = (h ^ uint64_t(k.values[i])) * 1099511628211ull;
    for (int64_t v : k.overflow) h = (h ^ uint64_t(v)) * 1099511628211ull;
    return size_t(h);
  }
};

// ---- reading tensor arguments ----
struct TensorView {
  uint64_t data = 0;
  int ndim = 0;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];  // in elements
  int elsize = 0;
  bool dtype_known = false;
  ir::DataType dtype = ir::DataType::kFP32;
};

std::string TypeName(PyObject* obj) {
  PyTypeObject* t = Py_TYPE(obj);
  py::object module = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(t)).attr("__module__");
  std::string mod = py::isinstance<py::str>(module) ? module.cast<std::string>() : "";
  return (mod.empty() || mod == "builtins" ? "" : mod + ".") + t->tp_name;
}

std::optional<ir::DataType> NumpyDType(char kind, int size) {
  using ir::DataType;
  switch (kind) {
    case 'f': return size == 2 ? std::optional(DataType::kFP16) : size == 4 ? std::optional(DataType::kFP32) : std::nullopt;
    case 'i':
      return size == 1 ? std::optional(DataType::kInt8) : size == 2 ? std::optional(DataType::kInt16)
           : size == 4 ? std::optional(DataType::kInt32) : size == 8 ? std::optional(DataType::kInt64) : std::nullopt;
    case 'u':
      return size == 1 ? std::optional(DataType::kUInt8) : size == 2 ? std::optional(DataType::kUInt16)
           : size == 4 ? std::optional(DataType::kUInt32) : size == 8 ? std::optional(DataType::kUInt64) : std::nullopt;
    case 'b': return size == 1 ? std::optional(DataType::kBool) : std::nullopt;
    default: return std::nullopt;
  }
}

// torch is imported lazily: only when a non-numpy argument arrives and torch is already loaded.
struct TorchTypes {
  PyObject* tensor_type = nullptr;
  std::vector<std::pair<PyObject*, ir::DataType>> dtypes;
  bool tried = false;
};
TorchTypes& Torch() {
  static TorchTypes* t = new TorchTypes();
  if (!t->tensor_type && !t->tried) {
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* torch = PyDict_GetItemString(modules, "torch");
    if (!torch) return *t;  // not loaded yet: try again next time
    t->tried = true;
    py::module_ mod = py::reinterpret_borrow<py::module_>(torch);
    t->tensor_type = py::object(mod.attr("Tensor")).release().ptr();
    using ir::DataType;
    for (auto [name, dtype] : std::initializer_list<std::pair<const char*, DataType>>{
             {"float16", DataType::kFP16}, {"bfloat16", DataType::kBF16}, {"float32", DataType::kFP32},
             {"int8", DataType::kInt8}, {"int16", DataType::kInt16}, {"int32", DataType::kInt32},
             {"int64", DataType::kInt64}, {"uint8", DataType::kUInt8}, {"bool", DataType::kBool}}) {
      t->dtypes.emplace_back(py::object(mod.attr(name)).release().ptr(), dtype);
    }
  }
  return *t;
}

class Kernel;
[[noreturn]] void ArgError(bool type_error, const std::string& message) {
  if (type_error) throw py::type_error(message);
  throw py::value_error(message);
}

// Fills `view` from a numpy array or torch tensor; false when `obj` is neither.
// `where()` names the argument in messages; only called on errors (no strings on the hot path).
template <typename Where>
bool ReadTensor(PyObject* obj, TensorView& view, const Where& where) {
  auto& np = py::detail::npy_api::get();
  if (np.PyArray_Check_(obj)) {
    auto* arr = py::detail::array_proxy(obj);
    auto* descr = py::detail::array_descriptor_proxy(arr->descr);
 if (arr->nd > kMaxRank) ArgError(false, where() + " has " + std::to_string(arr->nd) + " dims; at most 8 are supported");
    view.data = reinterpret_cast<uint64_t>(arr->data);
    view.ndim = arr->nd;
    view.elsize = descr->elsize;
    auto dtype = descr->byteorder == '>' ? std::nullopt : NumpyDType(descr->kind, descr->elsize);
    view.dtype_known = dtype.has_value();
    if (dtype) view.dtype = *dtype;
    for (int i = 0; i < arr->nd; ++i) {
      view.shape[i] = arr->dimensions[i];
      view.strides[i] = view.elsize ? arr->strides[i] / view.elsize : 0;
      if (view.elsize && arr->strides[i] % view.elsize != 0) view.strides[i] = -1;
    }
    return true;
  }
  TorchTypes& torch = Torch();
  if (!torch.tensor_type || !PyObject_IsInstance(obj, torch.tensor_type)) return false;
  py::handle t(obj);
  if (!t.attr("is_cpu").cast<bool>()) {
    ArgError(false, where() + " is on device '" + py::str(t.attr("device")).cast<std::string>() +
                        "'; the simulated device uses host (CPU) tensors");
  }
  py::object dtype = t.attr("dtype");
  view.dtype_known = false;
  for (auto& [obj_dtype, dt] : torch.dtypes) {
    if (dtype.ptr() == obj_dtype) {
      view.dtype = dt;
      view.dtype_known = true;
    }
  }
  py::tuple shape = t.attr("shape");
  py::tuple strides = t.attr("stride")();
  view.ndim = int(shape.size());
 if (view.ndim > kMaxRank) ArgError(false, where() + " has " + std::to_string(view.ndim) + " dims; at most 8 are supported");
  for (int i = 0; i < view.ndim; ++i) {
    view.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
    view.strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides.ptr(), i));
  }
  view.data = t.attr("data_ptr")().cast<uint64_t>();
  return true;
}

std::string ShapeText(const TensorView& v) {
  std::string s = "(";
  for (int i = 0; i < v.ndim; ++i) s += (i ? ", " : "") + std::to_string(v.shape[i]) + (v.ndim == 1 ? "," : "");
  return s + ")";
}

bool IsRowMajor(const TensorView& v) {
  int64_t expected = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    expected *= v.shape[i];
  }
  return true;
}

// ---- the kernel object ----
class Kernel {
 public:
  Kernel(std::string name, const std::vector<std::tuple<std::string, bool, std::string, std::vector<int64_t>>>& params,
         py::object compile_fn, py::object bind_fn, bool requires_dicts)
      : name_(std::move(name)), compile_fn_(std::move(compile_fn)), bind_fn_(std::move(bind_fn)),
        requires_dicts_(requires_dicts) {
    for (const auto& [pname, is_tensor, dtype, dims] : params) {
      ParamSpec spec;
      spec.name = pname;
      spec.is_tensor = is_tensor;
      auto dt = ir::DataTypeFromName(dtype);
      if (!dt) throw py::value_error("unknown dtype '" + dtype + "'");
      spec.dtype = *dt;
      spec.dims = dims;
      for (int64_t d : dims) has_static_ |= d == -1;
      params_.push_back(std::move(spec));
    }
    if (params_.size() > size_t(kMaxArgs)) throw py::value_error("a kernel takes at most 64 parameters");
  }

  const std::string& name() const { return name_; }
  bool requires_dicts() const { return requires_dicts_; }

  // Must hold the GIL.
  void Launch(PyStream& stream, int64_t block_dim, PyObject* const* args, Py_ssize_t nargs, PyObject* kwargs) {
    py::object bound;
    if ((kwargs && PyDict_GET_SIZE(kwargs) > 0) || nargs != Py_ssize_t(params_.size())) {
      // Keywords, defaults or a wrong count: the Python front end binds (and reports) them.
      py::tuple pos(nargs);
      for (Py_ssize_t i = 0; i < nargs; ++i) pos[i] = py::reinterpret_borrow<py::object>(args[i]);
      bound = bind_fn_(pos, kwargs ? py::reinterpret_borrow<py::object>(kwargs) : py::object(py::dict()));
      args = &PyTuple_GET_ITEM(bound.ptr(), 0);
      nargs = PyTuple_GET_SIZE(bound.ptr());
      if (nargs != Py_ssize_t(params_.size())) throw py::type_error(name_ + "(): argument binding failed");
    }

    uint64_t tensor_slots[kMaxArgs], scalar_slots[kMaxArgs], dyn_slots[kMaxArgs * kMaxRank];
    int n_tensor = 0, n_scalar = 0, n_dyn = 0;
    SignatureKey key;
    for (size_t i = 0; i < params_.size(); ++i) {
      const ParamSpec& p = params_[i];
      PyObject* obj = args[i];
      if (p.is_tensor) {
        TensorView view;
        auto where = [&] { return name_ + "(): argument '" + p.name + "'"; };
        if (!ReadTensor(obj, view, where)) {
          ArgError(true, where() + " must be a torch.Tensor or numpy.ndarray, got " + TypeName(obj));
        }
        if (!view.dtype_known || view.dtype != p.dtype) {
          std::string actual = py::str(py::handle(obj).attr("dtype")).cast<std::string>();
          ArgError(true, where() + " expects dtype " + std::string(ir::Name(p.dtype)) + " (pl." +
                             std::string(ir::Info(p.dtype).pl_name) + "), got " + actual);
        }
        if (view.ndim != int(p.dims.size())) {
          ArgError(true, where() + " expects a " + std::to_string(p.dims.size()) + "-D tensor, got " +
                             std::to_string(view.ndim) + "-D with shape " + ShapeText(view));
        }
        for (int d = 0; d < view.ndim; ++d) {
          int64_t spec = p.dims[size_t(d)], actual = view.shape[d];
          if (spec > 0 && actual != spec) {
            ArgError(true, where() + " dim " + std::to_string(d) + " must be " + std::to_string(spec) +
                               " (fixed in its annotation), got " + std::to_string(actual) + " in shape " +
                               ShapeText(view));
          }
          if (spec == -1) key.Push(actual);
          if (spec == -2) {
            if (actual > INT32_MAX) {
              ArgError(false, where() + " dim " + std::to_string(d) + " is " + std::to_string(actual) +
                                  "; DYNAMIC dims are int32 (at most 2147483647)");
            }
            dyn_slots[n_dyn++] = uint64_t(actual);
          }
        }
        if (!IsRowMajor(view)) {
          ArgError(false, where() + " must be contiguous (row-major) with shape " + ShapeText(view) +
                              "; pass .contiguous() / np.ascontiguousarray()");
        }
        tensor_slots[n_tensor++] = view.data;
      } else {
        scalar_slots[n_scalar++] = ReadScalar(p, obj);
      }
    }

    jit::Instance* inst = Lookup(key);
    if (!inst) inst = Compile(key);

    uint64_t slots[kMaxArgs + kMaxArgs * kMaxRank];
    int n = 0;
    for (int i = 0; i < n_tensor; ++i) slots[n++] = tensor_slots[i];
    for (int i = 0; i < n_scalar; ++i) slots[n++] = scalar_slots[i];
    for (int i = 0; i < n_dyn; ++i) slots[n++] = dyn_slots[i];
    uint32_t bd = uint32_t(std::min<int64_t>(block_dim, 1 << 20));
    int64_t seq = inst->launch(bd, stream.stream().handle(), slots);
    if (seq <= 0) throw std::runtime_error(name_ + ": the runtime refused the launch (ABI mismatch)");
    stream.KeepAlive(uint64_t(seq), args, size_t(nargs));
  }

  py::dict CacheInfo() const {
    py::dict d;
    d["compiles"] = compiles_;
    d["hits"] = hits_;
    d["misses"] = misses_;
    d["instances"] = instances_.size();
    return d;
  }

  py::list Instances() const {
    py::list out;
    for (const auto& inst : order_) out.append(py::cast(inst));
    return out;
  }

  void ClearCache() {
    instances_.clear();
    order_.clear();
    single_ = nullptr;
  }

 private:
  uint64_t ReadScalar(const ParamSpec& p, PyObject* obj) {
    auto where = [&] { return name_ + "(): argument '" + p.name + "'"; };
    using ir::DataType;
    if (p.dtype == DataType::kBool) {
      if (!PyBool_Check(obj)) ArgError(true, where() + " expects a bool, got " + TypeName(obj));
      return obj == Py_True ? 1 : 0;
    }
    if (ir::IsFloat(p.dtype)) {
      if (PyBool_Check(obj) || !(PyFloat_Check(obj) || PyLong_Check(obj))) {
        ArgError(true, where() + " expects a float (" + std::string(ir::Name(p.dtype)) + "), got " + TypeName(obj));
      }
      float f = float(PyFloat_AsDouble(obj));
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
      ArgError(true, where() + " expects an int (" + std::string(ir::Name(p.dtype)) + "), got " + TypeName(obj));
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    int bits = ir::Info(p.dtype).bits;
    bool is_signed = ir::Info(p.dtype).is_signed;
    long long lo = is_signed ? -(1LL << (bits - 1)) : 0;
    bool fits = overflow == 0 && v >= lo && (bits == 64 || v <= (is_signed ? (1LL << (bits - 1)) - 1 : (1LL << bits) - 1));
    if (!fits) {
      ArgError(false, where() + " = " + py::str(obj).cast<std::string>() + " does not fit in " +
                          std::string(ir::Name(p.dtype)));
    }
    return uint64_t(v);
  }

  // Must hold the GIL (it guards the cache).
  jit::Instance* Lookup(const SignatureKey& key) {
    if (!has_static_) {
      if (single_) ++hits_;
      return single_;
    }
    auto it = instances_.find(key);
    if (it == instances_.end()) return nullptr;
    ++hits_;
    return it->second.get();
  }

  jit::Instance* Compile(const SignatureKey& key) {
    // One compile per signature even when threads race: wait (GIL released) for the compile lock.
    {
      py::gil_scoped_release release;
      compile_mutex_.lock();
    }
    std::unique_lock<std::mutex> lock(compile_mutex_, std::adopt_lock);
    if (jit::Instance* done = Lookup(key)) return done;
    ++misses_;
    py::tuple statics(key.count);
    for (int i = 0; i < key.count; ++i) statics[i] = i < 16 ? key.values[i] : key.overflow[size_t(i - 16)];
    py::object result = compile_fn_(statics);
    auto inst = result.cast<std::shared_ptr<jit::Instance>>();
    ++compiles_;
    order_.push_back(inst);
    if (!has_static_) single_ = inst.get();
    instances_.emplace(key, inst);
    return inst.get();
  }

  std::string name_;
  std::vector<ParamSpec> params_;
  py::object compile_fn_;
  py::object bind_fn_;
  bool requires_dicts_;
  bool has_static_ = false;
  // The cache: guarded by the GIL; compile_mutex_ serialises compiles of this kernel.
  jit::Instance* single_ = nullptr;
  std::unordered_map<SignatureKey, std::shared_ptr<jit::Instance>, SignatureHash> instances_;
  std::vector<std::shared_ptr<jit::Instance>> order_;
  std::mutex compile_mutex_;
  int64_t compiles_ = 0, hits_ = 0, misses_ = 0;
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
  return overflow > 0 ? INT64_MAX : v;
}

// kernel[...] bound to its stream and block_dim.
struct Launcher {
  py::object kernel;         // keeps the kernel alive
  Kernel* impl;
  py::object stream_object;  // keeps the stream alive (kernel[Stream(), n] is common)
  PyStream* stream;
  int64_t block_dim;
};

}  // namespace

void BindLaunch(py::module_& m) {
  py::class_<Kernel>(m, "KernelBase", py::dynamic_attr())
      .def(py::init<std::string, const std::vector<std::tuple<std::string, bool, std::string, std::vector<int64_t>>>&,
                    py::object, py::object, bool>(),
           py::arg("name"), py::arg("params"), py::arg("compile_fn"), py::arg("bind_fn"), py::arg("requires_dicts"))
      .def("__getitem__",
           [](py::object self, py::handle key) {
             Kernel& k = self.cast<Kernel&>();
             std::string form = k.requires_dicts() ? "kernel[stream, block_dim, tiling_key_dict and/or datatype_dict]"
                                                   : "kernel[stream, block_dim] or kernel[block_dim]";
             if (PyTuple_Check(key.ptr())) {
               Py_ssize_t n = PyTuple_GET_SIZE(key.ptr());
               if (n == 2 && !k.requires_dicts()) {
                 py::handle stream = PyTuple_GET_ITEM(key.ptr(), 0);
                 PyStream& s = ResolveStream(stream);
                 return Launcher{self, &k, py::reinterpret_borrow<py::object>(stream), &s,
                                 ResolveBlockDim(PyTuple_GET_ITEM(key.ptr(), 1))};
               }
               throw py::value_error("kernel '" + k.name() + "': a launch takes " + form + ", got " +
                                     std::to_string(n) + " entries in the brackets");
             }
             if (k.requires_dicts()) {
               throw py::value_error("kernel '" + k.name() + "': a launch takes " + form);
             }
             return Launcher{self, &k, py::none(), &CurrentPyStream(), ResolveBlockDim(key)};
           })
      .def("__call__",
           [](py::object self, py::args args, py::kwargs kwargs) {
             Kernel& k = self.cast<Kernel&>();
             if (k.requires_dicts()) {
               throw py::value_error("kernel '" + k.name() +
                                     "' has a tiling_key or datatype schema: launch it as "
                                     "kernel[stream, block_dim, ...dicts](...)");
             }
             k.Launch(CurrentPyStream(), 1, &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()), kwargs.ptr());
           })
      .def("_cache_info", &Kernel::CacheInfo)
      .def("_instances", &Kernel::Instances)
      .def("_clear_cache", &Kernel::ClearCache);

  py::class_<Launcher>(m, "Launcher")
      .def("__call__", [](Launcher& l, py::args args, py::kwargs kwargs) {
        l.impl->Launch(*l.stream, l.block_dim, &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()),
                       kwargs.ptr());
      });
}

}  // namespace pypto_pro::python
