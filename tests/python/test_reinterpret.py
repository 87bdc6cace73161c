"""pl.reinterpret(tile, *, dtype=None, shape=None, layout=None): a tile's bytes as another tile type
(docs/language.md#make_tile-make_tile_group)."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

TILE = 64


def sync():
    pypto_pro.runtime.synchronize()


@pl.jit(auto_mutex=True)
def fp16_bits_as_bf16(x: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_FP16], out: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_BF16]):
    tt = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    g = pl.make_tile_group(type=tt, addrs=[0x0000], mutex_ids=[0])
    for i in pl.range(0, x.shape[0], TILE):
        t = g.next()
        pl.load(t, x, [i, 0])
        t2 = pl.reinterpret(t, shape=[TILE, TILE], dtype=pl.DT_BF16)
        pl.store(out, t2, [i, 0])


@pl.jit(auto_mutex=True, sanitizer=True)
def fp32_as_fp16_rows(x: pl.Tensor[[TILE, TILE], pl.DT_FP32], out: pl.Tensor[[TILE * 2, TILE], pl.DT_FP16]):
    tt = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    g = pl.make_tile_group(type=tt, addrs=[0x0000], mutex_ids=[0])
    with pl.section_vector():
        t = g.next()
        pl.load(t, x, [0, 0])
        h = pl.reinterpret(t, shape=[TILE * 2, TILE], dtype=pl.DT_FP16)   # element count changes, bytes do not
        pl.store(out, h, [0, 0])


def test_the_bytes_are_the_same():
    x = torch.randn(2 * TILE, TILE).half()
    out = torch.zeros(2 * TILE, TILE, dtype=torch.bfloat16)
    fp16_bits_as_bf16[None, 1](x, out)
    sync()
    assert torch.equal(out.view(torch.int16), x.view(torch.int16))
    y = torch.randn(TILE, TILE)
    o = torch.zeros(2 * TILE, TILE, dtype=torch.float16)
    fp32_as_fp16_rows[None, 1](y, o)     # also under the sanitizer: auto_mutex guards the view
    sync()
    assert torch.equal(o.reshape(-1).view(torch.float32).reshape(TILE, TILE), y)


@pl.jit
def float_bits(x: pl.Tensor[[1, 16], pl.DT_FP32], out: pl.Tensor[[1, 8], pl.DT_INT32], n: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        bits = pl.reinterpret(t, dtype=pl.DT_INT32, shape=[1, 8])   # the first half, as ints
        pl.set_validshape(bits, [1, n])                             # a view's window is its own
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, bits, [0, 0])


def test_a_smaller_view_with_its_own_window():
    x = torch.randn(1, 16)
    out = torch.zeros(1, 8, dtype=torch.int32)
    float_bits[None, 1](x, out, 5)
    sync()
    ref = torch.zeros(1, 8, dtype=torch.int32)
    ref[0, :5] = x[0, :5].view(torch.int32)
    assert torch.equal(out, ref)


def _launch(body):
    pl.jit(body)[None, 1](torch.zeros(1, 16))
    sync()


def test_errors():
    def nothing(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        v = pl.reinterpret(t)

    with pytest.raises(pypto_pro.ParserTypeError, match="needs at least one of dtype=, shape= and layout="):
        _launch(nothing)

    def dtype_only(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        v = pl.reinterpret(t, dtype=pl.DT_FP16)

    with pytest.raises(pypto_pro.ParserTypeError, match="changing the dtype needs shape= too"):
        _launch(dtype_only)

    def too_big(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        v = pl.reinterpret(t, shape=[2, 16])

    with pytest.raises(pypto_pro.ParserValueError, match="the view needs 128 bytes but the tile has 64; a view may "
                                                         "not reach past its tile"):
        _launch(too_big)

    def group(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0, 1])
        v = pl.reinterpret(g, shape=[2, 8])

    with pytest.raises(pypto_pro.UnsupportedFeatureError, match="reinterpreting a whole tile group is not implemented"):
        _launch(group)

    def of_subview(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        v = pl.reinterpret(t[0:1, 1:16], shape=[1, 8])

    with pytest.raises(pypto_pro.UnsupportedFeatureError, match="reinterpreting a subview is not implemented yet"):
        _launch(of_subview)

    def fractal(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        m = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                     layout=pl.NZ), addr=0)
        with pl.section_cube():
            v = pl.reinterpret(m, shape=[16, 16], dtype=pl.DT_BF16)

    with pytest.raises(pypto_pro.UnsupportedFeatureError, match="reading fractal \\(NZ/ZN\\) or column-major \\(DN\\) "
                                                                "bytes as another tile type is not implemented yet"):
        _launch(fractal)

    def not_a_tile(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        v = pl.reinterpret(x, shape=[16])

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.reinterpret takes a tile, got GM tensor 'x'"):
        _launch(not_a_tile)
