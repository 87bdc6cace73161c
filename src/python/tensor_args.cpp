#include "tensor_args.h"

#include "pypto_pro/support/config.h"

#include <pybind11/numpy.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace pypto_pro::python {

namespace {

// A numpy array's dtype (kind character and item size) in the dtype table (hw_tables.h).
std::optional<ir::DataType> NumpyDType(char kind, int size) {
  for (size_t i = 0; i < size_t(ir::DataType::kCount); ++i) {
    const char* np = hw::kDataTypes[i].numpy;
    if (np[0] == kind && np[1] - '0' == size && np[2] == 0) return ir::DataType(i);
  }
  return std::nullopt;
}

// libpypto_torch_args.so (src/torch_args): reads an at::Tensor directly.
using TorchRead = int (*)(PyObject*, uint64_t*, int*, int64_t*, int64_t*, int, int*, int*);
// Bits of pypto_torch_read's `flags`.
constexpr int kTorchOnCpu = 1, kTorchRequiresGrad = 2, kTorchLeaf = 4;
using TorchDTypeCode = int (*)(const char*);

// torch is looked up lazily: only once a non-numpy argument arrives and torch is already imported.
struct TorchTypes {
  PyObject* tensor_type = nullptr;
  py::object is_grad_enabled;                                // torch.is_grad_enabled, for the attribute path
  std::vector<std::pair<PyObject*, ir::DataType>> dtypes;  // torch.float16 ... for the attribute path
  TorchRead read = nullptr;                                  // the fast path, when the library loads
  std::vector<std::pair<int, ir::DataType>> codes;           // c10::ScalarType codes for it
};

// torch.<name> of each dtype torch has, from the dtype table (hw_tables.h).
std::vector<std::pair<const char*, ir::DataType>> TorchDTypes() {
  std::vector<std::pair<const char*, ir::DataType>> out;
  for (size_t i = 0; i < size_t(ir::DataType::kCount); ++i) {
    if (hw::kDataTypes[i].torch[0] && hw::kDataTypes[i].supported) out.emplace_back(hw::kDataTypes[i].torch, ir::DataType(i));
  }
  return out;
}

void LoadTorchFastPath(TorchTypes& t) {
  Dl_info self;
  if (!dladdr(reinterpret_cast<void*>(&LoadTorchFastPath), &self) || !self.dli_fname) return;
  std::string path = self.dli_fname;
  path = path.substr(0, path.rfind('/') + 1) + "libpypto_torch_args.so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;  // not built (no libtorch headers): the attribute path stays
  auto read = reinterpret_cast<TorchRead>(dlsym(lib, "pypto_torch_read_v2"));
  auto code = reinterpret_cast<TorchDTypeCode>(dlsym(lib, "pypto_torch_dtype_code"));
  if (!read || !code) return;
  for (auto [name, dtype] : TorchDTypes()) t.codes.emplace_back(code(name), dtype);
  t.read = read;
}

TorchTypes& Torch() {
  static TorchTypes* t = new TorchTypes();  // must hold the GIL
  if (!t->tensor_type) {
    PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
    if (!torch) return *t;
    const bool attribute_path = GetEnvFlag("PYPTO_PRO_TORCH_ATTRIBUTE_PATH");  // throws on a bad value
    py::module_ mod = py::reinterpret_borrow<py::module_>(torch);
    for (auto [name, dtype] : TorchDTypes()) t->dtypes.emplace_back(py::object(mod.attr(name)).release().ptr(), dtype);
    t->tensor_type = py::object(mod.attr("Tensor")).release().ptr();
    t->is_grad_enabled = mod.attr("is_grad_enabled");
    if (!attribute_path) LoadTorchFastPath(*t);
  }
  return *t;
}

std::vector<std::pair<PyObject*, ir::DataType>>& DTypeObjects() {
  static auto* objects = new std::vector<std::pair<PyObject*, ir::DataType>>();
  return *objects;
}

}  // namespace

void ArgError(bool type_error, const std::string& message) {
  if (type_error) throw py::type_error(message);
  throw py::value_error(message);
}

std::string TypeName(PyObject* obj) {
  PyTypeObject* t = Py_TYPE(obj);
  if (std::strchr(t->tp_name, '.')) return t->tp_name;  // already qualified ("numpy.float32")
  py::object module = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(t)).attr("__module__");
  std::string mod = py::isinstance<py::str>(module) ? module.cast<std::string>() : "";
  return (mod.empty() || mod == "builtins" ? "" : mod + ".") + t->tp_name;
}

