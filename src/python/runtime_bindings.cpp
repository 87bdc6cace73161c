// pypto_pro._C runtime objects: streams, events, synchronisation.
#include <pybind11/stl.h>

#include <pythread.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "bindings.h"
#include "pypto_pro/runtime/device.h"
#include "pypto_pro/runtime/profile.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::python {

namespace {
std::vector<PyStream*>& LiveStreams() {  // guarded by the GIL
  static auto* streams = new std::vector<PyStream*>;
  return *streams;
}

unsigned long g_main_thread = 0;  // Python's main thread: the only one that sees signals

bool PythonInterrupted() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

double TimeoutSeconds(const py::object& timeout, const char* where) {
  if (timeout.is_none()) return -1;
  if (PyBool_Check(timeout.ptr()) || !(PyFloat_Check(timeout.ptr()) || PyLong_Check(timeout.ptr()))) {
    throw py::type_error(std::string(where) + ": timeout must be a number of seconds or None, got " +
                         py::repr(timeout).cast<std::string>());
  }
  double t = timeout.cast<double>();
  if (!(t >= 0)) {
    throw py::value_error(std::string(where) + ": timeout must be >= 0 seconds, got " +
                          py::repr(timeout).cast<std::string>());
  }
  return t;
}
}  // namespace

runtime::WaitOptions PythonWaitOptions(double timeout) {
  runtime::WaitOptions options;
  options.timeout_seconds = timeout;
  if (PyThread_get_thread_ident() == g_main_thread) options.interrupted = &PythonInterrupted;
  return options;
}

void RaiseInterrupted() {
  if (PyErr_Occurred()) throw py::error_already_set();
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw py::error_already_set();
}

PyStream::PyStream() : owned_(std::make_unique<runtime::Stream>()), stream_(owned_.get()) {
  LiveStreams().push_back(this);
}
PyStream::PyStream(runtime::Stream* shared) : stream_(shared) { LiveStreams().push_back(this); }

void PyStream::RetireAll() {
  // By index: a released object's finaliser may create or destroy streams.
  for (size_t i = 0; i < LiveStreams().size(); ++i) LiveStreams()[i]->Retire();
}

PyStream::~PyStream() {
  std::erase(LiveStreams(), this);
  if (owned_) {
    py::gil_scoped_release release;
    owned_.reset();  // drains the queue first
  }
  for (size_t i = in_flight_head_; i < in_flight_.size(); ++i) Py_DECREF(in_flight_[i].second);
}

void PyStream::KeepAlive(uint64_t seq, PyObject* const* objects, size_t count) {
  Retire();
  for (size_t i = 0; i < count; ++i) {
    Py_INCREF(objects[i]);
    in_flight_.emplace_back(seq, objects[i]);
  }
}

void PyStream::Retire() {
  uint64_t done = stream_->completed();
  // The state is consistent before each Py_DECREF: a finaliser may launch onto this stream.
  while (in_flight_head_ < in_flight_.size() && in_flight_[in_flight_head_].first <= done) {
    PyObject* obj = in_flight_[in_flight_head_++].second;
    if (in_flight_head_ == in_flight_.size()) {
      in_flight_.clear();  // keeps the capacity: steady launching allocates nothing
      in_flight_head_ = 0;
    } else if (in_flight_head_ >= 4096 && in_flight_head_ * 2 >= in_flight_.size()) {
      in_flight_.erase(in_flight_.begin(), in_flight_.begin() + ptrdiff_t(in_flight_head_));
      in_flight_head_ = 0;
    }
    Py_DECREF(obj);
  }
}

namespace {
// Runs wait() with the GIL released, then after() with it held; an interrupted wait raises the
// Python error its check left (KeyboardInterrupt), any other error of the wait is rethrown.
template <typename Wait, typename After>
void WaitWithoutGil(Wait wait, After after) {
  std::exception_ptr error;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    try {
      wait();
    } catch (const runtime::WaitInterrupted&) {
      interrupted = true;
    } catch (...) {
      error = std::current_exception();
    }
  }
  after();
  if (interrupted) RaiseInterrupted();
  if (error) std::rethrow_exception(error);
}
}  // namespace

void PyStream::Synchronize(double timeout) {
  const runtime::WaitOptions options = PythonWaitOptions(timeout);
  WaitWithoutGil([&] { stream_->Synchronize(options); }, [&] { Retire(); });
}

PyStream& DefaultPyStream() {
  static PyStream* stream = new PyStream(&runtime::Stream::Default());
  return *stream;
}

