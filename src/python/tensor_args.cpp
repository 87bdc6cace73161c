#include "tensor_args.h"

#include <pybind11/numpy.h>

#include <optional>
#include <utility>
#include <vector>

namespace pypto_pro::python {

namespace {

std::optional<ir::DataType> NumpyDType(char kind, int size) {
  using ir::DataType;
  switch (kind) {
    case 'f':
      if (size == 2) return DataType::kFP16;
      if (size == 4) return DataType::kFP32;
      return std::nullopt;
    case 'i':
      if (size == 1) return DataType::kInt8;
      if (size == 2) return DataType::kInt16;
      if (size == 4) return DataType::kInt32;
      if (size == 8) return DataType::kInt64;
      return std::nullopt;
    case 'u':
      if (size == 1) return DataType::kUInt8;
      if (size == 2) return DataType::kUInt16;
      if (size == 4) return DataType::kUInt32;
      if (size == 8) return DataType::kUInt64;
      return std::nullopt;
    case 'b': return size == 1 ? std::optional(DataType::kBool) : std::nullopt;
    default: return std::nullopt;
  }
}

// torch is looked up lazily: only once a non-numpy argument arrives and torch is already imported.
struct TorchTypes {
  PyObject* tensor_type = nullptr;
  std::vector<std::pair<PyObject*, ir::DataType>> dtypes;
};

TorchTypes& Torch() {
  static TorchTypes* t = new TorchTypes();  // must hold the GIL
  if (!t->tensor_type) {
    PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
    if (!torch) return *t;
    py::module_ mod = py::reinterpret_borrow<py::module_>(torch);
    using ir::DataType;
    for (auto [name, dtype] : std::initializer_list<std::pair<const char*, DataType>>{
             {"float16", DataType::kFP16}, {"bfloat16", DataType::kBF16}, {"float32", DataType::kFP32},
             {"int8", DataType::kInt8}, {"int16", DataType::kInt16}, {"int32", DataType::kInt32},
             {"int64", DataType::kInt64}, {"uint8", DataType::kUInt8}, {"bool", DataType::kBool}}) {
      t->dtypes.emplace_back(py::object(mod.attr(name)).release().ptr(), dtype);
    }
    t->tensor_type = py::object(mod.attr("Tensor")).release().ptr();
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
  if (!torch.tensor_type || !PyObject_IsInstance(obj, torch.tensor_type)) return false;
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
  return true;
}

void RegisterDTypeObject(PyObject* obj, ir::DataType dtype) {
  Py_INCREF(obj);
  DTypeObjects().emplace_back(obj, dtype);
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

}  // namespace pypto_pro::python
