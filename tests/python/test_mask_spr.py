"""The vector mask and the special registers: pl.set_vec_mask, pl.set_mask_count, pl.set_mask_norm,
pl.reset_mask, pl.set_ctrl_spr, pl.get_ctrl_spr, pl.reset_ctrl_spr, pl.set_saturation_flag,
pl.get_saturation_flag, pl.get_spr and pl.SaturationFlagMode (docs/language.md#vector-mask-and-special-registers).

The kernels of the first part follow the call examples of the public API pages (repository hicann/pypto,
docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/vector_mask/ and
.../vf_computation/special_reg_access/), without their vector-function helpers (pl.Vf is planned). The
registers are read back through pl.setval into an output tensor; the error cases check the exception
class, the message and the line."""

import inspect

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import _C, errors

CTRL_DEFAULT = 0x1000000000000008
SAT = pl.SaturationFlagMode


def sync():
    pypto_pro.runtime.synchronize()


def inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)


def assert_sum(out, a, b):
    """fp32 + fp32 rounds once, like numpy's: equal within one rounding."""
    np.testing.assert_allclose(out, a + b, rtol=1e-6, atol=0)


# ---- the vector mask pages: tile ops manage the mask themselves ----------------------------------

@pl.jit(auto_mutex=True)
def set_vec_mask_page(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                      out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.set_vec_mask(-1, -1)
        pl.add(cur_out, cur_a, cur_b)
        pl.store(out, cur_out, [0, 0])


@pl.jit(auto_mutex=True)
def mask_count_norm_page(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                         out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.set_mask_count()
        pl.set_vec_mask(0, 64 * 64)
        pl.set_mask_norm()
        pl.set_vec_mask(-1, -1)
        pl.add(cur_out, cur_a, cur_b)
        pl.store(out, cur_out, [0, 0])


@pl.jit(auto_mutex=True)
def reset_mask_page(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                    out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.reset_mask()
        pl.add(cur_out, cur_a, cur_b)
        pl.store(out, cur_out, [0, 0])


@pl.jit(auto_mutex=True)
def narrow_masks(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                 out: pl.Tensor[[3, 64, 64], pl.DT_FP32], count: pl.DT_INT32):
    """The pages' other forms (the first 32 elements, none, a run-time count): a tile op overwrites the
    mask, so each add still covers its whole valid window."""
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    ta = pl.make_tile(tt, addr=0x0000)
    tb = pl.make_tile(tt, addr=0x4000)
    tc = pl.make_tile(tt, addr=0x8000)
    with pl.section_vector():
        pl.load(ta, a, [0, 0])
        pl.load(tb, b, [0, 0])
        pl.set_vec_mask(0, 0xFFFFFFFF)
        pl.add(tc, ta, tb)
        pl.store(out, tc, [0, 0, 0])
        pl.set_vec_mask(0, 0)
        pl.sub(tc, ta, tb)
        pl.store(out, tc, [1, 0, 0])
        pl.set_mask_count()
        pl.set_vec_mask(0, count)
        pl.mul(tc, ta, tb)
        pl.store(out, tc, [2, 0, 0])
        pl.set_mask_norm()
        pl.reset_mask()


@pytest.mark.parametrize("kernel", [set_vec_mask_page, mask_count_norm_page, reset_mask_page],
                         ids=["set_vec_mask", "set_mask_count_norm", "reset_mask"])
def test_mask_page_examples_add(kernel):
    a, b = inputs(1)
    out = np.zeros_like(a)
    kernel[None, 1](a, b, out)
    sync()
    assert_sum(out, a, b)


def test_tile_ops_ignore_a_narrow_mask():
    a, b = inputs(2)
    out = np.full((3, 64, 64), np.nan, np.float32)
    narrow_masks[None, 1](a, b, out, 7)
    sync()
    assert_sum(out[0], a, b)
    np.testing.assert_allclose(out[1], a - b, rtol=1e-6, atol=0)
    np.testing.assert_allclose(out[2], a * b, rtol=1e-6, atol=0)


# ---- reading the registers back ------------------------------------------------------------------

@pl.jit
def register_readback(seen: pl.Tensor[[2, 16], pl.DT_INT64], atomic: pl.DT_INT32):
    row = pl.get_block_idx()
    # as every block starts
    seen[row, 0] = pl.get_ctrl_spr(0, 63)
    seen[row, 1] = pl.get_ctrl_spr(60, 60)
    seen[row, 2] = pl.get_ctrl_spr(48, 48)
    seen[row, 3] = pl.get_spr()
    seen[row, 4] = pl.get_saturation_flag(pl.SaturationFlagMode.FLOAT)
    seen[row, 5] = pl.get_saturation_flag(pl.SaturationFlagMode.FLOAT8)
    seen[row, 6] = pl.get_saturation_flag(pl.SaturationFlagMode.INT)
    seen[row, 7] = pl.get_saturation_flag(mode=pl.SaturationFlagMode.CAST)
    # the saturation flags with their polarity, positional and by keyword
    pl.set_saturation_flag(pl.SaturationFlagMode.INT, True)
    pl.set_saturation_flag(mode=pl.SaturationFlagMode.CAST, enable=False)
    seen[row, 8] = pl.get_ctrl_spr(53, 53) * 10 + pl.get_ctrl_spr(59, 59)  # 1 (INT on), 1 (CAST off)
    seen[row, 9] = pl.get_saturation_flag(pl.SaturationFlagMode.INT) and not \
        pl.get_saturation_flag(pl.SaturationFlagMode.CAST)
    # a field written from a run-time value, then a single bit, then reset
    pl.set_ctrl_spr(6, 10, atomic + row)
    pl.set_ctrl_spr(start_bit=60, end_bit=60, value=0)
    seen[row, 10] = pl.get_ctrl_spr(6, 10)
    seen[row, 11] = pl.get_ctrl_spr(0, 63)
    pl.reset_ctrl_spr(6, 10)
    pl.reset_ctrl_spr(53, 53)
    pl.reset_ctrl_spr(59, 59)
    pl.reset_ctrl_spr(60, 60)
    seen[row, 12] = pl.get_ctrl_spr(0, 63)
    # the readers are scalars of kernel expressions
    if pl.get_saturation_flag(pl.SaturationFlagMode.INT):
        seen[row, 13] = -1
    else:
        seen[row, 13] = pl.get_spr() + 7
    with pl.section_vector():
        pl.set_vec_mask(row, -1)
        pl.set_mask_count()
        pl.reset_mask()
        seen[row, 14] = pl.get_ctrl_spr(2, 4)  # bit 3 of the default


def test_registers_read_back():
    seen = np.full((2, 16), -99, np.int64)
    register_readback[None, 2](seen, 5)
    sync()
    for row in range(2):  # every block starts from the reset values, whatever the one before did
        got = seen[row]
        assert got[0] == CTRL_DEFAULT and got[1] == 1 and got[2] == 0 and got[3] == 0
        assert list(got[4:8]) == [1, 1, 0, 1]  # FLOAT, FLOAT8, CAST saturate at reset; INT wraps
        assert got[8] == 11 and got[9] == 1
        assert got[10] == 5 + row
        expected = (CTRL_DEFAULT & ~(1 << 60) & ~(0x1F << 6)) | ((5 + row) << 6) | (1 << 53) | (1 << 59)
        assert got[11] == expected
        assert got[12] == CTRL_DEFAULT
        assert got[13] == 7
        assert got[14] == 0b010
        assert got[15] == -99


def test_registers_are_reset_at_every_launch():
    seen = np.zeros((2, 16), np.int64)
    for atomic in (3, 4):
        register_readback[None, 1](seen, atomic)
        sync()
        assert seen[0, 0] == CTRL_DEFAULT and seen[0, 10] == atomic


@pl.jit(sanitizer=True)
def per_core_registers(seen: pl.Tensor[[5, 4], pl.DT_INT64]):
    """A mixed block: each of its three cores keeps its own registers (code outside the sections runs on
    all of them)."""
    pl.set_saturation_flag(pl.SaturationFlagMode.FLOAT8, False)
    with pl.section_vector():
        pl.set_vec_mask(pl.get_subblock_idx(), -1)
        pl.set_ctrl_spr(6, 10, 1 + pl.get_subblock_idx())
        seen[pl.get_subblock_idx(), 0] = pl.get_ctrl_spr(6, 10)
        seen[pl.get_subblock_idx(), 1] = pl.get_saturation_flag(pl.SaturationFlagMode.FLOAT8)
    with pl.section_cube():
        seen[4, 0] = pl.get_ctrl_spr(6, 10)
        seen[4, 1] = pl.get_saturation_flag(pl.SaturationFlagMode.FLOAT8)
        seen[4, 2] = pl.get_spr()


def test_each_core_has_its_own_registers():
    seen = np.full((5, 4), -1, np.int64)
    per_core_registers[None, 1](seen)
    sync()
    assert list(seen[0, :2]) == [1, 0] and list(seen[1, :2]) == [2, 0]
    assert list(seen[4, :3]) == [0, 0, 0]


@pl.jit
def get_ctrl_spr_page(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                      out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                      seen: pl.Tensor[[1, 2], pl.DT_INT64]):
    global_mode = pl.get_ctrl_spr(60, 60)
    float_sat = pl.get_ctrl_spr(48, 48)
    tf = pl.TileType(shape=[1, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    in_a = pl.make_tile(tf, addr=0, size=256)
    t_out = pl.make_tile(tf, addr=256, size=256)
    with pl.section_vector():
        pl.load(in_a, a, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.store(out, in_a, [0, 0])
        seen[0, 0] = global_mode
        seen[0, 1] = float_sat


@pl.jit
def ctrl_spr_pages(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                   out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                   seen: pl.Tensor[[1, 6], pl.DT_INT64]):
    """The set_ctrl_spr, reset_ctrl_spr and saturation-flag pages around their (here absent) vector
    function, each step read back."""
    pl.set_ctrl_spr(60, 60, 1)
    pl.set_ctrl_spr(59, 59, 0)
    seen[0, 0] = pl.get_ctrl_spr(59, 60)
    pl.set_saturation_flag(mode=pl.SaturationFlagMode.CAST, enable=True)
    is_enabled = pl.get_saturation_flag(mode=pl.SaturationFlagMode.CAST)
    seen[0, 1] = is_enabled
    tf = pl.TileType(shape=[1, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    in_a = pl.make_tile(tf, addr=0, size=256)
    with pl.section_vector():
        pl.load(in_a, a, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, in_a, [0, 0])
    pl.set_saturation_flag(mode=pl.SaturationFlagMode.CAST, enable=False)
    seen[0, 2] = pl.get_saturation_flag(pl.SaturationFlagMode.CAST)
    seen[0, 3] = pl.get_ctrl_spr(59, 59)
    pl.reset_ctrl_spr(59, 59)
    pl.reset_ctrl_spr(60, 60)
    seen[0, 4] = pl.get_saturation_flag(pl.SaturationFlagMode.CAST)
    seen[0, 5] = pl.get_ctrl_spr(0, 63)


def test_get_ctrl_spr_page_example():
    a = torch.randn(1, 64)
    out = torch.empty(1, 64)
    seen = torch.full((1, 2), -1, dtype=torch.int64)
    get_ctrl_spr_page[None, 1](a, out, seen)
    sync()
    torch.testing.assert_close(out, a, rtol=1e-5, atol=1e-5)
    assert seen.tolist() == [[1, 0]]  # the global mode bit is set, FLOAT saturates (its bit is 0)


def test_ctrl_spr_and_saturation_page_examples():
    a = torch.randn(1, 64) * 50000
    out = torch.empty(1, 64)
    seen = torch.full((1, 6), -1, dtype=torch.int64)
    ctrl_spr_pages[None, 1](a, out, seen)
    sync()
    torch.testing.assert_close(out, a, rtol=0, atol=0)  # the copy is exact; no op here reads CTRL
    assert seen.tolist() == [[0b10, 1, 0, 1, 1, CTRL_DEFAULT]]


def test_saturation_flag_mode_is_built():
    assert [(m.name, int(m)) for m in SAT] == [("FLOAT", 0), ("FLOAT8", 1), ("INT", 2), ("CAST", 3)]
    assert repr(SAT.CAST) == "pl.SaturationFlagMode.CAST"
    assert _C.hw_tables()["saturation_flags"] == [m.name for m in SAT]
    for name in ("set_vec_mask", "set_mask_count", "set_mask_norm", "reset_mask", "set_ctrl_spr", "reset_ctrl_spr",
                 "set_saturation_flag"):
        assert getattr(pl, name).kind == "op" and _C.ir.op_info(name)["pipe"] == "S", name
    for name in ("get_spr", "get_ctrl_spr", "get_saturation_flag"):
        assert getattr(pl, name).kind == "special", name
    planned = {name for name, _ in _C.ir.planned_ops()}
    assert not planned & {"set_vec_mask", "set_mask_count", "set_mask_norm", "reset_mask", "get_spr",
                          "set_ctrl_spr", "get_ctrl_spr", "reset_ctrl_spr", "set_saturation_flag",
                          "get_saturation_flag"}


# ---- errors --------------------------------------------------------------------------------------

def body_of(stmt):
    src = ("def kernel(x: pl.Tensor[[16, 16], pl.DT_FP32], n: pl.DT_INT32):\n"
           "    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)\n"
           "    with pl.section_vector():\n"
           f"        {stmt}\n")
    return src


# (statement, exception, message fragments); the statement is line 4 of its kernel
COMPILE_ERRORS = {
    "mask float": ("pl.set_vec_mask(1.5, 0)", errors.ParserTypeError,
                   ["pl.set_vec_mask: 'mask_high' must be a 64-bit integer", "got the float 1.5"]),
    "mask bool": ("pl.set_vec_mask(0, n > 1)", errors.ParserTypeError,
                  ["'mask_low' must be a 64-bit integer", "got a run-time bool scalar"]),
    "mask wider than 64 bits": ("pl.set_vec_mask(1 << 64, 0)", errors.ParserValueError,
                                ["mask_high=18446744073709551616 does not fit in 64 bits"]),
    "mask tile": ("pl.set_vec_mask(t, 0)", errors.ParserTypeError, ["'mask_high' must be a scalar, got Tile"]),
    "mask missing half": ("pl.set_vec_mask(0)", errors.ParserTypeError, ["missing its 'mask_low' argument"]),
    "mask mode argument": ("pl.set_mask_count(1)", errors.ParserTypeError, ["pl.set_mask_count() takes 0 arguments"]),
    "ctrl run-time bit": ("pl.set_ctrl_spr(n, 60, 1)", errors.ParserTypeError,
                          ["'start_bit' must be a compile-time int (a CTRL bit, 0..63)", "run-time int32"]),
    "ctrl bit 64": ("pl.set_ctrl_spr(60, 64, 1)", errors.ParserValueError,
                    ["end_bit=64 is not a bit of the 64-bit CTRL register (0..63)"]),
    "ctrl reversed": ("pl.set_ctrl_spr(10, 6, 1)", errors.ParserValueError, ["start_bit=10 is above end_bit=6"]),
    "ctrl read-only bit": ("pl.set_ctrl_spr(3, 3, 0)", errors.ParserValueError,
                           ["CTRL bit 3 is not writable", "6..10, 45, 48, 50, 53, 59, 60"]),
    "ctrl across fields": ("pl.set_ctrl_spr(48, 50, 0)", errors.ParserValueError,
                           ["CTRL bits 48..50 are not writable"]),
    "ctrl value too wide": ("pl.set_ctrl_spr(48, 48, 2)", errors.ParserValueError,
                            ["value=2 does not fit CTRL bit 48, a 1-bit field (0..1)"]),
    "ctrl negative value": ("pl.set_ctrl_spr(6, 10, -1)", errors.ParserValueError,
                            ["value=-1 does not fit CTRL bits 6..10, a 5-bit field (0..31)"]),
    "ctrl float value": ("pl.set_ctrl_spr(48, 48, 1.0)", errors.ParserTypeError,
                         ["'value' must be an integer", "got the float 1"]),
    "ctrl undefined atomic dtype": ("pl.set_ctrl_spr(6, 8, 7)", errors.ParserValueError,
                                    ["sets CTRL bits 6..8 to 7, an atomic encoding the hardware does not define"]),
    "ctrl undefined atomic op": ("pl.set_ctrl_spr(6, 10, 0b11000)", errors.ParserValueError,
                                 ["sets CTRL bits 9..10 to 3"]),
    "ctrl missing value": ("pl.set_ctrl_spr(48, 48)", errors.ParserTypeError, ["missing its 'value' argument"]),
    "reset whole register": ("pl.reset_ctrl_spr(0, 63)", errors.ParserValueError, ["CTRL bits 0..63 are not writable"]),
    "reset run-time bit": ("pl.reset_ctrl_spr(59, n)", errors.ParserTypeError, ["'end_bit' must be a compile-time int"]),
    "get ctrl bit 64": ("v = pl.get_ctrl_spr(0, 64)", errors.ParserValueError,
                        ["pl.get_ctrl_spr: end_bit=64 is not a bit of the 64-bit CTRL register"]),
    "get ctrl reversed": ("v = pl.get_ctrl_spr(5, 4)", errors.ParserValueError, ["start_bit=5 is above end_bit=4"]),
    "get ctrl run-time bit": ("v = pl.get_ctrl_spr(n, 3)", errors.ParserTypeError,
                              ["pl.get_ctrl_spr: 'start_bit' must be a compile-time int", "run-time int32"]),
    "get ctrl float bit": ("v = pl.get_ctrl_spr(1.5, 3)", errors.ParserTypeError,
                           ["'start_bit' must be a compile-time int", "the fp32 constant 1.5"]),
    "get ctrl missing bit": ("v = pl.get_ctrl_spr(60)", errors.ParserTypeError, ["missing its 'end_bit' argument"]),
    "get spr argument": ("v = pl.get_spr(0)", errors.ParserTypeError, ["pl.get_spr() takes no arguments"]),
    "saturation int mode": ("pl.set_saturation_flag(3, True)", errors.ParserTypeError,
                            ["pl.set_saturation_flag mode must be a pl.SaturationFlagMode member "
                             "(FLOAT, FLOAT8, INT, CAST), got 3"]),
    "saturation other enum": ("pl.set_saturation_flag(pl.SaturateMode.ON, True)", errors.UnsupportedFeatureError,
                              ["pl.SaturateMode"]),
    "saturation round mode": ("pl.set_saturation_flag(pl.RoundMode.CAST_RINT, True)", errors.ParserTypeError,
                              ["mode must be a pl.SaturationFlagMode member", "RoundMode"]),
    "saturation int enable": ("pl.set_saturation_flag(pl.SaturationFlagMode.INT, 1)", errors.ParserTypeError,
                              ["pl.set_saturation_flag enable must be a compile-time bool (True or False), got 1"]),
    "saturation run-time enable": ("pl.set_saturation_flag(pl.SaturationFlagMode.INT, n > 0)",
                                   errors.ParserTypeError, ["enable must be a compile-time bool", "run-time bool"]),
    "saturation missing enable": ("pl.set_saturation_flag(mode=pl.SaturationFlagMode.INT)", errors.ParserTypeError,
                                  ["missing its 'enable' argument"]),
    "saturation unknown keyword": ("pl.set_saturation_flag(pl.SaturationFlagMode.INT, True, on=1)",
                                   errors.ParserTypeError, ["unexpected keyword 'on'; it takes mode, enable"]),
    "get saturation string": ("v = pl.get_saturation_flag('CAST')", errors.ParserTypeError,
                              ["pl.get_saturation_flag mode must be a pl.SaturationFlagMode member", "got 'CAST'"]),
}


@pytest.mark.parametrize("case", list(COMPILE_ERRORS))
def test_compile_errors(tmp_path, case):
    stmt, exc, fragments = COMPILE_ERRORS[case]
    path = tmp_path / "mask_spr_errors.py"
    path.write_text("import pypto_pro.language as pl\n\n\n" + body_of(stmt))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(exc) as info:
        pl.jit(namespace["kernel"])[None, 1](torch.zeros(16, 16), 1)
    err = info.value
    assert isinstance(err, errors.ParserError)
    for fragment in fragments:
        assert fragment in err.message, err.message
    assert err.filename == str(path) and err.lineno == 7, str(err)


@pl.jit
def run_time_ctrl_value(seen: pl.Tensor[[1, 2], pl.DT_INT64], value: pl.DT_INT32):
    pl.set_ctrl_spr(48, 48, value)
    seen[0, 0] = pl.get_ctrl_spr(48, 48)


@pl.jit
def run_time_undefined_encoding(seen: pl.Tensor[[1, 2], pl.DT_INT64], value: pl.DT_INT32):
    pl.set_ctrl_spr(6, 7, value)
    seen[0, 0] = pl.get_ctrl_spr(6, 10)
    pl.set_ctrl_spr(8, 8, 1)
    seen[0, 1] = 1


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, src in enumerate(lines) if text in src)


def test_run_time_values_are_checked():
    seen = torch.zeros(1, 2, dtype=torch.int64)
    run_time_ctrl_value[None, 1](seen, 1)
    sync()
    assert seen[0, 0] == 1
    line = line_of(run_time_ctrl_value, "pl.set_ctrl_spr(48, 48, value)")
    for value in (2, -1):
        run_time_ctrl_value[None, 1](seen, value)
        with pytest.raises(errors.KernelFault) as info:
            sync()
        assert info.value.line == line and info.value.op == "set_ctrl_spr"
        assert f"value {value} does not fit CTRL bit 48, a 1-bit field (0..1)" in str(info.value)

    run_time_undefined_encoding[None, 1](seen, 3)
    with pytest.raises(errors.KernelFault) as info:
        sync()
    assert info.value.line == line_of(run_time_undefined_encoding, "pl.set_ctrl_spr(8, 8, 1)")
    assert "leaves CTRL bits 6..8 = 7, an atomic encoding the hardware does not define" in str(info.value)
    assert seen.tolist() == [[3, 0]]  # the faulting write is not made, nothing after it runs
