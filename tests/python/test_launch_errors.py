"""Bad launches get a clear TypeError/ValueError naming the parameter, expected and actual value,
and nothing is queued: bad input gets a clear Python error, never a crash."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import make_add_kernel


@pytest.fixture(scope="module")
def add16():
    kernel = make_add_kernel(pl.DT_FP16)
    x = torch.zeros(128, 128, dtype=torch.float16)
    kernel[None, 1](x, x, torch.empty_like(x))  # compiled once up front
    pypto_pro.runtime.synchronize()
    return kernel


@pl.jit
def fixed_kernel(x: pl.Tensor[[64, pl.DYNAMIC], pl.DT_FP32], n: pl.DT_INT32, scale: pl.DT_FP32):
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.muls(t, t, scale)
        pl.adds(t, t, n)
        pl.store(x, t, [0, 0])


def x16(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


def test_wrong_dtype(add16):
    x = x16(128, 128)
    with pytest.raises(TypeError, match=r"argument 'y' expects dtype fp16 \(pl.DT_FP16\), got torch.float32"):
        add16[None, 1](x, torch.zeros(128, 128), x)
    with pytest.raises(TypeError, match=r"argument 'x' expects dtype fp16 \(pl.DT_FP16\), got float64"):
        add16[None, 1](np.zeros((128, 128)), x, x)


def test_wrong_rank(add16):
    with pytest.raises(TypeError, match=r"argument 'x' expects a 2-D tensor, got 3-D with shape \(2, 128, 128\)"):
        add16[None, 1](x16(2, 128, 128), x16(128, 128), x16(128, 128))


def test_wrong_fixed_dim():
    with pytest.raises(TypeError, match=r"argument 'x' dim 0 must be 64 \(fixed in its annotation\), got 32"):
        fixed_kernel[None, 1](torch.zeros(32, 64), 1, 2.0)


def test_non_tensor_argument(add16):
    with pytest.raises(TypeError, match=r"argument 'z' must be a torch.Tensor or numpy.ndarray, got list"):
        add16[None, 1](x16(128, 128), x16(128, 128), [[0.0]])


def test_wrong_argument_count(add16):
    with pytest.raises(TypeError, match=r"add_kernel\(x, y, z\): missing a required argument: 'z'"):
        add16[None, 1](x16(128, 128), x16(128, 128))
    with pytest.raises(TypeError, match=r"too many positional arguments"):
        add16[None, 1](x16(128, 128), x16(128, 128), x16(128, 128), x16(128, 128))
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'w'"):
        add16[None, 1](x16(128, 128), x16(128, 128), x16(128, 128), w=1)


def test_keyword_arguments_bind_in_signature_order(add16):
    x, y = torch.ones(128, 128, dtype=torch.float16), torch.full((128, 128), 2.0, dtype=torch.float16)
    z = x16(128, 128)
    add16[None, 1](z=z, y=y, x=x)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + y)


@pytest.mark.parametrize("bad", [0, -3, True, False, 1.0, "4", None])
def test_bad_block_dim(add16, bad):
    with pytest.raises(ValueError, match="block_dim must be a positive int"):
        add16[None, bad]
    with pytest.raises(ValueError, match="block_dim must be a positive int"):
        add16[bad]


def test_bad_bracket_forms(add16):
    with pytest.raises(ValueError, match=r"kernel\[stream, block_dim\]\(...\) or kernel\[block_dim\]\(...\), got 3 entries"):
        add16[None, 1, {"A": 1}]
    with pytest.raises(ValueError, match="got 1 entries"):
        add16[(None,)]
    with pytest.raises(ValueError, match="got 5 entries"):
        add16[None, 1, {}, {}, {}]
    with pytest.raises(TypeError, match="must be a pypto_pro.runtime.Stream or None, got str"):
        add16["stream0", 1]


def test_non_contiguous_and_non_cpu(add16):
    x = x16(128, 256)[:, :128]
    with pytest.raises(ValueError, match=r"argument 'x' must be contiguous \(row-major\)"):
        add16[None, 1](x, x16(128, 128), x16(128, 128))
    with pytest.raises(ValueError, match="must be contiguous"):
        add16[None, 1](np.zeros((128, 128), np.float16).T, x16(128, 128), x16(128, 128))


def test_scalar_arguments():
    x = torch.zeros(64, 64)
    with pytest.raises(TypeError, match=r"argument 'n' expects an int \(int32\), got float"):
        fixed_kernel[None, 1](x, 1.5, 2.0)
    with pytest.raises(TypeError, match=r"argument 'n' expects an int \(int32\), got bool"):
        fixed_kernel[None, 1](x, True, 2.0)
    with pytest.raises(OverflowError, match=r"argument 'n' = 4294967296 does not fit in int32"):
        fixed_kernel[None, 1](x, 2 ** 32, 2.0)
    with pytest.raises(TypeError, match=r"argument 'scale' expects a float \(fp32\), got str"):
        fixed_kernel[None, 1](x, 1, "2")
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    expected = x * 0.5 + 3
    fixed_kernel[None, 1](x, 3, 0.5)
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, expected)


def test_errors_leave_the_stream_usable(add16):
    with pytest.raises(TypeError):
        add16[None, 1](x16(128, 128), torch.zeros(128, 128), x16(128, 128))
    x = torch.ones(256, 128, dtype=torch.float16)
    z = x16(256, 128)
    add16[None, 2](x, x, z)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + x)


def test_tensors_on_other_devices_are_refused(add16):
    meta = torch.empty(128, 128, dtype=torch.float16, device="meta")
    with pytest.raises(ValueError, match=r"argument 'x' is on device 'meta'; the simulated device uses host \(CPU\)"):
        add16[None, 1](meta, x16(128, 128), x16(128, 128))


def test_torch_attribute_path_gives_the_same_results(tmp_path):
    """The launch path reads torch tensors through libtorch when libpypto_torch_args.so is built; the
    Python-attribute fallback must behave the same."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "attr_path.py"
    script.write_text(
        "import sys, torch, pypto_pro\n"
        "sys.path.insert(0, %r)\n"
        "import pypto_pro.language as pl\n"
        "from kernels import make_add_kernel\n"
        "k = make_add_kernel(pl.DT_FP16)\n"
        "x = torch.randn(256, 128).half(); z = torch.zeros_like(x)\n"
        "k[None, 2](x, x, z); pypto_pro.runtime.synchronize(); assert torch.equal(z, x + x)\n"
        "try:\n"
        "    k[None, 1](x, torch.zeros(256, 128), z)\n"
        "except TypeError as e:\n"
        "    print(e)\n" % str(Path(__file__).parent))
    env = dict(os.environ, PYPTO_PRO_TORCH_ATTRIBUTE_PATH="1",
               PYTHONPATH=str(Path(pypto_pro.__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "argument 'y' expects dtype fp16 (pl.DT_FP16), got torch.float32" in out.stdout


def test_float_scalars_that_do_not_fit_fp32_raise_overflow_error_and_run_nothing():
    x = torch.full((64, 64), 5.0)
    fixed_kernel[None, 1](x, 0, 1.0)  # warm: the instance exists
    pypto_pro.runtime.synchronize()
    for value in (10 ** 400, 1e39, -1e39, np.float64(1e300)):
        with pytest.raises(OverflowError, match=r"fixed_kernel\(\): argument 'scale' = .* does not fit in fp32"):
            fixed_kernel[None, 1](x, 0, value)
    # Argument order does not matter: the tensor comes first here, the scalar last.
    with pytest.raises(OverflowError, match=r"argument 'scale'"):
        fixed_kernel[None, 1](torch.full((64, 64), 5.0), 1, 10 ** 400)
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, torch.full((64, 64), 5.0))  # nothing ran
    fixed_kernel[None, 1](x, 0, float("inf"))  # inf is a value of fp32, not an overflow
    pypto_pro.runtime.synchronize()
    assert torch.isinf(x).all()


def test_numpy_scalars_are_scalar_arguments():
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    expected = x * 0.5 + 3
    fixed_kernel[None, 1](x, np.int32(3), np.float32(0.5))
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, expected)
    x = torch.ones(64, 64)
    fixed_kernel[None, 1](x, np.int64(-2), np.float64(2.0))
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, torch.zeros(64, 64))
    with pytest.raises(TypeError, match=r"argument 'n' expects an int \(int32\), got numpy.float32$"):
        fixed_kernel[None, 1](x, np.float32(1.0), 2.0)
    with pytest.raises(TypeError, match=r"argument 'n' expects an int \(int32\), got numpy.bool_$"):
        fixed_kernel[None, 1](x, np.bool_(True), 2.0)
    with pytest.raises(OverflowError, match=r"argument 'n' = 4294967296 does not fit in int32"):
        fixed_kernel[None, 1](x, np.int64(2 ** 32), 2.0)


