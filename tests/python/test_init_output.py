"""pl.init_output(tensor, *, offset=0, size, value=0): a region of a GM tensor set to a scalar
(docs/language.md#data-movement)."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl


def sync():
    pypto_pro.runtime.synchronize()


# ---- the public init_output page's kernels, unchanged ----

@pl.jit(auto_mutex=True)
def init_output_kernel(
    out: pl.Tensor[[64, 64], pl.DT_FP32],
):
    pl.init_output(out, offset=0, size=64 * 64, value=0.0)


@pl.jit(auto_mutex=True)
def init_dq_workspace_kernel(
    workspace: pl.Tensor[[4096 * 4096], pl.DT_FP32],
    dq_offset: pl.DT_INT32,
    init_size: pl.DT_INT32,
):
    for i in pl.range(0, init_size, 128 * 128):
        pl.init_output(workspace, offset=dq_offset + i, size=128 * 128, value=0.0)


def test_init_output_page_kernels():
    out = torch.ones(64, 64)
    init_output_kernel(out)
    sync()
    assert torch.equal(out, torch.zeros(64, 64))
    ws = torch.ones(4096 * 4096)
    init_dq_workspace_kernel[None, 1](ws, 1000, 3 * 128 * 128)
    sync()
    ref = torch.ones(4096 * 4096)
    ref[1000:1000 + 3 * 128 * 128] = 0
    assert torch.equal(ws, ref)


@pl.jit
def fills(f16: pl.Tensor[[100], pl.DT_FP16], i32: pl.Tensor[[50], pl.DT_INT32], u8: pl.Tensor[[100], pl.DT_UINT8],
          bf: pl.Tensor[[8, 8], pl.DT_BF16], f32: pl.Tensor[[256], pl.DT_FP32], v: pl.DT_FP32):
    with pl.section_vector():
        pl.init_output(f16, offset=0, size=100, value=0.0)
        pl.init_output(i32, offset=3, size=40, value=7)
        pl.init_output(u8, size=100, value=200)
        pl.init_output(bf, offset=8, size=16, value=pl.const(float("-inf"), pl.DT_FP32))
        pl.init_output(f32, offset=0, size=128, value=1.5)
        pl.system.bar_all()
        pl.init_output(f32, offset=128, size=128, value=v)
        pl.system.bar_all()
        pl.init_output(f32, offset=96, size=64, value=7.0)


def test_dtypes_offsets_and_values():
    f16 = torch.ones(100, dtype=torch.float16)
    i32 = torch.ones(50, dtype=torch.int32)
    u8 = torch.zeros(100, dtype=torch.uint8)
    bf = torch.ones(8, 8, dtype=torch.bfloat16)
    f32 = torch.zeros(256)
    fills[None, 1](f16, i32, u8, bf, f32, -2.0)
    sync()
    assert torch.equal(f16, torch.zeros(100, dtype=torch.float16))
    ref = torch.ones(50, dtype=torch.int32)
    ref[3:43] = 7
    assert torch.equal(i32, ref)
    assert torch.equal(u8, torch.full((100,), 200, dtype=torch.uint8))
    ref = torch.ones(64, dtype=torch.bfloat16)
    ref[8:24] = float("-inf")
    assert torch.equal(bf.flatten(), ref)
    ref = torch.cat([torch.full((96,), 1.5), torch.full((64,), 7.0), torch.full((96,), -2.0)])
    assert torch.equal(f32, ref)


@pl.jit
def strided(base: pl.Ptr[pl.DT_FP32]):
    with pl.section_vector():
        view = pl.make_tensor(base, [4, 4], stride=[8, 1])   # the left half of a [4, 8] buffer
        pl.init_output(view, offset=2, size=10, value=3.0)


def test_a_strided_view_fills_its_elements_row_major():
    buf = torch.zeros(4, 8)
    strided[None, 1](buf)
    sync()
    ref = torch.zeros(4, 8)
    view = ref[:, :4].reshape(-1).clone()
    view[2:12] = 3.0
    ref[:, :4] = view.reshape(4, 4)
    assert torch.equal(buf, ref)


def test_a_region_outside_the_tensor_is_a_fault_and_writes_nothing():
    ws = torch.ones(4096 * 4096)
    with pytest.raises(pypto_pro.KernelFault,
                       match=r"test_init_output.py:\d+ in pl.init_output: the region \[offset, offset \+ size\) leaves "
                             r"the tensor: tensor 'workspace' of shape \[16777216\], offsets \[16777116\], "
                             r"window \[16384\]"):
        init_dq_workspace_kernel[None, 1](ws, 4096 * 4096 - 100, 128 * 128)
        sync()
    assert torch.equal(ws, torch.ones(4096 * 4096))


def _launch(body, *args):
    pl.jit(body)[None, 1](torch.zeros(16), *args)
    sync()


def test_compile_errors():
    def float_into_int(x: pl.Tensor[[16], pl.DT_FP32], y: pl.Tensor[[16], pl.DT_INT32]):
        pl.init_output(y, size=16, value=0.5)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.init_output: value is a float but tensor 'y' holds int32"):
        pl.jit(float_into_int)[None, 1](torch.zeros(16), torch.zeros(16, dtype=torch.int32))

    def too_big(x: pl.Tensor[[16], pl.DT_FP32], y: pl.Tensor[[16], pl.DT_UINT8]):
        pl.init_output(y, size=16, value=300)

    with pytest.raises(pypto_pro.ParserValueError, match="pl.init_output: value 300 does not fit uint8"):
        pl.jit(too_big)[None, 1](torch.zeros(16), torch.zeros(16, dtype=torch.uint8))

    def past_the_end(x: pl.Tensor[[16], pl.DT_FP32]):
        pl.init_output(x, offset=10, size=8)

    with pytest.raises(pypto_pro.ParserValueError, match="offset 10 \\+ size 8 leaves tensor 'x' of 16 elements"):
        _launch(past_the_end)

    def no_size(x: pl.Tensor[[16], pl.DT_FP32]):
        pl.init_output(x, offset=0)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.init_output\\(\\) is missing its 'size' argument"):
        _launch(no_size)

    def zero_size(x: pl.Tensor[[16], pl.DT_FP32]):
        pl.init_output(x, size=0)

    with pytest.raises(pypto_pro.ParserValueError, match="size must be positive, got 0"):
        _launch(zero_size)

    def positional(x: pl.Tensor[[16], pl.DT_FP32]):
        pl.init_output(x, 0, 16)

    with pytest.raises(pypto_pro.ParserTypeError, match="takes offset, size and value as keywords"):
        _launch(positional)

    def a_tile(x: pl.Tensor[[16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        pl.init_output(t, size=16)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.init_output fills a GM tensor, got tile 't'"):
        _launch(a_tile)
