"""Flash attention forward as the a5 hardware runs it: fp16 BSND, one mixed kernel, no GM workspace.

Per (batch, head, 128-row query tile) the cube core computes S = Q Kᵀ (K loaded transposed with
order=[1, 0]) into L0C, and its fixpipe splits S between the two vector cores' UB
(acc_to_vec_mode=DualModeSplitM: AIV 0 the first half of the rows, rounded up to even); each vector
core runs the online softmax on its rows and inserts its rows of P straight into the cube core's L1
(pl.insert), where the cube computes P V and splits it back the same way. Every hand-over between
the cores is a pair of cross-core flags (the data is ready / its buffer is free again), pre-set once
and drained at the end so that sets and waits balance; within each core auto_mutex orders the
pipes. Sequence lengths need not be multiples of 128: the last tiles are tails with valid shapes.
Causal masking is a TilingKey field, so the causal and full kernels are two specialised instances.

q, k, v, out are [batch, seq, heads, 128] (BSND), seen by the kernel as [batch * seq, heads * 128].

Run: PYTHONPATH=python /usr/bin/python3 examples/flash_attention.py   (make demo runs every example)
"""

import math
import time

import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro.runtime.tilingkey import TilingKeyField

D = 128       # head dim
T = 128       # query rows and key/value rows per tile
HALF = T // 2  # the most query rows a vector core gets from a split

# Cross-core events of one block. Forward: the data is in the other core's memory. Backward: the
# receiver has finished with its buffer, which may be written again.
S_READY, P_READY, O_READY = 0, 1, 2   # AIC -> AIVs, AIVs -> AIC, AIC -> AIVs
S_FREE, O_FREE, P_FREE = 3, 4, 5      # AIVs -> AIC, AIVs -> AIC, AIC -> AIVs

M = pl.MemorySpace
PIPE = pl.PipeType
SPLIT = pl.AccToVecMode.DualModeSplitM


def slot(tile_type, addr, mutex_id):
    """A tile two pipes of a core hand over: a one-slot group with a mutex id of its own, so
    auto_mutex orders the pipes that share it."""
    return pl.make_tile_group(type=tile_type, addrs=addr, mutex_ids=[mutex_id]).current()


def tile(shape, dtype, memory=M.Vec, layout=None):
    """Tails set the valid shape at run time; a fractal tile (every cube memory, an NZ Vec tile) takes
    a tail only in compact mode on the NPU (compact=1)."""
    fractal = memory is not M.Vec or layout is pl.NZ
    return pl.TileType(shape=shape, dtype=dtype, target_memory=memory, valid_shape=[-1, -1], layout=layout,
                       compact=1 if fractal else None)


class AttentionKey:
    Causal = TilingKeyField(bits=1, values=[0, 1])


