"""A cube kernel: C = A @ B with A [M, 128] fp16, B [128, N] fp16 and C fp32, one 128x128 output tile
per step. Tiles go GM -> Mat (L1, 4-deep groups) -> Left/Right (L0A/L0B, 2-deep) -> matmul -> Acc
(L0C, 2-deep) -> GM; auto_mutex orders the pipes through the groups' mutex ids.

Run: make demo   (or: PYTHONPATH=python /usr/bin/python3 examples/matmul.py)
"""

import time

import torch

import pypto_pro
import pypto_pro.language as pl
from softmax import per_call  # (the softmax example's timing helper)

TILE = 128
K = 128


@pl.jit(auto_mutex=True)
def matmul_kernel(a: pl.Tensor[[pl.DYNAMIC, K], pl.DT_FP16],
                  b: pl.Tensor[[K, pl.DYNAMIC], pl.DT_FP16],
                  c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32]):
    a_type = pl.TileType(shape=[TILE, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
    b_type = pl.TileType(shape=[K, TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
    a_mat = pl.make_tile_group(type=a_type, addrs=0x00000, mutex_ids=[0, 1, 2, 3])     # 4 x 32 KiB of L1
    b_mat = pl.make_tile_group(type=b_type, addrs=0x20000, mutex_ids=[4, 5, 6, 7])
    left = pl.make_tile_group(type=pl.TileType(shape=[TILE, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                              addrs=0x0, mutex_ids=[8, 9])                              # all of L0A
    right = pl.make_tile_group(type=pl.TileType(shape=[K, TILE], dtype=pl.DT_FP16,
                                                target_memory=pl.MemorySpace.Right),
                               addrs=0x0, mutex_ids=[10, 11])
    acc = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                             addrs=0x0, mutex_ids=[12, 13])                             # 2 x 64 KiB of L0C
    with pl.section_cube():
        col_tiles = c.shape[1] // TILE
        for t in pl.range(pl.get_block_idx(), a.shape[0] // TILE * col_tiles, pl.get_block_num()):
            i = t // col_tiles
            j = t % col_tiles
            ta, tb = a_mat.next(), b_mat.next()
            tl, tr, tc = left.next(), right.next(), acc.next()
            pl.load_tile(ta, a, [i, 0])
            pl.load_tile(tb, b, [0, j])
            pl.move(tl, ta)
            pl.move(tr, tb)
            pl.matmul(tc, tl, tr)
            pl.store_tile(c, tc, [i, j])


def main():
    stream = pypto_pro.runtime.Stream()
    torch.manual_seed(0)
    for m, n in [(256, 256), (512, 512), (1024, 1024), (2048, 2048)]:
        a = torch.randn(m, K, dtype=torch.float16)
        b = torch.randn(K, n, dtype=torch.float16)
        c = torch.empty(m, n, dtype=torch.float32)
        start = time.perf_counter()
        matmul_kernel[stream, 32](a, b, c)       # the first launch compiles the kernel
        stream.synchronize()
        first = time.perf_counter() - start
        matmul_kernel.wait_compiled()  # (the first launch ran on the tier-0 executor: time the compiled kernel)
        ms = per_call(lambda: matmul_kernel[stream, 32](a, b, c)) * 1e3
        err = (c - a.float() @ b.float()).abs().max().item()
        gflops = 2 * m * n * K / (ms * 1e-3) / 1e9
        print(f"matmul fp16 {m}x{K} @ {K}x{n} -> fp32: max |err| vs torch = {err:.3g}, "
              f"first launch {first * 1e3:.1f} ms, {ms:.3f} ms/launch ({gflops:.1f} GFLOP/s)")
    print(f"compiled instances: {matmul_kernel.cache_info()['compiles']}, "
          f"artefacts in {matmul_kernel.instances()[0].dir}")


if __name__ == "__main__":
    main()
