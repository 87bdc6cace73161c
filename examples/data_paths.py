"""The data paths of an a5 mixed block, one small kernel each (docs/language.md#data-movement):

- acc_to_vec_single: the cube's fixpipe moves C = A @ B from L0C into the UB of one vector core;
- acc_to_vec_dual: the fixpipe splits C's rows between the UBs of both vector cores;
- insert: both vector cores write their rows of a tile into the cube core's L1 (pl.insert);
- quantised_store: the fixpipe writes an fp32 accumulator to GM as int8 (ReLU, then a scale);
- atomic_add: every block adds its tile into the same GM rows (atomic=AtomicAdd).

Each returns its output and a torch reference. Run: PYTHONPATH=python /usr/bin/python3 examples/data_paths.py
"""

import torch

import pypto_pro
import pypto_pro.language as pl

M, K, N = 32, 64, 32
MEM = pl.MemorySpace
PIPE = pl.PipeType


def tile(shape, dtype, memory=MEM.Vec, layout=None):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=memory, layout=layout)


def cube_product(acc, a, b):
    """acc = a @ b on the cube core: GM -> L1 -> L0A/L0B -> L0C, in program order (bar_all between
    the pipes, for brevity; the bigger examples use mutex groups)."""
    a_mat = pl.make_tile(tile([M, K], pl.DT_FP16, MEM.Mat), addr=0x0)
    b_mat = pl.make_tile(tile([K, N], pl.DT_FP16, MEM.Mat), addr=0x1000)
    left = pl.make_tile(tile([M, K], pl.DT_FP16, MEM.Left), addr=0x0)
    right = pl.make_tile(tile([K, N], pl.DT_FP16, MEM.Right), addr=0x0)
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    pl.system.bar_all()
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    pl.system.bar_all()
    pl.matmul(acc, left, right)
    pl.system.bar_all()


@pl.jit
def acc_to_vec_single_kernel(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                             c: pl.Tensor[[M, N], pl.DT_FP16]):
    vec = pl.make_tile(tile([M, N], pl.DT_FP16), addr=0x0)  # in each AIV's UB
    with pl.section_cube():
        acc = pl.make_tile(tile([M, N], pl.DT_FP32, MEM.Acc), addr=0x0)
        cube_product(acc, a, b)
        pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec1)  # fp32 -> fp16 into AIV 1's UB
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=PIPE.MTE3, event_id=0)
        if pl.get_subblock_idx() == 1:
            pl.store(c, vec, [0, 0])


