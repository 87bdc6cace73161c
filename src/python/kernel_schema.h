// The kernel signature as the launch path reads it: jit::KernelSignature (the one description,
// shared with the compile path) plus the Python objects arguments are read with: interned names,
// TilingData classes and the TilingKey class's is_valid.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "pypto_pro/jit/signature.h"

namespace pypto_pro::python {

namespace py = pybind11;

// A TilingKey class (pypto_pro._C.TilingKeySchema): packs launch dicts on the hot path, unpacks
// keys for the parser, enumerates the valid ones. is_valid runs once per distinct key.
struct PyTilingKey {
  std::string kernel_name;
  jit::TilingKeySchema schema;
  std::vector<py::object> names;  // interned field names, definition order
  py::object accept;              // accept(values: tuple) -> bool (the class's is_valid), or None
  std::unordered_set<uint64_t> accepted;

  // A launch's {field: value}: the packed key, or ValueError naming what is wrong.
  uint64_t Pack(py::handle dict);
  bool Accepts(const std::vector<int64_t>& values) const;
  py::dict ValuesOf(uint64_t packed) const;
};

// Per parameter: what reading its argument needs besides jit::ParamSpec.
struct PyParam {
  py::object name;                     // interned
  py::object tiling_class;             // TilingData
  std::vector<py::object> field_names; // TilingData fields, interned
};

struct KernelSchema {
  jit::KernelSignature sig;
  std::vector<PyParam> py_params;
  std::shared_ptr<PyTilingKey> tiling_key;  // also the front end's kernel.tiling_key
  std::vector<py::object> datatype_names;   // interned, datatype schema order
  // Launcher slot of each parameter (tensors, scalars, TilingData) and of each DYNAMIC dim, in the
  // one order of ir/launcher_slots.h.
  std::vector<int> param_slot;
  std::vector<int> dynamic_slot;
  std::vector<int> bytes_slot;  // per parameter: the slot of a pl.Ptr's buffer size, else -1
  int num_slots = 0;
};

// From the front end's description: params = [{name, kind (tensor, ptr, scalar, tiling), dtype, dims,
// dt_entry, cls, size, fields}], schema = {tiling_key: _C.TilingKeySchema, datatype: {params, var_of, var_names}}.
KernelSchema ParseKernelSchema(const std::string& name, const py::list& params, const py::dict& schema);

// A launch's datatype dict into one dtype code per entry; ValueError/TypeError naming the entry.
void ParseDatatype(const KernelSchema& schema, py::handle dict, uint8_t* dtypes);

void BindKernelSchema(py::module_& m);

}  // namespace pypto_pro::python
