// The launch hot path: kernel[stream, block_dim(, tiling_key)(, datatype)](*args) reads tensor
// metadata, validates it, looks the compiled instance up by integer key, packs the launcher slots
// and enqueues, all in C++. Everything here runs with the GIL held unless a comment says otherwise.
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "bindings.h"
#include "pypto_pro/jit/instance.h"
#include "pypto_pro/runtime/device.h"
#include "pypto_pro/support/fork.h"
#include "tensor_args.h"

namespace pypto_pro::python {

namespace {

constexpr int kMaxArgs = 64;
// A launch runs exactly block_dim blocks (in waves when they outnumber the cores), up to the
// hardware launcher's limit.
constexpr int64_t kMaxBlockDim = 65535;
constexpr int kMaxDatatypeEntries = 16;
// Dim codes of a tensor parameter (positive: a fixed size).
constexpr int64_t kStaticDim = -1, kDynamicDim = -2, kRestDims = -3;

enum class ParamKind { kTensor, kScalar, kTiling };

struct TilingField {
  py::object name;  // interned str
  std::string text;
  ir::DataType dtype;  // kInt64, kFP32 or kBool
  int count;           // 0: a scalar field, N: an array T[N]
  size_t offset;
};

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::kTensor;
  ir::DataType dtype = ir::DataType::kFP32;
  std::vector<int64_t> dims;  // tensors: fixed sizes or kStaticDim / kDynamicDim / a trailing kRestDims
  int dt_entry = -1;          // tensors named in the datatype schema: its entry gives the dtype
  py::object tiling_class;    // TilingData
  std::vector<TilingField> fields;
  size_t tiling_size = 0;
};

// The integer key of a compile signature: TilingKey, datatype codes, then STATIC dim values.
struct SignatureKey {
  int64_t values[16];
  int count = 0;
  std::vector<int64_t> overflow;
  void Push(int64_t v) {
    if (count < 16) values[count] = v;
    else overflow.push_back(v);
    ++count;
  }
  int64_t At(int i) const { return i < 16 ? values[i] : overflow[size_t(i - 16)]; }
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
    for (int i = 0; i < k.count; ++i) h = (h ^ uint64_t(k.At(i))) * 1099511628211ull;
    return size_t(h);
  }
};

// What the brackets selected besides stream and block_dim.
struct Selection {
  uint64_t tiling_key = 0;
  uint8_t dtypes[kMaxDatatypeEntries] = {};
};

struct TilingKeySpec {
  std::vector<py::object> names;  // interned field names, definition order
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> values;
  std::vector<int> offsets;
  py::object validate;  // Python: validate(packed) -> None or raises ValueError (is_valid)
  std::unordered_set<uint64_t> accepted;
};

struct DatatypeSpec {
  std::vector<py::object> names;  // interned parameter names
  std::vector<std::string> texts;
  std::vector<int> var_of;        // entry -> index of its dtype variable
  std::vector<std::string> var_names;
};

std::string JoinQuoted(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "'" : ", '") + s + "'";
  return out;
}

// What a tensor argument allows a kernel that writes it (bits of Launch's tensor_access).
constexpr uint8_t kReadOnly = 1, kRequiresGrad = 2, kGradLeaf = 4;

// A launch's packed TilingData: inline for the usual few dozen bytes.
struct TilingBuffer {
  alignas(16) uint8_t inline_bytes[512];
  std::unique_ptr<uint8_t[]> heap;
  uint8_t* Get(size_t size) {
    if (size <= sizeof inline_bytes) {
      std::memset(inline_bytes, 0, size);
      return inline_bytes;
    }
    heap.reset(new uint8_t[size]());
    return heap.get();
  }
};

[[noreturn]] void RaiseOverflow(const std::string& message) {
  PyErr_SetString(PyExc_OverflowError, message.c_str());
  throw py::error_already_set();
}

