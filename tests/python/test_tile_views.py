"""A tile's invalid region (TileType(pad=), pl.fillpad) and views of a tile's bytes
(docs/language.md#types-and-tiles), against torch references."""

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

M = pl.MemorySpace


def sync():
    pypto_pro.runtime.synchronize()


PADS = {pl.TilePad.zero: 0.0, pl.TilePad.max: float("inf"), pl.TilePad.min: float("-inf")}


def pad_on_load(pad):
    @pl.jit(name=f"pad_on_load_{pad.name}")
    def kernel(x: pl.Tensor[[8, 8], pl.DT_FP32], out: pl.Tensor[[8, 8], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32, valid_shape=[-1, -1], pad=pad), addr=0)
        full = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addr=0)  # the same bytes, all of them
        pl.expands(full, 7.0)
        pl.system.bar_all()
        pl.set_validshape(t, [5, 3])
        pl.load(t, x, [0, 0])
        pl.system.bar_all()
        pl.store(out, full, [0, 0])
    return kernel


@pytest.mark.parametrize("pad", list(PADS), ids=[p.name for p in PADS])
def test_a_load_fills_the_invalid_region_with_the_tiles_pad(pad):
    x = torch.randn(8, 8)
    out = torch.zeros(8, 8)
    pad_on_load(pad)[None, 1](x, out)
    sync()
    ref = torch.full((8, 8), PADS[pad])
    ref[:5, :3] = x[:5, :3]
    assert torch.equal(out, ref)


@pl.jit(auto_mutex=True)
def fillpad_modes(x: pl.Tensor[[8, 8], pl.DT_INT32], same: pl.Tensor[[8, 8], pl.DT_INT32],
                  wide: pl.Tensor[[8, 16], pl.DT_INT32], inplace: pl.Tensor[[8, 8], pl.DT_INT32]):
    src_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=M.Vec, valid_shape=[-1, -1])
    src = pl.make_tile_group(type=src_t, addrs=0x0, mutex_ids=[0]).current()
    out = pl.make_tile_group(type=pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, pad=pl.TilePad.max), addrs=0x100,
                             mutex_ids=[1]).current()
    big = pl.make_tile_group(type=pl.TileType(shape=[8, 16], dtype=pl.DT_INT32, pad=pl.TilePad.min), addrs=0x200,
                             mutex_ids=[2]).current()
    own_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, valid_shape=[-1, -1], pad=pl.TilePad.zero)
    own = pl.make_tile_group(type=own_t, addrs=0x400, mutex_ids=[3]).current()
    with pl.section_vector():
        pl.load(src, x, [0, 0])
        pl.set_validshape(src, [5, 7])
        pl.fillpad(out, src)
        pl.store(same, out, [0, 0])
        pl.fillpad(big, src, mode=pl.FillPadMode.EXPAND)
        pl.store(wide, big, [0, 0])
        pl.load(own, x, [0, 0])
        pl.set_validshape(own, [2, 4])
        pl.fillpad(own, own, mode=pl.FillPadMode.INPLACE)
        pl.set_validshape(own, [8, 8])
        pl.store(inplace, own, [0, 0])


def test_fillpad_normal_expand_and_inplace():
    x = torch.randint(-100, 100, (8, 8), dtype=torch.int32)
    same, inplace = torch.zeros(8, 8, dtype=torch.int32), torch.zeros(8, 8, dtype=torch.int32)
    wide = torch.zeros(8, 16, dtype=torch.int32)
    fillpad_modes[None, 1](x, same, wide, inplace)
    sync()
    i32 = torch.iinfo(torch.int32)
    ref = torch.full((8, 8), i32.max, dtype=torch.int32)
    ref[:5, :7] = x[:5, :7]
    assert torch.equal(same, ref)
    ref = torch.full((8, 16), i32.min, dtype=torch.int32)
    ref[:5, :7] = x[:5, :7]
    assert torch.equal(wide, ref)
    ref = torch.zeros(8, 8, dtype=torch.int32)
    ref[:2, :4] = x[:2, :4]
    assert torch.equal(inplace, ref)


