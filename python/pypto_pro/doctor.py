"""python -m pypto_pro doctor: whether this machine can compile and run kernels, and what to do when
it cannot. Each check prints OK, or FAIL with the fix; the exit code is 1 when any check failed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from pypto_pro import _C

# The device headers every kernel includes, so a compiler that cannot build kernels fails here.
_PROBE = '#include "pypto_pro/device.h"\nint pypto_pro_doctor_probe(int x) { return x + 1; }\n'


class Report:
    def __init__(self, out=sys.stdout):
        self.out = out
        self.failed = 0

    def ok(self, what, detail=""):
        print(f"[ OK ] {what}" + (f": {detail}" if detail else ""), file=self.out)

    def fail(self, what, problem, fix):
        self.failed += 1
        print(f"[FAIL] {what}: {problem}\n       fix: {fix}", file=self.out)

    def info(self, what, detail):
        print(f"[info] {what}: {detail}", file=self.out)


def _compiler(report):
    cmd = _C.compiler_command()
    compiler = cmd[0]
    path = shutil.which(compiler)
    if path is None:
        report.fail("host C++ compiler", f"'{compiler}' (PYPTO_PRO_CXX) is not on PATH",
                    "apt-get install g++ (make test does it), or set PYPTO_PRO_CXX to a C++20 compiler")
        return
    with tempfile.TemporaryDirectory(prefix="pypto_pro_doctor_") as work:
        with open(os.path.join(work, "probe.cpp"), "w") as f:
            f.write(_PROBE)
        try:
            run = subprocess.run(cmd + ["-o", "probe.so", "probe.cpp"], cwd=work, capture_output=True, text=True,
                                 timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            report.fail("host C++ compiler", f"'{path}' could not run: {exc}", "check PYPTO_PRO_CXX")
            return
        if run.returncode != 0 or not os.path.isfile(os.path.join(work, "probe.so")):
            lines = (run.stderr or run.stdout).strip().splitlines()
            first = next((line for line in lines if "error" in line), lines[0] if lines else "no output")
            report.fail("host C++ compiler", f"'{path}' failed on a probe with the kernel flags: {first}",
                        "use g++ 12 or clang 14 or newer (C++20, -march=native), or fix PYPTO_PRO_CXXFLAGS")
            return
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    report.ok("host C++ compiler", f"{path} ({version[0] if version else '?'}) builds kernels with: "
                                   f"{' '.join(cmd[1:])}")


def _device_headers(report):
    include = next((part[2:] for part in _C.compiler_command() if part.startswith("-I")), "")
    if os.path.isfile(os.path.join(include, "pypto_pro", "device.h")):
        report.ok("device headers", include)
    else:
        report.fail("device headers", f"no pypto_pro/device.h under '{include}'",
                    "unset PYPTO_PRO_DEVICE_INCLUDE, or point it at the device_include directory of this checkout")


def _build_dir(report):
    root = os.path.abspath(_C.artefact_root())
    try:
        os.makedirs(root, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor"):
            pass
    except OSError as exc:
        report.fail("artefact directory", f"cannot write '{root}': {exc.strerror or exc}",
                    "run from a writable directory, or set ASCEND_WORK_PATH to one (artefacts go to "
                    "$ASCEND_WORK_PATH/PYPTO_PRO/build/)")
        return
    report.ok("artefact directory", f"{root} is writable")


def _python(report):
    report.ok("Python", f"{sys.version.split()[0]} at {sys.executable}")
    try:
        import numpy
        report.ok("numpy", numpy.__version__)
    except ImportError:
        report.fail("numpy", "not importable from this Python",
                    "use Debian's /usr/bin/python3 (apt-get install python3-numpy) or a venv made from it with "
                    "--system-site-packages")
    try:
        import torch
        fast = os.path.isfile(os.path.join(os.path.dirname(_C.__file__), "libpypto_torch_args.so"))
        report.ok("torch", f"{torch.__version__}; libtorch fast path "
                           f"{'built' if fast else 'not built (torch tensors are read through Python attributes)'}")
    except ImportError:
        report.info("torch", "not importable (numpy arrays still work; apt-get install python3-torch for tensors)")


def _cpu(report):
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    used = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")
            if f in flags]
    report.info("CPU features the kernels use", ", ".join(used) or "none beyond SSE2 (kernels run, slower)")
    report.info("host threads for blocks", str(_C.device_threads()))


def _archs(report):
    for name in _C.arch_names():
        a = _C.arch_info(name)
        report.info(f"arch {name}", f"{a['model']}: {a['aic_cores']} AIC / {a['aiv_cores']} AIV")


def _environment(report):
    for name, default, _doc in _C.env_table():
        value = os.environ.get(name)
        shown = f"{value!r} (set)" if value else f"{default!r} (default)" if default else "unset"
        report.info(name, shown)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print("usage: python -m pypto_pro doctor\n\n" + (__doc__ or ""))
        return 0
    report = Report()
    print(f"pypto_pro doctor ({os.path.dirname(os.path.abspath(_C.__file__))})")
    _python(report)
    _compiler(report)
    _device_headers(report)
    _build_dir(report)
    _cpu(report)
    _archs(report)
    _environment(report)
    if report.failed:
        print(f"{report.failed} problem(s): kernels will not compile or run until they are fixed")
        return 1
    print("everything a kernel needs is here")
    return 0
