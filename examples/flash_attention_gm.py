"""Flash attention forward through GM workspaces, fp16 BSND, one mixed kernel: the cube computes
S = Q Kᵀ and O = P V for 128 x 128 tiles, the two vector cores of each block run the online softmax
on 64 rows each; they hand tiles over through per-block GM workspaces and cross-core flags. This is
the way on a3 and a2, which have no data path between the cube core's and the vector cores' local
memories; on a5 examples/flash_attention.py hands them over through UB and L1 instead (make bench
compares the two). Causal masking is a TilingKey field, so the causal and full kernels are two
specialised instances.

q, k, v, out are [batch, seq, heads, 128] (BSND), seen by the kernel as [batch * seq, heads * 128].

Run: PYTHONPATH=python /usr/bin/python3 examples/flash_attention_gm.py
"""

import math

import torch

import pypto_pro.language as pl
from pypto_pro.runtime.tilingkey import TilingKeyField

from flash_attention import demo, reference  # noqa: F401  (the same torch reference and demo)

D = 128       # head dim
T = 128       # query and key/value rows per tile
HALF = T // 2  # query rows per vector core

# Cross-core events of one block, set in this order for every key/value tile.
S_READY, P_READY, O_READY = 0, 1, 2


def handed_over(tile_type, addr, mutex_id):
    """A tile one pipe fills and another reads (GM -> L1 -> L0 -> Acc -> GM, GM -> UB -> GM): a
    one-slot group with a mutex id of its own, so auto_mutex orders the pipes that share it."""
    return pl.make_tile_group(type=tile_type, addrs=addr, mutex_ids=[mutex_id]).current()


class AttentionKey:
    Causal = TilingKeyField(bits=1, values=[0, 1])


