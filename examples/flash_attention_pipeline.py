"""Flash attention forward in pipeline form: the kernel of examples/flash_attention.py written as a
serial loop of four stages with no cross-core flag, scheduled by pl.jit(pipeline=...)
(docs/language.md#pipeline).

The loop runs over this block's (query tile, key/value tile) pairs, t = w * q_tiles + j for the w-th
(batch, head, query tile) item of the block and key/value tile j:

- stage 1 (cube): S = Q Kᵀ (Q loaded at j == 0), split between the two vector cores' UB;
- stage 2 (vector): the online softmax of this core's rows of S: the new row max, the rescale
  factor alpha and the row sums of P go to rings the fourth stage reads; P (fp16, NZ) goes into
  the cube core's L1;
- stage 3 (cube): O_j = P V, split between the vector cores' UB;
- stage 4 (vector): l = l * alpha + rowsum(P), acc = acc * alpha + O_j; after the last j,
  out = acc / l.

With preload=2 the cube computes S for the next pairs while the vector cores run the softmax, and
the vector core runs stage 2 of pair t + 2 before stage 4 of pair t: what stage 4 needs of stage 2
(alpha, the row sums) is kept in rings of preload + 1 slots indexed by t, and the running max in a
tile only stage 2 touches. The same arithmetic in the same order as the hand-synchronised kernel,
so the results are the same bits. A causal kernel walks every pair and skips those above the
diagonal (their stages still take their buffer slots, so the flags stay balanced).

Run: PYTHONPATH=python /usr/bin/python3 examples/flash_attention_pipeline.py
"""

import math

import torch

import pypto_pro.language as pl
from flash_attention import AttentionKey, D, HALF, T, demo, reference, slot, tile

M = pl.MemorySpace
SPLIT = pl.AccToVecMode.DualModeSplitM
RING = 3  # slots of the vector cores' alpha / row-sum rings: preload + 1 (stage 4 runs preload pairs behind)


def pair(t, blk, heads, q_tiles, seq):
    """The pair of loop iteration t: (key/value tile j, query tile qi, head, first row of the sequence)."""
    j = t % q_tiles
    item = blk + t // q_tiles * pl.get_block_num()
    return j, item // heads % q_tiles, item % heads, item // heads // q_tiles * seq


def vector_rows(rows, sub):
    """DualModeSplitM: AIV 0 takes the first half of the rows rounded up to even, AIV 1 the rest:
    (this core's row count, its first row)."""
    first = (rows + 1) // 2 * 2 // 2
    return (first if sub == 0 else rows - first), (0 if sub == 0 else first)


@pl.pipeline.stage
def scores(t, causal, blk, heads, q_tiles, seq, q, k, q_mat, q_left, kt_mat, kt_right, s_acc, s_buf):
    s_ub = s_buf.next()
    j, qi, head, base = pair(t, blk, heads, q_tiles, seq)
    if causal == 0 or j <= qi:
        rows = pl.min(T, seq - qi * T)
        cols = pl.min(T, seq - j * T)
        if j == 0:
            pl.set_validshape(q_mat, [rows, D])
            pl.set_validshape(q_left, [rows, D])
            pl.load(q_mat, q, [base + qi * T, head * D])
            pl.move(q_left, q_mat)
        pl.set_validshape(kt_mat, [D, cols])
        pl.set_validshape(kt_right, [D, cols])
        pl.load(kt_mat, k, [base + j * T, head * D], order=[1, 0])
        pl.move(kt_right, kt_mat)
        pl.set_validshape(s_acc, [rows, cols])
        pl.matmul(s_acc, q_left, kt_right)
        pl.move(s_ub, s_acc, acc_to_vec_mode=SPLIT)


