#include "captures.h"

namespace pypto_pro::python {

namespace {

uint64_t DictVersion(PyObject* dict) {
#if PY_VERSION_HEX < 0x030C0000
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;  // changes with every write
#else
  (void)dict;
  return 0;  // no version tag: compare every capture
#endif
}

}  // namespace

void CaptureWatch::Add(const py::tuple& t) {
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

bool CaptureWatch::Current(const std::string& kernel_name) {
  bool dicts_unchanged = true;
  for (const WatchedDict& w : dicts_) dicts_unchanged &= w.version != 0 && DictVersion(w.dict) == w.version;
  for (Capture& c : captures_) {
    if (!c.cell && dicts_unchanged) continue;
    PyObject* now = c.cell ? PyCell_GET(c.container.ptr()) : PyDict_GetItemWithError(c.container.ptr(), c.name.ptr());
    if (now == c.value.ptr()) continue;
    if (!now) {
      if (PyErr_Occurred()) throw py::error_already_set();
      return Stale(kernel_name, c, nullptr);
    }
    // Rebound to an equal value (a new float object of the same number): keep the instances.
    int same = Py_TYPE(now) == Py_TYPE(c.value.ptr()) ? PyObject_RichCompareBool(now, c.value.ptr(), Py_EQ) : 0;
    if (same < 0) {
      PyErr_Clear();
      same = 0;
    }
    if (!same) return Stale(kernel_name, c, now);
    c.value = py::reinterpret_borrow<py::object>(now);
  }
  for (WatchedDict& w : dicts_) w.version = DictVersion(w.dict);
  return true;
}

bool CaptureWatch::Stale(const std::string& kernel_name, const Capture& c, PyObject* now) {
  // Leaked: a static py::object would be released after the interpreter is gone.
  static py::object* log = new py::object(py::module_::import("logging").attr("getLogger")("pypto_pro.jit"));
  log->attr("info")("kernel '%s': %s '%s' changed from %r to %r since it was compiled; recompiling", kernel_name,
                   c.cell ? "closure variable" : "global", c.name, c.value,
                   now ? py::reinterpret_borrow<py::object>(now) : py::str("<deleted>"));
  captures_.clear();
  dicts_.clear();
  return false;
}

}  // namespace pypto_pro::python