@pl.jit(tiling_key=AttentionKey)
def flash_attention(q: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    k: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    v: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                    mask: pl.Tensor[[T, T], pl.DT_FP32],
                    seq: pl.DT_INT32, scale: pl.DT_FP32):
    # The tiles both sides name: P in the cube core's L1, where both vector cores insert their rows;
    # S and O in each vector core's UB, where the cube core's fixpipe writes their halves.
    p_mat = slot(tile([T, T], pl.DT_FP16, M.Mat, pl.NZ), 0x30000, 0)
    s_ub = slot(tile([HALF, T], pl.DT_FP32), 0x00000, 10)
    o_ub = slot(tile([HALF, D], pl.DT_FP32), 0x08000, 11)
    heads = q.shape[1] // D
    q_tiles = (seq + T - 1) // T
    items = q.shape[0] // seq * heads * q_tiles  # (batch, head, query tile) triples

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
        pl.system.set_cross_core(pipe=PIPE.MTE1, event_id=P_FREE)  # P's L1 tile starts free
        for item in pl.range(pl.get_block_idx(), items, pl.get_block_num()):
            head = item % heads
            qi = item // heads % q_tiles
            base = item // heads // q_tiles * seq  # the sequence's first row
            rows = pl.min(T, seq - qi * T)
            kv_end = qi + 1 if Causal == 1 else q_tiles
            pl.set_validshape(q_mat, [rows, D])
            pl.set_validshape(q_left, [rows, D])
            pl.load(q_mat, q, [base + qi * T, head * D])
            pl.move(q_left, q_mat)
            for j in pl.range(kv_end):
                cols = pl.min(T, seq - j * T)
                # S = Q Kᵀ, split between the UBs of the two vector cores once they are done with the last S.
                pl.set_validshape(kt_mat, [D, cols])
                pl.set_validshape(kt_right, [D, cols])
                pl.load(kt_mat, k, [base + j * T, head * D], order=[1, 0])
                pl.move(kt_right, kt_mat)
                pl.set_validshape(s_acc, [rows, cols])
                pl.matmul(s_acc, q_left, kt_right)
                pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=S_FREE)
                pl.move(s_ub, s_acc, acc_to_vec_mode=SPLIT)
                pl.system.set_cross_core(pipe=PIPE.FIX, event_id=S_READY)
                # O_j = P V, P as the vector cores inserted it into L1.
                pl.set_validshape(v_mat, [cols, D])
                pl.set_validshape(v_right, [cols, D])
                pl.load(v_mat, v, [base + j * T, head * D])
                pl.move(v_right, v_mat)
                pl.set_validshape(p_mat, [rows, cols])
                pl.set_validshape(p_left, [rows, cols])
                pl.system.wait_cross_core(pipe=PIPE.MTE1, event_id=P_READY)
                pl.move(p_left, p_mat)
                pl.system.set_cross_core(pipe=PIPE.MTE1, event_id=P_FREE)
                pl.set_validshape(o_acc, [rows, D])
                pl.matmul(o_acc, p_left, v_right)
                pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=O_FREE)
                pl.move(o_ub, o_acc, acc_to_vec_mode=SPLIT)
                pl.system.set_cross_core(pipe=PIPE.FIX, event_id=O_READY)
        # The vector cores' first frees were set before any S or O: one of each is left to take.
        pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=S_FREE)
        pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=O_FREE)

    with pl.section_vector():
        # The rest of each vector core's UB: only the vector pipe touches acc, tmp and work.
        acc = pl.make_tile(tile([HALF, D], pl.DT_FP32), addr=0x10000)
        tmp = pl.make_tile(tile([HALF, T], pl.DT_FP32), addr=0x18000)
        work = pl.make_tile(tile([HALF, T], pl.DT_FP32), addr=0x20000)  # the reductions' scratch
        mask_ub = slot(tile([HALF, T], pl.DT_FP32), 0x28000, 12)
        p16 = slot(tile([HALF, T], pl.DT_FP16), 0x30000, 13)
        p_nz = slot(tile([HALF, T], pl.DT_FP16, layout=pl.NZ), 0x34000, 14)
        col = pl.TileType(shape=[HALF, 1], dtype=pl.DT_FP32, layout=pl.DN)
        m_old = pl.make_tile(col, addr=0x38000)
        m_new = pl.make_tile(col, addr=0x38100)
        l_sum = pl.make_tile(col, addr=0x38200)
        alpha = pl.make_tile(col, addr=0x38300)
        cur = pl.make_tile(col, addr=0x38400)
        sub = pl.get_subblock_idx()
        blk = pl.get_block_idx() // pl.get_subblock_num()
        pl.system.set_cross_core(pipe=PIPE.V, event_id=S_FREE)  # s_ub and o_ub start free
        pl.system.set_cross_core(pipe=PIPE.V, event_id=O_FREE)
        for item in pl.range(blk, items, pl.get_block_num()):
            head = item % heads
            qi = item // heads % q_tiles
            base = item // heads // q_tiles * seq
            rows = pl.min(T, seq - qi * T)
            kv_end = qi + 1 if Causal == 1 else q_tiles
            # DualModeSplitM: AIV 0 takes the first half of the rows rounded up to even, AIV 1 the rest.
            first = (rows + 1) // 2 * 2 // 2
            mine = first if sub == 0 else rows - first
            row0 = 0 if sub == 0 else first
            pl.set_validshape(acc, [mine, D])
            pl.expands(m_old, -math.inf)
            pl.expands(l_sum, 0.0)
            pl.expands(acc, 0.0)
            for j in pl.range(kv_end):
                cols = pl.min(T, seq - j * T)
                pl.set_validshape(s_ub, [mine, cols])
                pl.set_validshape(tmp, [mine, cols])
                pl.set_validshape(mask_ub, [mine, cols])
                pl.set_validshape(p16, [mine, cols])
                pl.set_validshape(p_nz, [mine, cols])
                pl.set_validshape(o_ub, [mine, D])
                if Causal == 1:
                    if j == qi:
                        pl.load(mask_ub, mask, [row0, 0])
                pl.system.wait_cross_core(pipe=PIPE.V, event_id=S_READY)
                pl.muls(tmp, s_ub, scale)
                if Causal == 1:
                    if j == qi:  # the diagonal tile: hide the future
                        pl.add(tmp, tmp, mask_ub)
                pl.row_max(cur, tmp, work)
                pl.maximum(m_new, m_old, cur)
                pl.sub(alpha, m_old, m_new)  # rescales what was summed with the old max
                pl.exp(alpha, alpha)
                pl.row_expand_sub(tmp, tmp, m_new)
                pl.exp(tmp, tmp)             # P, unnormalised
                pl.system.set_cross_core(pipe=PIPE.V, event_id=S_FREE)  # s_ub is read: the next S may come
                pl.row_sum(cur, tmp, work)
                pl.mul(l_sum, l_sum, alpha)
                pl.add(l_sum, l_sum, cur)
                pl.cast(p16, tmp)
                pl.move(p_nz, p16)           # ND -> NZ, the layout L1 holds P in
                pl.system.wait_cross_core(pipe=PIPE.MTE3, event_id=P_FREE)
                pl.insert(p_mat, p_nz, [row0, 0])
                pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=P_READY)
                pl.system.wait_cross_core(pipe=PIPE.V, event_id=O_READY)
                pl.row_expand_mul(acc, acc, alpha)
                pl.add(acc, acc, o_ub)
                pl.system.set_cross_core(pipe=PIPE.V, event_id=O_FREE)
                pl.muls(m_old, m_new, 1.0)
            pl.row_expand_div(acc, acc, l_sum)
            pl.set_validshape(p16, [mine, D])
            pl.cast(p16, acc)
            pl.store(out, p16, [base + qi * T + row0, head * D])
        pl.system.wait_cross_core(pipe=PIPE.MTE3, event_id=P_FREE)  # the cube's first free is left