// A Python (or numpy) number as the fp32 a kernel receives; OverflowError naming `where` when it
// does not fit (inf and nan pass through as themselves).
float ToFP32(PyObject* obj, const std::string& where) {
  double d = PyFloat_AsDouble(obj);
  if (d == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
    PyErr_Clear();
    RaiseOverflow(where + " = " + py::str(obj).cast<std::string>().substr(0, 40) +
                  (PyLong_Check(obj) ? "..." : "") + " does not fit in fp32 (at most 3.4028235e+38 in magnitude)");
  }
  float f = float(d);
  if (std::isinf(f) && std::isfinite(d)) {
    RaiseOverflow(where + " = " + py::repr(obj).cast<std::string>() +
                  " does not fit in fp32 (at most 3.4028235e+38 in magnitude)");
  }
  return f;
}

class Kernel {
 public:
  Kernel(std::string name, const py::list& params, py::object compile_fn, py::object bind_fn, const py::dict& schema)
      : name_(std::move(name)), compile_fn_(std::move(compile_fn)), bind_fn_(std::move(bind_fn)) {
    for (py::handle h : params) params_.push_back(ParseParam(h.cast<py::dict>()));
    if (params_.size() > size_t(kMaxArgs)) throw py::value_error("a kernel takes at most 64 parameters");
    if (schema.contains("tiling_key")) ParseTilingKeySchema(schema["tiling_key"].cast<py::dict>());
    if (schema.contains("datatype")) ParseDatatypeSchema(schema["datatype"].cast<py::dict>());
  }

  const std::string& name() const { return name_; }
  bool has_tiling_key() const { return tk_ != nullptr; }
  bool has_datatype() const { return dt_ != nullptr; }
  bool requires_dicts() const { return tk_ || dt_; }

  std::string LaunchForm() const {
    std::string form = "kernel[stream, block_dim";
    if (tk_) form += ", tiling_key_dict";
    if (dt_) form += ", datatype_dict";
    return form + "](...)" + (requires_dicts() ? "" : " or kernel[block_dim](...)");
  }

  uint64_t ParseTilingKey(py::handle key) {
    if (!PyDict_Check(key.ptr())) {
      ArgError(false, "kernel '" + name_ + "': the TilingKey of a launch must be a dict {field: value}, got " +
                          TypeName(key.ptr()));
    }
    const TilingKeySpec& tk = *tk_;
    uint64_t packed = 0;
    Py_ssize_t found = 0;
    for (size_t i = 0; i < tk.names.size(); ++i) {
      PyObject* value = PyDict_GetItemWithError(key.ptr(), tk.names[i].ptr());
      if (!value) {
        if (PyErr_Occurred()) throw py::error_already_set();
        continue;
      }
      ++found;
      int overflow = 0;
      long long v = PyLong_Check(value) && !PyBool_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
      const auto& candidates = tk.values[i];
      auto it = std::find(candidates.begin(), candidates.end(), int64_t(v));
      if (!PyLong_Check(value) || PyBool_Check(value) || overflow || it == candidates.end()) {
        std::string list;
        for (int64_t c : candidates) list += (list.empty() ? "" : ", ") + std::to_string(c);
        ArgError(false, "kernel '" + name_ + "': TilingKey field '" + tk.texts[i] + "' = " +
                            py::repr(value).cast<std::string>() + " is not one of its values [" + list + "]");
      }
      packed |= uint64_t(it - candidates.begin()) << tk.offsets[i];
    }
    if (found != Py_ssize_t(tk.names.size()) || PyDict_GET_SIZE(key.ptr()) != found) {
      std::vector<std::string> missing, unknown;
      for (size_t i = 0; i < tk.names.size(); ++i) {
        if (!PyDict_Contains(key.ptr(), tk.names[i].ptr())) missing.push_back(tk.texts[i]);
      }
      for (auto item : py::reinterpret_borrow<py::dict>(key)) {
        bool known = false;
        for (const py::object& n : tk.names) known |= n.equal(item.first);
        if (!known) unknown.push_back(py::str(item.first).cast<std::string>());
      }
      std::string what = (missing.empty() ? "" : "missing " + JoinQuoted(missing)) +
                         (!missing.empty() && !unknown.empty() ? " and " : "") +
                         (unknown.empty() ? "" : "unknown " + JoinQuoted(unknown));
      std::string fields;
      for (const std::string& t : tk.texts) fields += (fields.empty() ? "" : ", ") + t;
      ArgError(false, "kernel '" + name_ + "': TilingKey dict has " + what + "; its fields are " + fields);
    }
    if (!tk_->accepted.count(packed)) {
      tk_->validate(packed);  // raises ValueError naming the key when is_valid rejects it
      tk_->accepted.insert(packed);
    }
    return packed;
  }