def test_fillpad_misuse_is_refused():
    def no_pad(x: pl.Tensor[[8, 8], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addr=0x100)
        pl.fillpad(b, a)

    with pytest.raises(errors.ParserTypeError) as info:
        pl.jit(no_pad)[None, 1](torch.zeros(8, 8))
    assert "pl.fillpad: 'out' fills its padding with its TileType's pad= value" in info.value.message

    def shrink(x: pl.Tensor[[8, 8], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[8, 4], dtype=pl.DT_FP32, pad=pl.TilePad.zero), addr=0x100)
        pl.fillpad(b, a, mode=pl.FillPadMode.EXPAND)

    with pytest.raises(errors.ParserTypeError) as info:
        pl.jit(shrink)[None, 1](torch.zeros(8, 8))
    assert "mode=EXPAND needs 'out' at least as large as 'src' in both dims" in info.value.message

    @pl.jit
    def normal_in_place(x: pl.Tensor[[8, 8], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_FP32, pad=pl.TilePad.zero), addr=0)
        pl.fillpad(a, a)

    normal_in_place[None, 1](torch.zeros(8, 8))
    with pytest.raises(errors.KernelFault, match="mode=NORMAL and EXPAND copy 'src' into 'out' at another address"):
        sync()


def test_reading_fractal_bytes_through_another_view_is_refused():
    def alias(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        nd = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP16), addr=0x100)
        nz = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, layout=pl.NZ), addr=0x100)
        pl.load(nd, x, [0, 0])
        pl.move(nz, nd)

    with pytest.raises(errors.UnsupportedFeatureError) as info:
        pl.jit(alias)[None, 1](torch.zeros(16, 32).half())
    assert "starts at the same Vec address 0x100 as tile 'nd'" in info.value.message
    assert "reading fractal (NZ/ZN) or column-major (DN) bytes through another tile type is not implemented yet" \
        in info.value.message


def test_compact_and_fractal_are_honoured_or_refused():
    pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Acc, fractal=1024, compact=1)
    pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat, fractal=512, compact=0)
    with pytest.raises(NotImplementedError, match=r"TileType\(compact=2\) \(RowPlusOne"):
        pl.TileType(shape=[33, 64], dtype=pl.DT_FP16, layout=pl.NZ, compact=2)
    with pytest.raises(NotImplementedError, match="has the hardware's standard 1024-byte fractal"):
        pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Acc, fractal=512)


def tail_load(compact):
    """A 16x32 L1 tile gets a 13-row tail: with compact=1 the window is the NPU's compact one, without it
    the public load page calls the load an error."""
    def tail(memory):
        return pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=memory, valid_shape=[-1, -1],
                           compact=compact)

    mat_t, left_t = tail(M.Mat), tail(M.Left)

    def kernel(a: pl.Tensor[[16, 32], pl.DT_FP16], eye: pl.Tensor[[32, 32], pl.DT_FP16],
               out: pl.Tensor[[16, 32], pl.DT_FP32]):
        a_mat = pl.make_tile(mat_t, addr=0)
        e_mat = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x1000)
        left = pl.make_tile(left_t, addr=0)
        right = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=M.Right), addr=0)
        acc = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=M.Acc, valid_shape=[-1, -1],
                                       compact=compact), addr=0)
        with pl.section_cube():
            pl.set_validshape(a_mat, [13, 32])
            pl.load(a_mat, a, [0, 0])
            pl.load(e_mat, eye, [0, 0])
            pl.system.bar_all()
            pl.set_validshape(left, [13, 32])
            pl.move(left, a_mat)
            pl.move(right, e_mat)
            pl.system.bar_all()
            pl.set_validshape(acc, [13, 32])
            pl.matmul(acc, left, right)
            pl.system.bar_all()
            pl.store(out, acc, [0, 0])

    return pl.jit(kernel, name=f"tail_load_{compact}")


def test_a_tail_in_a_fractal_tile_needs_compact_mode():
    a = torch.randn(16, 32).half()
    out = torch.full((16, 32), float("nan"))
    tail_load(1)[None, 1](a, torch.eye(32).half(), out)
    sync()
    assert torch.equal(out[:13], a[:13].float()) and out[13:].isnan().all()
    tail_load(None)[None, 1](a, torch.eye(32).half(), out)
    with pytest.raises(pypto_pro.KernelFault, match=r"in pl.load: tile 'a_mat' \(Tile\[\[16, 32\], fp16, Mat, NZ\]\) has "
                                                    r"a partial valid window, which a fractal \(NZ/ZN\) tile takes "
                                                    r"only with TileType\(..., compact=1\) on the NPU: size \[16, "
                                                    r"32\], offsets \[0, 0\], window \[13, 32\]"):
        sync()


# ---- subviews: tile[r0:r1, c0:c1] ----

@pl.jit(auto_mutex=True)
def subview_store(a: pl.Tensor[[8, 64], pl.DT_FP16], out: pl.Tensor[[4, 34], pl.DT_FP16]):
    group = pl.make_tile_group(type=pl.TileType(shape=[8, 64], dtype=pl.DT_FP16), addrs=0x0, mutex_ids=[0])
    with pl.section_vector():
        tile = group.next()
        pl.load(tile, a, [0, 0])
        sub = tile[2:6, 16:50]
        pl.store(out, sub, [0, 0])


