"""Language features (control flow, scalars, helpers, TilingData, ...), each checked with numbers against numpy/torch."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

MODULE_TILE = 16  # read at compile time by the kernels below


def sync():
    pypto_pro.runtime.synchronize()


@pl.jit
def control_flow(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
                 mode: pl.DT_INT32, skip: pl.DT_INT32, stop_after: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[MODULE_TILE, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        n = x.shape[0] // MODULE_TILE
        i = 0
        while i < n:
            pl.load_tile(t, x, [i, 0])
            if mode == 0:
                pl.adds(t, t, 1.0)
            elif mode == 1:
                pl.muls(t, t, 3.0)
            else:
                pl.subs(t, t, 0.5)
            if i == skip:
                i += 1
                continue
            pl.store_tile(y, t, [i, 0])
            i += 1
            if i >= stop_after:
                break


@pytest.mark.parametrize("mode, skip, stop_after", [(0, -1, 100), (1, 2, 100), (2, 0, 3), (5, 4, 6)])
def test_while_if_elif_else_break_continue(mode, skip, stop_after):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    y = np.full_like(x, -1.0)
    control_flow[None, 1](x, y, mode, skip, stop_after)
    sync()
    ref = np.full_like(x, -1.0)
    for i in range(8):
        rows = slice(16 * i, 16 * (i + 1))
        value = x[rows] + 1 if mode == 0 else x[rows] * 3 if mode == 1 else x[rows] - 0.5
        if i != skip:
            ref[rows] = value
        if i + 1 >= stop_after:
            break
    np.testing.assert_array_equal(y, ref)
    assert control_flow.cache_info()["compiles"] == 1


def test_closure_constants_early_return_and_negative_shape_index():
    rows = 32

    @pl.jit
    def fill(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[rows, 32], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            tiles = x.shape[0] // rows
            if pl.get_block_idx() >= tiles:
                return
            for j in pl.range(x.shape[-1] // 32):
                pl.load_tile(t, x, [pl.get_block_idx(), j])
                pl.muls(t, t, -1.0)
                pl.store_tile(y, t, [pl.get_block_idx(), j])

    x = torch.randn(96, 128)
    y = torch.zeros_like(x)
    fill[None, 8](x, y)   # 8 blocks, 3 tiles of rows: blocks 3..7 return at once
    sync()
    assert torch.equal(y, -x)


def test_tile_group_cursor_current_previous_and_index():
    @pl.jit
    def rotate(x: pl.Tensor[[48, 32], pl.DT_FP32], y: pl.Tensor[[48, 32], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addrs=0x100, depth=3)
        with pl.section_vector():
            for k in pl.range(3):
                pl.load_tile(g.next(), x, [k, 0])      # slots 0, 1, 2 get tiles 0, 1, 2
            pl.store_tile(y, g.current(), [0, 0])      # slot 2 (tile 2) -> rows 0..15
            pl.store_tile(y, g.previous(), [1, 0])     # slot 1 (tile 1) -> rows 16..31
            pl.store_tile(y, g[0], [2, 0])             # slot 0 (tile 0) -> rows 32..47

    x = torch.arange(48 * 32, dtype=torch.float32).reshape(48, 32)
    y = torch.zeros_like(x)
    rotate[None, 1](x, y)
    sync()
    assert torch.equal(y, torch.cat([x[32:48], x[16:32], x[0:16]]))


DTYPES = [(pl.DT_FP16, torch.float16), (pl.DT_BF16, torch.bfloat16), (pl.DT_FP32, torch.float32),
          (pl.DT_INT32, torch.int32)]


def make_binary_kernel(dtype, op_name, scalar=None):
    op = getattr(pl, op_name)

    @pl.jit(name=f"{op_name}_{dtype.name}")
    def binary(a: pl.Tensor[[pl.DYNAMIC, 64], dtype], b: pl.Tensor[[pl.DYNAMIC, 64], dtype],
               c: pl.Tensor[[pl.DYNAMIC, 64], dtype]):
        tt = pl.TileType(shape=[32, 64], dtype=dtype)
        ta = pl.make_tile(tt, addr=0)
        tb = pl.make_tile(tt, addr=0x4000)
        tc = pl.make_tile(tt, addr=0x8000)
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), a.shape[0] // 32, pl.get_block_num()):
                pl.load_tile(ta, a, [i, 0])
                if scalar is None:
                    pl.load_tile(tb, b, [i, 0])
                    op(tc, ta, tb)
                else:
                    op(tc, ta, scalar)   # a scalar right operand selects the scalar form (adds, ...)
                pl.store_tile(c, tc, [i, 0])

    return binary


TORCH_OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
             "minimum": torch.minimum}


@pytest.mark.parametrize("dtype, tdtype", DTYPES, ids=lambda d: getattr(d, "name", str(d)))
@pytest.mark.parametrize("op_name", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_ops_match_torch(dtype, tdtype, op_name):
    torch.manual_seed(0)
    if tdtype is torch.int32:
        a = torch.randint(-1000, 1000, (128, 64), dtype=tdtype)
        b = torch.randint(1, 50, (128, 64), dtype=tdtype) * torch.where(torch.rand(128, 64) < 0.5, -1, 1).int()
    else:
        a = torch.randn(128, 64).to(tdtype)
        b = (torch.rand(128, 64) + 0.5).to(tdtype)
    c = torch.zeros_like(a)
    make_binary_kernel(dtype, op_name)[None, 3](a, b, c)
    sync()
    if op_name == "div":
        ref = torch.div(a, b, rounding_mode="trunc") if tdtype is torch.int32 else a / b
    else:
        ref = TORCH_OPS[op_name](a, b)
    assert torch.equal(c, ref)  # one rounding per op, like torch's CPU kernels: exact


@pytest.mark.parametrize("dtype, tdtype", DTYPES, ids=lambda d: getattr(d, "name", str(d)))
@pytest.mark.parametrize("op_name, scalar", [("add", 2.5), ("sub", -0.25), ("mul", 3.0), ("div", 4.0),
                                             ("maximum", 0.5), ("minimum", -0.5)])
def test_scalar_forms_match_torch(dtype, tdtype, op_name, scalar):
    if tdtype is torch.int32:
        scalar = int(scalar) or 3
    a = (torch.randn(64, 64) * 8).to(tdtype)
    c = torch.zeros_like(a)
    make_binary_kernel(dtype, op_name, scalar)[None, 2](a, a, c)
    sync()
    s = torch.tensor(scalar, dtype=tdtype)
    if op_name == "div":
        ref = torch.div(a, s, rounding_mode="trunc") if tdtype is torch.int32 else a / s
    else:
        ref = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
               "minimum": torch.minimum}[op_name](a, s)
    assert torch.equal(c, ref)


def test_valid_window_moves_only_its_rows_and_columns():
    @pl.jit
    def window(x: pl.Tensor[[32, 64], pl.DT_FP32], y: pl.Tensor[[32, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, valid_shape=[8, 24]), addr=0)
        with pl.section_vector():
            pl.load(t, x, [4, 8])
            pl.adds(t, t, 100.0)
            pl.store(y, t, [20, 40])

    x = torch.randn(32, 64)
    y = torch.zeros(32, 64)
    window[None, 1](x, y)
    sync()
    ref = torch.zeros(32, 64)
    ref[20:28, 40:64] = x[4:12, 8:32] + 100
    assert torch.equal(y, ref)


def test_scalar_arithmetic_semantics():
    @pl.jit
    def scalars(x: pl.Tensor[[8, 32], pl.DT_FP32], y: pl.Tensor[[8, 32], pl.DT_FP32], a: pl.DT_INT32,
                b: pl.DT_INT32, f: pl.DT_FP32):
        t = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.adds(t, t, a // b)                          # truncates toward zero, like the device
            pl.store(y, t, [0, 0])
            pl.adds(t, t, a % b - a // b)                  # the remainder takes the dividend's sign
            pl.store(y, t, [1, 0])
            pl.muls(t, t, 0.0)
            pl.adds(t, t, pl.max(a, b) * 10 + pl.min(a, b))
            pl.store(y, t, [2, 0])
            pl.muls(t, t, 0.0)
            pl.adds(t, t, a * 3 - b if a > b else b - a)
            pl.store(y, t, [3, 0])
            pl.muls(t, t, 0.0)
            pl.adds(t, t, f * 2.0 + a)
            pl.store(y, t, [4, 0])
            pl.muls(t, t, 0.0)
            big = pl.const(3000000000, pl.DT_INT64) + a     # int64 arithmetic
            pl.adds(t, t, big - 2999999990)
            pl.store(y, t, [5, 0])
            pl.muls(t, t, 0.0)
            pl.adds(t, t, -a if not (a >= 0 and b >= 0) else 0)
            pl.store(y, t, [6, 0])
            pl.muls(t, t, 0.0)
            pl.adds(t, t, 7 // 2 + (-7) // 2 + 7 % -3)       # compile-time folding uses the same rules
            pl.store(y, t, [7, 0])

    for a, b, f in [(-7, 2, 0.25), (9, -4, -1.5)]:
        x = torch.zeros(8, 32)
        y = torch.zeros(8, 32)
        scalars[None, 1](x, y, a, b, f)
        sync()
        q = int(a / b)
        r = a - q * b
        expected = [q, r, max(a, b) * 10 + min(a, b), a * 3 - b if a > b else b - a, f * 2 + a, a + 10,
                    -a if not (a >= 0 and b >= 0) else 0, 3 + (-3) + 1]
        assert y[:, 0].tolist() == [float(e) for e in expected], (a, b)
        assert torch.equal(y, y[:, :1].expand(8, 32))


def test_integer_division_by_zero_is_a_fault_not_a_crash():
    @pl.jit
    def divide(a: pl.Tensor[[16, 16], pl.DT_INT32], b: pl.Tensor[[16, 16], pl.DT_INT32],
               c: pl.Tensor[[16, 16], pl.DT_INT32], d: pl.DT_INT32):
        tt = pl.TileType(shape=[16, 16], dtype=pl.DT_INT32)
        ta, tb = pl.make_tile(tt, addr=0), pl.make_tile(tt, addr=0x400)
        with pl.section_vector():
            pl.load(ta, a, [0, 0])
            pl.load(tb, b, [0, 0])
            pl.div(ta, ta, tb)
            pl.divs(ta, ta, 100 // d)
            pl.store(c, ta, [0, 0])

    a = torch.full((16, 16), 12, dtype=torch.int32)
    c = torch.zeros_like(a)
    divide[None, 1](a, torch.zeros_like(a), c, 1)
    with pytest.raises(pypto_pro.KernelFault, match="integer division by zero in a tile"):
        sync()
    divide[None, 1](a, torch.ones_like(a), c, 0)
    with pytest.raises(pypto_pro.KernelFault, match="pl.scalar //: integer division by zero"):
        sync()
    divide[None, 1](a, torch.full_like(a, 2), c, 50)
    sync()
    assert torch.equal(c, torch.full_like(a, 3))


def test_one_dimensional_tensors_and_tiles():
    @pl.jit
    def scale1d(x: pl.Tensor[[pl.DYNAMIC], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[256], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), x.shape[0] // 256, pl.get_block_num()):
                pl.load_tile(t, x, [i])
                pl.muls(t, t, 0.5)
                pl.store(y, t, [i * 256])

    x = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    y = np.zeros_like(x)
    scale1d[None, 4](x, y)
    sync()
    np.testing.assert_array_equal(y, x * np.float32(0.5))


def test_kernel_without_sections_runs_on_vector_cores():
    @pl.jit
    def plain(x: pl.Tensor[[16, 16], pl.DT_FP32], y: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0, size=1024)
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])

    x = torch.randn(16, 16)
    y = torch.zeros_like(x)
    plain(x, y)
    sync()
    assert torch.equal(y, x + 1)
    assert plain.instances()[0].kind == "vector"


def test_scalar_multiply_add_rounds_twice():
    """f * g - h is two device ops: the product is rounded before the subtraction (no FMA)."""
    @pl.jit
    def fma_free(y: pl.Tensor[[1, 16], pl.DT_FP32], f: pl.DT_FP32, g: pl.DT_FP32, h: pl.DT_FP32):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.expands(t, 0.0)
            pl.adds(t, t, f * g - h)
            pl.store(y, t, [0, 0])

    y = torch.full((1, 16), 7.0)
    one = 1 + 2.0 ** -12
    fma_free[None, 1](y, one, one, 1 + 2.0 ** -11)
    sync()
    assert torch.equal(y, torch.zeros(1, 16))


def test_hardware_vocabulary_comes_from_one_table():
    """pl's pipes, memories, layouts, round modes, sync modes and dtypes are the C++ table's rows,
    and the registry's options use the same names in the same order."""
    from pypto_pro import _C
    table = _C.hw_tables()
    assert [m.name for m in pl.PipeType] == table["pipes"] == ["MTE1", "MTE2", "MTE3", "M", "V", "S", "FIX", "ALL"]
    # the public language's memories and layouts this version does not model follow the built ones
    assert [m.name for m in pl.MemorySpace] == table["memories"] + table["planned_memories"]
    assert table["planned_memories"] == ["ScaleLeft", "ScaleRight"]
    assert [m.name for m in pl.TensorLayout] == table["layouts"] + table["planned_layouts"]
    assert table["layouts"] == ["ND", "DN", "NZ", "ZN"] and table["planned_layouts"] == ["NN", "ZZ"]
    assert [m.name for m in pl.RoundMode] == table["round_modes"]
    assert [m.name for m in pl.CrossCoreSyncMode] == table["cross_core_sync_modes"]
    assert [d.pl_name for d in pl.DTYPES.values()] == [row[1] for row in table["dtypes"]]
    assert len(pl.DTYPES) == 22 and pl.DT_BF16.bits == 16 and pl.DT_FP32.supported and not pl.DT_HF8.supported
    assert pl.DT_FP4.bits == 4 and not pl.DT_FP4.supported
    set_pipe = next(k for k in _C.ir.op_info("system.sync_src")["kwargs"] if k["name"] == "set_pipe")
    assert set_pipe["choices"] == table["pipes"]
    mode = next(k for k in _C.ir.op_info("cast")["kwargs"] if k["name"] == "mode")
    assert mode["choices"] == table["round_modes"]
    assert repr(pl.MemorySpace.Vec) == "pl.MemorySpace.Vec" and repr(pl.NZ) == "pl.NZ"


