"""The pieces of the pipeline transform's API that exist without pl.jit(pipeline=...): stages are
plain inlined code, cross-core buffers carry their fwd_ids / bwd_ids, and misuse is located."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl


def sync():
    pypto_pro.runtime.synchronize()


@pl.pipeline.stage
def scale_stage(k, src, dst, buf):
    t = buf.next()
    pl.load(t, src, [k, 0])
    pl.system.bar_all()
    pl.muls(t, t, 2.0)
    pl.system.bar_all()
    pl.store(dst, t, [k, 0])
    pl.system.bar_all()


@pl.jit
def staged(x: pl.Tensor[[4, 16], pl.DT_FP32], y: pl.Tensor[[4, 16], pl.DT_FP32]):
    buf = pl.make_tile_group(type=pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addrs=0, depth=2,
                             fwd_ids=[0, 1], bwd_ids=[2, 3])
    with pl.section_vector():
        for k in pl.range(0, 4):
            scale_stage(k, x, y, buf)


def test_without_pipeline_a_stage_is_plain_code():
    x = torch.randn(4, 16)
    y = torch.zeros(4, 16)
    staged[None, 1](x, y)
    sync()
    assert torch.equal(y, 2 * x)
    ir = pl.parser.parse_kernel(staged.fn, staged.spec)[0]
    text = str(ir)
    assert "stage scale_stage:" in text and "fwd_ids=[0, 1], bwd_ids=[2, 3]" in text


@pl.pipeline.stage
def inner_stage(t):
    pl.muls(t, t, 2.0)


@pl.pipeline.stage
def outer_stage(t):
    inner_stage(t)


@pl.pipeline.stage
def returning_stage(t):
    return 1


def _launch(body):
    pl.jit(body)[None, 1](torch.zeros(1, 16))
    sync()


def test_stage_misuse():
    def nested(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            outer_stage(t)

    with pytest.raises(pypto_pro.ParserSyntaxError,
                       match="pipeline stage 'inner_stage' is called inside stage 'outer_stage'; stages do not nest"):
        _launch(nested)

    def returns(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            v = returning_stage(t)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="pipeline stage 'returning_stage' returns a value"):
        _launch(returns)
    with pytest.raises(TypeError, match="pl.pipeline.stage decorates a function"):
        pl.pipeline.stage(3)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"fwd_ids": [0]}, pypto_pro.ParserValueError, r"fwd_ids= has 1 ids but the group has 2 slots"),
    ({"fwd_ids": [0, 16]}, pypto_pro.ParserValueError, r"fwd_ids= id 16 is out of range \[0, 15\]"),
    ({"bwd_ids": [3, 3]}, pypto_pro.ParserValueError, r"bwd_ids= repeats an id: \[3, 3\]"),
    ({"fwd_ids": [0, 1], "bwd_ids": [1, 2]}, pypto_pro.ParserValueError, r"share id 1"),
    ({"fwd_ids": "01"}, pypto_pro.ParserTypeError, r"fwd_ids= is a list of compile-time ints"),
])
def test_cross_core_id_errors(kwargs, error, message):
    fwd, bwd = kwargs.get("fwd_ids"), kwargs.get("bwd_ids")

    def body(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addrs=0, depth=2, fwd_ids=fwd,
                               bwd_ids=bwd)

    with pytest.raises(error, match=message):
        _launch(body)