namespace {

struct PyEvent {
  std::shared_ptr<runtime::EventState> state = std::make_shared<runtime::EventState>();
  py::object stream;  // keeps the recording stream alive
};

thread_local PyStream* current_stream = nullptr;

// Every stream, each given what is left of one timeout: the first fault found is raised. An
// interrupted or timed-out wait cancels what the other streams still run too.
void SynchronizeAll(double timeout) {
  const runtime::WaitOptions base = PythonWaitOptions(timeout);
  std::exception_ptr first;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    std::vector<runtime::Stream*> streams = runtime::Stream::All();
    for (runtime::Stream* s : streams) {
      runtime::WaitOptions options = base;
      if (timeout >= 0) {
        double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        options.timeout_seconds = std::max(0.0, timeout - spent);
      }
      try {
        s->Synchronize(options);
      } catch (const runtime::WaitInterrupted&) {
        interrupted = true;
      } catch (...) {
        if (!first) first = std::current_exception();
      }
      if (interrupted) break;
    }
    if (interrupted) {
      for (runtime::Stream* s : streams) s->Cancel(runtime::CancelReason::kInterrupt);
    }
  }
  PyStream::RetireAll();
  if (interrupted) RaiseInterrupted();
  if (first) std::rethrow_exception(first);
}

// At interpreter exit: launches still queued are waited for (after a second the wait says so;
// Ctrl-C cancels them), and a fault no synchronisation raised is printed rather than dropped.
void ReportAtExit() {
  const runtime::WaitOptions options = PythonWaitOptions(-1);
  std::vector<std::string> reports;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    for (runtime::Stream* s : runtime::Stream::All()) {
      try {
        if (!interrupted && s->completed() < s->submitted()) {
          runtime::WaitOptions first = options;
          first.timeout_seconds = 1;
          first.cancel_on_timeout = false;
          s->WaitFor(s->submitted(), first);
          if (s->completed() < s->submitted()) {
            std::fprintf(stderr, "pypto_pro: waiting at exit for %llu launch(es) still queued or running "
                                 "(Ctrl-C cancels them)\n",
                         static_cast<unsigned long long>(s->submitted() - s->completed()));
            s->WaitFor(s->submitted(), options);
          }
        }
      } catch (const runtime::WaitInterrupted&) {
        interrupted = true;
      }
      if (interrupted) {
        if (uint64_t dropped = s->Cancel(runtime::CancelReason::kInterrupt)) {
          reports.push_back("pypto_pro: " + std::to_string(dropped) + " launch(es) were cancelled at exit");
        }
      }
      if (std::optional<runtime::FaultInfo> fault = s->TakeFault()) {
        reports.push_back("pypto_pro: a kernel fault was never raised (no synchronize after it) before exit:\n  " +
                          fault->Format());
      }
    }
  }
  if (interrupted) PyErr_Clear();
  for (const std::string& r : reports) std::fprintf(stderr, "%s\n", r.c_str());
  std::fflush(stderr);
}

}  // namespace

PyStream& CurrentPyStream() { return current_stream ? *current_stream : DefaultPyStream(); }

