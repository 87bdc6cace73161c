"""softmax(A @ B) as one mixed kernel (the CV-fused operator of the public tutorials).

Each logical block is 1 AIC + 2 AIV. The cube section computes a 16-row band of S = A @ B, 256
columns per matmul, into a GM workspace (a kernel parameter) and signals the band with
set_cross_core; the two vector cores of the block wait for it and normalise 8 rows each:
max, subtract, exp, sum, divide.

Run: make demo   (or: PYTHONPATH=python /usr/bin/python3 examples/fused_softmax_matmul.py)
"""

import torch

import pypto_pro
import pypto_pro.language as pl

K = 128           # A is [M, K], B is [K, N]
N = 1024
M_TILE = 16       # rows of S per cube band
N_TILE = 256      # columns of S per matmul (a [128, 256] fp16 B tile fills L0B's 64 KiB)
VEC_ROWS = M_TILE // 2  # rows per vector core



@pl.jit(auto_mutex=True)
def fused_softmax_matmul(a: pl.Tensor[[pl.DYNAMIC, K], pl.DT_FP16],
                         b: pl.Tensor[[K, N], pl.DT_FP16],
                         out: pl.Tensor[[pl.DYNAMIC, N], pl.DT_FP32],
                         workspace: pl.Tensor[[pl.DYNAMIC, N], pl.DT_FP32]):
    bands = a.shape[0] // M_TILE

    # cube tiles: L1, L0A, L0B, L0C
    a_l1 = pl.make_tile_group(type=pl.TileType(shape=[M_TILE, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x00000, mutex_ids=[0])
    b_l1 = pl.make_tile_group(type=pl.TileType(shape=[K, N_TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x01000, mutex_ids=[1])
    a_l0a = pl.make_tile_group(
        type=pl.TileType(shape=[M_TILE, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
        addrs=0x0000, mutex_ids=[2])
    b_l0b = pl.make_tile_group(
        type=pl.TileType(shape=[K, N_TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
        addrs=0x0000, mutex_ids=[3])
    s_l0c = pl.make_tile_group(
        type=pl.TileType(shape=[M_TILE, N_TILE], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
        addrs=0x0000, mutex_ids=[4])

    # vector tiles: whole rows of S in UB, and one [rows, 1] column for the row max / row sum
    rows_t = pl.TileType(shape=[VEC_ROWS, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    s_ub = pl.make_tile_group(type=rows_t, addrs=0x00000, mutex_ids=[5])
    tmp_ub = pl.make_tile_group(type=rows_t, addrs=0x08000, mutex_ids=[6])
    col_ub = pl.make_tile_group(
        type=pl.TileType(shape=[VEC_ROWS, 1], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, layout=pl.DN),
        addrs=0x10000, mutex_ids=[7])

    with pl.section_cube():
        a_mat, b_mat, left, right, acc = a_l1.current(), b_l1.current(), a_l0a.current(), b_l0b.current(), \
            s_l0c.current()
        for band in pl.range(pl.get_block_idx(), bands, pl.get_block_num()):
            pl.load_tile(a_mat, a, [band, 0])
            pl.move(left, a_mat)
            for nj in pl.range(N // N_TILE):
                pl.load_tile(b_mat, b, [0, nj])
                pl.move(right, b_mat)
                pl.matmul(acc, left, right)
                pl.store_tile(workspace, acc, [band, nj])
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)  # the band is in the workspace

    with pl.section_vector():
        s, tmp, col = s_ub.current(), tmp_ub.current(), col_ub.current()
        core = pl.get_block_idx() // pl.get_subblock_num()  # the logical block, as on the cube side
        for band in pl.range(core, bands, pl.get_block_num()):
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0)
            rows = band * 2 + pl.get_subblock_idx()  # this core's half of the band, in VEC_ROWS units
            pl.load_tile(s, workspace, [rows, 0])
            pl.row_max(col, s, tmp)
            pl.row_expand_sub(s, s, col)
            pl.exp(s, s)
            pl.row_sum(col, s, tmp)
            pl.row_expand_div(s, s, col)
            pl.store_tile(out, s, [rows, 0])


def run(m=48, block_dim=3, seed=0):
    """Returns (out, reference) for A [m, 128] and B [128, 1024] fp16."""
    torch.manual_seed(seed)
    a = torch.randn(m, K, dtype=torch.float16) * 0.1  # keeps softmax out of saturation
    b = torch.randn(K, N, dtype=torch.float16) * 0.1
    out = torch.zeros(m, N)
    workspace = torch.zeros(m, N)
    fused_softmax_matmul[None, block_dim](a, b, out, workspace)
    pypto_pro.runtime.synchronize()
    return out, torch.softmax(a.float() @ b.float(), dim=-1)


def main():
    for block_dim in (1, 3):
        out, ref = run(block_dim=block_dim)
        err = (out - ref).abs().max().item()
        print(f"softmax(A @ B) 48x128 @ 128x1024, block_dim {block_dim}: max |err| vs torch = {err:.3g}")


if __name__ == "__main__":
    main()
