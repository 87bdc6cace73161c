"""pip install [--no-build-isolation] [-e] . : builds the C++ core with CMake (as `make build` does, into
cmake-build/) and installs the package with its compiled core, the libtorch fast path and the device
headers kernels compile against (python/pypto_pro/device_include/ in the installed package)."""

import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithCMake(build_py):
    def run(self):
        build = ROOT / "cmake-build"
        if not (build / "build.ninja").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                                   f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "_C"])
        subprocess.call(["cmake", "--build", str(build), "--target", "pypto_torch_args"])  # optional
        super().run()
        package = Path(self.build_lib) / "pypto_pro"
        for library in (ROOT / "python" / "pypto_pro").glob("*.so"):
            shutil.copy2(library, package / library.name)
        headers = package / "device_include"
        shutil.rmtree(headers, ignore_errors=True)
        shutil.copytree(ROOT / "device_include", headers)


setup(cmdclass={"build_py": BuildWithCMake})
