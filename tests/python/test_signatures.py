"""Compile signatures (docs/jit.md#compile-signatures): what makes a new instance and what does not.

No `from __future__ import annotations` here: make_add's annotations name closure variables, which
string annotations cannot see. TilingData arrays are quoted instead ("float[4]")."""

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import run_threads
from pypto_pro.runtime import Stream
from pypto_pro.runtime.tilingkey import TilingKeyField

SHAPES = [(256, 256), (512, 256), (256, 512), (256, 256)]


def make_add(d0, d1, name):
    def add(x: pl.Tensor[[d0, d1], pl.DT_FP32], y: pl.Tensor[[d0, d1], pl.DT_FP32],
            z: pl.Tensor[[d0, d1], pl.DT_FP32]):
        tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP32)
        a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
        b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
        c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
        with pl.section_vector():
            tiles_n = x.shape[1] // 128
            for t in pl.range(pl.get_block_idx(), x.shape[0] // 64 * tiles_n, pl.get_block_num()):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [t // tiles_n, t % tiles_n])
                pl.load_tile(tb, y, [t // tiles_n, t % tiles_n])
                pl.add(tc, ta, tb)
                pl.store_tile(z, tc, [t // tiles_n, t % tiles_n])
    return pl.jit(add, name=name)


@pytest.mark.parametrize("policy, instances", [((pl.DYNAMIC, pl.DYNAMIC), 1), ((pl.STATIC, pl.STATIC), 3),
                                               ((pl.DYNAMIC, pl.STATIC), 2), ((pl.STATIC, pl.DYNAMIC), 2)])
def test_instances_per_shape_policy(policy, instances, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = make_add(*policy, name="add_policy")
    for shape in SHAPES:
        x, y = torch.randn(shape), torch.randn(shape)
        z = torch.zeros(shape)
        kernel[None, 4](x, y, z)
        pypto_pro.runtime.synchronize()
        assert torch.equal(z, x + y)
    assert kernel.cache_info()["compiles"] == instances
    tops = sorted(p.name for p in (tmp_path / "build").iterdir())
    if policy == (pl.DYNAMIC, pl.DYNAMIC):
        assert tops == ["add_policy__a5"]
    else:
        assert len(tops) == instances and all(re.fullmatch(r"add_policy__a5__shape_[0-9a-f]{12}", t) for t in tops)


def test_stream_and_block_dim_are_not_part_of_the_signature():
    kernel = make_add(pl.STATIC, pl.STATIC, name="add_launch_cfg")
    x = torch.ones(128, 256)
    z = torch.zeros_like(x)
    for stream in (None, Stream(), Stream()):
        for block_dim in (1, 2, 5, 64, 10_000):
            kernel[stream, block_dim](x, x, z)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, 2 * x) and kernel.cache_info()["compiles"] == 1


def test_trailing_ellipsis_makes_the_remaining_dims_static():
    @pl.jit
    def rows(x: pl.Tensor[[pl.DYNAMIC, ...], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, ...], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            for i in pl.range(x.shape[0]):
                for j in pl.range(x.shape[1] // 64):   # shape[1] is specialised: a constant
                    pl.load_tile(t, x, [i, j])
                    pl.adds(t, t, 1.0)
                    pl.store_tile(y, t, [i, j])

    for shape in [(4, 128), (9, 128), (4, 256)]:
        x = torch.randn(shape)
        y = torch.zeros_like(x)
        rows[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x + 1)
    assert rows.cache_info()["compiles"] == 2
    assert [s["static_dims"] for s in rows.signatures()] == [{"x": [128], "y": [128]}, {"x": [256], "y": [256]}]
    with pytest.raises(TypeError, match=r"argument 'x' expects a tensor of at least 1-D dims"):
        rows[None, 1](torch.tensor(1.0), torch.tensor(1.0))


# ---- TilingKey ----

class TwoBits:
    A = TilingKeyField(bits=1, values=[0, 1])
    B = TilingKeyField(bits=1, values=[0, 1])


class Modes:
    Op = TilingKeyField(bits=2, values=[10, 20, 30])      # stored as the index of the value
    Scale = TilingKeyField(bits=3, values=[1, 4])

    def is_valid(self, key):
        op, scale = key
        return not (op == 30 and scale == 4)


@pl.jit(tiling_key=Modes)
def modes(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        if Op == 10:
            pl.adds(t, t, 1.0)
        elif Op == 20:
            pl.muls(t, t, 2.0)
        else:
            pl.subs(t, t, 3.0)
        pl.muls(t, t, Scale)
        pl.store(y, t, [0, 0])


def test_tiling_key_two_one_bit_fields_land_in_tk_3(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @pl.jit(tiling_key=TwoBits)
    def flags(x: pl.Tensor[[16, 16], pl.DT_FP32], y: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            if A == 1:
                pl.adds(t, t, 10.0)
            if B == 1:
                pl.adds(t, t, 100.0)
            pl.store(y, t, [0, 0])

    x = torch.zeros(16, 16)
    for a, b in [(1, 1), (0, 1), (1, 1), (0, 0)]:
        y = torch.zeros_like(x)
        flags[None, 1, {"A": a, "B": b}](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, torch.full_like(x, 10.0 * a + 100.0 * b))
    assert flags.cache_info()["compiles"] == 3
    top = tmp_path / "build" / "flags__a5"
    assert sorted(p.name for p in top.iterdir()) == ["tk_0", "tk_2", "tk_3"]
    # The branches of the other modes are gone from the generated code.
    assert (top / "tk_3" / "kernel.cpp").read_text().count("pto::adds(") == 2
    assert (top / "tk_0" / "kernel.cpp").read_text().count("pto::adds(") == 0


@pytest.mark.parametrize("op, scale", [(10, 1), (20, 4), (30, 1)])
def test_tiling_key_fields_are_constants_in_the_body(op, scale):
    x = torch.randn(64, 64)
    y = torch.zeros_like(x)
    modes[None, 1, {"Op": op, "Scale": scale}](x, y)
    pypto_pro.runtime.synchronize()
    ref = {10: x + 1, 20: x * 2, 30: x - 3}[op] * scale
    assert torch.equal(y, ref)


def test_tiling_key_packing_and_enumeration():
    assert modes.tiling_key.pack({"Op": 30, "Scale": 1}) == 2
    assert modes.tiling_key.pack({"Op": 10, "Scale": 4}) == 1 << 2
    assert modes.enumerate_tiling_keys() == [{"Op": 10, "Scale": 1}, {"Op": 20, "Scale": 1}, {"Op": 30, "Scale": 1},
                                             {"Op": 10, "Scale": 4}, {"Op": 20, "Scale": 4}]


@pytest.mark.parametrize("key, message", [
    ({"Op": 10}, r"TilingKey dict has missing 'Scale'; its fields are Op, Scale"),
    ({"Op": 10, "Scale": 1, "X": 0}, r"TilingKey dict has unknown 'X'"),
    ({"Op": 11, "Scale": 1}, r"TilingKey field 'Op' = 11 is not one of its values \[10, 20, 30\]"),
    ({"Op": True, "Scale": 1}, r"TilingKey field 'Op' = True is not one of its values"),
    ({"Op": 30, "Scale": 4}, r"TilingKey \{Op: 30, Scale: 4\} is rejected by Modes.is_valid"),
    ([10, 1], r"the TilingKey of a launch must be a dict"),
])
def test_tiling_key_launch_errors(key, message):
    with pytest.raises(ValueError, match=message):
        modes[None, 1, key]


def test_tiling_key_launch_forms():
    x = torch.zeros(64, 64)
    with pytest.raises(ValueError, match=r"launch it as kernel\[stream, block_dim, tiling_key_dict\]"):
        modes(x, x)
    with pytest.raises(ValueError, match=r"a launch takes kernel\[stream, block_dim, tiling_key_dict\]\(...\), got 2"):
        modes[None, 1]
    with pytest.raises(ValueError, match=r"got kernel\[1\]"):
        modes[1]


@pytest.mark.parametrize("cls, exc, message", [
    (type("K", (), {"A": TilingKeyField(bits=0, values=[0])}), ValueError, "bits must be an int > 0"),
    (type("K", (), {"A": TilingKeyField(bits=1, values=[])}), ValueError, "values must be a non-empty list"),
    (type("K", (), {"A": TilingKeyField(bits=1, values=[0, 0])}), ValueError, "values must be unique"),
    (type("K", (), {"A": TilingKeyField(bits=1, values=[0, 1, 2])}), ValueError, r"3 values do not fit in 1 bit"),
    (type("K", (), {"A": TilingKeyField(bits=1, values=[True])}), ValueError, "values must be ints"),
    (type("K", (), {"A": TilingKeyField(bits=40, values=[0]), "B": TilingKeyField(bits=30, values=[1])}),
     ValueError, "needs 70 bits"),
    (type("K", (), {"x": TilingKeyField(bits=1, values=[0])}), ValueError, "field 'x' clashes with the kernel param"),
    (type("K", (), {"A": TilingKeyField(bits=1, values=[0]), "is_valid": 3}), TypeError, "is_valid must be callable"),
])
def test_tiling_key_schema_is_checked_at_decoration(cls, exc, message):
    with pytest.raises(exc, match=message):
        @pl.jit(tiling_key=cls)
        def k(x: pl.Tensor[[8], pl.DT_FP32]):
            pass


# ---- datatype ----

@pl.jit(datatype={"x": "T", "y": "T"})
def scale_any(x: pl.Tensor[[pl.DYNAMIC, 64], "T"], y: pl.Tensor[[pl.DYNAMIC, 64], "T"]):
    t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=T), addr=0)
    with pl.section_vector():
        for i in pl.range(x.shape[0] // 16):
            pl.load_tile(t, x, [i, 0])
            if T == pl.DT_FP32:
                pl.muls(t, t, 3.0)
            else:
                pl.muls(t, t, 2.0)
            pl.store_tile(y, t, [i, 0])


@pl.jit(datatype={"x": "T"})
def by_tensor_dtype(x: pl.Tensor[[16, 64], "T"]):
    t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=x.dtype), addr=0)  # x.dtype is the launch's T
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        if x.dtype == pl.DT_FP32:
            pl.adds(t, t, 1.0)
        else:
            pl.adds(t, t, 2.0)
        pl.store(x, t, [0, 0])


@pytest.mark.parametrize("dt, tdt, added", [(pl.DT_FP16, torch.float16, 2.0), (pl.DT_FP32, torch.float32, 1.0)])
def test_tensor_dtype_is_the_launch_dtype_of_a_datatype_parameter(dt, tdt, added):
    x = torch.randn(16, 64).to(tdt)
    ref = x.float() + added
    by_tensor_dtype[None, 1, {"x": dt}](x)
    pypto_pro.runtime.synchronize()
    tol = 1e-2 if tdt is torch.float16 else 0  # fp16: the sum rounds once
    torch.testing.assert_close(x.float(), ref, rtol=tol, atol=tol)


def test_datatype_instances_and_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = pl.jit(scale_any.fn, datatype={"x": "T", "y": "T"}, name="scale_any")
    for dt, tdt, factor in [(pl.DT_FP16, torch.float16, 2), (pl.DT_FP32, torch.float32, 3),
                            (pl.DT_BF16, torch.bfloat16, 2), (pl.DT_FP16, torch.float16, 2)]:
        x = torch.randn(64, 64).to(tdt)
        y = torch.zeros_like(x)
        kernel[None, 1, {"x": dt, "y": dt}](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x * factor)
    assert kernel.cache_info()["compiles"] == 3
    top = tmp_path / "build" / "scale_any__a5"
    dt_dirs = sorted(p for p in top.iterdir())
    assert len(dt_dirs) == 3 and all(re.fullmatch(r"dt_[0-9a-f]{16}", p.name) for p in dt_dirs)
    bindings = sorted(json.loads((d / "datatype.json").read_text())["datatype"]["x"] for d in dt_dirs)
    assert bindings == ["DT_BF16", "DT_FP16", "DT_FP32"]
    assert all((d / "tk_none" / "kernel.cpp").is_file() for d in dt_dirs)


@pytest.mark.parametrize("dts, exc, message", [
    ({"x": pl.DT_FP16}, ValueError, r"datatype dict has missing 'y'; its parameters are x, y"),
    ({"x": pl.DT_FP16, "y": pl.DT_FP16, "z": pl.DT_FP16}, ValueError, r"has unknown 'z'"),
    ({"x": torch.float16, "y": pl.DT_FP16}, TypeError, r"datatype\['x'\] must be a pl.DT_\* dtype, got torch.float16"),
    ({"x": pl.DT_FP16, "y": pl.DT_FP32}, ValueError,
     r"datatype\['x'\] and \['y'\] share the variable 'T' but are pl.DT_FP16 and pl.DT_FP32"),
    ("fp16", ValueError, r"the datatype of a launch must be a dict"),
])
def test_datatype_launch_errors(dts, exc, message):
    with pytest.raises(exc, match=message):
        scale_any[None, 1, dts]


def test_datatype_dict_decides_the_expected_tensor_dtype():
    x = torch.zeros(16, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"argument 'x' expects dtype fp32 \(pl.DT_FP32\) as its datatype dict says, "
                                        r"got torch.float16"):
        scale_any[None, 1, {"x": pl.DT_FP32, "y": pl.DT_FP32}](x, x)


def test_tiling_key_and_datatype_together():
    class Half:
        Neg = TilingKeyField(bits=1, values=[0, 1])

    @pl.jit(tiling_key=Half, datatype={"x": "D"})
    def neg(x: pl.Tensor[[32], "D"], y: pl.Tensor[[32], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[32], dtype=D), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0])
            if Neg == 1:
                pl.muls(t, t, -1.0)
            pl.store(x, t, [0])

    x = torch.arange(32, dtype=torch.float16)
    neg[None, 1, {"Neg": 1}, {"x": pl.DT_FP16}](x, torch.zeros(32))
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, -torch.arange(32, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"kernel\[stream, block_dim, tiling_key_dict, datatype_dict\]"):
        neg[None, 1, {"Neg": 1}]


@pytest.mark.parametrize("kind", ["classmethod", "staticmethod"])
def test_tiling_key_is_valid_may_be_a_classmethod_or_staticmethod(kind):
    def check(key):
        return key[0] != 1

    ns = {"Mode": TilingKeyField(bits=2, values=[0, 1, 2])}
    if kind == "classmethod":
        ns["is_valid"] = classmethod(lambda cls, key: check(key))
    else:
        ns["is_valid"] = staticmethod(check)
    cls = type("Key", (), ns)

    @pl.jit(tiling_key=cls, name=f"tk_{kind}")
    def kernel(x: pl.Tensor[[8, 32], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.adds(t, t, Mode)
            pl.store(x, t, [0, 0])

    assert kernel.enumerate_tiling_keys() == [{"Mode": 0}, {"Mode": 2}]
    x = torch.zeros(8, 32)
    kernel[None, 1, {"Mode": 2}](x)
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, torch.full((8, 32), 2.0))
    with pytest.raises(ValueError, match=r"TilingKey \{Mode: 1\} is rejected by Key.is_valid"):
        kernel[None, 1, {"Mode": 1}](x)


# ---- TilingData ----

@dataclass
class Tiling:
    rows: int
    scale: float
    add_one: bool
    bias: "float[4]"
    pick: "int[3]" = field(default_factory=lambda: [0, 1, 2])


@pl.jit
def tiled(x: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], tiling: Tiling):
    t = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for i in pl.range(tiling.rows):
            pl.load_tile(t, x, [i, 0])
            pl.muls(t, t, tiling.scale)
            if tiling.add_one:
                pl.adds(t, t, 1.0)
            pl.adds(t, t, tiling.bias[tiling.pick[i % 3]])
            pl.store_tile(y, t, [i, 0])


def test_tiling_data_values_are_runtime_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = pl.jit(tiled.fn, name="tiled")
    x = torch.randn(8, 32)
    for rows, scale, add_one, bias, pick in [(8, 2.0, True, [0.5, 1.5, 2.5, 3.5], [0, 1, 2]),
                                             (5, -1.0, False, [10.0, 20.0, 30.0, 40.0], [3, 3, 0])]:
        y = torch.zeros_like(x)
        kernel[None, 1](x, y, Tiling(rows, scale, add_one, bias, pick))
        pypto_pro.runtime.synchronize()
        ref = torch.zeros_like(x)
        for i in range(rows):
            ref[i] = x[i] * scale + (1.0 if add_one else 0.0) + bias[pick[i % 3]]
        assert torch.equal(y, ref)
    assert kernel.cache_info()["compiles"] == 1
    inst_dir = tmp_path / "build" / "tiled__a5" / "tk_none"
    header = (inst_dir / "Tiling_tiling.h").read_text()
    assert "struct Tiling {\n  int64_t rows;\n  float scale;\n  bool add_one;\n  float bias[4];\n  int64_t pick[3];\n};" \
        in header
    assert "static_assert(sizeof(Tiling) == 56" in header  # 8 + 4 + 1 (+3) + 16 (+0) -> 32, pick at 32 -> 56
    assert '#include "Tiling_tiling.h"' in (inst_dir / "kernel.cpp").read_text()


def test_tiling_data_errors():
    x = torch.zeros(8, 32)
    good = Tiling(1, 1.0, False, [0.0] * 4)
    with pytest.raises(ValueError, match=r"argument 'tiling'.bias must have exactly 4 values, got 3"):
        tiled[None, 1](x, x, Tiling(1, 1.0, False, [0.0] * 3))
    with pytest.raises(TypeError, match=r"argument 'tiling'.rows must be an int, got float"):
        tiled[None, 1](x, x, Tiling(1.5, 1.0, False, [0.0] * 4))
    with pytest.raises(TypeError, match=r"argument 'tiling'.pick\[1\] must be an int, got str"):
        tiled[None, 1](x, x, Tiling(1, 1.0, False, [0.0] * 4, [0, "1", 2]))
    with pytest.raises(TypeError, match=r"argument 'tiling' expects a Tiling instance \(TilingData\), got dict"):
        tiled[None, 1](x, x, {"rows": 1})
    tiled[None, 1](x, x, good)
    pypto_pro.runtime.synchronize()
    tiled[None, 1](x, x, Tiling(1, 1.0, False, [0.0] * 4, [0, 9, 2]))   # pick[0] = 0: index 9 unused
    pypto_pro.runtime.synchronize()
    tiled[None, 1](x, x, Tiling(2, 1.0, False, [0.0] * 4, [0, 9, 2]))   # row 1 reads bias[9]
    with pytest.raises(pypto_pro.KernelFault, match=r"TilingData array index out of range: size \[4\], offsets \[9\]"):
        pypto_pro.runtime.synchronize()


def test_tiling_data_must_be_last():
    with pytest.raises(TypeError, match=r"the TilingData parameter 't' must be the last parameter"):
        @pl.jit
        def k(t: Tiling, x: pl.Tensor[[8], pl.DT_FP32]):
            pass

    @dataclass
    class Bad:
        arr: "int[0]"

    with pytest.raises(ValueError, match=r"Bad.arr: array length 0 is outside 1..2048"):
        @pl.jit
        def k2(x: pl.Tensor[[8], pl.DT_FP32], t: Bad):
            pass

    @dataclass
    class Worse:
        name: str

    with pytest.raises(TypeError, match=r"Worse.name: a TilingData field must be int, float, bool or T\[N\]"):
        @pl.jit
        def k3(x: pl.Tensor[[8], pl.DT_FP32], t: Worse):
            pass


def test_tiling_fields_are_not_compile_time_values():
    @pl.jit
    def bad(x: pl.Tensor[[8, 32], pl.DT_FP32], tiling: Tiling):
        t = pl.make_tile(pl.TileType(shape=[tiling.rows, 32], dtype=pl.DT_FP32), addr=0)

    with pytest.raises(pypto_pro.ParserTypeError, match=r"cannot be used in compile-time Python here"):
        bad[None, 1](torch.zeros(8, 32), Tiling(1, 1.0, False, [0.0] * 4))


def test_keyword_arguments_and_defaults():
    @pl.jit
    def axpb(x: pl.Tensor[[16], pl.DT_FP32], y: pl.Tensor[[16], pl.DT_FP32], a: pl.DT_FP32 = 2.0,
             b: pl.DT_INT32 = 1):
        t = pl.make_tile(pl.TileType(shape=[16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0])
            pl.muls(t, t, a)
            pl.adds(t, t, b)
            pl.store(y, t, [0])

    x = torch.arange(16, dtype=torch.float32)
    for args, kwargs, ref in [((x,), {}, x * 2 + 1), ((x,), {"b": 5}, x * 2 + 5), ((), {"x": x, "a": -1.0}, -x + 1),
                              ((x,), {"a": 0.5, "b": 3}, x * 0.5 + 3)]:
        y = torch.zeros(16)
        if "x" in kwargs:
            axpb[None, 1](y=y, **kwargs)
        else:
            axpb[None, 1](*args, y, **kwargs)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, ref), (args, kwargs)
    assert axpb.cache_info()["compiles"] == 1
    with pytest.raises(TypeError, match=r"axpb\(x, y, a, b\): multiple values for argument 'a'"):
        axpb[None, 1](x, x, 1.0, a=2.0)


class Lane:
    Id = TilingKeyField(bits=2, values=[0, 1, 2, 3])


@dataclass
class Scale:
    factor: float


def test_concurrent_first_launches_keep_their_own_tiling_data():
    """Each thread's first launch compiles its TilingKey instance (the compile releases the GIL) while
    the others pack their TilingData: every launch must run with its own."""

    @pl.jit(tiling_key=Lane, name="lanes")
    def lanes(x: pl.Tensor[[8, 32], pl.DT_FP32], y: pl.Tensor[[8, 32], pl.DT_FP32], s: Scale):
        t = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.muls(t, t, s.factor)
            pl.adds(t, t, Id * 1000)
            pl.store(y, t, [0, 0])

    x = torch.randn(8, 32)
    outs = [[torch.zeros(8, 32) for _ in range(3)] for _ in range(4)]

    def body(lane):
        for k in range(3):
            lanes[None, 1, {"Id": lane}](x, outs[lane][k], Scale(float(10 * lane + k + 1)))

    run_threads(4, body)
    pypto_pro.runtime.synchronize()
    for lane in range(4):
        for k in range(3):
            torch.testing.assert_close(outs[lane][k], x * (10 * lane + k + 1) + lane * 1000, rtol=1e-6, atol=1e-3)


# ---- module globals and closure variables are part of what a kernel was compiled with ----

FACTOR = 2.0
ROWS_PER_TILE = 8


def scaled_rows(t):
    pl.muls(t, t, FACTOR)


@pl.jit
def uses_globals(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[ROWS_PER_TILE, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        scaled_rows(t)
        pl.store(y, t, [0, 0])


def test_a_changed_global_recompiles_the_kernel():
    global FACTOR, scaled_rows
    x = torch.randn(8, 64)
    y = torch.zeros(8, 64)
    old_helper = scaled_rows
    try:
        uses_globals[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x * 2)
        FACTOR = 2.0  # rebound to an equal value: nothing to recompile
        uses_globals[None, 1](x, y)
        assert uses_globals.cache_info()["compiles"] == 1
        FACTOR = 3.0
        uses_globals[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x * 3)
        info = uses_globals.cache_info()
        assert info["compiles"] == 2 and info["stale"] == 1 and info["instances"] == 1
        # instances() and signatures() list the current instances only, like cache_info().
        assert len(uses_globals.instances()) == len(uses_globals.signatures()) == 1

        def scaled_rows(t):  # a redefined helper is a changed global too
            pl.adds(t, t, FACTOR)

        uses_globals[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x + 3)
        assert uses_globals.cache_info()["compiles"] == 3
        uses_globals[None, 1](x, y)  # and then it is cached again
        assert uses_globals.cache_info()["compiles"] == 3
    finally:
        FACTOR, scaled_rows = 2.0, old_helper


def test_a_changed_closure_variable_recompiles_the_kernel():
    offset = 1.0

    @pl.jit(name="uses_closure")
    def kernel(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.adds(t, t, offset)
            pl.store(y, t, [0, 0])

    x = torch.randn(8, 64)
    y = torch.zeros(8, 64)
    kernel[None, 1](x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, x + 1)
    offset = 5.0
    kernel[None, 1](x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, x + 5) and kernel.cache_info()["compiles"] == 2
