#include "kernel_schema.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <stdexcept>

#include "tensor_args.h"

namespace pypto_pro::python {

namespace {

py::object Interned(const std::string& text) {
  PyObject* s = PyUnicode_FromString(text.c_str());
  if (!s) throw py::error_already_set();
  PyUnicode_InternInPlace(&s);
  return py::reinterpret_steal<py::object>(s);
}

std::string JoinQuoted(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "'" : ", '") + s + "'";
  return out;
}

// "missing 'a' and unknown 'b'; its <what> are a, c": the keys of `dict` against `names`.
[[noreturn]] void KeysError(const std::string& prefix, py::handle dict, const std::vector<py::object>& names,
                            const std::string& what) {
  std::vector<std::string> missing, unknown, all;
  for (const py::object& n : names) {
    all.push_back(py::str(n).cast<std::string>());
    if (!PyDict_Contains(dict.ptr(), n.ptr())) missing.push_back(all.back());
  }
  for (auto item : py::reinterpret_borrow<py::dict>(dict)) {
    bool known = false;
    for (const py::object& n : names) known |= n.equal(item.first);
    if (!known) unknown.push_back(py::str(item.first).cast<std::string>());
  }
  std::string text = (missing.empty() ? "" : "missing " + JoinQuoted(missing)) +
                     (!missing.empty() && !unknown.empty() ? " and " : "") +
                     (unknown.empty() ? "" : "unknown " + JoinQuoted(unknown));
  std::string list;
  for (const std::string& n : all) list += (list.empty() ? "" : ", ") + n;
  ArgError(false, prefix + text + "; its " + what + " are " + list);
}

}  // namespace