  void ParseDatatype(py::handle dict, Selection& sel) {
    if (!PyDict_Check(dict.ptr())) {
      ArgError(false, "kernel '" + name_ + "': the datatype of a launch must be a dict {parameter: pl.DT_*}, got " +
                          TypeName(dict.ptr()));
    }
    const DatatypeSpec& dt = *dt_;
    std::vector<int> var_dtype(dt.var_names.size(), -1);
    std::vector<int> var_first(dt.var_names.size(), -1);
    Py_ssize_t found = 0;
    for (size_t i = 0; i < dt.names.size(); ++i) {
      PyObject* value = PyDict_GetItemWithError(dict.ptr(), dt.names[i].ptr());
      if (!value) {
        if (PyErr_Occurred()) throw py::error_already_set();
        continue;
      }
      ++found;
      ir::DataType dtype;
      if (!DTypeOfObject(value, dtype)) {
        ArgError(true, "kernel '" + name_ + "': datatype['" + dt.texts[i] + "'] must be a pl.DT_* dtype, got " +
                           py::repr(value).cast<std::string>());
      }
      if (!ir::Info(dtype).supported) {
        ArgError(false, "kernel '" + name_ + "': datatype['" + dt.texts[i] + "'] = pl." +
                            std::string(ir::Info(dtype).pl_name) + " is not supported yet");
      }
      int var = dt.var_of[i];
      if (var_dtype[size_t(var)] >= 0 && var_dtype[size_t(var)] != int(dtype)) {
        ArgError(false, "kernel '" + name_ + "': datatype['" + dt.texts[size_t(var_first[size_t(var)])] + "'] and ['" +
                            dt.texts[i] + "'] share the variable '" + dt.var_names[size_t(var)] + "' but are pl." +
                            std::string(ir::Info(ir::DataType(var_dtype[size_t(var)])).pl_name) + " and pl." +
                            std::string(ir::Info(dtype).pl_name));
      }
      var_dtype[size_t(var)] = int(dtype);
      if (var_first[size_t(var)] < 0) var_first[size_t(var)] = int(i);
      sel.dtypes[i] = uint8_t(dtype);
    }
    if (found != Py_ssize_t(dt.names.size()) || PyDict_GET_SIZE(dict.ptr()) != found) {
      std::vector<std::string> missing, unknown;
      for (size_t i = 0; i < dt.names.size(); ++i) {
        if (!PyDict_Contains(dict.ptr(), dt.names[i].ptr())) missing.push_back(dt.texts[i]);
      }
      for (auto item : py::reinterpret_borrow<py::dict>(dict)) {
        bool known = false;
        for (const py::object& n : dt.names) known |= n.equal(item.first);
        if (!known) unknown.push_back(py::str(item.first).cast<std::string>());
      }
      std::string what = (missing.empty() ? "" : "missing " + JoinQuoted(missing)) +
                         (!missing.empty() && !unknown.empty() ? " and " : "") +
                         (unknown.empty() ? "" : "unknown " + JoinQuoted(unknown));
      std::string names;
      for (const std::string& t : dt.texts) names += (names.empty() ? "" : ", ") + t;
      ArgError(false, "kernel '" + name_ + "': datatype dict has " + what + "; its parameters are " + names);
    }
  }

