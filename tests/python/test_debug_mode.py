"""pl.jit(debug=True) / PYPTO_PRO_DEBUG=1 (docs/jit.md#debugging): a -O0 -g build whose code maps to
the kernel's Python lines (#line), blocks one at a time, a gdb command line printed at the compile; gdb
stops at a Python line of the kernel."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''import torch, pypto_pro, pypto_pro.language as pl

@pl.jit(debug={debug})
def stepped(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])

x = torch.zeros(8, 64); y = torch.empty_like(x)
stepped[None, 2](x, y)
pypto_pro.runtime.synchronize()
print("sum", y.sum().item())
'''
ADDS_LINE = 8


def _script(tmp_path, debug="True"):
    path = tmp_path / "stepped.py"
    path.write_text(SCRIPT.format(debug=debug))
    return path


def _env(**extra):
    return dict(os.environ, PYTHONPATH=str(ROOT / "python"), **extra)


def test_a_debug_build_maps_to_python_lines_and_says_how_to_debug(tmp_path):
    script = _script(tmp_path)
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "sum 512.0" in run.stdout  # the same results as a plain build
    assert "kernel 'stepped' is a debug build" in run.stderr
    assert f"gdb -ex 'set breakpoint pending on' -ex 'break {script}:7' --args {sys.executable} {script}" in run.stderr
    instance = tmp_path / "build" / "stepped__a5__debug" / "tk_none"
    kernel_cpp = (instance / "kernel.cpp").read_text()
    assert f'#line {ADDS_LINE} "{script}"' in kernel_cpp
    assert any(f.startswith("call_kernel_") for f in os.listdir(instance))


def test_the_environment_variable_asks_for_it_too(tmp_path):
    script = _script(tmp_path, debug="None")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(PYPTO_PRO_DEBUG="1"),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "is a debug build" in run.stderr
    assert (tmp_path / "build" / "stepped__a5__debug").is_dir()


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_gdb_stops_at_the_kernels_python_line(tmp_path):
    script = _script(tmp_path)
    run = subprocess.run(["gdb", "-batch", "-ex", "set breakpoint pending on", "-ex", f"break {script.name}:{ADDS_LINE}",
                          "-ex", "run", "-ex", "bt 1", "-ex", "info threads", "-ex", "kill", "--args", sys.executable, str(script)],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert "hit Breakpoint 1" in out, out[-3000:]
    assert f"KernelEntry" in out and f"{script}:{ADDS_LINE}" in out
    # The stopped thread is named after the core it runs: block 0's vector core (a vector-only kernel).
    assert '"block0/AIV"' in out, out[-3000:]


def test_debug_must_be_a_bool():
    import pypto_pro.language as pl

    def k(x: pl.Tensor[[8, 8], pl.DT_FP32]):
        pass

    with pytest.raises(TypeError, match="pl.jit: debug must be a bool, got 'yes'"):
        pl.jit(k, debug="yes")