SCALES = [1.0, 2.0, -3.0, 0.5]


@pl.jit
def static_unrolled(x: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32]):
    tt = pl.TileType(shape=[8, 32], dtype=pl.DT_FP32)
    tiles = [pl.make_tile(tt, addr=0x0), pl.make_tile(tt, addr=0x400), pl.make_tile(tt, addr=0x800)]
    with pl.section_vector():
        for i in pl.range(x.shape[0] // 32):
            # Rows 8k..8k+8 of block i scaled by SCALES[k], through tile k % 3; k is a Python int.
            for k in pl.static_range(len(SCALES)):
                pl.load(tiles[k % 3], x, [i * 32 + k * 8, 0])
                pl.muls(tiles[k % 3], tiles[k % 3], SCALES[k])
                if k % 2 == 1:  # a compile-time branch per unrolled copy
                    pl.adds(tiles[k % 3], tiles[k % 3], 1.0)
                pl.store(y, tiles[k % 3], [i * 32 + k * 8, 0])
            for j in pl.static_range(2, 9, 3):  # j ends at 8, as in Python
                pass
            pl.load(tiles[0], x, [i * 32, 0])
            pl.adds(tiles[0], tiles[0], j * 100.0)
            pl.store(y, tiles[0], [i * 32, 0])


def test_static_range_unrolls_with_compile_time_values():
    x = torch.randn(64, 32)
    y = torch.zeros_like(x)
    static_unrolled(x, y)
    sync()
    ref = torch.empty_like(x)
    for k, s in enumerate(SCALES):
        rows = torch.cat([torch.arange(b * 32 + k * 8, b * 32 + k * 8 + 8) for b in range(2)])
        ref[rows] = x[rows] * s + (1.0 if k % 2 == 1 else 0.0)
    for b in range(2):
        ref[b * 32:b * 32 + 8] = x[b * 32:b * 32 + 8] + 800.0
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-5)
    assert static_unrolled.cache_info()["instances"] == 1