  void Launch(PyStream& stream, int64_t block_dim, const Selection& sel, PyObject* const* args, Py_ssize_t nargs,
              PyObject* kwargs) {
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
    uint8_t tensor_param[kMaxArgs], tensor_access[kMaxArgs];  // per tensor: its parameter, kReadOnly | ...
    uint64_t tiling_slot = 0;
    TilingBuffer tiling;  // this launch's own: another thread may launch while this one compiles
    int n_tensor = 0, n_scalar = 0, n_dyn = 0;
    SignatureKey key;
    if (tk_) key.Push(int64_t(sel.tiling_key));
    if (dt_) {
      for (size_t i = 0; i < dt_->names.size(); ++i) key.Push(sel.dtypes[i]);
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      const ParamSpec& p = params_[i];
      PyObject* obj = args[i];
      ArgName arg{name_, p.name};
      if (p.kind == ParamKind::kScalar) {
        scalar_slots[n_scalar++] = ReadScalar(p, obj, arg);
        continue;
      }
      if (p.kind == ParamKind::kTiling) {
        tiling_slot = PackTiling(p, obj, arg, tiling);
        continue;
      }
      TensorView view;
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
      bool rest = !p.dims.empty() && p.dims.back() == kRestDims;
      int declared = int(p.dims.size()) - (rest ? 1 : 0);
      if (rest ? view.ndim < declared : view.ndim != declared) {
        ArgError(true, arg.str() + " expects a " + (rest ? "tensor of at least " : "") + std::to_string(declared) +
                           "-D" + (rest ? " dims" : " tensor") + ", got " + std::to_string(view.ndim) +
                           "-D with shape " + ShapeText(view));
      }
      if (rest) key.Push(view.ndim - declared);
      for (int d = 0; d < view.ndim; ++d) {
        int64_t spec = d < declared ? p.dims[size_t(d)] : kStaticDim, actual = view.shape[d];
        if (spec > 0 && actual != spec) {
          ArgError(true, arg.str() + " dim " + std::to_string(d) + " must be " + std::to_string(spec) +
                             " (fixed in its annotation), got " + std::to_string(actual) + " in shape " +
                             ShapeText(view));
        }
        if (spec == kStaticDim) key.Push(actual);
        if (spec == kDynamicDim) {
          if (actual > INT32_MAX) {
            ArgError(false, arg.str() + " dim " + std::to_string(d) + " is " + std::to_string(actual) +
                                "; DYNAMIC dims are int32 (at most 2147483647)");
          }
          dyn_slots[n_dyn++] = uint64_t(actual);
        }
      }
      if (!IsRowMajor(view)) {
        ArgError(false, arg.str() + " must be contiguous (row-major) with shape " + ShapeText(view) +
                            "; pass .contiguous() / np.ascontiguousarray()");
      }
      tensor_param[n_tensor] = uint8_t(i);
      tensor_access[n_tensor] = uint8_t((view.read_only ? kReadOnly : 0) | (view.requires_grad ? kRequiresGrad : 0) |
                                        (view.is_leaf ? kGradLeaf : 0));
      tensor_slots[n_tensor++] = view.data;
    }

    if (!captures_.empty() && !CapturesCurrent()) ++recompiles_;
    jit::Instance* inst = Lookup(key);
    if (!inst) {
      runtime::Device::Get();  // reads and checks the device's environment variables (ValueError)
      inst = Compile(key, sel);
    }
    for (int t : inst->written_tensors) {
      if (tensor_access[t]) RefuseWrite(params_[tensor_param[t]], tensor_access[t]);
    }

    uint64_t slots[kMaxArgs + kMaxArgs * kMaxRank + 1];
    int n = 0;
    for (int i = 0; i < n_tensor; ++i) slots[n++] = tensor_slots[i];
    for (int i = 0; i < n_scalar; ++i) slots[n++] = scalar_slots[i];
    for (int i = 0; i < n_dyn; ++i) slots[n++] = dyn_slots[i];
    if (tiling_slot) slots[n++] = tiling_slot;
    int64_t seq = inst->launch(uint32_t(block_dim), stream.stream().handle(), slots);  // copies the TilingData bytes
    if (seq <= 0) throw std::runtime_error(name_ + ": the runtime refused the launch (ABI mismatch)");
    stream.KeepAlive(uint64_t(seq), args, size_t(nargs));
  }

