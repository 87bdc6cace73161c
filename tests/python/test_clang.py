"""Kernels compiled with clang++ (PYPTO_PRO_CXX=clang++) give the same results as with g++: the device
headers spell the compiler-specific builtins for both (non-temporal stores, shuffles, the dot products,
sqrt). One child process (the compiler is chosen per process) runs the add example (a direct run
whose 4 MiB output is written with streaming stores), the matmul example (a 4 MiB fp32 result stored
around the caches), a transpose in registers, an int8 matmul and a sqrt, each against torch. Its
kernels compile everything inline (PYPTO_PRO_PCH=0: clang builds the GEMM and the transfers into each
library, not a routines library of its own, which takes it two minutes here); clang checks every part
of the routines library (device_include/pypto_pro/routines/) separately."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import pypto_pro

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ not installed")

_SCRIPT = r'''
import sys
import torch
import pypto_pro
import pypto_pro.language as pl
sys.path[:0] = sys.argv[1:3]
from add import add_kernel
from matmul import matmul_kernel
from kernels import exp_inputs, exp_rows, int8_matmul


@pl.jit
def transpose_sqrt(x: pl.Tensor[[64, 48], pl.DT_FP32], t_out: pl.Tensor[[48, 64], pl.DT_FP32],
                   s_out: pl.Tensor[[64, 48], pl.DT_FP32]):
    a = pl.make_tile(pl.TileType(shape=[64, 48], dtype=pl.DT_FP32), addr=0x0)
    t = pl.make_tile(pl.TileType(shape=[48, 64], dtype=pl.DT_FP32), addr=0x4000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.transpose(t, a)
        pl.store(t_out, t, [0, 0])
        pl.sqrt(a, a)
        pl.store(s_out, a, [0, 0])


torch.manual_seed(0)
stream = pypto_pro.runtime.Stream()
x = torch.randn(2048, 1024, dtype=torch.float16)
y = torch.randn(2048, 1024, dtype=torch.float16)
z = torch.empty_like(x)
add_kernel[stream, 64](x, y, z)
a = torch.randn(1024, 128).half()
b = torch.randn(128, 1024).half()
c = torch.empty(1024, 1024)
matmul_kernel[stream, 32](a, b, c)
v = torch.rand(64, 48) * 100
t_out, s_out = torch.empty(48, 64), torch.empty(64, 48)
transpose_sqrt[stream, 1](v, t_out, s_out)
ia = torch.randint(-128, 128, (64, 128), dtype=torch.int8)
ib = torch.randint(-128, 128, (128, 64), dtype=torch.int8)
ic = torch.empty(64, 64, dtype=torch.int32)
int8_matmul[stream, 1](ia, ib, ic)
ex = exp_inputs()
ey = torch.empty_like(ex)
exp_rows[stream, 1](ex, ey)
stream.synchronize()
torch.save(ey, "exp_clang.pt")  # the parent compares its bits with g++'s
assert torch.equal(z, x + y), "add"
torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)
assert torch.equal(t_out, v.t()), "transpose"
assert torch.equal(s_out, torch.sqrt(v)), "sqrt"
assert torch.equal(ic.long(), ia.long() @ ib.long()), "int8 matmul"
for kernel in (add_kernel, matmul_kernel, transpose_sqrt, int8_matmul, exp_rows):
    for instance in kernel.instances():  # built by clang: its version string in the .comment section
        assert b"clang version" in open(instance.library, "rb").read(), instance.library
print("clang ok")
'''


def test_kernels_compiled_with_clang_match_torch(tmp_path, monkeypatch):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYPTO_PRO_CXX="clang++", PYPTO_PRO_PCH="0",
               PYPTO_PRO_TIER0="0",  # every launch on the library clang built, none on the executor
               ASCEND_WORK_PATH=str(tmp_path))
    script = tmp_path / "with_clang.py"  # a file: the front end reads the kernels' source
    script.write_text(_SCRIPT)
    run = subprocess.run([sys.executable, str(script), str(ROOT / "examples"), str(ROOT / "tests" / "python")],
                         cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "clang ok" in run.stdout
    # exp in fused multiply-adds with either compiler: the same bits as g++'s library here
    from kernels import exp_inputs, exp_rows
    monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
    x = exp_inputs()
    y = torch.empty_like(x)
    exp_rows[None, 1](x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(torch.load(tmp_path / "exp_clang.pt").view(torch.int32), y.view(torch.int32))


def test_clang_compiles_every_part_of_the_routines_library():
    """The routines library's parts (its tier-0 executor included) are device code too: clang must
    accept them with the kernels' flags (a syntax and template check; the kernels above run the
    same headers' code)."""
    from pypto_pro import _C
    flags = [f for f in _C.compiler_command() if f != "-shared"][1:]  # the kernels' flags (the compiler dropped)
    parts = sorted((ROOT / "device_include" / "pypto_pro" / "routines").glob("*.cpp"))
    assert len(parts) >= 5
    run = subprocess.run(["clang++", *flags, "-fsyntax-only", *map(str, parts)], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