@pl.jit
def acc_to_vec_dual_kernel(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                           c: pl.Tensor[[M, N], pl.DT_FP32]):
    half = pl.make_tile(pl.TileType(shape=[M // 2, N], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x0)
    with pl.section_cube():
        acc = pl.make_tile(tile([M, N], pl.DT_FP32, MEM.Acc), addr=0x0)
        cube_product(acc, a, b)
        pl.move(half, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)  # rows 0..15 to AIV 0, 16..31 to AIV 1
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=PIPE.MTE3, event_id=0)
        pl.store(c, half, [pl.get_subblock_idx() * (M // 2), 0])


@pl.jit
def insert_kernel(x: pl.Tensor[[M, K], pl.DT_FP16], eye: pl.Tensor[[K, K], pl.DT_FP16],
                  c: pl.Tensor[[M, K], pl.DT_FP32]):
    x_mat = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=MEM.Mat, layout=pl.NZ),
                         addr=0x4000)  # in the AIC's L1
    with pl.section_vector():
        rows = pl.make_tile(tile([M // 2, K], pl.DT_FP16), addr=0x0)
        rows_nz = pl.make_tile(tile([M // 2, K], pl.DT_FP16, layout=pl.NZ), addr=0x1000)
        row0 = pl.get_subblock_idx() * (M // 2)
        pl.load(rows, x, [row0, 0])
        pl.system.bar_all()
        pl.move(rows_nz, rows)  # ND -> NZ in UB: UB -> L1 copies fractal blocks as they are
        pl.system.bar_all()
        pl.insert(x_mat, rows_nz, [row0, 0])  # this AIV's rows of the AIC's tile
        pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=1)
    with pl.section_cube():
        eye_mat = pl.make_tile(tile([K, K], pl.DT_FP16, MEM.Mat), addr=0x8000)
        left = pl.make_tile(tile([M, K], pl.DT_FP16, MEM.Left), addr=0x0)
        right = pl.make_tile(tile([K, K], pl.DT_FP16, MEM.Right), addr=0x0)
        acc = pl.make_tile(tile([M, K], pl.DT_FP32, MEM.Acc), addr=0x0)
        pl.load(eye_mat, eye, [0, 0])
        pl.system.bar_all()  # the load (MTE2) before the moves out of L1 (MTE1)
        pl.system.wait_cross_core(pipe=PIPE.MTE1, event_id=1)  # both AIVs have inserted
        pl.move(left, x_mat)
        pl.move(right, eye_mat)
        pl.system.bar_all()
        pl.matmul(acc, left, right)  # x @ I: what arrived
        pl.system.bar_all()
        pl.store(c, acc, [0, 0])


@pl.jit
def quantised_store_kernel(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                           c: pl.Tensor[[M, N], pl.DT_INT8]):
    with pl.section_cube():
        acc = pl.make_tile(tile([M, N], pl.DT_FP32, MEM.Acc), addr=0x0)
        cube_product(acc, a, b)
        pl.store(c, acc, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu, scale=8.0)


@pl.jit
def atomic_add_kernel(x: pl.Tensor[[pl.DYNAMIC, N], pl.DT_FP32], total: pl.Tensor[[16, N], pl.DT_FP32]):
    t = pl.make_tile(tile([16, N], pl.DT_FP32), addr=0x0)
    for i in pl.range(pl.get_block_idx(), x.shape[0] // 16, pl.get_block_num()):
        pl.load(t, x, [i * 16, 0])
        pl.system.bar_all()
        pl.store(total, t, [0, 0], atomic=pl.AtomicType.AtomicAdd)
        pl.system.bar_all()


def operands(seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=gen).half(), torch.randn(K, N, generator=gen).half()


def acc_to_vec_single():
    a, b = operands(1)
    c = torch.zeros(M, N).half()
    acc_to_vec_single_kernel[None, 1](a, b, c)
    pypto_pro.runtime.synchronize()
    return c.float(), (a.float() @ b.float()).half().float()


def acc_to_vec_dual():
    a, b = operands(2)
    c = torch.zeros(M, N)
    acc_to_vec_dual_kernel[None, 1](a, b, c)
    pypto_pro.runtime.synchronize()
    return c, a.float() @ b.float()


def insert():
    x = torch.randn(M, K).half()
    c = torch.zeros(M, K)
    insert_kernel[None, 1](x, torch.eye(K).half(), c)
    pypto_pro.runtime.synchronize()
    return c, x.float()


def quantised_store():
    a, b = operands(3)
    c = torch.zeros(M, N, dtype=torch.int8)
    quantised_store_kernel[None, 1](a, b, c)
    pypto_pro.runtime.synchronize()
    ref = torch.clamp(torch.round((a.float() @ b.float()).clamp(min=0) * 8.0), -128, 127)
    return c.float(), ref


def atomic_add(blocks=8):
    x = torch.randint(-4, 5, (16 * 24, N)).float()
    total = torch.zeros(16, N)
    atomic_add_kernel[None, blocks](x, total)
    pypto_pro.runtime.synchronize()
    return total, x.view(24, 16, N).sum(0)


PATHS = [acc_to_vec_single, acc_to_vec_dual, insert, quantised_store, atomic_add]


def main():
    for path in PATHS:
        out, ref = path()
        print(f"{path.__name__}: max |err| vs torch = {(out - ref).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