void BindRuntime(py::module_& m) {
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  py::class_<PyStream>(m, "Stream", "An in-order queue of kernel launches served by its own worker thread.")
      .def(py::init<>())
      .def(
          "synchronize",
          [](PyStream& s, const py::object& timeout) { s.Synchronize(TimeoutSeconds(timeout, "Stream.synchronize")); },
          py::arg("timeout") = py::none(),
          "Waits for every launch queued so far; raises KernelFault for the first fault since the last "
          "synchronisation. With timeout= (seconds), a wait that runs out stops the running launch and drops "
          "the queued ones, and raises KernelTimeout. Ctrl-C does the same and raises KeyboardInterrupt.")
      .def("query", [](PyStream& s) { return s.stream().completed() == s.stream().submitted(); },
           "True when every queued launch has run.")
      .def_property_readonly("pending",
                             [](PyStream& s) { return s.stream().submitted() - s.stream().completed(); })
      .def("__repr__", [](PyStream& s) {
        return "<pypto_pro.runtime.Stream at " + std::to_string(reinterpret_cast<uintptr_t>(&s.stream())) + ">";
      });

  m.def("default_stream", [] { return &DefaultPyStream(); }, py::return_value_policy::reference);
  m.def("current_stream", [] { return &CurrentPyStream(); },
        py::return_value_policy::reference);
  m.def("_set_current_stream", [](PyStream* s) { current_stream = s; }, py::arg("stream").none(true));
  m.def(
      "synchronize", [](const py::object& timeout) { SynchronizeAll(TimeoutSeconds(timeout, "synchronize")); },
      py::arg("timeout") = py::none());
  m.def("_report_at_exit", &ReportAtExit);
  // pypto_pro.profiler: launches inside profile() record; each finished launch's model, as dicts.
  m.def("_set_profiling", [](bool on) { runtime::SetProfiling(on); });
  m.def("_profiling", [] { return runtime::Profiling(); });
  m.def("_take_profiles", [] {
    py::list out;
    for (runtime::ProfileRecord& r : runtime::TakeProfiles()) {
      const runtime::LaunchProfile& p = r.profile;
      py::dict d;
      d["kernel"] = r.kernel;
      d["source_files"] = r.source_files;
      d["arch"] = p.arch;
      d["clock_ghz"] = p.clock_ghz;
      d["shape"] = p.shape == runtime::BlockShape::kMixed ? "mixed" : p.shape == runtime::BlockShape::kCube ? "cube" : "vector";
      d["block_dim"] = p.block_dim;
      d["physical_slots"] = p.physical_slots;
      d["waves"] = p.waves;
      d["cycles"] = p.cycles;
      d["gm_bytes"] = p.gm_bytes;
      d["flops"] = p.flops;
      d["truncated"] = p.truncated;
      // The arch's peaks, for "achieved fraction of peak": the cube's fp16 FLOPs and GM bytes per cycle.
      const ArchModel* arch = FindArch(p.arch);
      const ArchModel& a = arch ? *arch : DefaultArch();
      d["peak_flops_per_cycle"] = 2.0 * a.cost.cube_macs_fp16 * a.aic_cores;
      d["gm_bytes_per_cycle"] = a.cost.gm_bytes_per_cycle;
      py::dict busy, pipe_cores;
      for (size_t i = 0; i < p.busy.size(); ++i) {
        if (p.pipe_cores[i] == 0) continue;
        busy[hw::kPipeNames[i]] = p.busy[i];
        pipe_cores[hw::kPipeNames[i]] = p.pipe_cores[i];
      }
      d["busy"] = busy;
      d["pipe_cores"] = pipe_cores;
      d["names"] = p.names;
      py::list ops;
      for (const runtime::ModelledOp& o : p.ops) {
        ops.append(py::make_tuple(o.block, o.core, o.physical, hw::kPipeNames[o.pipe], o.start, o.end, o.line, o.name,
                                  o.units, runtime::Name(o.op_class)));
      }
      d["ops"] = ops;
      py::list flows;
      for (const runtime::ModelledFlow& f : p.flows) {
        flows.append(py::make_tuple(f.block, f.from_core, f.to_core, hw::kPipeNames[f.from_pipe],
                                    hw::kPipeNames[f.to_pipe], f.set_at, f.taken_at, f.set_line, f.wait_line, f.id));
      }
      d["flows"] = flows;
      py::list stalls;
      for (const runtime::ModelledStall& st : p.stalls) {
        stalls.append(py::make_tuple(st.block, st.core, hw::kPipeNames[st.pipe], st.from, st.until, st.line, st.reason));
      }
      d["stalls"] = stalls;
      out.append(d);
    }
    return out;
  });
  m.def("device_threads", [] { return runtime::Device::Get().num_threads(); });

  py::class_<PyEvent>(m, "Event", "A marker in a stream; completes when the stream reaches it.")
      .def(py::init<>())
      .def(
          "record",
          [](PyEvent& e, PyStream* stream) {
            PyStream* s = stream ? stream : &CurrentPyStream();
            e.stream = py::cast(s, py::return_value_policy::reference);
            s->stream().Record(e.state);
          },
          py::arg("stream") = nullptr)
      .def("query", [](PyEvent& e) { return e.state->completed.load(); })
      .def("synchronize",
           [](PyEvent& e) {
             if (e.state->seq == 0) throw py::value_error("Event.synchronize(): the event was never recorded");
             const runtime::WaitOptions options = PythonWaitOptions(-1);
             WaitWithoutGil([&] { e.state->stream->WaitFor(e.state->seq, options); }, [] {});
           })
      .def("elapsed_time", [](PyEvent& start, PyEvent& end) {
        if (start.state->seq == 0 || end.state->seq == 0) {
          throw py::value_error("Event.elapsed_time(): both events must have been recorded");
        }
        if (!start.state->completed.load() || !end.state->completed.load()) {
          throw py::value_error("Event.elapsed_time(): synchronize the events (or their streams) first");
        }
        return std::chrono::duration<double, std::milli>(end.state->when - start.state->when).count();
      }, py::arg("end"), "Milliseconds from this event to `end`.");
}

}  // namespace pypto_pro::python