@pl.pipeline.stage
def softmax(t, causal, blk, heads, q_tiles, seq, sub, scale, mask, s_buf, p_buf, tmp, work, p16, p_nz, m_old, m_new,
            alphas, sums):
    s_ub = s_buf.next()
    p_mat = p_buf.next()
    j, qi, head, base = pair(t, blk, heads, q_tiles, seq)
    if causal == 0 or j <= qi:
        mine, row0 = vector_rows(pl.min(T, seq - qi * T), sub)
        cols = pl.min(T, seq - j * T)
        alpha = alphas[t % RING]
        row_sum = sums[t % RING]
        if j == 0:
            pl.expands(m_old, -math.inf)
        pl.set_validshape(s_ub, [mine, cols])
        pl.set_validshape(tmp, [mine, cols])
        pl.set_validshape(work, [mine, cols])
        pl.set_validshape(p16, [mine, cols])
        pl.set_validshape(p_nz, [mine, cols])
        pl.muls(tmp, s_ub, scale)
        if causal == 1:
            if j == qi:  # the diagonal tile: hide the future (the mask borrows the reductions' scratch)
                pl.load(work, mask, [row0, 0])
                pl.add(tmp, tmp, work)
        pl.row_max(m_new, tmp, work)
        pl.maximum(m_new, m_old, m_new)
        pl.sub(alpha, m_old, m_new)  # rescales what was summed with the old max
        pl.exp(alpha, alpha)
        pl.row_expand_sub(tmp, tmp, m_new)
        pl.exp(tmp, tmp)  # P, unnormalised
        pl.row_sum(row_sum, tmp, work)
        pl.muls(m_old, m_new, 1.0)
        pl.cast(p16, tmp)
        pl.move(p_nz, p16)  # ND -> NZ, the layout L1 holds P in
        pl.insert(p_mat, p_nz, [row0, 0])


@pl.pipeline.stage
def values(t, causal, blk, heads, q_tiles, seq, v, p_buf, o_buf, v_mat, v_right, p_left, o_acc):
    p_mat = p_buf.next()
    o_ub = o_buf.next()
    j, qi, head, base = pair(t, blk, heads, q_tiles, seq)
    if causal == 0 or j <= qi:
        rows = pl.min(T, seq - qi * T)
        cols = pl.min(T, seq - j * T)
        pl.set_validshape(v_mat, [cols, D])
        pl.set_validshape(v_right, [cols, D])
        pl.load(v_mat, v, [base + j * T, head * D])
        pl.move(v_right, v_mat)
        pl.set_validshape(p_mat, [rows, cols])
        pl.set_validshape(p_left, [rows, cols])
        pl.move(p_left, p_mat)
        pl.set_validshape(o_acc, [rows, D])
        pl.matmul(o_acc, p_left, v_right)
        pl.move(o_ub, o_acc, acc_to_vec_mode=SPLIT)


@pl.pipeline.stage
def update(t, causal, blk, heads, q_tiles, seq, sub, out, o_buf, acc, l_sum, p16, alphas, sums):
    o_ub = o_buf.next()
    j, qi, head, base = pair(t, blk, heads, q_tiles, seq)
    if causal == 0 or j <= qi:
        mine, row0 = vector_rows(pl.min(T, seq - qi * T), sub)
        alpha = alphas[t % RING]
        pl.set_validshape(acc, [mine, D])
        if j == 0:
            pl.expands(l_sum, 0.0)
            pl.expands(acc, 0.0)
        pl.set_validshape(o_ub, [mine, D])
        pl.mul(l_sum, l_sum, alpha)
        pl.add(l_sum, l_sum, sums[t % RING])
        pl.row_expand_mul(acc, acc, alpha)
        pl.add(acc, acc, o_ub)
        if j == (qi if causal == 1 else q_tiles - 1):  # the last key/value tile of this query tile
            pl.row_expand_div(acc, acc, l_sum)
            pl.set_validshape(p16, [mine, D])
            pl.cast(p16, acc)
            pl.store(out, p16, [base + qi * T + row0, head * D])


