// The module globals and closure variables a kernel's compile read (constants, helpers, TileTypes).
// When one is rebound later every instance is stale, so a launch compares them first, as Triton
// does, and recompiles. Guarded by the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pypto_pro::python {

namespace py = pybind11;

class CaptureWatch {
 public:
  // (container, name, value): the globals dict or closure cell, the name read, the value seen.
  void Add(const py::tuple& capture);
  bool empty() const { return captures_.empty(); }
  // True when every capture still holds the value its compile saw; false (logged, and the watch
  // emptied) when one changed.
  bool Current(const std::string& kernel_name);

 private:
  struct Capture {
    py::object container;
    py::object name;
    py::object value;
    bool cell = false;
  };
  struct WatchedDict {
    PyObject* dict;
    uint64_t version;  // ma_version_tag when every capture in it last matched
  };
  bool Stale(const std::string& kernel_name, const Capture& c, PyObject* now);

  std::vector<Capture> captures_;
  std::vector<WatchedDict> dicts_;
};

}  // namespace pypto_pro::python
