"""Element access, valid windows set at run time, and inlined helper functions."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

FACTOR = 2.0


def sync():
    pypto_pro.runtime.synchronize()


@pl.jit
def elements(x: pl.Tensor[[4, 8], pl.DT_FP16], y: pl.Tensor[[4, 8], pl.DT_FP16], s: pl.Tensor[[3], pl.DT_INT32]):
    g = pl.make_tile_group(type=pl.TileType(shape=[4, 8], dtype=pl.DT_FP16), addrs=0, mutex_ids=[0])
    with pl.section_vector():
        t = g.current()
        pl.load(t, x, [0, 0])
        v = t[1, 2]                 # a tile element (fp16 reads as an fp32 scalar)
        t[0, 0] = v * 2.0           # rounded back to fp16 when written
        t[3, 7] = pl.getval(t, 9) + s[0]
        pl.store(y, t, [0, 0])
        s[2] = s[0] * 10 + s[1]     # GM tensors too
        pl.setval(s, 1, 77)


def test_element_reads_and_writes():
    x = torch.arange(32, dtype=torch.float16).reshape(4, 8) / 4
    y = torch.zeros_like(x)
    s = torch.tensor([5, 6, 0], dtype=torch.int32)
    elements[None, 1](x, y, s)
    sync()
    ref = x.clone()
    ref[0, 0] = x[1, 2] * 2
    ref[3, 7] = x.flatten()[9] + 5
    assert torch.equal(y, ref)
    assert s.tolist() == [5, 77, 56]


def test_element_offsets_are_checked():
    @pl.jit
    def poke(s: pl.Tensor[[pl.DYNAMIC], pl.DT_INT32], i: pl.DT_INT32):
        s[i] = 1

    s = np.zeros(4, np.int32)
    poke[None, 1](s, 3)
    sync()
    poke[None, 1](s, 4)
    with pytest.raises(pypto_pro.KernelFault, match=r"in pl.setval: element offset out of range: tensor 's' of "
                                                     r"shape \[4\], offsets \[4\]"):
        sync()
    assert s.tolist() == [0, 0, 0, 1]


def test_element_access_errors():
    @pl.jit
    def bad(x: pl.Tensor[[4, 8], pl.DT_FP32]):
        with pl.section_vector():
            v = x[1]

    with pytest.raises(pypto_pro.ParserTypeError, match=r"tensor 'x' has 2 dims; index it with 2 indices, got 1"):
        bad[None, 1](np.zeros((4, 8), np.float32))


@pl.jit
def windows(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
            info: pl.Tensor[[2], pl.DT_INT32]):
    tt = pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    g = pl.make_tile_group(type=tt, addrs=0, mutex_ids=[0, 1])
    with pl.section_vector():
        rows, cols = x.shape[0], x.shape[1]
        for i in pl.range((rows + 15) // 16):
            for j in pl.range((cols + 31) // 32):
                t = g.next()
                pl.set_validshape(t, [pl.min(16, rows - i * 16), pl.min(32, cols - j * 32)])
                pl.load_tile(t, x, [i, j])
                pl.adds(t, t, 1.0)
                pl.store_tile(y, t, [i, j])
                info[0] = t.valid_shape[0]
                info[1] = t.valid_shape[1]


@pytest.mark.parametrize("shape", [(16, 32), (37, 70), (5, 3), (64, 33)])
def test_tail_tiles_with_set_validshape(shape):
    x = torch.randn(shape)
    y = torch.zeros_like(x)
    info = torch.zeros(2, dtype=torch.int32)
    windows[None, 1](x, y, info)
    sync()
    assert torch.equal(y, x + 1)
    last = [(shape[0] - 1) % 16 + 1, (shape[1] - 1) % 32 + 1]
    assert info.tolist() == last
    assert windows.cache_info()["compiles"] == 1


def test_set_validshape_on_a_group_and_its_checks():
    @pl.jit
    def group_window(x: pl.Tensor[[8, 8], pl.DT_FP32], y: pl.Tensor[[8, 8], pl.DT_FP32], r: pl.DT_INT32):
        g = pl.make_tile_group(type=pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0, 1])
        pl.set_validshape(g, [r, 4])
        with pl.section_vector():
            for k in pl.range(2):
                t = g.next()
                pl.load(t, x, [0, 0])
                pl.muls(t, t, 2.0)
                pl.store(y, t, [0, 0])

    x = torch.randn(8, 8)
    y = torch.zeros_like(x)
    group_window[None, 1](x, y, 3)
    sync()
    ref = torch.zeros_like(x)
    ref[:3, :4] = 2 * x[:3, :4]
    assert torch.equal(y, ref)
    group_window[None, 1](x, y, 9)
    with pytest.raises(pypto_pro.KernelFault, match=r"valid shape outside the tile's shape"):
        sync()


# ---- inlined helpers ----

def scale_tile(t, factor):
    pl.muls(t, t, factor * FACTOR)      # module constants of the helper's module


def tile_count(x, rows):
    return x.shape[0] // rows


def clamp(i, limit):
    if i >= limit:                      # run-time control flow inside a helper
        i = limit - 1
    return i


def nested(t, x, i):
    pl.load_tile(t, x, [clamp(i, tile_count(x, 8)), 0])


@pl.jit
def uses_helpers(x: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32],
                 extra: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        i = 7   # the helper's own `i` must not clobber this one
        for k in pl.range(tile_count(x, 8) + extra):
            nested(t, x, k)
            scale_tile(t, 1.5)
            pl.store_tile(y, t, [clamp(k, tile_count(x, 8)), 0])
        pl.adds(t, t, i)
        pl.store_tile(y, t, [0, 0])


def test_helpers_are_inlined():
    x = torch.randn(32, 32)
    y = torch.zeros_like(x)
    uses_helpers[None, 1](x, y, 2)
    sync()
    ref = x * 3.0
    ref[0:8] = x[24:32] * 3.0 + 7    # after the loop t holds the last tile (clamped to tile 3)
    assert torch.equal(y, ref)


def sometimes_returns(t, flag):
    if flag > 0:
        return 1


def test_helper_errors_point_at_the_helper():
    @pl.jit
    def bad(x: pl.Tensor[[8], pl.DT_FP32], f: pl.DT_INT32):
        t = pl.make_tile(pl.TileType(shape=[8], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            v = sometimes_returns(t, f)

    with pytest.raises(pypto_pro.ParserTypeError,
                       match=r"'sometimes_returns' returns a value on some paths and nothing on others") as info:
        bad[None, 1](np.zeros(8, np.float32), 1)
    assert "v = sometimes_returns(t, f)" in str(info.value)

    @pl.jit
    def wrong_args(x: pl.Tensor[[8], pl.DT_FP32]):
        scale_tile(x)

    with pytest.raises(pypto_pro.ParserTypeError, match=r"scale_tile\(\): missing a required argument: 'factor'"):
        wrong_args[None, 1](np.zeros(8, np.float32))


# ---- order= on loads ----

@pl.jit
def transposed(x: pl.Tensor[[48, 32], pl.DT_FP32], y: pl.Tensor[[32, 48], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[32, 48], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0], order=[1, 0])       # a descending pair transposes
        pl.store(y, t, [0, 0])


def test_load_order_transposes():
    x = torch.randn(48, 32)
    y = torch.zeros(32, 48)
    transposed[None, 1](x, y)
    sync()
    assert torch.equal(y, x.T)


@pl.jit
def bsnd_head(q: pl.Tensor[[2, 64, 4, 16], pl.DT_FP16], out: pl.Tensor[[2, 4, 64, 16], pl.DT_FP16]):
    t = pl.make_tile(pl.TileType(shape=[32, 16], dtype=pl.DT_FP16), addr=0)
    with pl.section_vector():
        for b in pl.range(2):
            for n in pl.range(4):
                for s in pl.range(2):
                    pl.load_tile(t, q, [b, s, n, 0], order=[1, 3])   # rows along S, columns along D
                    pl.store_tile(out, t, [b, n, s, 0])


def test_load_tile_order_picks_axes_of_a_4d_tensor():
    q = torch.randn(2, 64, 4, 16).half()
    out = torch.zeros(2, 4, 64, 16).half()
    bsnd_head[None, 1](q, out)
    sync()
    assert torch.equal(out, q.permute(0, 2, 1, 3))


@pytest.mark.parametrize("order, message", [("[0, 0]", "must name two different axes of the 2-D tensor"),
                                            ("[0, 2]", "must name two different axes"),
                                            ("[0]", "must name two different axes")])
def test_load_order_errors(order, message, tmp_path):
    src = tmp_path / "k.py"
    src.write_text(
        "import pypto_pro.language as pl\n"
        "@pl.jit\n"
        "def k(x: pl.Tensor[[8, 8], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addr=0)\n"
        "    with pl.section_vector():\n"
        f"        pl.load(t, x, [0, 0], order={order})\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("order_kernel", src)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(pypto_pro.ParserValueError, match=message) as info:
        module.k[None, 1](np.zeros((8, 8), np.float32))
    assert info.value.lineno == 6
