"""out = relu(A @ B) @ D in pipeline form (docs/language.md#pipeline): four stages per 64-row block of
A, alternating the cube and vector cores, written as a serial loop with no cross-core flag;
pl.jit(pipeline=...) inserts the flags of the three cross-core buffers and, with preload, runs the
stages of different blocks at once (the cube up to `preload` blocks ahead of the vector cores).

- stage 1 (cube): A_i @ B, the fixpipe splitting the rows between the two vector cores' UB;
- stage 2 (vector): relu, to NZ, inserted into the cube's L1;
- stage 3 (cube): relu(A_i @ B) @ D into the vector cores' UB;
- stage 4 (vector): store.

Run: PYTHONPATH=python /usr/bin/python3 examples/pipeline_mlp.py
"""

import time

import torch

import pypto_pro
import pypto_pro.language as pl

TILE = 64
HALF = TILE // 2
MEM = pl.MemorySpace


def tile(shape, memory=MEM.Vec, layout=None, fractal=None):
    return pl.TileType(shape=shape, dtype=pl.DT_FP32, target_memory=memory, layout=layout, fractal=fractal)


@pl.pipeline.stage
def first_product(i, a, b_l1, a_l1, left, right, acc, mm1):
    a_tile = a_l1.next()
    pl.load(a_tile, a, [i * TILE, 0])
    l_t, r_t, acc_t = left.next(), right.next(), acc.next()
    pl.move(l_t, a_tile)
    pl.move(r_t, b_l1.current())
    pl.matmul(acc_t, l_t, r_t)
    pl.move(mm1.next(), acc_t, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def activation(i, sub, mm1, relu_vec, relu_nz, p_mat):
    r = relu_vec.next()
    pl.relu(r, mm1.next())
    nz = relu_nz.next()
    pl.move(nz, r)                                   # ND -> NZ: pl.insert takes NZ tiles
    pl.insert(p_mat.next(), nz, [sub * HALF, 0])     # this vector core's rows of the cube's L1 tile


@pl.pipeline.stage
def second_product(i, d_l1, p_mat, left, right, acc, out_vec):
    l_t, r_t, acc_t = left.next(), right.next(), acc.next()
    pl.move(l_t, p_mat.next())
    pl.move(r_t, d_l1.current())
    pl.matmul(acc_t, l_t, r_t)
    pl.move(out_vec.next(), acc_t, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def write_back(i, sub, out, out_vec):
    pl.store(out, out_vec.next(), [i * TILE + sub * HALF, 0])


def mlp(a: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_FP32], b: pl.Tensor[[TILE, TILE], pl.DT_FP32],
        d: pl.Tensor[[TILE, TILE], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_FP32]):
    # the cross-core buffers: two slots each, their flags' ids
    mm1 = pl.make_tile_group(type=tile([HALF, TILE]), addrs=0x0, mutex_ids=[12, 13], fwd_ids=[0, 1], bwd_ids=[2, 3])
    p_mat = pl.make_tile_group(type=tile([TILE, TILE], MEM.Mat, pl.NZ), addrs=0x8000, mutex_ids=[14, 15],
                               fwd_ids=[4, 5], bwd_ids=[6, 7])
    out_vec = pl.make_tile_group(type=tile([HALF, TILE]), addrs=0x10000, mutex_ids=[16, 17], fwd_ids=[8, 9],
                                 bwd_ids=[10, 11])
    with pl.section_cube():
        a_l1 = pl.make_tile_group(type=tile([TILE, TILE], MEM.Mat, pl.NZ), addrs=0x0, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=tile([TILE, TILE], MEM.Mat, pl.NZ), addrs=0x10000, mutex_ids=[2])
        d_l1 = pl.make_tile_group(type=tile([TILE, TILE], MEM.Mat, pl.NZ), addrs=0x14000, mutex_ids=[3])
        left = pl.make_tile_group(type=tile([TILE, TILE], MEM.Left, pl.NZ), addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=tile([TILE, TILE], MEM.Right, pl.ZN), addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile_group(type=tile([TILE, TILE], MEM.Acc, pl.NZ, 1024), addrs=0x0, mutex_ids=[8, 9, 10, 11])
        pl.load(b_l1.current(), b, [0, 0])
        pl.load(d_l1.current(), d, [0, 0])
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        relu_vec = pl.make_tile_group(type=tile([HALF, TILE]), addrs=0x8000, mutex_ids=[18, 19])
        relu_nz = pl.make_tile_group(type=tile([HALF, TILE], MEM.Vec, pl.NZ), addrs=0x18000, mutex_ids=[20, 21])
    for i in pl.range(0, a.shape[0] // TILE):
        with pl.section_cube():
            first_product(i, a, b_l1, a_l1, left, right, acc, mm1)
        with pl.section_vector():
            activation(i, sub, mm1, relu_vec, relu_nz, p_mat)
        with pl.section_cube():
            second_product(i, d_l1, p_mat, left, right, acc, out_vec)
        with pl.section_vector():
            write_back(i, sub, out, out_vec)


# the serial loop with its flags, and the pipelined one
mlp_serial = pl.jit(mlp, auto_mutex=True, name="mlp_serial", pipeline=pl.pipeline.PipelineConfig(sync_only=True))
mlp_pipelined = pl.jit(mlp, auto_mutex=True, name="mlp_pipelined", pipeline=pl.pipeline.PipelineConfig(preload=2))


def relu_mlp(a, b, d, kernel=mlp_pipelined):
    out = torch.zeros(a.shape[0], TILE)
    kernel[None, 1](a, b, d, out)
    pypto_pro.runtime.synchronize()
    return out


def main():
    torch.manual_seed(0)
    a, b, d = torch.randn(16 * TILE, TILE), torch.randn(TILE, TILE), torch.randn(TILE, TILE)
    ref = torch.relu(a.double() @ b.double()) @ d.double()
    for kernel in (mlp_serial, mlp_pipelined):
        relu_mlp(a, b, d, kernel)  # compile
        start = time.perf_counter()
        out = relu_mlp(a, b, d, kernel)
        ms = (time.perf_counter() - start) * 1e3
        err = (out.double() - ref).abs().max().item()
        print(f"{kernel.kernel_name}: A {list(a.shape)} max |err| vs torch = {err:.2e}, {ms:.1f} ms")


if __name__ == "__main__":
    main()
