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


add_fp16_example = pl.jit(_add(pl.DT_FP16, 128, 128), name="bench_add_fp16")   # the first kernel of the README
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


@pl.jit
def narrow_kernel(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                  h: pl.Tensor[[64, 64], pl.DT_FP32]):
    """wide_kernel with three tensors: the same work, five arguments fewer."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, a, [0, 0])
        pl.store(h, t, [0, 0])


def _matmul_k_loop(dtype, acc_dtype=pl.DT_FP32, kt=128):
    def matmul_k_loop(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], b: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
                      c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], acc_dtype]):
        """C = A @ B for any K (a multiple of kt): one 128x128 output tile per step, accumulated over
        kt-deep k slices with matmul_acc in L0C (32 KiB A and B tiles: kt 128 for 16-bit inputs, 64 for
        fp32)."""
        t128 = 128
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[t128, kt], dtype=dtype, target_memory=pl.MemorySpace.Mat),
                                   addrs=0x00000, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[kt, t128], dtype=dtype, target_memory=pl.MemorySpace.Mat),
                                   addrs=0x10000, mutex_ids=[2, 3])
        left = pl.make_tile_group(type=pl.TileType(shape=[t128, kt], dtype=dtype, target_memory=pl.MemorySpace.Left),
                                  addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=pl.TileType(shape=[kt, t128], dtype=dtype,
                                                    target_memory=pl.MemorySpace.Right),
                                   addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile(pl.TileType(shape=[t128, t128], dtype=acc_dtype, target_memory=pl.MemorySpace.Acc),
                           addr=0)
        with pl.section_cube():
            col_tiles = c.shape[1] // t128
            k_tiles = a.shape[1] // kt
            for t in pl.range(pl.get_block_idx(), c.shape[0] // t128 * col_tiles, pl.get_block_num()):
                i = t // col_tiles
                j = t % col_tiles
                for kk in pl.range(k_tiles):
                    ta, tb, tl, tr = a_mat.next(), b_mat.next(), left.next(), right.next()
                    pl.load_tile(ta, a, [i, kk])
                    pl.load_tile(tb, b, [kk, j])
                    pl.move(tl, ta)
                    pl.move(tr, tb)
                    if kk == 0:
                        pl.matmul(acc, tl, tr)
                    else:
                        pl.matmul_acc(acc, acc, tl, tr)
                pl.store_tile(c, acc, [i, j])
    return matmul_k_loop


matmul_k_loop = pl.jit(_matmul_k_loop(pl.DT_FP16), name="bench_matmul_k_loop_fp16")
matmul_k_loop_bf16 = pl.jit(_matmul_k_loop(pl.DT_BF16), name="bench_matmul_k_loop_bf16")
matmul_k_loop_int8 = pl.jit(_matmul_k_loop(pl.DT_INT8, pl.DT_INT32), name="bench_matmul_k_loop_int8")
matmul_k_loop_fp32 = pl.jit(_matmul_k_loop(pl.DT_FP32, kt=64), name="bench_matmul_k_loop_fp32")


class EightModes:
    Mode = pl.TilingKeyField(bits=3, values=[0, 1, 2, 3, 4, 5, 6, 7])


def _eight_modes(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
    """Eight TilingKey instances of one small kernel: what compiling them concurrently costs."""
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, Mode * 1.0)
        pl.exp(t, t)
        pl.store(y, t, [0, 0])


# The same kernel twice under two names: one compiles its instances serially, one concurrently.
eight_modes_serial = pl.jit(_eight_modes, name="bench_eight_modes_serial", tiling_key=EightModes)
eight_modes_concurrent = pl.jit(_eight_modes, name="bench_eight_modes_concurrent", tiling_key=EightModes)


class SixtyFourModes:
    Mode = pl.TilingKeyField(bits=6, values=list(range(64)))


sixty_four_modes = pl.jit(_eight_modes, name="bench_sixty_four_modes", tiling_key=SixtyFourModes)
