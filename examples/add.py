"""The add kernel of the language reference: z = x + y on fp16, double-buffered tile groups in UB.

Run: make demo   (or: PYTHONPATH=python /usr/bin/python3 examples/add.py)
"""

import time

import torch

import pypto_pro
import pypto_pro.language as pl


@pl.jit(auto_mutex=True)
def add_kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
               y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
               z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16]):
    tt = pl.TileType(shape=[128, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])     # double buffer in UB
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[30, 31])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 128, pl.get_block_num()):
            for j in pl.range(0, x.shape[1] // 128, 1):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [i, j]); pl.load_tile(tb, y, [i, j])
                pl.add(tc, ta, tb)
                pl.store_tile(z, tc, [i, j])


def main():
    stream = pypto_pro.runtime.Stream()
    for shape in [(128, 128), (2048, 1024), (8192, 4096)]:
        x = torch.randn(shape, dtype=torch.float16)
        y = torch.randn(shape, dtype=torch.float16)
        z = torch.empty_like(x)
        start = time.perf_counter()
        add_kernel[stream, 64](x, y, z)          # first launch of a signature compiles it
        stream.synchronize()
        first = time.perf_counter() - start
        add_kernel.wait_compiled()  # (the first launch ran on the tier-0 executor: time the compiled kernel)
        runs = 20
        begin, end = pypto_pro.runtime.Event(), pypto_pro.runtime.Event()
        begin.record(stream)
        for _ in range(runs):
            add_kernel[stream, 64](x, y, z)
        end.record(stream)
        stream.synchronize()
        ms = begin.elapsed_time(end) / runs
        gbps = 3 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9
        err = (z.float() - (x + y).float()).abs().max().item()
        print(f"add fp16 {shape[0]}x{shape[1]}: max |err| vs torch = {err:.3g}, first launch {first * 1e3:.1f} ms, "
              f"{ms:.3f} ms/launch ({gbps:.1f} GB/s)")
    inst = add_kernel.instances()[0]
    print(f"compiled instances: {add_kernel.cache_info()['compiles']}, artefacts in {inst.dir}")


if __name__ == "__main__":
    main()