@pl.jit
def copy_kernel(src: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], dst: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for i in pl.range(src.shape[0] // 8):
            pl.load_tile(t, src, [i, 0])
            pl.store_tile(dst, t, [i, 0])


def test_read_only_outputs_are_refused_before_anything_runs():
    import mmap
    src = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    frozen = np.zeros((8, 64), np.float32)
    frozen.setflags(write=False)
    data = bytes(8 * 64 * 4)
    from_bytes = np.frombuffer(data, np.float32).reshape(8, 64)
    mapping = mmap.mmap(-1, 8 * 64 * 4, prot=mmap.PROT_READ)
    from_mapping = np.frombuffer(mapping, np.float32).reshape(8, 64)
    for dst in (frozen, from_bytes, from_mapping):
        with pytest.raises(ValueError, match=r"copy_kernel\(\): argument 'dst' is a read-only array"):
            copy_kernel[None, 1](src, dst)
    pypto_pro.runtime.synchronize()
    assert data == bytes(8 * 64 * 4) and not frozen.any() and not from_mapping.any()
    # A read-only input is fine: the kernel only reads it.
    src.setflags(write=False)
    out = np.zeros((8, 64), np.float32)
    copy_kernel[None, 1](src, out)
    pypto_pro.runtime.synchronize()
    assert np.array_equal(out, src)


def test_torch_tensors_that_require_grad_are_refused_as_outputs_like_torch_does():
    src = torch.randn(8, 64)
    leaf = torch.zeros(8, 64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"argument 'dst': a leaf Variable that requires grad is being used in an "
                                           r"in-place operation"):
        copy_kernel[None, 1](src, leaf)
    inner = leaf * 2  # not a leaf, still tracked by autograd
    with pytest.raises(RuntimeError, match=r"argument 'dst' requires grad, but autograd cannot see the kernel"):
        copy_kernel[None, 1](src, inner)
    pypto_pro.runtime.synchronize()
    assert not leaf.detach().any()
    with torch.no_grad():  # as for torch's own in-place ops
        copy_kernel[None, 1](src, leaf)
    copy_kernel[None, 1](src.requires_grad_(), torch.zeros(8, 64))  # inputs may require grad
    pypto_pro.runtime.synchronize()
    assert torch.equal(leaf.detach(), src.detach())


def test_empty_tensors_are_contiguous(add16):
    # (N, 0) tensors have no elements: their strides say nothing, so they are never "non-contiguous".
    for empty in (x16(128, 0), x16(0, 128), np.zeros((128, 0), np.float16)):
        add16[None, 1](empty, empty, empty)
    pypto_pro.runtime.synchronize()


def test_block_dim_above_the_launch_limit():
    x = torch.zeros(64, 64)
    with pytest.raises(ValueError, match=r"block_dim must be at most 65535 \(the device's launch limit\), got 65536"):
        fixed_kernel[None, 65536](x, 1, 2.0)
    with pytest.raises(ValueError, match=r"block_dim must be at most 65535"):
        fixed_kernel[None, 2 ** 70](x, 1, 2.0)


def test_the_set_up_builds_the_libtorch_fast_path():
    """`make` installs libtorch-dev, so torch tensors are read through libtorch (~35 ns), not five Python
    attribute calls: the benchmark table is reproducible from the README's two commands."""
    import os
    if os.environ.get("PYPTO_PRO_TORCH_ATTRIBUTE_PATH") == "1":
        pytest.skip("the attribute path was asked for")
    assert pypto_pro._C.torch_fast_path(), "libpypto_torch_args.so was not built or does not load"