@pl.jit(auto_mutex=True)
def subview_clamped(a: pl.Tensor[[8, 64], pl.DT_FP16], out: pl.Tensor[[4, 24], pl.DT_FP16]):
    group = pl.make_tile_group(type=pl.TileType(shape=[8, 64], dtype=pl.DT_FP16, valid_shape=[-1, -1]), addrs=0x0,
                               mutex_ids=[0])
    with pl.section_vector():
        tile = group.next()
        pl.load(tile, a, [0, 0])
        pl.set_validshape(tile, [6, 40])
        pl.store(out, tile[2:6, 16:50], [0, 0])


def test_a_subview_stores_its_slice():
    a = torch.randn(8, 64).half()
    out = torch.zeros(4, 34).half()
    subview_store[None, 1](a, out)
    out2 = torch.zeros(4, 24).half()
    subview_clamped[None, 1](a, out2)
    sync()
    assert torch.equal(out, a[2:6, 16:50])
    assert torch.equal(out2, a[2:6, 16:40])  # the slice clamped to the [6, 40] window


@pl.jit
def subview_compute(x: pl.Tensor[[16, 32], pl.DT_FP32], out: pl.Tensor[[16, 32], pl.DT_FP32], r: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0)
    pl.load(t, x, [0, 0])
    pl.system.bar_all()
    part = t[r:r + 4, 8:]      # a run-time row, an open end
    pl.muls(part, part, 10.0)  # computes on the viewed bytes, in place
    pl.system.bar_all()
    pl.store(out, t, [0, 0])


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_ops_on_a_subview_change_the_viewed_tile(sanitizer):
    x = torch.randn(16, 32)
    out = torch.zeros(16, 32)
    kernel = subview_compute if not sanitizer else pl.jit(subview_compute.fn, sanitizer=True)
    kernel[None, 1](x, out, 5)
    sync()
    ref = x.clone()
    ref[5:9, 8:] *= 10.0
    assert torch.equal(out, ref)


