"""pl.dump_data (docs/language.md#debug): a window of a GM tensor or tile printed on its core's output
and saved as .npy in the instance's dumps/, read back with kernel.dumps() / pypto_pro.debug."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors
from pypto_pro.debug import load_dumps

M = pl.MemorySpace


def sync():
    pypto_pro.runtime.synchronize()


@pl.jit(auto_mutex=True)
def dump_vec(x: pl.Tensor[[4, 8], pl.DT_FP32]):
    t = pl.make_tile_group(type=pl.TileType(shape=[4, 8], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addrs=0,
                           mutex_ids=[0]).current()
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.dump_data(t, flag="after load")
        pl.set_validshape(t, [2, 8])
        pl.dump_data(t, [0, 2], [2, 3], loc=True)
        pl.dump_data(t)                                   # the valid window
        pl.dump_data(x, offsets=[1, 0], shapes=[2, -1])   # -1: to the end


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_dumps_of_a_tile_and_a_tensor_print_and_read_back(capfd, sanitizer):
    kernel = dump_vec if not sanitizer else pl.jit(dump_vec.fn, auto_mutex=True, sanitizer=True, name="dump_vec_san")
    x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    kernel[None, 1](x)
    sync()
    out = capfd.readouterr().out.splitlines()
    file = dump_vec.fn.__code__.co_filename
    assert out[:6] == ["[block 0 AIV] after load",
                       "[block 0 AIV] dump_data Vec tile 't' fp32 [4, 8] at [0, 0]:",
                       "[block 0 AIV]   0 1 2 3 4 5 6 7",
                       "[block 0 AIV]   8 9 10 11 12 13 14 15",
                       "[block 0 AIV]   16 17 18 19 20 21 22 23",
                       "[block 0 AIV]   24 25 26 27 28 29 30 31"]
    assert out[6].startswith(f"[block 0 AIV] {file}:") and out[6].endswith(": dump_data Vec tile 't' fp32 [2, 3] at [0, 2]:")
    dumps = kernel.dumps()
    assert [(d.name, d.what, d.shape, d.offsets) for d in dumps] == [
        ("t", "Vec tile", (4, 8), (0, 0)), ("t", "Vec tile", (2, 3), (0, 2)), ("t", "Vec tile", (2, 8), (0, 0)),
        ("x", "tensor", (2, 8), (1, 0))]
    assert dumps[0].flag == "after load" and dumps[1].flag is None
    np.testing.assert_array_equal(dumps[0].data, x.numpy())
    np.testing.assert_array_equal(dumps[1].data, x.numpy()[:2, 2:5])
    np.testing.assert_array_equal(dumps[2].data, x.numpy()[:2])
    np.testing.assert_array_equal(dumps[3].data, x.numpy()[1:3])
    assert all(d.kernel == kernel.kernel_name and d.block == 0 and d.core == "AIV 0" for d in dumps)
    assert dumps[0].data.dtype == np.float32 and dumps[0].dtype == "fp32"
    assert [d.seq for d in load_dumps(kernel.instances()[0].dir)] == [d.seq for d in dumps]


@pl.jit
def dump_dtypes(h: pl.Tensor[[2, 16], pl.DT_FP16], b: pl.Tensor[[2, 16], pl.DT_BF16],
                i: pl.Tensor[[3, 2, 16], pl.DT_INT32]):
    with pl.section_vector():
        pl.dump_data(h)
        pl.dump_data(b)
        pl.dump_data(i, [1, 0, 4], [2, 2, 3])


def test_dumps_keep_their_dtype_and_rank():
    h = torch.randn(2, 16).half()
    b = torch.randn(2, 16).bfloat16()
    i = torch.randint(-1000, 1000, (3, 2, 16), dtype=torch.int32)
    dump_dtypes[None, 1](h, b, i)
    sync()
    d_h, d_b, d_i = dump_dtypes.dumps()
    assert d_h.data.dtype == np.float16 and np.array_equal(d_h.data, h.numpy())
    assert d_b.dtype == "bf16" and d_b.data.dtype == np.float32 and np.array_equal(d_b.data, b.float().numpy())
    assert d_i.data.dtype == np.int32 and np.array_equal(d_i.data, i.numpy()[1:3, 0:2, 4:7])


@pl.jit
def dump_cube(a: pl.Tensor[[16, 16], pl.DT_FP16], b: pl.Tensor[[16, 16], pl.DT_FP16],
              ws: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32]):
    a_mat = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0)
    b_mat = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x1000)
    left = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Left), addr=0)
    right = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Right), addr=0)
    acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.system.bar_all()
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.dump_data(acc, [8, 0], [8, 16], workspace=ws)


def test_acc_dumps_through_its_workspace():
    a, b = torch.randn(16, 16).half(), torch.randn(16, 16).half()
    ws = torch.zeros(16, 16)
    dump_cube[None, 1](a, b, ws)
    sync()
    (d_acc,) = dump_cube.dumps()
    assert d_acc.what == "Acc tile" and d_acc.core == "AIC 0"
    ref = a.float() @ b.float()
    np.testing.assert_allclose(d_acc.data, ref.numpy()[8:], rtol=1e-5, atol=1e-5)
    # the fixpipe wrote the whole tile to the workspace, also for a window (the public page), as on the NPU
    torch.testing.assert_close(ws, ref, rtol=1e-5, atol=1e-5)


def test_acc_workspace_must_hold_the_whole_tile():
    a, b = torch.randn(16, 16).half(), torch.randn(16, 16).half()
    with pytest.raises(errors.KernelFault, match="the workspace is smaller than the Acc tile"):
        dump_cube[None, 1](a, b, torch.zeros(8, 16))
        sync()


def test_mat_left_right_tiles_cannot_be_dumped():
    def body(a: pl.Tensor[[16, 16], pl.DT_FP16]):
        a_mat = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0)
        with pl.section_cube():
            pl.load(a_mat, a, [0, 0])
            pl.dump_data(a_mat)

    with pytest.raises(errors.ParserTypeError, match="pl.dump_data: a Mat tile cannot be dumped on the NPU"):
        pl.jit(body)[None, 1](torch.zeros(16, 16).half())


@pl.jit
def dump_blocks(x: pl.Tensor[[4, 8], pl.DT_INT32]):
    t = pl.make_tile(pl.TileType(shape=[1, 8], dtype=pl.DT_INT32), addr=0)
    with pl.section_vector():
        b = pl.get_block_idx()
        pl.load(t, x, [b, 0])
        pl.system.bar_all()
        pl.dump_data(t)


def test_each_block_dumps_its_own_window():
    x = torch.arange(32, dtype=torch.int32).reshape(4, 8)
    dump_blocks[None, 4](x)
    sync()
    by_block = {d.block: d.data for d in dump_blocks.dumps()}
    assert sorted(by_block) == [0, 1, 2, 3]
    for b, data in by_block.items():
        np.testing.assert_array_equal(data, x.numpy()[b:b + 1])


def test_dump_data_misuse_is_refused():
    def acc_without_workspace(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            pl.dump_data(acc)

    with pytest.raises(errors.ParserValueError, match="an Acc tile is dumped through a GM workspace"):
        pl.jit(acc_without_workspace)[None, 1](torch.zeros(16, 16))

    def vec_with_workspace(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.dump_data(t, workspace=x)

    with pytest.raises(errors.ParserValueError, match="workspace= is for Acc tiles only"):
        pl.jit(vec_with_workspace)[None, 1](torch.zeros(16, 16))

    def half_window(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_vector():
            pl.dump_data(x, offsets=[0, 0])

    with pytest.raises(errors.ParserTypeError, match="takes offsets and shapes together, or neither"):
        pl.jit(half_window)[None, 1](torch.zeros(16, 16))

    def wrong_rank(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_vector():
            pl.dump_data(x, [0, 0, 0], [1, 1, 1])

    with pytest.raises(errors.ParserTypeError, match=r"offsets needs one entry per dim of 'x' \(2\)"):
        pl.jit(wrong_rank)[None, 1](torch.zeros(16, 16))


def test_a_window_outside_the_data_or_its_workspace_is_a_fault():
    @pl.jit
    def outside(x: pl.Tensor[[4, 8], pl.DT_FP32], r: pl.DT_INT32):
        with pl.section_vector():
            pl.dump_data(x, [r, 0], [2, 8])

    outside[None, 1](torch.zeros(4, 8), 3)
    with pytest.raises(pypto_pro.KernelFault, match=r"in pl.dump_data: the dumped window leaves the data: tensor 'x' "
                                                    r"of shape \[4, 8\], offsets \[3, 0\], window \[2, 8\]"):
        sync()


# ---- the public dump_data page's kernels, unchanged ----

@pl.jit()
def dump_data_tensor_full_kernel(
    out: pl.Tensor[[16], pl.DT_INT32],
):
    with pl.section_vector():
        for i in pl.range(0, 16):
            out[i] = i * 10
        pl.dump_data(out)


@pl.jit(auto_mutex=True)
def dump_data_tile_full_kernel(
    a: pl.Tensor[[32, 32], pl.DT_INT32],
    b: pl.Tensor[[32, 32], pl.DT_INT32],
    out: pl.Tensor[[32, 32], pl.DT_INT32],
):
    tt = pl.TileType(shape=[32, 32], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    ta_group = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tb_group = pl.make_tile_group(type=tt, addrs=0x1000, mutex_ids=[1])
    tc_group = pl.make_tile_group(type=tt, addrs=0x2000, mutex_ids=[2])
    with pl.section_vector():
        ta = ta_group.current()
        tb = tb_group.current()
        tc = tc_group.current()
        pl.load(ta, a, [0, 0])
        pl.load(tb, b, [0, 0])
        pl.add(tc, ta, tb)
        pl.dump_data(tc)
        pl.store(out, tc, [0, 0])


def test_dump_data_page_kernels(capfd):
    out = torch.zeros(16, dtype=torch.int32)
    dump_data_tensor_full_kernel[None, 1](out)
    sync()
    (d,) = dump_data_tensor_full_kernel.dumps()
    np.testing.assert_array_equal(d.data, np.arange(16) * 10)
    assert "150" in capfd.readouterr().out
    a = torch.arange(32 * 32, dtype=torch.int32).reshape(32, 32)
    o = torch.zeros(32, 32, dtype=torch.int32)
    dump_data_tile_full_kernel[None, 1](a, a, o)
    sync()
    (d,) = dump_data_tile_full_kernel.dumps()
    np.testing.assert_array_equal(d.data, (2 * a).numpy())   # the page's printout: 0 2 4 ... / 64 66 ...
    assert torch.equal(o, 2 * a)
