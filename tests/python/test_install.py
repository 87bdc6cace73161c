"""pip install . into a venv made with --system-site-packages (offline: Debian's setuptools, numpy and
torch), then a kernel from another directory: the installed package carries its compiled core and the
device headers kernels compile against."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import ensurepip, setuptools"],
                                               capture_output=True).returncode != 0,
                                reason="python3-venv / python3-setuptools are not installed")


def test_pip_install_then_a_kernel_from_elsewhere(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the venv installed
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-deps",
                              "--no-index", "-q", str(ROOT)], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(ROOT / "examples" / "add.py", elsewhere / "add.py")
    run = subprocess.run([str(venv / "bin" / "python"), "add.py"], cwd=elsewhere, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "max |err| vs torch = 0" in run.stdout
    doctor = subprocess.run([str(venv / "bin" / "pypto-pro"), "doctor"], cwd=elsewhere, env=env,
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0, doctor.stdout
    installed = venv / "lib"
    assert f"[ OK ] device headers: {installed}" in doctor.stdout  # the package's own, not the checkout's
    version = subprocess.run([str(venv / "bin" / "python"), "-c", "import pypto_pro; print(pypto_pro.__file__)"],
                             cwd=elsewhere, env=env, capture_output=True, text=True)
    assert version.stdout.startswith(str(venv))
