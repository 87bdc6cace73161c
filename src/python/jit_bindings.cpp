// pypto_pro._C: compiling instances, the artefact tree, configuration and error translation.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <map>

#include "bindings.h"
#include "pypto_pro/jit/artefacts.h"
#include "pypto_pro/jit/instance.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/config.h"
#include "pypto_pro/support/error.h"

namespace pypto_pro::python {

namespace {

// Instantiates pypto_pro.errors.<name>(*args, **kwargs) and sets it as the current Python error.
void RaisePython(const char* name, py::tuple args, py::dict kwargs) {
  py::object cls = py::module_::import("pypto_pro.errors").attr(name);
  py::object exc = cls(*args, **kwargs);
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void BindJit(py::module_& m) {
  static py::exception<CompileDiagnostic> diagnostic(m, "Diagnostic");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CompileDiagnostic& e) {
      // args: (kind, message, line, col, hint); the front end turns it into a located error.
      py::tuple args = py::make_tuple(ErrorKindName(e.kind()), e.what(), e.span().line, e.span().col, e.hint());
      PyErr_SetObject(diagnostic.ptr(), args.ptr());
    } catch (const jit::CompileTimeout& e) {
      py::dict kw;
      kw["kernel"] = e.kernel;
      kw["instance_dir"] = e.dir.string();
      kw["limit"] = e.limit;
      RaisePython("CompileTimeoutError", py::make_tuple(e.what()), kw);
    } catch (const jit::ArtefactDirError& e) {
      py::dict kw;
      kw["instance_dir"] = e.dir.string();
      RaisePython("BuildDirectoryError", py::make_tuple(e.what()), kw);
    } catch (const jit::CompileInterrupted&) {
      // The interrupt check left its error (KeyboardInterrupt) set; keep it.
      if (!PyErr_Occurred()) PyErr_SetNone(PyExc_KeyboardInterrupt);
    } catch (const jit::CompileFailure& e) {
      py::dict kw;
      kw["kernel"] = e.kernel;
      kw["instance_dir"] = e.dir.string();
      kw["log"] = e.log;
      RaisePython("CompileError", py::make_tuple(e.what()), kw);
    } catch (const runtime::SanitizerError& e) {
      const runtime::FaultInfo& f = e.info();
      py::list findings;
      for (const runtime::SanitizerFinding& s : f.findings) {
        py::dict d;
        d["kind"] = s.kind;
        d["message"] = s.message;
        d["hint"] = s.hint;
        d["kernel"] = s.kernel;
        d["file"] = s.file;
        d["line"] = s.line;
        d["hits"] = s.hits;
        d["block"] = s.block;
        d["core"] = s.core;
        findings.append(d);
      }
      py::dict kw;
      kw["kernel"] = f.kernel;
      kw["source_file"] = f.source_file;
      kw["findings"] = findings;
      kw["report"] = f.report;
      RaisePython("SanitizerError", py::make_tuple(e.what()), kw);
    } catch (const runtime::KernelFaultError& e) {
      const runtime::FaultInfo& f = e.info();
      py::dict kw;
      kw["kernel"] = f.kernel;
      kw["block"] = f.block;
      kw["core"] = f.core;
      kw["source_file"] = f.source_file;
      kw["line"] = f.line;
      kw["op"] = f.op;
      kw["detail"] = f.message;
      RaisePython(f.deadlock ? "KernelDeadlock" : f.timeout() ? "KernelTimeout" : "KernelFault",
                  py::make_tuple(e.what()), kw);
    }
  });

  py::class_<jit::Instance, std::shared_ptr<jit::Instance>>(m, "Instance")
      .def_property_readonly("kernel_name", [](const jit::Instance& i) { return i.kernel_name; })
      .def_property_readonly("dir", [](const jit::Instance& i) { return i.dir; })
      .def_property_readonly("library", [](const jit::Instance& i) { return i.library; })
      .def_property_readonly("kind", [](const jit::Instance& i) { return std::string(ir::Name(i.kind)); })
      .def_property_readonly("sanitizer_report",
                             [](const jit::Instance& i) -> py::object {
                               if (i.sanitizer_report.empty()) return py::none();
                               return py::cast(i.sanitizer_report);
                             })
      .def_property_readonly("stats",
                             [](const jit::Instance& i) {
                               const jit::CompileStats s = i.Stats();
                               py::dict d;
                               d["parse_ms"] = s.parse_ms;
                               d["passes_ms"] = s.passes_ms;
                               d["codegen_ms"] = s.codegen_ms;
                               d["write_ms"] = s.write_ms;
                               d["compile_ms"] = s.compile_ms;
                               d["load_ms"] = s.load_ms;
                               d["reused"] = s.reused;
                               d["tier0"] = s.tier0;
                               d["tier0_refused"] = s.tier0_refused;
                               d["compiled"] = i.compiled.load();
                               return d;
                             })
      .def("wait_compiled",
           [](jit::Instance& i) {
             py::gil_scoped_release release;
             jit::WaitCompiled(i);
           },
           "Waits until the instance's library is loaded (a first launch run by the tier-0 executor compiles "
           "it in the background) and raises what stopped its compile.")
      .def_property_readonly("warnings",
                             [](const jit::Instance& i) {
                               py::list out;
                               for (const auto& [span, message] : i.warnings) {
                                 out.append(py::make_tuple(span.line, span.col, message));
                               }
                               return out;
                             })
      .def("__repr__", [](const jit::Instance& i) {
        return "<Instance " + i.kernel_name + " at " + i.dir.string() + ">";
      });