def test_subview_misuse_is_refused():
    def out_of_shape(x: pl.Tensor[[16, 32], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0)
        pl.store(x, t[0:17, 0:8], [0, 0])

    with pytest.raises(errors.ParserValueError, match=r"subview bound 17 is outside \[0, 16\] of axis 0"):
        pl.jit(out_of_shape)[None, 1](torch.zeros(16, 32))

    def resize_view(x: pl.Tensor[[16, 32], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0)
        v = t[0:4, 0:8]
        pl.set_validshape(v, [16, 32])

    with pytest.raises(errors.ParserTypeError, match="'v' is a subview .*its window is its slice"):
        pl.jit(resize_view)[None, 1](torch.zeros(16, 32))

    @pl.jit
    def runtime_out_of_shape(x: pl.Tensor[[16, 32], pl.DT_FP32], r: pl.DT_INT32):
        t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0)
        pl.store(x, t[r:r + 4, 0:8], [0, 0])

    runtime_out_of_shape[None, 1](torch.zeros(16, 32), 14)
    with pytest.raises(errors.KernelFault, match="the slice leaves the tile's shape"):
        sync()


def npu_order(x, layout, valid_rows=None):
    """x's elements in the order an NPU tile of `layout` holds them (fp32: 8-element 32-byte columns for
    NZ; a compact tile's partial window has its rows rounded up to 16 per column block)."""
    rows, cols = x.shape
    if layout == "DN":
        return x.t().reshape(-1)
    if layout == "ZN":
        return npu_order(x.t(), "NZ")
    stride = rows if valid_rows is None else (valid_rows + 15) // 16 * 16
    blocks = [x[:stride, j:j + 8].reshape(-1) for j in range(0, cols, 8)]
    return torch.cat(blocks + [x[stride:].reshape(-1)])


def element_order_kernel(layout, shape, valid_rows=None):
    """Fills a Vec tile of `layout` from x (a move from an ND tile), reads every element back by its
    linear offset (pl.getval) into `out`, then writes 100 + offset to offset 5 with pl.setval and
    stores the tile through an ND tile to `back`."""
    rows, cols = shape
    count = rows * cols
    compact = 1 if valid_rows is not None else None
    shaped = pl.TileType(shape=[rows, cols], dtype=pl.DT_FP32, layout=getattr(pl, layout), compact=compact,
                         valid_shape=[-1, -1])

    @pl.jit(name=f"element_order_{layout}_{rows}x{cols}_{valid_rows}")
    def kernel(x: pl.Tensor[[rows, cols], pl.DT_FP32], out: pl.Tensor[[count], pl.DT_FP32],
               back: pl.Tensor[[rows, cols], pl.DT_FP32]):
        nd = pl.make_tile(pl.TileType(shape=[rows, cols], dtype=pl.DT_FP32), addr=0)
        t = pl.make_tile(shaped, addr=0x4000)
        with pl.section_vector():
            pl.load(nd, x, [0, 0])
            pl.system.bar_all()
            if valid_rows is not None:
                pl.set_validshape(t, [valid_rows, cols])
            pl.move(t, nd)
            pl.system.bar_all()
            for p in pl.range(count):
                out[p] = pl.getval(t, p)
            pl.setval(t, 5, 100.0)
            pl.system.bar_all()
            pl.move(nd, t)
            pl.system.bar_all()
            pl.store(back, nd, [0, 0])

    return kernel


@pytest.mark.parametrize("layout, shape, valid_rows", [("NZ", (32, 16), None), ("ZN", (16, 32), None),
                                                        ("DN", (8, 6), None), ("NZ", (48, 16), 20)],
                         ids=["NZ", "ZN", "DN", "NZ-compact-tail"])
def test_element_offsets_address_a_tile_in_the_npus_byte_order(layout, shape, valid_rows):
    x = torch.randn(*shape)
    out = torch.zeros(shape[0] * shape[1])
    back = torch.zeros(*shape)
    element_order_kernel(layout, shape, valid_rows)[None, 1](x, out, back)
    sync()
    order = npu_order(x, layout, valid_rows)
    assert torch.equal(out, order)
    # setval at offset 5 changed the element that sits 6th in the NPU's order
    index = torch.arange(x.numel()).reshape(shape)
    target = npu_order(index, layout, valid_rows)[5]
    expect = x.clone().reshape(-1)
    expect[target] = 100.0
    expect = expect.reshape(shape)
    rows = valid_rows or shape[0]
    assert torch.equal(back[:rows], expect[:rows])


def test_element_access_needs_whole_32_byte_blocks():
    def read_nz(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 4], dtype=pl.DT_FP32, layout=pl.NZ), addr=0)
        v = t[0, 1]
        pl.setval(x, 0, v)

    with pytest.raises(errors.ParserTypeError, match="element access to tile 't': the columns of an NZ tile fill "
                                                     "32-byte blocks on the NPU, and 4 fp32 elements do not"):
        pl.jit(read_nz)[None, 1](torch.zeros(16, 16))


def test_wide_dn_tiles_load_column_major_and_refuse_row_major_transfers():
    @pl.jit
    def dn_load(x: pl.Tensor[[6, 8], pl.DT_FP32], out: pl.Tensor[[8, 6], pl.DT_FP32]):
        dn = pl.make_tile(pl.TileType(shape=[8, 6], dtype=pl.DT_FP32, layout=pl.DN), addr=0)
        nd = pl.make_tile(pl.TileType(shape=[8, 6], dtype=pl.DT_FP32), addr=0x1000)
        with pl.section_vector():
            pl.load(dn, x, [0, 0], order=[1, 0])  # the column-major view: dn = xᵀ
            pl.system.bar_all()
            pl.adds(dn, dn, 1.0)
            pl.system.bar_all()
            pl.move(nd, dn)
            pl.system.bar_all()
            pl.store(out, nd, [0, 0])

    x = torch.randn(6, 8)
    out = torch.zeros(8, 6)
    dn_load[None, 1](x, out)
    sync()
    assert torch.equal(out, x.t() + 1)

    def row_major_load(x: pl.Tensor[[8, 6], pl.DT_FP32]):
        dn = pl.make_tile(pl.TileType(shape=[8, 6], dtype=pl.DT_FP32, layout=pl.DN), addr=0)
        with pl.section_vector():
            pl.load(dn, x, [0, 0])

    with pytest.raises(errors.ParserValueError, match=r"the DN tile 'dn' \[8, 6\] is column-major, and only a "
                                                      r"column-major view of the tensor copies into it"):
        pl.jit(row_major_load)[None, 1](torch.zeros(8, 6))

    def dn_store(x: pl.Tensor[[8, 6], pl.DT_FP32]):
        dn = pl.make_tile(pl.TileType(shape=[8, 6], dtype=pl.DT_FP32, layout=pl.DN), addr=0)
        with pl.section_vector():
            pl.store(x, dn, [0, 0])

    with pytest.raises(errors.ParserValueError, match="a transposing store is not a data path"):
        pl.jit(dn_store)[None, 1](torch.zeros(8, 6))
