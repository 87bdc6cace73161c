"""The add kernel of docs/language.md#kernels-and-launch end to end."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import TILE_FOR, make_add_kernel

SHAPES = [(128, 128), (256, 512), (1024, 256), (2048, 1024)]
BLOCK_DIMS = [1, 2, 7, 64]


@pytest.fixture(scope="module")
def add_fp16():
    return make_add_kernel(pl.DT_FP16, TILE_FOR[pl.DT_FP16])


@pytest.fixture(scope="module")
def add_fp32():
    return make_add_kernel(pl.DT_FP32, TILE_FOR[pl.DT_FP32])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block_dim", BLOCK_DIMS)
def test_fp16_torch_exact(add_fp16, shape, block_dim):
    torch.manual_seed(shape[0] + block_dim)
    x = torch.randn(shape, dtype=torch.float16)
    y = torch.randn(shape, dtype=torch.float16)
    z = torch.full_like(x, float("nan"))
    add_fp16[None, block_dim](x, y, z)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + y)  # fp16 add rounds exactly like torch: tolerance 0


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block_dim", [1, 3, 64])
def test_fp32_numpy_exact(add_fp32, shape, block_dim):
    rng = np.random.default_rng(shape[1] + block_dim)
    x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.standard_normal(shape, dtype=np.float32)
    z = np.full_like(x, np.nan)
    add_fp32[block_dim](x, y, z)
    pypto_pro.runtime.synchronize()
    np.testing.assert_array_equal(z, x + y)


@pytest.mark.parametrize("dtype", [pl.DT_FP16, pl.DT_FP32])
def test_numpy_fp16_and_torch_fp32(dtype):
    kernel = make_add_kernel(dtype, TILE_FOR[dtype])
    shape = (512, 256)
    if dtype is pl.DT_FP16:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float16)
        y = np.random.default_rng(2).standard_normal(shape).astype(np.float16)
        z = np.zeros_like(x)
        kernel[None, 8](x, y, z)
        pypto_pro.runtime.synchronize()
        np.testing.assert_array_equal(z, x + y)
    else:
        x, y = torch.randn(shape), torch.randn(shape)
        z = torch.zeros_like(x)
        kernel[None, 8](x, y, z)
        pypto_pro.runtime.synchronize()
        assert torch.equal(z, x + y)


def test_second_launch_reuses_the_instance():
    kernel = make_add_kernel()
    x = torch.ones(256, 256, dtype=torch.float16)
    z = torch.zeros_like(x)
    kernel[None, 2](x, x, z)
    kernel[None, 4](x, x, z)                                 # new block_dim: same instance
    kernel[pypto_pro.runtime.Stream(), 1](x, x, z)           # new stream: same instance
    big = torch.ones(512, 1024, dtype=torch.float16)
    kernel[None, 1](big, big, torch.zeros_like(big))         # new DYNAMIC dims: same instance
    pypto_pro.runtime.synchronize()
    info = kernel.cache_info()
    assert info["compiles"] == 1 and info["instances"] == 1 and info["hits"] == 3
    assert len(kernel.instances()) == 1
    assert torch.equal(z, x + x)


@pl.jit
def bool_copy(x: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_BOOL], y: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_BOOL]):
    t = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_BOOL), addr=0)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 8, pl.get_block_num()):
            pl.load_tile(t, x, [i, 0])
            pl.store_tile(y, t, [i, 0])


def test_bool_tensors_load_and_store():
    """bool tiles move between GM and the UB like any dtype (a bool store once failed to compile)."""
    x = np.random.default_rng(1).random((24, 32)) > 0.5
    y = np.zeros_like(x)
    bool_copy[None, 2](x, y)
    pypto_pro.runtime.synchronize()
    assert y.dtype == np.bool_ and np.array_equal(x, y)
