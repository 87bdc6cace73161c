"""Kernels the benchmark suite measures (the example kernels, plus a few made for measuring)."""

import pypto_pro.language as pl


def _add(dtype, rows, cols):
    def add(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
            z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype]):
        tt = pl.TileType(shape=[rows, cols], dtype=dtype, target_memory=pl.MemorySpace.Vec)
        a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])
        b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
        c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[30, 31])
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), x.shape[0] // rows, pl.get_block_num()):
                for j in pl.range(0, x.shape[1] // cols, 1):
                    ta, tb, tc = a.next(), b.next(), c.next()
                    pl.load_tile(ta, x, [i, j])
                    pl.load_tile(tb, y, [i, j])
                    pl.add(tc, ta, tb)
                    pl.store_tile(z, tc, [i, j])
    return add


add_fp16_example = pl.jit(_add(pl.DT_FP16, 128, 128), name="bench_add_fp16")   # the LANGUAGE.md kernel
add_kernel = pl.jit(_add(pl.DT_FP32, 64, 128), name="bench_add_fp32")


@pl.jit
def wide_kernel(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                c: pl.Tensor[[64, 64], pl.DT_FP32], d: pl.Tensor[[64, 64], pl.DT_FP32],
                e: pl.Tensor[[64, 64], pl.DT_FP32], f: pl.Tensor[[64, 64], pl.DT_FP32],
                g: pl.Tensor[[64, 64], pl.DT_FP32], h: pl.Tensor[[64, 64], pl.DT_FP32]):
    """Eight tensors, almost no work: what one more tensor argument costs a launch."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, a, [0, 0])
        pl.store(h, t, [0, 0])