@pl.jit(tiling_key=AttentionKey)
def flash_attention_gm(q: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    k: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    v: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    mask: pl.Tensor[[T, T], pl.DT_FP32],
                    s_ws: pl.Tensor[[pl.DYNAMIC, T], pl.DT_FP32],
                    p_ws: pl.Tensor[[pl.DYNAMIC, T], pl.DT_FP16],
                    o_ws: pl.Tensor[[pl.DYNAMIC, D], pl.DT_FP32],
                    seq: pl.DT_INT32, scale: pl.DT_FP32):
    # Cube tiles (L1 / L0A / L0B / L0C), each passed between two pipes.
    mat16 = pl.TileType(shape=[T, T], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
    q_mat = handed_over(mat16, 0x00000, 0)
    k_mat = handed_over(mat16, 0x08000, 1)         # Kᵀ: a transposed load
    p_mat = handed_over(mat16, 0x10000, 2)
    v_mat = handed_over(mat16, 0x18000, 3)
    left16 = pl.TileType(shape=[T, T], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left)
    right16 = pl.TileType(shape=[T, T], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right)
    q_left = handed_over(left16, 0x0000, 4)
    p_left = handed_over(left16, 0x8000, 5)
    k_right = handed_over(right16, 0x0000, 6)
    v_right = handed_over(right16, 0x8000, 7)
    acc32 = pl.TileType(shape=[T, T], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc)
    s_acc = handed_over(acc32, 0x00000, 8)
    o_acc = handed_over(acc32, 0x10000, 9)
    # Vector tiles (UB of each AIV): 64 query rows. Those only the vector pipe touches need no mutex.
    rows32 = pl.TileType(shape=[HALF, T], dtype=pl.DT_FP32)
    s_ub = handed_over(rows32, 0x00000, 10)
    o_ub = handed_over(rows32, 0x08000, 11)
    acc_ub = pl.make_tile(rows32, addr=0x10000)
    tmp_ub = pl.make_tile(rows32, addr=0x18000)
    mask_ub = handed_over(rows32, 0x20000, 12)
    p16_ub = handed_over(pl.TileType(shape=[HALF, T], dtype=pl.DT_FP16), 0x28000, 13)
    col = pl.TileType(shape=[HALF, 1], dtype=pl.DT_FP32, layout=pl.DN)
    m_old = pl.make_tile(col, addr=0x2C000)
    m_new = pl.make_tile(col, addr=0x2C100)
    l_sum = pl.make_tile(col, addr=0x2C200)
    alpha = pl.make_tile(col, addr=0x2C300)
    cur = pl.make_tile(col, addr=0x2C400)

    q_tiles = seq // T
    heads = q.shape[1] // D
    items = q.shape[0] // T * heads            # (batch, head, query tile) triples

    with pl.section_cube():
        blk = pl.get_block_idx()
        for item in pl.range(blk, items, pl.get_block_num()):
            head = item % heads
            qt = item // heads                  # query tile over batch * seq
            qi = qt % q_tiles                   # ... within its sequence
            kv_base = qt - qi                   # the sequence's first key/value tile
            kv_end = qi + 1 if Causal == 1 else q_tiles
            pl.load_tile(q_mat, q, [qt, head])
            pl.move(q_left, q_mat)
            for j in pl.range(kv_end):
                pl.load_tile(k_mat, k, [kv_base + j, head], order=[1, 0])   # Kᵀ
                pl.move(k_right, k_mat)
                pl.matmul(s_acc, q_left, k_right)
                pl.store_tile(s_ws, s_acc, [blk, 0])
                pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=S_READY)
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=P_READY)
                pl.load_tile(p_mat, p_ws, [blk, 0])
                pl.move(p_left, p_mat)
                pl.load_tile(v_mat, v, [kv_base + j, head])
                pl.move(v_right, v_mat)
                pl.matmul(o_acc, p_left, v_right)
                pl.store_tile(o_ws, o_acc, [blk, 0])
                pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=O_READY)

    with pl.section_vector():
        blk = pl.get_block_idx() // pl.get_subblock_num()
        half = blk * 2 + pl.get_subblock_idx()  # this core's 64 rows of the block's workspace slot
        if Causal == 1:
            pl.load_tile(mask_ub, mask, [pl.get_subblock_idx(), 0])
        for item in pl.range(blk, items, pl.get_block_num()):
            head = item % heads
            qt = item // heads
            qi = qt % q_tiles
            kv_end = qi + 1 if Causal == 1 else q_tiles
            pl.expands(m_old, -math.inf)
            pl.expands(l_sum, 0.0)
            pl.expands(acc_ub, 0.0)
            for j in pl.range(kv_end):
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=S_READY)
                pl.load_tile(s_ub, s_ws, [half, 0])
                pl.muls(s_ub, s_ub, scale)
                if Causal == 1:
                    if j == qi:                 # the diagonal tile: hide the future
                        pl.add(s_ub, s_ub, mask_ub)
                pl.row_max(cur, s_ub, tmp_ub)
                pl.maximum(m_new, m_old, cur)
                pl.sub(alpha, m_old, m_new)     # rescales what was summed with the old max
                pl.exp(alpha, alpha)
                pl.row_expand_sub(s_ub, s_ub, m_new)
                pl.exp(s_ub, s_ub)              # P, unnormalised
                pl.row_sum(cur, s_ub, tmp_ub)
                pl.mul(l_sum, l_sum, alpha)
                pl.add(l_sum, l_sum, cur)
                pl.cast(p16_ub, s_ub)
                pl.store_tile(p_ws, p16_ub, [half, 0])
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=P_READY)
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=O_READY)
                pl.load_tile(o_ub, o_ws, [half, 0])
                pl.row_expand_mul(acc_ub, acc_ub, alpha)
                pl.add(acc_ub, acc_ub, o_ub)
                pl.muls(m_old, m_new, 1.0)
            pl.row_expand_div(acc_ub, acc_ub, l_sum)
            pl.cast(p16_ub, acc_ub)
            pl.store_tile(out, p16_ub, [qt * 2 + pl.get_subblock_idx(), head])


def attention(q, k, v, causal, stream=None, block_dim=32):
    """q, k, v: [batch, seq, heads, 128] fp16 (BSND). Returns out like q."""
    b, s, n, d = q.shape
    assert d == D and s % T == 0, "head dim 128 and seq a multiple of 128"
    blocks = min(block_dim, 32)
    out = torch.empty_like(q)
    s_ws = torch.empty(blocks * T, T)
    p_ws = torch.empty(blocks * T, T, dtype=torch.float16)
    o_ws = torch.empty(blocks * T, D)
    mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    flash_attention_gm[stream, blocks, {"Causal": int(causal)}](
        q.view(b * s, n * d), k.view(b * s, n * d), v.view(b * s, n * d), out.view(b * s, n * d), mask, s_ws, p_ws,
        o_ws, s, 1.0 / math.sqrt(d))
    return out


def main():
    demo(attention, [(1, 512), (2, 1024), (1, 2048)])


if __name__ == "__main__":
    main()