  m.def("default_cache_dir", [] { return jit::DefaultCacheDir().string(); });
  m.def(
      "prepare_device_code",
      [](double timeout_seconds) {
        const jit::Environment environment = jit::CaptureEnvironment();  // with the GIL
        bool built = false;
        std::filesystem::path dir;
        {
          py::gil_scoped_release release;
          dir = jit::PrepareDeviceCode(timeout_seconds, environment, built);
        }
        return py::make_tuple(dir.string(), built);
      },
      py::arg("timeout_seconds") = 600.0,
      "(directory, built): the precompiled device code of plain kernels, built now if missing");
  m.def(
      "wait_background_compiles",
      [] {
        py::gil_scoped_release release;
        return jit::WaitForBackgroundCompiles();
      },
      "Waits for every kernel library compiling in the background; returns what stopped those that failed.");
  // An environment variable of the table in support/config.h (its default when unset).
  m.def("get_env", [](const std::string& name) { return GetEnv(name); });
  m.def("arch_names", [] {
    std::vector<std::string> names;
    for (std::string_view n : ArchNames()) names.emplace_back(n);
    return names;
  });
  m.def("arch_info", [](const std::string& name) {
    const ArchModel* arch = FindArch(name);
    if (!arch) throw py::value_error("unknown arch '" + name + "'; known: " + ArchNamesJoined());
    py::dict d;
    d["name"] = std::string(arch->name);
    d["model"] = std::string(arch->model);
    d["aic_cores"] = arch->aic_cores;
    d["cube_vector_local_paths"] = arch->cube_vector_local_paths;
    d["ssbuf_bytes"] = arch->ssbuf_bytes;
    d["aiv_cores"] = arch->aiv_cores;
    py::dict capacity;
    for (size_t i = 1; i < size_t(ir::MemorySpace::kCount); ++i) {
      capacity[py::str(std::string(ir::Name(ir::MemorySpace(i))))] = arch->capacity[i];
    }
    d["capacity"] = capacity;
    return d;
  });
  m.def("tile_alignment", [](const std::string& memory) {
    auto m = ir::MemorySpaceFromName(memory);
    if (!m) throw py::value_error("unknown memory space '" + memory + "'");
    return TileAlignment(*m);
  });

  // The hardware vocabulary (hw_tables.h), from which the pl enums and dtypes are built.
  m.def("hw_tables", [] {
    auto names = [](const auto& table) { return std::vector<std::string>(std::begin(table), std::end(table)); };
    py::dict out;
    out["pipes"] = names(hw::kPipeNames);
    out["memories"] = names(hw::kMemoryNames);
    out["layouts"] = names(hw::kLayoutNames);
    out["planned_memories"] = names(hw::kPlannedMemoryNames);
    out["planned_layouts"] = names(hw::kPlannedLayoutNames);
    out["round_modes"] = names(hw::kRoundModeNames);
    out["cross_core_sync_modes"] = names(hw::kCrossCoreSyncModeNames);
    std::vector<std::string> saturation_flags;
    for (const hw::SaturationFlagRow& r : hw::kSaturationFlags) saturation_flags.emplace_back(r.name);
    out["saturation_flags"] = saturation_flags;
    std::vector<std::tuple<std::string, std::string, int, bool, bool>> dtypes;
    for (const hw::DataTypeRow& r : hw::kDataTypes) dtypes.emplace_back(r.name, r.pl_name, r.bits, r.is_float, r.supported);
    out["dtypes"] = dtypes;
    return out;
  });

  // For `python -m pypto_pro doctor`: where kernels land, and how they are compiled.
  m.def("artefact_root", [] { return jit::ArtefactRoot().string(); });
  m.def("compiler_command", [] { return jit::CompilerCommand(); });
  m.def("env_table", [] {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const EnvVarSpec& spec : EnvVarTable()) {
      out.emplace_back(std::string(spec.name), std::string(spec.default_value), std::string(spec.doc));
    }
    return out;
  });
}

}  // namespace pypto_pro::python