  py::dict CacheInfo() const {
    py::dict d;
    d["compiles"] = compiles_;
    d["hits"] = hits_;
    d["misses"] = misses_;
    d["stale"] = recompiles_;  // times a changed global or closure variable dropped the instances
    d["instances"] = instances_.size();
    return d;
  }

  py::list Instances() const {
    py::list out;
    for (const auto& inst : order_) out.append(py::cast(inst));
    return out;
  }

 private:
  static ParamSpec ParseParam(const py::dict& d) {
    ParamSpec spec;
    spec.name = d["name"].cast<std::string>();
    std::string kind = d["kind"].cast<std::string>();
    spec.kind = kind == "tensor" ? ParamKind::kTensor : kind == "scalar" ? ParamKind::kScalar : ParamKind::kTiling;
    if (spec.kind != ParamKind::kTiling) {
      auto dt = ir::DataTypeFromName(d["dtype"].cast<std::string>());
      if (!dt) throw py::value_error("unknown dtype for parameter '" + spec.name + "'");
      spec.dtype = *dt;
    }
    if (spec.kind == ParamKind::kTensor) {
      spec.dims = d["dims"].cast<std::vector<int64_t>>();
      spec.dt_entry = d.contains("dt_entry") ? d["dt_entry"].cast<int>() : -1;
    }
    if (spec.kind == ParamKind::kTiling) {
      spec.tiling_class = d["cls"];
      spec.tiling_size = d["size"].cast<size_t>();
      for (py::handle f : d["fields"]) {
        auto [fname, dtype, count, offset] = f.cast<std::tuple<std::string, std::string, int, size_t>>();
        PyObject* interned = PyUnicode_FromString(fname.c_str());
        PyUnicode_InternInPlace(&interned);
        spec.fields.push_back(
            {py::reinterpret_steal<py::object>(interned), fname, *ir::DataTypeFromName(dtype), count, offset});
      }
    }
    return spec;
  }

  void ParseTilingKeySchema(const py::dict& d) {
    tk_ = std::make_unique<TilingKeySpec>();
    for (py::handle n : d["names"]) {
      py::str name = py::reinterpret_borrow<py::str>(n);
      tk_->texts.push_back(name.cast<std::string>());
      tk_->names.push_back(name);
    }
    tk_->values = d["values"].cast<std::vector<std::vector<int64_t>>>();
    tk_->offsets = d["offsets"].cast<std::vector<int>>();
    tk_->validate = d["validate"];
  }

  void ParseDatatypeSchema(const py::dict& d) {
    dt_ = std::make_unique<DatatypeSpec>();
    for (py::handle n : d["params"]) {
      py::str name = py::reinterpret_borrow<py::str>(n);
      dt_->texts.push_back(name.cast<std::string>());
      dt_->names.push_back(name);
    }
    dt_->var_of = d["var_of"].cast<std::vector<int>>();
    dt_->var_names = d["var_names"].cast<std::vector<std::string>>();
    if (dt_->names.size() > size_t(kMaxDatatypeEntries)) {
      throw py::value_error("a datatype schema names at most 16 parameters");
    }
  }

