// Reading kernel arguments on the launch path: numpy arrays and torch tensors, used in place.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernel_schema.h"
#include "pypto_pro/ir/dtype.h"

namespace pypto_pro::python {

namespace py = pybind11;

constexpr int kMaxRank = 8;

struct TensorView {
  uint64_t data = 0;
  int ndim = 0;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];  // in elements
  bool dtype_known = false;   // false: a dtype the tile language has no name for (float64, complex, ...)
  ir::DataType dtype = ir::DataType::kFP32;
  bool read_only = false;     // numpy: the array is not writeable (writeable=False, a bytes buffer, PROT_READ)
  bool requires_grad = false; // torch: requires grad while grad mode is on (autograd cannot see a kernel's write)
  bool is_leaf = false;       // torch: with requires_grad, a leaf (torch refuses in-place writes to it)
};

// Names an argument in messages ("add_kernel(): argument 'x'"); built only when an error is raised.
struct ArgName {
  const std::string& kernel;
  const std::string& param;
  std::string str() const { return kernel + "(): argument '" + param + "'"; }
};

[[noreturn]] void ArgError(bool type_error, const std::string& message);

// "numpy.ndarray", "torch.Tensor", "int" ...: for messages.
std::string TypeName(PyObject* obj);
std::string ShapeText(const TensorView& v);  // "(2, 3)"
bool IsRowMajor(const TensorView& v);

// Fills `view` from a numpy array or a CPU torch tensor; false when `obj` is neither.
bool ReadTensor(PyObject* obj, TensorView& view, const ArgName& name);

// The kind of a scalar argument: Python's bool, int and float, and numpy's scalars of the same kinds
// (np.bool_, np.int32, np.float32, ...). kNone for anything else.
enum class ScalarKind { kNone, kBool, kInt, kFloat };
ScalarKind ScalarKindOf(PyObject* obj);
// The value of a kInt scalar; `overflow` is set as PyLong_AsLongLongAndOverflow does.
long long IntValue(PyObject* obj, int& overflow);

// A scalar argument as its 64-bit launcher slot: bools and ints range-checked against the
// parameter's dtype (OverflowError), floats as fp32 bits.
uint64_t ReadScalar(const jit::ParamSpec& p, PyObject* obj, const ArgName& arg);

// A launch's packed TilingData: inline for the usual few dozen bytes.
struct TilingBuffer {
  alignas(16) uint8_t inline_bytes[512];
  std::unique_ptr<uint8_t[]> heap;
  uint8_t* Get(size_t size);
};

// Serialises a TilingData instance into the C struct layout of <Class>_tiling.h (natural
// alignment) in `buffer`; returns its address for the launcher slot.
uint64_t PackTiling(const jit::ParamSpec& p, const PyParam& py_param, PyObject* obj, const ArgName& arg,
                    TilingBuffer& buffer);

// True when torch tensors are read through libpypto_torch_args.so (torch must be imported).
bool TorchFastPath();

// pl.DT_* objects, registered once by the front end, to ir dtypes (identity lookup).
void RegisterDTypeObject(PyObject* obj, ir::DataType dtype);
bool DTypeOfObject(PyObject* obj, ir::DataType& out);
// The registered pl.DT_* object of `dtype` (borrowed), or nullptr.
PyObject* DTypeObject(ir::DataType dtype);

}  // namespace pypto_pro::python