def flash_attention_pipeline(q: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                             k: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                             v: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                             out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                             mask: pl.Tensor[[T, T], pl.DT_FP32],
                             seq: pl.DT_INT32, scale: pl.DT_FP32):
    # The cross-core buffers: S and O in each vector core's UB (written by the cube's fixpipe), P in the
    # cube core's L1 (written by both vector cores); each slot with its forward and backward flag.
    s_buf = pl.make_tile_group(type=tile([HALF, T], pl.DT_FP32), addrs=0x00000, mutex_ids=[10, 13],
                               fwd_ids=[0, 1], bwd_ids=[2, 3])
    o_buf = pl.make_tile_group(type=tile([HALF, D], pl.DT_FP32), addrs=0x10000, mutex_ids=[11], fwd_ids=[8],
                               bwd_ids=[9])
    p_buf = pl.make_tile_group(type=tile([T, T], pl.DT_FP16, M.Mat, pl.NZ), addrs=0x30000, mutex_ids=[0, 12],
                               fwd_ids=[4, 5], bwd_ids=[6, 7])
    heads = q.shape[1] // D
    q_tiles = (seq + T - 1) // T
    items = q.shape[0] // seq * heads * q_tiles  # (batch, head, query tile) triples
    blk = pl.get_block_idx() // pl.get_subblock_num()  # the block, on the cube and on both vector cores
    my_items = (items - blk + pl.get_block_num() - 1) // pl.get_block_num()

    with pl.section_cube():
        q_mat = slot(tile([T, D], pl.DT_FP16, M.Mat), 0x00000, 1)
        kt_mat = slot(tile([D, T], pl.DT_FP16, M.Mat, pl.ZN), 0x10000, 2)  # Kᵀ, loaded transposed
        v_mat = slot(tile([T, D], pl.DT_FP16, M.Mat), 0x20000, 3)
        q_left = slot(tile([T, D], pl.DT_FP16, M.Left), 0x0000, 4)
        p_left = slot(tile([T, T], pl.DT_FP16, M.Left), 0x8000, 5)
        kt_right = slot(tile([D, T], pl.DT_FP16, M.Right), 0x0000, 6)
        v_right = slot(tile([T, D], pl.DT_FP16, M.Right), 0x8000, 7)
        s_acc = slot(tile([T, T], pl.DT_FP32, M.Acc), 0x00000, 8)
        o_acc = slot(tile([T, D], pl.DT_FP32, M.Acc), 0x10000, 9)
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        acc = pl.make_tile(tile([HALF, D], pl.DT_FP32), addr=0x18000)
        tmp = pl.make_tile(tile([HALF, T], pl.DT_FP32), addr=0x20000)
        work = slot(tile([HALF, T], pl.DT_FP32), 0x28000, 14)  # the reductions' scratch and the causal mask
        p16 = slot(tile([HALF, T], pl.DT_FP16), 0x38000, 15)
        p_nz = slot(tile([HALF, T], pl.DT_FP16, layout=pl.NZ), 0x30000, 16)
        col = pl.TileType(shape=[HALF, 1], dtype=pl.DT_FP32, layout=pl.DN)
        m_old = pl.make_tile(col, addr=0x3C000)
        m_new = pl.make_tile(col, addr=0x3C100)
        l_sum = pl.make_tile(col, addr=0x3C200)
        alphas = pl.make_tile_group(type=col, addrs=0x3C300, depth=RING)
        sums = pl.make_tile_group(type=col, addrs=0x3C600, depth=RING)

    for t in pl.range(0, my_items * q_tiles):
        with pl.section_cube():
            scores(t, Causal, blk, heads, q_tiles, seq, q, k, q_mat, q_left, kt_mat, kt_right, s_acc, s_buf)
        with pl.section_vector():
            softmax(t, Causal, blk, heads, q_tiles, seq, sub, scale, mask, s_buf, p_buf, tmp, work, p16, p_nz, m_old,
                    m_new, alphas, sums)
        with pl.section_cube():
            values(t, Causal, blk, heads, q_tiles, seq, v, p_buf, o_buf, v_mat, v_right, p_left, o_acc)
        with pl.section_vector():
            update(t, Causal, blk, heads, q_tiles, seq, sub, out, o_buf, acc, l_sum, p16, alphas, sums)


pipelined = pl.jit(flash_attention_pipeline, tiling_key=AttentionKey,
                   pipeline=pl.pipeline.PipelineConfig(preload=RING - 1))
serial = pl.jit(flash_attention_pipeline, tiling_key=AttentionKey, name="flash_attention_serial",
                pipeline=pl.pipeline.PipelineConfig(sync_only=True))


def attention(q, k, v, causal, stream=None, block_dim=32, kernel=pipelined):
    """q, k, v: [batch, seq, heads, 128] fp16 (BSND). Returns out like q."""
    b, s, n, d = q.shape
    assert d == D, "head dim 128"
    out = torch.empty_like(q)
    mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    kernel[stream, min(block_dim, 32), {"Causal": int(causal)}](
        q.view(b * s, n * d), k.view(b * s, n * d), v.view(b * s, n * d), out.view(b * s, n * d), mask, s,
        1.0 / math.sqrt(d))
    return out


def main():
    demo(attention, [(1, 512), (2, 1000), (1, 2048)])


if __name__ == "__main__":
    main()
