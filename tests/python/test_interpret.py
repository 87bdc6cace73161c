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
from kernels import fp16_matmul_on_amx, load_example

ROOT = Path(__file__).resolve().parents[2]


def _example(name):
    return load_example(name, "interpret_example")


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

    @pl.jit(interpret=True)
    def divide_by(x: pl.Tensor[[16, 64], pl.DT_INT32], k: pl.DT_INT32):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_INT32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.divs(t, t, k)

    with pytest.raises(pypto_pro.KernelFault, match="faulted in divs .*integer division by zero"):
        divide_by(x, 0)


DIVISOR = 4


def test_module_globals_are_read_at_every_launch():
    global DIVISOR

    @pl.jit(interpret=True)
    def scaled(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.divs(t, t, DIVISOR)
            pl.store(y, t, [0, 0])

    x, y = torch.ones(16, 64), torch.empty(16, 64)
    scaled(x, y)
    assert torch.equal(y, x / 4)
    DIVISOR = 2
    try:
        scaled(x, y)
    finally:
        DIVISOR = 4
    assert torch.equal(y, x / 2)
    assert "__pl_section__" not in globals()  # the interpreter's names stay out of the module


def test_element_access_and_subviews_as_compiled():
    def elements(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0)
        with pl.section_vector():
            pl.set_validshape(t, [6, 40])
            pl.expands(t, 0.0)
            pl.set_validshape(t, [16, 64])
            pl.load(t, x, [0, 0])
            t[0, 0] = t[2, 3] + x[1, 1]
            pl.setval(t, 5, pl.getval(t, 64))
            pl.set_validshape(t, [6, 40])
            s = t[2:6, 16:50]             # window clamped to [4, 24]
            pl.adds(s, s, 100.0)
            pl.set_validshape(t, [16, 64])
            pl.store(y, t, [0, 0])

    x = torch.randn(16, 64)
    outputs = []
    for interpret in (False, True):
        y = torch.empty(16, 64)
        pl.jit(elements, interpret=interpret)[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        outputs.append(y)
    assert torch.equal(outputs[0], outputs[1])
    assert outputs[1][0, 0] == x[2, 3] + x[1, 1] and outputs[1][0, 5] == x[1, 0]
    assert torch.equal(outputs[1][2:6, 16:40], x[2:6, 16:40] + 100) and torch.equal(outputs[1][2:6, 40:50], x[2:6, 40:50])

    @pl.jit(interpret=True)
    def out_of_tile(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.setval(t, 16 * 64, 1.0)

    with pytest.raises(pypto_pro.KernelFault, match=r"faulted in setval .*element offset 1024 is outside the "
                                                    r"\[16, 64\] tile"):
        out_of_tile(x)


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


def test_the_environment_variable_interprets_every_kernel(tmp_path):
    script = tmp_path / "stepped.py"
    script.write_text(PDB_SCRIPT.replace("@pl.jit(interpret=True)", "@pl.jit") +
                      "print(type(stepped).__name__, stepped.instances())\n")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYPTO_PRO_INTERPRET="1"))
    assert run.returncode == 0, run.stderr
    assert "sum 131328.0" in run.stdout and "_InterpretedKernel []" in run.stdout
    assert not (tmp_path / "build").exists()  # nothing compiled


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
    def uses_axpy(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0x1000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.axpy(b, a, 2.0)
            pl.store(y, b, [0, 0])

    line = uses_axpy.fn.__code__.co_firstlineno + 6
    with pytest.raises(NotImplementedError, match=rf"{__file__}:{line}: pl.axpy is not supported by the "
                                                  rf"interpreter yet \(pl.jit\(interpret=True\)\); run the compiled kernel"):
        uses_axpy(torch.randn(16, 64), torch.empty(16, 64))


def _differential(fn, args, outputs):
    """Runs `fn` compiled and interpreted on copies of `outputs`; returns both results."""
    results = []
    for interpret in (False, True):
        outs = [o.clone() for o in outputs]
        pl.jit(fn, interpret=interpret)[None, 1](*args, *outs)
        pypto_pro.runtime.synchronize()
        results.append(outs)
    return results


def test_bitwise_compare_select_and_friends_as_compiled():
    def integer_ops(x: pl.Tensor[[16, 64], pl.DT_INT32], s: pl.Tensor[[16, 64], pl.DT_INT32],
                    y: pl.Tensor[[16, 64], pl.DT_INT32], z: pl.Tensor[[16, 64], pl.DT_INT32],
                    w: pl.Tensor[[64, 16], pl.DT_INT32]):
        ti = pl.TileType(shape=[16, 64], dtype=pl.DT_INT32, valid_shape=[-1, -1])
        a, b, c = pl.make_tile(ti, addr=0), pl.make_tile(ti, addr=0x1000), pl.make_tile(ti, addr=0x2000)
        d = pl.make_tile(ti, addr=0x3000)
        t = pl.make_tile(pl.TileType(shape=[64, 16], dtype=pl.DT_INT32, valid_shape=[-1, -1]), addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, s, [0, 0])
            pl.xor(c, a, b, d)
            pl.and_(c, c, 0x0FF0)
            pl.or_(c, c, a)
            pl.not_(d, c)
            pl.shl(c, a, b)
            pl.shr(d, d, b)
            pl.store(y, c, [0, 0])
            pl.store(z, d, [0, 0])
            pl.set_validshape(a, [10, 48])
            pl.transpose(t, a)
            pl.fill_index(t, -3)
            pl.set_validshape(t, [48, 10])  # what the transpose and fill_index wrote (the rest: stale UB)
            pl.store(w, t, [0, 0])

    xi = torch.randint(-2**31, 2**31 - 1, (16, 64), dtype=torch.int32)
    shifts = torch.randint(0, 32, (16, 64), dtype=torch.int32)
    (c0, c1) = _differential(integer_ops, (xi, shifts), [torch.zeros(16, 64, dtype=torch.int32),
                                                        torch.zeros(16, 64, dtype=torch.int32),
                                                        torch.zeros(64, 16, dtype=torch.int32)])
    for compiled, interpreted in zip(c0, c1):
        assert torch.equal(compiled, interpreted)

    def float_ops(x: pl.Tensor[[16, 64], pl.DT_FP16], r: pl.Tensor[[16, 64], pl.DT_FP16],
                  y: pl.Tensor[[16, 64], pl.DT_FP16], m: pl.Tensor[[16, 64], pl.DT_UINT8],
                  z: pl.Tensor[[16, 64], pl.DT_FP16]):
        th = pl.TileType(shape=[16, 64], dtype=pl.DT_FP16, valid_shape=[-1, -1])
        a, b, c = pl.make_tile(th, addr=0), pl.make_tile(th, addr=0x800), pl.make_tile(th, addr=0x1000)
        mask = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_UINT8, valid_shape=[-1, -1]), addr=0x2000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, r, [0, 0])
            pl.expands(mask, 0)
            pl.set_validshape(mask, [12, 37])
            pl.lt(mask, a, b)
            pl.select(c, mask, a, -1.5, b)
            pl.ge(mask, a, 0.25)
            pl.set_validshape(mask, [16, 64])
            pl.store(m, mask, [0, 0])
            pl.add_relu(c, a, b)
            pl.sub_relu(b, a, c)
            pl.addc(a, a, b, c)
            pl.store(y, c, [0, 0])
            pl.store(z, a, [0, 0])

    x, r = torch.randn(16, 64).half(), torch.randn(16, 64).half()
    (c0, c1) = _differential(float_ops, (x, r), [torch.zeros(16, 64).half(), torch.zeros(16, 64, dtype=torch.uint8),
                                                 torch.zeros(16, 64).half()])
    for compiled, interpreted in zip(c0, c1):
        assert torch.equal(compiled, interpreted)

    def bad_shift(x: pl.Tensor[[16, 64], pl.DT_INT32], s: pl.Tensor[[16, 64], pl.DT_INT32],
                  y: pl.Tensor[[16, 64], pl.DT_INT32]):
        ti = pl.TileType(shape=[16, 64], dtype=pl.DT_INT32)
        a, b = pl.make_tile(ti, addr=0), pl.make_tile(ti, addr=0x1000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, s, [0, 0])
            pl.shl(a, a, b)
            pl.store(y, a, [0, 0])

    shifts[3, 5] = 32
    with pytest.raises(pypto_pro.KernelFault, match=r"faulted in shl .*shift amount 32 in 'rhs' \(element \[3, 5\]\) "
                                                    r"is outside \[0, 32\)"):
        pl.jit(bad_shift, interpret=True)[None, 1](xi, shifts, torch.zeros(16, 64, dtype=torch.int32))


