"""Layer normalisation over the last dim, fp32, rows x cols both DYNAMIC, with gamma and beta [1, N]
and eps 1e-5: 16-row tiles up to 512 columns, tail tiles through pl.set_validshape.

Run: make demo   (or: PYTHONPATH=python /usr/bin/python3 examples/layernorm.py)
"""

import time

import torch

import pypto_pro
import pypto_pro.language as pl
from softmax import per_call  # (the softmax example's timing helper)

ROWS = 16
MAX_COLS = 512


@pl.jit
def layernorm_kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                     gamma: pl.Tensor[[1, pl.DYNAMIC], pl.DT_FP32], beta: pl.Tensor[[1, pl.DYNAMIC], pl.DT_FP32],
                     y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32], eps: pl.DT_FP32):
    rows_t = pl.TileType(shape=[ROWS, MAX_COLS], dtype=pl.DT_FP32, valid_shape=[-1, -1])     # 32 KiB
    row_t = pl.TileType(shape=[1, MAX_COLS], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    col_t = pl.TileType(shape=[ROWS, 1], dtype=pl.DT_FP32, layout=pl.DN, valid_shape=[-1, -1])
    xin = pl.make_tile_group(type=rows_t, addrs=0x00000, mutex_ids=[0, 1])
    out = pl.make_tile_group(type=rows_t, addrs=0x10000, mutex_ids=[2, 3])
    sq = pl.make_tile(rows_t, addr=0x20000)
    g = pl.make_tile(row_t, addr=0x28000)
    b = pl.make_tile(row_t, addr=0x28800)
    mean = pl.make_tile(col_t, addr=0x29000)
    rstd = pl.make_tile(col_t, addr=0x29040)
    with pl.section_vector():
        rows, cols = x.shape[0], x.shape[1]
        pl.pto_assert(cols <= MAX_COLS, "layernorm_kernel handles at most 512 columns, got %d", cols)
        if cols > MAX_COLS:
            pl.trap()  # pto_assert only reports, as on the NPU: stop before the tiles overflow
        inv_n = 1.0 / cols
        pl.set_validshape(g, [1, cols])
        pl.set_validshape(b, [1, cols])
        pl.load(g, gamma, [0, 0])
        pl.load(b, beta, [0, 0])
        for t in pl.range(pl.get_block_idx(), (rows + ROWS - 1) // ROWS, pl.get_block_num()):
            r = pl.min(ROWS, rows - t * ROWS)
            a, o = xin.next(), out.next()
            pl.set_validshape(a, [r, cols])
            pl.set_validshape(o, [r, cols])
            pl.set_validshape(sq, [r, cols])
            pl.set_validshape(mean, [r, 1])
            pl.set_validshape(rstd, [r, 1])
            pl.load(a, x, [t * ROWS, 0])
            pl.row_sum(mean, a, sq)
            pl.muls(mean, mean, inv_n)
            pl.row_expand_sub(o, a, mean)              # centred rows
            pl.mul(sq, o, o)
            pl.row_sum(rstd, sq, sq)
            pl.muls(rstd, rstd, inv_n)                 # variance
            pl.adds(rstd, rstd, eps)
            pl.rsqrt(rstd, rstd)
            pl.row_expand_mul(o, o, rstd)
            pl.col_expand_mul(o, o, g)                 # gamma and beta: one value per column
            pl.col_expand_add(o, o, b)
            pl.store(y, o, [t * ROWS, 0])


def layernorm(x, gamma, beta, eps=1e-5, stream=None, block_dim=64, out=None):
    y = torch.empty_like(x) if out is None else out
    layernorm_kernel[stream, block_dim](x, gamma.reshape(1, -1), beta.reshape(1, -1), y, eps)
    return y


def main():
    torch.manual_seed(0)
    torch.set_num_threads(pypto_pro.runtime.device_threads())
    for shape in [(2048, 64), (1000, 200), (777, 300), (100, 512), (2049, 100), (4096, 512)]:
        x = torch.randn(shape) * 3 + 1
        gamma, beta = torch.randn(shape[1]), torch.randn(shape[1])
        start = time.perf_counter()
        y = layernorm(x, gamma, beta)
        pypto_pro.runtime.synchronize()
        first = time.perf_counter() - start
        layernorm_kernel.wait_compiled()  # (the first launch ran on the tier-0 executor: time the compiled kernel)
        # One output for every run, as in the softmax example.
        out = torch.empty_like(x)
        ours = per_call(lambda: layernorm(x, gamma, beta, out=out))
        theirs = per_call(lambda: torch.nn.functional.layer_norm(x, (shape[1],), gamma, beta, eps=1e-5))
        err = (y - torch.nn.functional.layer_norm(x, (shape[1],), gamma, beta, eps=1e-5)).abs().max().item()
        print(f"layernorm fp32 {shape[0]}x{shape[1]}: max |err| vs torch = {err:.2e}, first launch "
              f"{first * 1e3:.1f} ms, {ours * 1e3:.3f} ms/call (torch layer_norm {theirs * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