std::string ShapeText(const TensorView& v) {
  std::string s = "(";
  for (int i = 0; i < v.ndim; ++i) s += (i ? ", " : "") + std::to_string(v.shape[i]) + (v.ndim == 1 ? "," : "");
  return s + ")";
}

bool IsRowMajor(const TensorView& v) {
  for (int i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return true;  // no elements: any strides describe the same (empty) layout
  }
  int64_t expected = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    expected *= v.shape[i];
  }
  return true;
}

bool ReadTensor(PyObject* obj, TensorView& view, const ArgName& name) {
  auto& np = py::detail::npy_api::get();
  if (np.PyArray_Check_(obj)) {
    auto* arr = py::detail::array_proxy(obj);
    auto* descr = py::detail::array_descriptor_proxy(arr->descr);
    if (arr->nd > kMaxRank) {
      ArgError(false, name.str() + " has " + std::to_string(arr->nd) + " dims; at most 8 are supported");
    }
    view.data = reinterpret_cast<uint64_t>(arr->data);
    view.ndim = arr->nd;
    view.read_only = !(arr->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_);
    auto dtype = descr->byteorder == '>' ? std::nullopt : NumpyDType(descr->kind, descr->elsize);
    view.dtype_known = dtype.has_value();
    if (dtype) view.dtype = *dtype;
    for (int i = 0; i < arr->nd; ++i) {
      view.shape[i] = arr->dimensions[i];
      bool whole = descr->elsize > 0 && arr->strides[i] % descr->elsize == 0;
      view.strides[i] = whole ? arr->strides[i] / descr->elsize : -1;
    }
    return true;
  }
  TorchTypes& torch = Torch();
  if (!torch.tensor_type) return false;
  if (torch.read) {
    int dtype_code = -1, flags = 0;
    if (!torch.read(obj, &view.data, &view.ndim, view.shape, view.strides, kMaxRank, &dtype_code, &flags)) {
      return false;
    }
    const bool on_cpu = flags & kTorchOnCpu;
    view.requires_grad = flags & kTorchRequiresGrad;
    view.is_leaf = flags & kTorchLeaf;
    if (view.ndim > kMaxRank) {
      ArgError(false, name.str() + " has " + std::to_string(view.ndim) + " dims; at most 8 are supported");
    }
    if (!on_cpu) {
      ArgError(false, name.str() + " is on device '" + py::str(py::handle(obj).attr("device")).cast<std::string>() +
                          "'; the simulated device uses host (CPU) tensors");
    }
    view.dtype_known = false;
    for (auto [code, dtype] : torch.codes) {
      if (code == dtype_code) {
        view.dtype = dtype;
        view.dtype_known = true;
      }
    }
    return true;
  }
  if (!PyObject_IsInstance(obj, torch.tensor_type)) return false;
  py::handle t(obj);
  if (!t.attr("is_cpu").cast<bool>()) {
    ArgError(false, name.str() + " is on device '" + py::str(t.attr("device")).cast<std::string>() +
                        "'; the simulated device uses host (CPU) tensors");
  }
  py::object dtype = t.attr("dtype");
  view.dtype_known = false;
  for (auto& [object, dt] : torch.dtypes) {
    if (dtype.ptr() == object) {
      view.dtype = dt;
      view.dtype_known = true;
    }
  }
  py::tuple shape = t.attr("shape");
  py::tuple strides = t.attr("stride")();
  view.ndim = int(shape.size());
  if (view.ndim > kMaxRank) {
    ArgError(false, name.str() + " has " + std::to_string(view.ndim) + " dims; at most 8 are supported");
  }
  for (int i = 0; i < view.ndim; ++i) {
    view.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
    view.strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides.ptr(), i));
  }
  view.data = t.attr("data_ptr")().cast<uint64_t>();
  if (t.attr("requires_grad").cast<bool>() && torch.is_grad_enabled().cast<bool>()) {
    view.requires_grad = true;
    view.is_leaf = t.attr("is_leaf").cast<bool>();
  }
  return true;
}

bool TorchFastPath() { return Torch().read != nullptr; }

ScalarKind ScalarKindOf(PyObject* obj) {
  if (PyBool_Check(obj)) return ScalarKind::kBool;
  if (PyLong_Check(obj)) return ScalarKind::kInt;
  if (PyFloat_Check(obj)) return ScalarKind::kFloat;
  struct NumpyTypes {
    PyObject* bool_ = nullptr;
    PyObject* integer = nullptr;
    PyObject* floating = nullptr;
  };
  static NumpyTypes* types = new NumpyTypes();  // must hold the GIL
  if (!types->bool_) {
    PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");
    if (!np) return ScalarKind::kNone;  // never imported: no numpy scalar exists
    py::module_ mod = py::reinterpret_borrow<py::module_>(np);
    types->integer = py::object(mod.attr("integer")).release().ptr();
    types->floating = py::object(mod.attr("floating")).release().ptr();
    types->bool_ = py::object(mod.attr("bool_")).release().ptr();
  }
  auto is = [&](PyObject* type) { return PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(type)) != 0; };
  if (is(types->bool_)) return ScalarKind::kBool;
  if (is(types->integer)) return ScalarKind::kInt;
  if (is(types->floating)) return ScalarKind::kFloat;
  return ScalarKind::kNone;
}

