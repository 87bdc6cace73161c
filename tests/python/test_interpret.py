"""pl.jit(interpret=True) (docs/jit.md#interpret-mode): the kernel's Python run on the host with numpy
tiles. Differential tests against the compiled path over the examples it runs, pdb at a kernel line,
and every refusal with its message."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

ROOT = Path(__file__).resolve().parents[2]


def _example(name):
    sys.path.insert(0, str(ROOT / "examples"))
    spec = importlib.util.spec_from_file_location(f"interpret_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _both(kernel, make_args, like, block_dim):
    """(compiled result, interpreted result) of one launch shape."""
    compiled, interpreted = torch.empty_like(like), torch.empty_like(like)
    kernel[None, block_dim](*make_args(compiled))
    pypto_pro.runtime.synchronize()
    pl.jit(kernel.fn, interpret=True, name=kernel.kernel_name)[None, block_dim](*make_args(interpreted))
    return compiled, interpreted


@pytest.mark.parametrize("shape,block_dim", [((128, 128), 1), ((384, 256), 5), ((256, 640), 64)])
def test_add_example_gives_the_compiled_bits(shape, block_dim):
    add = _example("add")
    torch.manual_seed(1)
    x, y = torch.randn(shape, dtype=torch.float16), torch.randn(shape, dtype=torch.float16)
    compiled, interpreted = _both(add.add_kernel, lambda z: (x, y, z), x, block_dim)
    assert torch.equal(compiled, interpreted)  # one fp16 rounding of an fp32 sum: exact on both paths
    assert torch.equal(interpreted, x + y)


@pytest.mark.parametrize("shape,block_dim", [((100, 300), 8), ((17, 512), 3), ((2049, 100), 64)])
def test_softmax_and_layernorm_examples_match_the_compiled_path(shape, block_dim):
    softmax, layernorm = _example("softmax"), _example("layernorm")
    torch.manual_seed(2)
    x = torch.randn(shape) * 4
    compiled, interpreted = _both(softmax.softmax_kernel, lambda y: (x, y), x, block_dim)
    # exp and the row sums differ from the compiled path's in the last bits only (summation order, exp's ulp)
    torch.testing.assert_close(interpreted, compiled, rtol=2e-6, atol=1e-7)
    torch.testing.assert_close(interpreted, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    gamma, beta = torch.randn(1, shape[1]), torch.randn(1, shape[1])
    compiled, interpreted = _both(layernorm.layernorm_kernel, lambda y: (x, gamma, beta, y, 1e-5), x, block_dim)
    torch.testing.assert_close(interpreted, compiled, rtol=1e-5, atol=1e-5)
    reference = torch.nn.functional.layer_norm(x, (shape[1],), gamma[0], beta[0], 1e-5)
    torch.testing.assert_close(interpreted, reference, rtol=1e-4, atol=1e-4)


def test_numpy_arguments_and_scalar_ops():
    @pl.jit(interpret=True)
    def scale_shift(x: pl.Tensor[[16, 64], pl.DT_INT32], y: pl.Tensor[[16, 64], pl.DT_INT32], k: pl.DT_INT32):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_INT32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.muls(t, t, k)
            pl.divs(t, t, 3)         # integer division truncates toward zero, as in C
            pl.adds(t, t, 2.9)       # a float scalar on an integer tile truncates: + 2
            pl.store(y, t, [0, 0])

    x = np.arange(-512, 512, dtype=np.int32).reshape(16, 64)
    y = np.zeros_like(x)
    scale_shift[1](x, y, 5)
    expected = np.trunc(x * 5 / 3).astype(np.int32) + 2
    np.testing.assert_array_equal(y, expected)


PDB_SCRIPT = '''import torch, pypto_pro.language as pl

@pl.jit(interpret=True)
def stepped(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])

x = torch.arange(512.0).reshape(8, 64); y = torch.empty_like(x)
stepped[None, 2](x, y)
print("sum", y.sum().item())
'''


def test_pdb_stops_at_a_kernel_line_and_shows_its_tile(tmp_path):
    script = tmp_path / "stepped.py"
    script.write_text(PDB_SCRIPT)
    commands = "break stepped.py:9\ncontinue\np pl.get_block_idx(), t.window[1, :3].tolist()\ncontinue\n" \
               "p pl.get_block_idx()\ncontinue\n"
    run = subprocess.run([sys.executable, "-m", "pdb", str(script)], input=commands, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), capture_output=True, text=True,
                         timeout=300)
    assert "stepped.py(9)stepped()" in run.stdout, run.stdout + run.stderr
    assert "(0, [65.0, 66.0, 67.0])" in run.stdout  # block 0, after the adds of line 8
    assert "(Pdb) 1\n" in run.stdout  # the second block stops there too
    assert "sum 131328.0" in run.stdout


def test_a_fault_names_the_kernel_line_and_block():
    @pl.jit(interpret=True)
    def overrun(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [pl.get_block_idx() * 16, 0])
            pl.store(y, t, [pl.get_block_idx() * 16, 0])

    x = torch.randn(24, 64)
    with pytest.raises(pypto_pro.KernelFault) as info:
        overrun[None, 2](x, torch.empty_like(x))
    err = info.value
    line = overrun.fn.__code__.co_firstlineno + 4
    assert err.line == line and err.block == 1 and err.op == "load"
    assert f"kernel 'overrun' (interpreted) faulted in load at {__file__}:{line}, block 1: GM access out of bounds: " \
           f"tensor of shape [24, 64], offsets [16, 0], window [16, 64]" in str(err)


def test_an_op_it_does_not_run_yet_is_refused_at_its_line():
    @pl.jit(interpret=True)
    def uses_cast(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP16]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP16), addr=0x1000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.cast(b, a, pl.RoundMode.CAST_RINT)
            pl.store(y, b, [0, 0])

    line = uses_cast.fn.__code__.co_firstlineno + 6
    with pytest.raises(NotImplementedError, match=rf"{__file__}:{line}: pl.cast is not supported by the interpreter "
                                                  rf"yet \(pl.jit\(interpret=True\)\); run the compiled kernel"):
        uses_cast(torch.randn(16, 64), torch.empty(16, 64, dtype=torch.float16))


def test_refusals_and_launch_checks():
    def mixed(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            pass
        with pl.section_vector():
            pass

    with pytest.raises(NotImplementedError, match="kernel 'mixed' has a cube section; the interpreter runs "
                                                  "vector-only kernels so far"):
        pl.jit(mixed, interpret=True)[None, 1](torch.zeros(16, 16))

    class Key:
        Mode = pl.TilingKeyField(bits=1, values=[0, 1])

    def keyed(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        pass

    with pytest.raises(NotImplementedError, match="tiling_key=, datatype= and pipeline= are not interpreted yet"):
        pl.jit(keyed, interpret=True, tiling_key=Key)
    kernel = pl.jit(keyed, interpret=True)
    with pytest.raises(ValueError, match="block_dim must be an int in 1..65535, got 0"):
        kernel[None, 0]
    with pytest.raises(TypeError, match="stream must be a pypto_pro.runtime.Stream or None, got 'default'"):
        kernel["default", 1]
    with pytest.raises(TypeError, match="argument 'x' must be DT_FP32, got float64"):
        kernel[1](np.zeros((16, 16)))
    with pytest.raises(TypeError, match="pl.jit: interpret must be a bool, got 1"):
        pl.jit(keyed, interpret=1)
    assert kernel.instances() == []  # nothing compiled