uint64_t PyTilingKey::Pack(py::handle key) {
  const std::string who = "kernel '" + kernel_name + "': ";
  if (!PyDict_Check(key.ptr())) {
    ArgError(false, who + "the TilingKey of a launch must be a dict {field: value}, got " + TypeName(key.ptr()));
  }
  std::vector<int> indices(names.size(), 0);
  Py_ssize_t found = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    PyObject* value = PyDict_GetItemWithError(key.ptr(), names[i].ptr());
    if (!value) {
      if (PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    ++found;
    int overflow = 0;
    const bool is_int = PyLong_Check(value) && !PyBool_Check(value);
    long long v = is_int ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
    const std::vector<int64_t>& candidates = schema.fields[i].values;
    auto it = std::find(candidates.begin(), candidates.end(), int64_t(v));
    if (!is_int || overflow || it == candidates.end()) {
      std::string list;
      for (int64_t c : candidates) list += (list.empty() ? "" : ", ") + std::to_string(c);
      ArgError(false, who + "TilingKey field '" + schema.fields[i].name + "' = " + py::repr(value).cast<std::string>() +
                          " is not one of its values [" + list + "]");
    }
    indices[i] = int(it - candidates.begin());
  }
  if (found != Py_ssize_t(names.size()) || PyDict_GET_SIZE(key.ptr()) != found) {
    KeysError(who + "TilingKey dict has ", key, names, "fields");
  }
  const uint64_t packed = schema.Pack(indices);
  if (!accepted.count(packed)) {
    const std::vector<int64_t> values = schema.Unpack(packed);
    if (!Accepts(values)) {
      ArgError(false, who + "TilingKey " + schema.Describe(values) + " is rejected by " + schema.class_name +
                          ".is_valid");
    }
    accepted.insert(packed);
  }
  return packed;
}

bool PyTilingKey::Accepts(const std::vector<int64_t>& values) const {
  if (accept.is_none()) return true;
  py::tuple t(values.size());
  for (size_t i = 0; i < values.size(); ++i) t[i] = py::int_(values[i]);
  return accept(t).cast<bool>();
}

py::dict PyTilingKey::ValuesOf(uint64_t packed) const {
  py::dict d;
  const std::vector<int64_t> values = schema.Unpack(packed);
  for (size_t i = 0; i < values.size(); ++i) d[names[i]] = py::int_(values[i]);
  return d;
}

KernelSchema ParseKernelSchema(const std::string& name, const py::list& params, const py::dict& schema) {
  KernelSchema out;
  out.sig.name = name;
  for (py::handle h : params) {
    py::dict d = h.cast<py::dict>();
    jit::ParamSpec spec;
    PyParam py_param;
    spec.name = d["name"].cast<std::string>();
    py_param.name = Interned(spec.name);
    const std::string kind = d["kind"].cast<std::string>();
    spec.kind = kind == "tensor"   ? jit::ParamKind::kTensor
                : kind == "scalar" ? jit::ParamKind::kScalar
                : kind == "ptr"    ? jit::ParamKind::kPtr
                                   : jit::ParamKind::kTiling;
    if (spec.kind != jit::ParamKind::kTiling) {
      auto dt = ir::DataTypeFromName(d["dtype"].cast<std::string>());
      if (!dt) throw py::value_error("unknown dtype for parameter '" + spec.name + "'");
      spec.dtype = *dt;
    }
    if (spec.kind == jit::ParamKind::kTensor) spec.dims = d["dims"].cast<std::vector<int64_t>>();
    if (spec.kind == jit::ParamKind::kTensor || spec.kind == jit::ParamKind::kPtr) {
      spec.dt_entry = d.contains("dt_entry") ? d["dt_entry"].cast<int>() : -1;
    }
    if (spec.kind == jit::ParamKind::kTiling) {
      py_param.tiling_class = d["cls"];
      spec.tiling_size = d["size"].cast<size_t>();
      for (py::handle f : d["fields"]) {
        auto [fname, dtype, count, offset] = f.cast<std::tuple<std::string, std::string, int, size_t>>();
        py_param.field_names.push_back(Interned(fname));
        spec.fields.push_back({fname, *ir::DataTypeFromName(dtype), count, offset});
      }
    }
    out.sig.params.push_back(std::move(spec));
    out.py_params.push_back(std::move(py_param));
  }
  if (schema.contains("tiling_key")) {
    out.tiling_key = schema["tiling_key"].cast<std::shared_ptr<PyTilingKey>>();
    out.sig.tiling_key = out.tiling_key->schema;
  }
  if (schema.contains("datatype")) {
    py::dict d = schema["datatype"].cast<py::dict>();
    jit::DatatypeSchema dt;
    dt.params = d["params"].cast<std::vector<std::string>>();
    dt.var_of = d["var_of"].cast<std::vector<int>>();
    dt.var_names = d["var_names"].cast<std::vector<std::string>>();
    for (const std::string& p : dt.params) out.datatype_names.push_back(Interned(p));
    out.sig.datatype = std::move(dt);
  }
  try {
    out.sig.Check();
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  const std::vector<ir::LauncherSlot> slots = out.sig.Slots();
  out.param_slot.assign(out.sig.params.size(), -1);
  out.bytes_slot.assign(out.sig.params.size(), -1);
  for (size_t n = 0; n < slots.size(); ++n) {
    if (slots[n].kind == ir::SlotKind::kDynamicDim) {
      out.dynamic_slot.push_back(int(n));
    } else if (slots[n].kind == ir::SlotKind::kBufferBytes) {
      out.bytes_slot[size_t(slots[n].param)] = int(n);
    } else {
      out.param_slot[size_t(slots[n].param)] = int(n);
    }
  }
  out.num_slots = int(slots.size());
  return out;
}

void ParseDatatype(const KernelSchema& schema, py::handle dict, uint8_t* dtypes) {
  const std::string who = "kernel '" + schema.sig.name + "': ";
  if (!PyDict_Check(dict.ptr())) {
    ArgError(false, who + "the datatype of a launch must be a dict {parameter: pl.DT_*}, got " + TypeName(dict.ptr()));
  }
  const jit::DatatypeSchema& dt = *schema.sig.datatype;
  std::vector<int> var_dtype(dt.var_names.size(), -1);
  std::vector<int> var_first(dt.var_names.size(), -1);
  Py_ssize_t found = 0;
  for (size_t i = 0; i < dt.params.size(); ++i) {
    PyObject* value = PyDict_GetItemWithError(dict.ptr(), schema.datatype_names[i].ptr());
    if (!value) {
      if (PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    ++found;
    ir::DataType dtype;
    if (!DTypeOfObject(value, dtype)) {
      ArgError(true, who + "datatype['" + dt.params[i] + "'] must be a pl.DT_* dtype, got " +
                         py::repr(value).cast<std::string>());
    }
    if (!ir::Info(dtype).supported) {
      ArgError(false, who + "datatype['" + dt.params[i] + "'] = pl." + std::string(ir::Info(dtype).pl_name) +
                          " is not supported yet");
    }
    const size_t var = size_t(dt.var_of[i]);
    if (var_dtype[var] >= 0 && var_dtype[var] != int(dtype)) {
      ArgError(false, who + "datatype['" + dt.params[size_t(var_first[var])] + "'] and ['" + dt.params[i] +
                          "'] share the variable '" + dt.var_names[var] + "' but are pl." +
                          std::string(ir::Info(ir::DataType(var_dtype[var])).pl_name) + " and pl." +
                          std::string(ir::Info(dtype).pl_name));
    }
    var_dtype[var] = int(dtype);
    if (var_first[var] < 0) var_first[var] = int(i);
    dtypes[i] = uint8_t(dtype);
  }
  if (found != Py_ssize_t(dt.params.size()) || PyDict_GET_SIZE(dict.ptr()) != found) {
    KeysError(who + "datatype dict has ", dict, schema.datatype_names, "parameters");
  }
}

void BindKernelSchema(py::module_& m) {
  py::class_<PyTilingKey, std::shared_ptr<PyTilingKey>>(m, "TilingKeySchema",
                                                        "A checked TilingKey class (pl.jit(tiling_key=...)).")
      .def(py::init([](const std::string& kernel, const std::string& class_name,
                       const std::vector<std::tuple<std::string, int, std::vector<int64_t>>>& fields,
                       const std::vector<std::string>& reserved, py::object accept) {
             std::vector<jit::TilingKeySchema::Field> declared;
             for (const auto& [name, bits, values] : fields) declared.push_back({name, bits, values, 0});
             auto key = std::make_shared<PyTilingKey>();
             key->kernel_name = kernel;
             try {
               key->schema = jit::TilingKeySchema::Declare(kernel, class_name, std::move(declared), reserved);
             } catch (const std::invalid_argument& e) {
               throw py::value_error(e.what());
             }
             for (const auto& f : key->schema.fields) key->names.push_back(Interned(f.name));
             key->accept = std::move(accept);
             return key;
           }),
           py::arg("kernel"), py::arg("class_name"), py::arg("fields"), py::arg("reserved"), py::arg("accept"))
      .def_property_readonly("name", [](const PyTilingKey& k) { return k.schema.class_name; })
      .def_property_readonly("names", [](const PyTilingKey& k) {
        std::vector<std::string> out;
        for (const auto& f : k.schema.fields) out.push_back(f.name);
        return out;
      })
      .def("pack", &PyTilingKey::Pack, py::arg("key"), "The packed key of a {field: value} dict (ValueError if invalid).")
      .def("unpack", &PyTilingKey::ValuesOf, py::arg("packed"), "The {field: value} dict of a packed key.")
      .def("enumerate_valid", [](const PyTilingKey& k) {
        py::list out;
        for (uint64_t packed : k.schema.Enumerate([&](const std::vector<int64_t>& v) { return k.Accepts(v); })) {
          out.append(k.ValuesOf(packed));
        }
        return out;
      }, "Every {field: value} dict is_valid accepts, in packed order.");
}

}  // namespace pypto_pro::python
