// pypto_pro._C runtime objects: streams, events, synchronisation.
#include <chrono>
#include <vector>

#include "bindings.h"
#include "pypto_pro/runtime/device.h"

namespace pypto_pro::python {

namespace {
std::vector<PyStream*>& LiveStreams() {  // guarded by the GIL
  static auto* streams = new std::vector<PyStream*>;
  return *streams;
}
}  // namespace

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

void PyStream::Synchronize() {
  std::exception_ptr fault;
  {
    py::gil_scoped_release release;
    try {
      stream_->Synchronize();
    } catch (...) {
      fault = std::current_exception();
    }
  }
  Retire();
  if (fault) std::rethrow_exception(fault);
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

}  // namespace

PyStream& CurrentPyStream() { return current_stream ? *current_stream : DefaultPyStream(); }

void BindRuntime(py::module_& m) {
  py::class_<PyStream>(m, "Stream", "An in-order queue of kernel launches served by its own worker thread.")
      .def(py::init<>())
      .def("synchronize", &PyStream::Synchronize,
           "Waits for every launch queued so far; raises KernelFault for the first fault since the last "
           "synchronisation.")
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
  m.def("synchronize", [] {
    // Every stream: gather them first, then wait on each (the first fault found is raised).
    std::exception_ptr first;
    {
      py::gil_scoped_release release;
      for (runtime::Stream* s : runtime::Stream::All()) {
        try {
          s->Synchronize();
        } catch (...) {
          if (!first) first = std::current_exception();
        }
      }
    }
    PyStream::RetireAll();
    if (first) std::rethrow_exception(first);
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
             py::gil_scoped_release release;
             e.state->stream->WaitFor(e.state->seq);
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