  uint64_t ReadScalar(const ParamSpec& p, PyObject* obj, const ArgName& arg) {
    using ir::DataType;
    const ScalarKind kind = ScalarKindOf(obj);
    if (p.dtype == DataType::kBool) {
      if (kind != ScalarKind::kBool) ArgError(true, arg.str() + " expects a bool, got " + TypeName(obj));
      int truth = PyObject_IsTrue(obj);
      if (truth < 0) throw py::error_already_set();
      return truth ? 1 : 0;
    }
    if (ir::IsFloat(p.dtype)) {
      if (kind != ScalarKind::kInt && kind != ScalarKind::kFloat) {
        ArgError(true, arg.str() + " expects a float (" + std::string(ir::Name(p.dtype)) + "), got " + TypeName(obj));
      }
      float f = ToFP32(obj, arg.str());
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
    if (kind != ScalarKind::kInt) {
      ArgError(true, arg.str() + " expects an int (" + std::string(ir::Name(p.dtype)) + "), got " + TypeName(obj));
    }
    int overflow = 0;
    long long v = IntValue(obj, overflow);
    int bits = ir::Info(p.dtype).bits;
    bool is_signed = ir::Info(p.dtype).is_signed;
    long long lo = is_signed ? -(1LL << (bits - 1)) : 0;
    bool fits = overflow == 0 && v >= lo &&
                (bits == 64 || v <= (is_signed ? (1LL << (bits - 1)) - 1 : (1LL << bits) - 1));
    if (!fits) {
      RaiseOverflow(arg.str() + " = " + py::str(obj).cast<std::string>() + " does not fit in " +
                    std::string(ir::Name(p.dtype)));
    }
    return uint64_t(v);
  }

  // A tensor the instance writes that must not be written: the refusal numpy or torch itself gives.
  [[noreturn]] void RefuseWrite(const ParamSpec& p, uint8_t access) const {
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

  // Serialises a TilingData instance into the C struct layout of <Class>_tiling.h (natural
  // alignment); the launcher copies the bytes into the queued launch.
  uint64_t PackTiling(const ParamSpec& p, PyObject* obj, const ArgName& arg, TilingBuffer& buffer) {
    int is = PyObject_IsInstance(obj, p.tiling_class.ptr());
    if (is < 0) throw py::error_already_set();
    if (!is) {
      ArgError(true, arg.str() + " expects a " + py::str(p.tiling_class.attr("__name__")).cast<std::string>() +
                         " instance (TilingData), got " + TypeName(obj));
    }
    uint8_t* base = buffer.Get(p.tiling_size);
    for (const TilingField& f : p.fields) {
      py::object value = py::reinterpret_steal<py::object>(PyObject_GetAttr(obj, f.name.ptr()));
      if (!value) throw py::error_already_set();
      if (f.count == 0) {
        WriteTilingValue(f, value.ptr(), base + f.offset, arg, -1);
        continue;
      }
      if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
        ArgError(true, arg.str() + "." + f.text + " must be a list of " + std::to_string(f.count) + " values, got " +
                           TypeName(value.ptr()));
      }
      Py_ssize_t len = PySequence_Fast_GET_SIZE(value.ptr());
      if (len != f.count) {
        ArgError(false, arg.str() + "." + f.text + " must have exactly " + std::to_string(f.count) + " values, got " +
                            std::to_string(len));
      }
      PyObject** items = PySequence_Fast_ITEMS(value.ptr());
      size_t size = size_t(ir::Bytes(f.dtype));
      for (int k = 0; k < f.count; ++k) WriteTilingValue(f, items[k], base + f.offset + size_t(k) * size, arg, k);
    }
    return reinterpret_cast<uint64_t>(base);
  }

  // One value of a TilingData field (`index` >= 0: an element of an array field).
  static void WriteTilingValue(const TilingField& f, PyObject* v, uint8_t* out, const ArgName& arg, int index) {
    auto where = [&] { return arg.str() + "." + f.text + (index >= 0 ? "[" + std::to_string(index) + "]" : ""); };
    const ScalarKind kind = ScalarKindOf(v);
    if (f.dtype == ir::DataType::kBool) {
      if (kind != ScalarKind::kBool) ArgError(true, where() + " must be a bool, got " + TypeName(v));
      int truth = PyObject_IsTrue(v);
      if (truth < 0) throw py::error_already_set();
      *out = truth ? 1 : 0;
    } else if (f.dtype == ir::DataType::kFP32) {
      if (kind != ScalarKind::kInt && kind != ScalarKind::kFloat) {
        ArgError(true, where() + " must be a float, got " + TypeName(v));
      }
      float f = ToFP32(v, where());
      std::memcpy(out, &f, sizeof f);
    } else {
      if (kind != ScalarKind::kInt) ArgError(true, where() + " must be an int, got " + TypeName(v));
      int overflow = 0;
      int64_t i64 = IntValue(v, overflow);
      if (overflow) RaiseOverflow(where() + " = " + py::str(v).cast<std::string>() + " does not fit in int64");
      std::memcpy(out, &i64, sizeof i64);
    }
  }

  jit::Instance* Lookup(const SignatureKey& key) {
    if (single_) {
      ++hits_;
      return single_;
    }
    auto it = instances_.find(key);
    if (it == instances_.end()) return nullptr;
    ++hits_;
    return it->second.get();
  }

  // One compile per signature even when threads race; different signatures compile in parallel
  // (the host compiler runs with the GIL released). Waiting for another thread's compile of the same
  // signature is interruptible; in a forked child a lock the parent's compiling thread held is new.
  jit::Instance* Compile(const SignatureKey& key, const Selection& sel) {
    CompileLock& slot = compiling_[key];
    if (!slot.mutex || slot.generation != ForkGeneration()) {
      slot.mutex = std::make_shared<std::timed_mutex>();
      slot.generation = ForkGeneration();
    }
    std::shared_ptr<std::timed_mutex> mutex = slot.mutex;
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
    if (jit::Instance* done = Lookup(key)) return done;
    ++misses_;
    py::tuple statics(key.count - (tk_ ? 1 : 0) - (dt_ ? int(dt_->names.size()) : 0));
    int first = key.count - int(statics.size());
    for (int i = first; i < key.count; ++i) statics[size_t(i - first)] = key.At(i);
    py::object tk = tk_ ? py::object(py::int_(sel.tiling_key)) : py::object(py::none());
    py::object dts = py::none();
    if (dt_) {
      py::tuple names(dt_->names.size());
      for (size_t i = 0; i < dt_->names.size(); ++i) names[i] = std::string(ir::Name(ir::DataType(sel.dtypes[i])));
      dts = names;
    }
    py::tuple result = compile_fn_(statics, tk, dts);
    auto inst = result[0].cast<std::shared_ptr<jit::Instance>>();
    for (py::handle capture : result[1]) AddCapture(py::reinterpret_borrow<py::tuple>(capture));
    ++compiles_;
    order_.push_back(inst);
    instances_.emplace(key, inst);
    if (key.count == 0) single_ = inst.get();  // no specialisation: skip the map from now on
    compiling_.erase(key);
    return inst.get();
  }

  // ---- module globals and closure variables the compiled code was built with ----
  // A kernel reads them at compile time (constants, helpers, TileTypes); when one is rebound later
  // every instance is stale, so a launch compares them first, as Triton does, and recompiles.
  struct Capture {
    py::object container;  // the globals dict, or the closure cell
    py::object name;
    py::object value;      // what the compile saw
    bool cell = false;
  };
  struct WatchedDict {
    PyObject* dict;
    uint64_t version;  // ma_version_tag when every capture in it last matched
  };

  void AddCapture(const py::tuple& t) {
    Capture c{t[0], t[1], t[2], PyCell_Check(t[0].ptr()) != 0};
    for (const Capture& have : captures_) {
      if (have.container.is(c.container) && have.name.equal(c.name)) return;
    }
    if (!c.cell) {
      bool watched = false;
      for (const WatchedDict& w : dicts_) watched |= w.dict == c.container.ptr();
      if (!watched) dicts_.push_back({c.container.ptr(), 0});
    }
    captures_.push_back(std::move(c));
  }

  static uint64_t DictVersion(PyObject* dict) {
#if PY_VERSION_HEX < 0x030C0000
    return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;  // changes with every write
#else
    (void)dict;
    return 0;  // no version tag: compare every capture
#endif
  }

  // True when every capture still holds the value its compile saw.
  bool CapturesCurrent() {
    bool dicts_unchanged = true;
    for (const WatchedDict& w : dicts_) dicts_unchanged &= w.version != 0 && DictVersion(w.dict) == w.version;
    for (Capture& c : captures_) {
      if (!c.cell && dicts_unchanged) continue;
      PyObject* now = c.cell ? PyCell_GET(c.container.ptr()) : PyDict_GetItemWithError(c.container.ptr(), c.name.ptr());
      if (now == c.value.ptr()) continue;
      if (!now) {
        if (PyErr_Occurred()) throw py::error_already_set();
        return Stale(c, nullptr);
      }
      // Rebound to an equal value (a new float object of the same number): keep the instances.
      int same = Py_TYPE(now) == Py_TYPE(c.value.ptr()) ? PyObject_RichCompareBool(now, c.value.ptr(), Py_EQ) : 0;
      if (same < 0) {
        PyErr_Clear();
        same = 0;
      }
      if (!same) return Stale(c, now);
      c.value = py::reinterpret_borrow<py::object>(now);
    }
    for (WatchedDict& w : dicts_) w.version = DictVersion(w.dict);
    return true;
  }

  // A capture changed: every instance is dropped (queued launches keep their libraries loaded) and
  // the next lookup compiles anew.
  bool Stale(const Capture& c, PyObject* now) {
    // Leaked: a static py::object would be released after the interpreter is gone.
    static py::object* log = new py::object(py::module_::import("logging").attr("getLogger")("pypto_pro.jit"));
    log->attr("info")("kernel '%s': %s '%s' changed from %r to %r since it was compiled; recompiling", name_,
                     c.cell ? "closure variable" : "global", c.name, c.value,
                     now ? py::reinterpret_borrow<py::object>(now) : py::str("<deleted>"));
    instances_.clear();
    single_ = nullptr;
    captures_.clear();
    dicts_.clear();
    return false;
  }

  std::string name_;
  std::vector<ParamSpec> params_;
  py::object compile_fn_;
  py::object bind_fn_;
  std::unique_ptr<TilingKeySpec> tk_;
  std::unique_ptr<DatatypeSpec> dt_;
  // The cache: guarded by the GIL. compiling_ holds one mutex per signature being compiled.
  jit::Instance* single_ = nullptr;
  std::unordered_map<SignatureKey, std::shared_ptr<jit::Instance>, SignatureHash> instances_;
  struct CompileLock {
    std::shared_ptr<std::timed_mutex> mutex;
    uint64_t generation = 0;  // ForkGeneration() it was made in
  };
  std::unordered_map<SignatureKey, CompileLock, SignatureHash> compiling_;
  std::vector<Capture> captures_;  // guarded by the GIL, like the cache
  std::vector<WatchedDict> dicts_;
  std::vector<std::shared_ptr<jit::Instance>> order_;
  int64_t compiles_ = 0, hits_ = 0, misses_ = 0, recompiles_ = 0;
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
  m.def("torch_fast_path", &TorchFastPath, "True when torch tensors are read through libtorch (torch imported).");
  m.def("register_dtype_object", [](py::handle obj, const std::string& name) {
    auto dt = ir::DataTypeFromName(name);
    if (!dt) throw py::value_error("unknown dtype " + name);
    RegisterDTypeObject(obj.ptr(), *dt);
  });

  py::class_<Kernel>(m, "KernelBase", py::dynamic_attr())
      .def(py::init<std::string, const py::list&, py::object, py::object, const py::dict&>(), py::arg("name"),
           py::arg("params"), py::arg("compile_fn"), py::arg("bind_fn"), py::arg("schema"))
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
      .def("_cache_info", &Kernel::CacheInfo)
      .def("_instances", &Kernel::Instances);

  py::class_<Launcher>(m, "Launcher").def("__call__", [](Launcher& l, py::args args, py::kwargs kwargs) {
    l.impl->Launch(*l.stream, l.block_dim, l.selection, &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()),
                   kwargs.ptr());
  });
}

}  // namespace pypto_pro::python