long long IntValue(PyObject* obj, int& overflow) {
  if (PyLong_Check(obj)) return PyLong_AsLongLongAndOverflow(obj, &overflow);
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj));  // numpy integers
  if (!index) throw py::error_already_set();
  return PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
}

void RegisterDTypeObject(PyObject* obj, ir::DataType dtype) {
  Py_INCREF(obj);
  DTypeObjects().emplace_back(obj, dtype);
}

PyObject* DTypeObject(ir::DataType dtype) {
  for (auto& [object, registered] : DTypeObjects()) {
    if (registered == dtype) return object;
  }
  return nullptr;
}

bool DTypeOfObject(PyObject* obj, ir::DataType& out) {
  for (auto& [object, dtype] : DTypeObjects()) {
    if (object == obj) {
      out = dtype;
      return true;
    }
  }
  return false;
}

namespace {

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

// One value of a TilingData field (`index` >= 0: an element of an array field).
void WriteTilingValue(const jit::TilingFieldSpec& f, PyObject* v, uint8_t* out, const ArgName& arg, int index) {
  auto where = [&] { return arg.str() + "." + f.name + (index >= 0 ? "[" + std::to_string(index) + "]" : ""); };
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
    const float value = ToFP32(v, where());
    std::memcpy(out, &value, sizeof value);
  } else {
    if (kind != ScalarKind::kInt) ArgError(true, where() + " must be an int, got " + TypeName(v));
    int overflow = 0;
    int64_t i64 = IntValue(v, overflow);
    if (overflow) RaiseOverflow(where() + " = " + py::str(v).cast<std::string>() + " does not fit in int64");
    std::memcpy(out, &i64, sizeof i64);
  }
}

}  // namespace

uint64_t ReadScalar(const jit::ParamSpec& p, PyObject* obj, const ArgName& arg) {
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


uint8_t* TilingBuffer::Get(size_t size) {
  if (size <= sizeof inline_bytes) {
    std::memset(inline_bytes, 0, size);
    return inline_bytes;
  }
  heap.reset(new uint8_t[size]());
  return heap.get();
}


// Serialises a TilingData instance into the C struct layout of <Class>_tiling.h (natural
// alignment); the launcher copies the bytes into the queued launch.
uint64_t PackTiling(const jit::ParamSpec& p, const PyParam& py_param, PyObject* obj, const ArgName& arg,
                    TilingBuffer& buffer) {
  int is = PyObject_IsInstance(obj, py_param.tiling_class.ptr());
  if (is < 0) throw py::error_already_set();
  if (!is) {
    ArgError(true, arg.str() + " expects a " + py::str(py_param.tiling_class.attr("__name__")).cast<std::string>() +
                       " instance (TilingData), got " + TypeName(obj));
  }
  uint8_t* base = buffer.Get(p.tiling_size);
  for (size_t i = 0; i < p.fields.size(); ++i) {
    const jit::TilingFieldSpec& f = p.fields[i];
    py::object value = py::reinterpret_steal<py::object>(PyObject_GetAttr(obj, py_param.field_names[i].ptr()));
    if (!value) throw py::error_already_set();
    if (f.count == 0) {
      WriteTilingValue(f, value.ptr(), base + f.offset, arg, -1);
      continue;
    }
    if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
      ArgError(true, arg.str() + "." + f.name + " must be a list of " + std::to_string(f.count) + " values, got " +
                         TypeName(value.ptr()));
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(value.ptr());
    if (len != f.count) {
      ArgError(false, arg.str() + "." + f.name + " must have exactly " + std::to_string(f.count) + " values, got " +
                          std::to_string(len));
    }
    PyObject** items = PySequence_Fast_ITEMS(value.ptr());
    size_t size = size_t(ir::Bytes(f.dtype));
    for (int k = 0; k < f.count; ++k) WriteTilingValue(f, items[k], base + f.offset + size_t(k) * size, arg, k);
  }
  return reinterpret_cast<uint64_t>(base);
}

}  // namespace pypto_pro::python