def attention(q, k, v, causal, stream=None, block_dim=32, sanitizer=False):
    """q, k, v: [batch, seq, heads, 128] fp16 (BSND). Returns out like q."""
    b, s, n, d = q.shape
    assert d == D, "head dim 128"
    kernel = flash_attention if not sanitizer else _checked()
    out = torch.empty_like(q)
    mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    kernel[stream, min(block_dim, 32), {"Causal": int(causal)}](
        q.view(b * s, n * d), k.view(b * s, n * d), v.view(b * s, n * d), out.view(b * s, n * d), mask, s,
        1.0 / math.sqrt(d))
    return out


_CHECKED = []


def _checked():
    """The same kernel in sanitizer mode (an instance of its own)."""
    if not _CHECKED:
        _CHECKED.append(pl.jit(flash_attention.fn, tiling_key=AttentionKey, sanitizer=True))
    return _CHECKED[0]


def reference(q, k, v, causal):
    """softmax(q kᵀ / sqrt(d)) v in fp32, per batch and head."""
    qf, kf, vf = (t.float().permute(0, 2, 1, 3) for t in (q, k, v))  # BNSD
    scores = qf @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[1]
        scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vf).permute(0, 2, 1, 3)


def demo(attention_fn, shapes):
    """Runs `attention_fn` on each (batch, seq) of `shapes`, full and causal, against torch."""
    torch.manual_seed(0)
    torch.set_num_threads(pypto_pro.runtime.device_threads())
    for b, s in shapes:
        q, k, v = (torch.randn(b, s, 2, D).half() for _ in range(3))
        for causal in (False, True):
            start = time.perf_counter()
            out = attention_fn(q, k, v, causal)
            pypto_pro.runtime.synchronize()
            first = time.perf_counter() - start
            start = time.perf_counter()
            attention_fn(q, k, v, causal)
            pypto_pro.runtime.synchronize()
            ours = time.perf_counter() - start
            start = time.perf_counter()
            ref = reference(q, k, v, causal)
            theirs = time.perf_counter() - start
            err = (out.float() - ref).abs().max().item()
            print(f"flash attention b={b} s={s} n=2 d=128 {'causal' if causal else 'full'}: max |err| vs torch "
                  f"= {err:.2e}, first launch {first * 1e3:.0f} ms, {ours * 1e3:.1f} ms (torch fp32 "
                  f"{theirs * 1e3:.1f} ms)")


def main():
    demo(attention, [(1, 512), (2, 1000), (1, 2048)])


if __name__ == "__main__":
    main()