def _swapped(module):
    """The module's kernels replaced by interpreted ones (restore with the returned dict)."""
    saved = {}
    for name in dir(module):
        kernel = getattr(module, name)
        if isinstance(kernel, pl.JitFunction):
            saved[name] = kernel
            key = next((v for v in vars(module).values() if isinstance(v, type) and
                        any(isinstance(f, pl.TilingKeyField) for f in vars(v).values())), None)
            setattr(module, name, pl.jit(kernel.fn, interpret=True, name=kernel.kernel_name,
                                         tiling_key=key if kernel.tiling_key is not None else None))
    return saved


def _compiled_and_interpreted(module, run):
    compiled = run()
    pypto_pro.runtime.synchronize()
    saved = _swapped(module)
    try:
        interpreted = run()
    finally:
        for name, kernel in saved.items():
            setattr(module, name, kernel)
    return compiled, interpreted


def _same_fp16_matmul(compiled, interpreted, what):
    """fp16 products are exact in fp32, and the interpreter sums them in the order of the compiled
    vector path (one fp32 sum per k): the same bits. On the AMX tile unit the compiled sums group the
    products otherwise (gemm.h): as close as two fp32 sums of the same exact products (results
    rounded to fp16 afterwards: within one fp16 rounding)."""
    if not fp16_matmul_on_amx():
        assert torch.equal(compiled, interpreted), what
    else:
        tol = 1e-3 if compiled.dtype == torch.float16 else 1e-5  # an fp16 rounding; fp32 sums of ~100 products
        torch.testing.assert_close(compiled.float(), interpreted.float(), rtol=tol, atol=10 * tol, msg=what)


