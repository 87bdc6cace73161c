"""pl.autotune: the TilingKey chosen by the performance model's cycles, once per key, with the
ranking printable (docs/profiler.md#autotune)."""

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro.runtime.tilingkey import TilingKeyField
from kernels import SlotsKey, slots_add

def test_the_fewest_modelled_cycles_win_once_per_key():
    tuned = pl.autotune(configs=[{"Slots": 1}, {"Slots": 2}], key=["x"])(
        pl.jit(slots_add, tiling_key=SlotsKey, name="tuned_add"))
    x = torch.randn(256, 1024, dtype=torch.float16)
    y = torch.randn_like(x)
    z = torch.empty_like(x)
    tuned[None, 2](x, y, z)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + y)
    (key,) = tuned.choices
    chosen, ranking = tuned.choices[key]
    assert chosen == {"Slots": 2}  # double buffering overlaps the loads with the adds
    assert [c for c, _, _ in ranking] == [{"Slots": 2}, {"Slots": 1}] and ranking[0][1] < ranking[1][1]
    text = tuned.ranking()
    assert "{'Slots': 2}" in text and "<- chosen" in text and "cycles" in text
    z2 = torch.empty_like(x)
    tuned[None, 2](x, y, z2)  # the same key: no tuning
    pypto_pro.runtime.synchronize()
    assert tuned.tunings == 1 and torch.equal(z2, x + y)
    small = torch.randn(128, 128, dtype=torch.float16)
    tuned[None, 2](small, small, torch.empty_like(small))  # another shape: tuned again
    pypto_pro.runtime.synchronize()
    assert tuned.tunings == 2


def test_block_dim_can_be_tuned_and_outputs_restored():
    def acc(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 128], dtype=pl.DT_FP32), addr=0)
        u = pl.make_tile(pl.TileType(shape=[8, 128], dtype=pl.DT_FP32), addr=0x1000)
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), x.shape[0] // 8, pl.get_block_num()):
                pl.load(t, x, [i * 8, 0])
                pl.load(u, z, [i * 8, 0])
                pl.add(u, u, t)   # z += x: each candidate must start from the caller's z
                pl.store(z, u, [i * 8, 0])

    class NoKey:
        Unused = TilingKeyField(bits=1, values=[0])

    tuned = pl.autotune(configs=[{"Unused": 0, "block_dim": 1}, {"Unused": 0, "block_dim": 16}],
                        restore_value=["z"])(pl.jit(acc, tiling_key=NoKey, name="tuned_acc"))
    x = torch.randn(128, 128)
    z = torch.ones(128, 128)
    tuned[None, 1](x, z)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(z, x + 1)  # added once, not once per candidate
    ((_, (chosen, _)),) = tuned.choices.items()
    assert chosen["block_dim"] == 16  # sixteen cores beat one


def test_misuse_says_what_to_change():
    kernel = pl.jit(slots_add, tiling_key=SlotsKey, name="tuned_add_misuse")
    with pytest.raises(ValueError, match=r"configs\[0\] names 'Tile', which is not a TilingKey field of kernel "
                                         r"'tuned_add_misuse' \(its fields: Slots\)"):
        pl.autotune(configs=[{"Tile": 1}])(kernel)
    with pytest.raises(ValueError, match="configs must be a non-empty list of dicts"):
        pl.autotune(configs=[])(kernel)
    with pytest.raises(ValueError, match=r"'w' is not a parameter of kernel 'tuned_add_misuse' \(x, y, z\)"):
        pl.autotune(configs=[{"Slots": 1}], key=["w"])(kernel)
    with pytest.raises(TypeError, match="key must be a list of parameter names"):
        pl.autotune(configs=[{"Slots": 1}], key="x")
    with pytest.raises(TypeError, match="pl.autotune decorates a @pl.jit kernel"):
        pl.autotune(configs=[{"Slots": 1}])(slots_add)
    tuned = pl.autotune(configs=[{"Slots": 1}])(kernel)
    with pytest.raises(TypeError, match="the TilingKey is what the tuner chooses"):
        tuned[None, 1, {"Slots": 2}]
    x = torch.zeros(128, 128, dtype=torch.float16)
    with pypto_pro.profiler.profile():
        with pytest.raises(RuntimeError, match="launch it once before profiling"):
            tuned[None, 1](x, x, torch.empty_like(x))