def test_the_data_path_example_gives_the_compiled_bits():
    data_paths = _example("data_paths")
    for path in data_paths.PATHS:
        def run():
            torch.manual_seed(3)
            return path()
        (compiled, reference), (interpreted, _) = _compiled_and_interpreted(data_paths, run)
        _same_fp16_matmul(compiled, interpreted, path.__name__)
        torch.testing.assert_close(interpreted, reference, rtol=2e-3, atol=2e-3)


def test_matmul_and_fused_softmax_matmul_examples():
    matmul = _example("matmul")
    a, b = torch.randn(512, 128).half(), torch.randn(128, 384).half()

    def run():
        c = torch.empty(512, 384)
        matmul.matmul_kernel[None, 5](a, b, c)
        return c
    compiled, interpreted = _compiled_and_interpreted(matmul, run)
    _same_fp16_matmul(compiled, interpreted, "matmul")
    torch.testing.assert_close(interpreted, a.float() @ b.float(), rtol=1e-4, atol=1e-3)
    fused = _example("fused_softmax_matmul")
    for block_dim in (1, 3):
        (compiled, reference), (interpreted, _) = _compiled_and_interpreted(fused, lambda: fused.run(block_dim=block_dim))
        torch.testing.assert_close(interpreted, compiled, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(interpreted, reference, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name,seq", [("flash_attention", 200), ("flash_attention_gm", 256)])
def test_flash_attention_examples(name, seq):
    module = _example(name)
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, seq, 2, 128).half() for _ in range(3))
    for causal in (False, True):
        compiled, interpreted = _compiled_and_interpreted(module, lambda: module.attention(q, k, v, causal))
        # fp16 outputs: within one fp16 ulp of the compiled path (exp and sum orders differ in the last fp32 bits)
        torch.testing.assert_close(interpreted.float(), compiled.float(), rtol=1e-3, atol=5e-4)
        torch.testing.assert_close(interpreted.float(), module.reference(q, k, v, causal), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("tiles", [1, 2, 5])
def test_pipeline_examples_run_their_stages_in_the_serial_order(tiles):
    mlp = _example("pipeline_mlp")
    torch.manual_seed(6)
    a, b, d = torch.randn(tiles * mlp.TILE, mlp.TILE), torch.randn(mlp.TILE, mlp.TILE), torch.randn(mlp.TILE, mlp.TILE)
    compiled = mlp.relu_mlp(a, b, d)
    interpreted = mlp.relu_mlp(a, b, d, pl.jit(mlp.mlp, name="mlp_interpreted", interpret=True,
                                                pipeline=pl.pipeline.PipelineConfig(preload=2)))
    # fp32 matmuls: the K sums' order differs from the compiled path's in the last bits
    torch.testing.assert_close(interpreted, compiled, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(interpreted.double(), torch.relu(a.double() @ b.double()) @ d.double(),
                               rtol=1e-4, atol=1e-3)


def test_the_pipelined_flash_attention_example():
    fa = _example("flash_attention_pipeline")
    torch.manual_seed(7)
    q, k, v = (torch.randn(1, 300, 2, 128).half() for _ in range(3))
    kernel = pl.jit(fa.flash_attention_pipeline, tiling_key=fa.AttentionKey, interpret=True,
                    pipeline=pl.pipeline.PipelineConfig(preload=fa.RING - 1))
    for causal in (False, True):
        compiled = fa.attention(q, k, v, causal)
        interpreted = fa.attention(q, k, v, causal, kernel=kernel)
        torch.testing.assert_close(interpreted.float(), compiled.float(), rtol=1e-3, atol=5e-4)
        torch.testing.assert_close(interpreted.float(), fa.reference(q, k, v, causal), rtol=2e-3, atol=2e-3)


CAST_KERNEL = """import pypto_pro.language as pl

def cast_{mode}(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP16],
                z: pl.Tensor[[16, 64], pl.DT_INT32], w: pl.Tensor[[16, 64], pl.DT_INT8]):
    a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
    b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP16), addr=0x1000)
    c = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_INT32), addr=0x2000)
    d = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_INT8), addr=0x3000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.cast(b, a, mode=pl.RoundMode.{mode})
        pl.cast(c, a, mode=pl.RoundMode.{mode})
        pl.cast(d, c, mode=pl.RoundMode.{mode})
        pl.store(y, b, [0, 0])
        pl.store(z, c, [0, 0])
        pl.store(w, d, [0, 0])
"""


@pytest.mark.parametrize("mode", ["CAST_ROUND", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_NONE"])
def test_cast_rounds_as_the_compiled_path(tmp_path, mode):
    path = tmp_path / f"cast_{mode}.py"
    path.write_text(CAST_KERNEL.format(mode=mode))
    spec = importlib.util.spec_from_file_location(f"cast_{mode}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, f"cast_{mode}")
    torch.manual_seed(5)
    x = torch.randn(16 * 64) * 1000
    x[:256] = (torch.arange(256).float() - 128) * 0.5                    # integer ties
    h = torch.randn(256).half()
    x[256:512] = h.float() + torch.from_numpy(np.spacing(h.numpy()).astype(np.float32)) / 2  # fp16 ties
    x[512:516] = torch.tensor([70000.0, -70000.0, 65519.0, 3e9])           # overflow both ways
    x = x.view(16, 64)
    outputs = []
    for interpret in (False, True):
        y, z, w = torch.empty(16, 64).half(), torch.empty(16, 64, dtype=torch.int32), torch.empty(16, 64, dtype=torch.int8)
        pl.jit(fn, interpret=interpret)[None, 1](x, y, z, w)
        pypto_pro.runtime.synchronize()
        outputs.append((y.view(torch.int16), z, w))
    for compiled, interpreted in zip(*outputs):
        assert torch.equal(compiled, interpreted)


def test_a_mixed_block_that_waits_forever_is_a_deadlock():
    @pl.jit(interpret=True)
    def stuck(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=3)
        with pl.section_vector():
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)

    with pytest.raises(pypto_pro.KernelDeadlock, match=r"(?s)kernel 'stuck' \(interpreted\): every unfinished core "
                                                        r"of block 0 waits.*AIC of block 0 waits in "
                                                        r"pl.system.wait_cross_core\(event_id=3, sync_mode=INTRA_BLOCK\)"
                                                        r".*AIV 0 of block 0 has finished"):
        stuck[None, 1](torch.zeros(16, 16))


def test_refusals_and_launch_checks():
    class Key:
        Mode = pl.TilingKeyField(bits=1, values=[0, 1])

    def keyed(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        pass

    with pytest.raises(NotImplementedError, match="datatype= is not interpreted yet"):
        pl.jit(keyed, interpret=True, datatype={"x": "T"})
    with_key = pl.jit(keyed, interpret=True, tiling_key=Key)
    with pytest.raises(ValueError, match=r"has a tiling_key: launch it with kernel\[stream, block_dim, "):
        with_key[None, 1](torch.zeros(16, 16))
    with pytest.raises(ValueError, match="TilingKey field 'Mode' = 3 is not one of its values"):
        with_key[None, 1, {"Mode": 3}]
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
