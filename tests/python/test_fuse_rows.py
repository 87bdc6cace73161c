"""fuse_rows (docs/device.md#fused-row-strips): runs of row-local vector ops execute strip by strip,
and every result is the same as op by op. Differential tests: every row-local op of the registry in a
run, and every example, compiled with the fusion (the default) and without it (PYPTO_PRO_FUSE_ROWS=0),
compared bit for bit; the fused compile's IR must show the strip loop, so each case really fuses. The
loads of the run's operands head its run, so each case also loads strip by strip."""

from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import _C
from kernels import EXAMPLE_RUNS, example_outputs, load_example, module_from_source

ROOT = Path(__file__).resolve().parents[2]
R, C, VR, VC = 16, 512, 13, 500  # tiles of 16 x 512 with a tail window: strips cross its edge

ROW_LOCAL = sorted(n for n in _C.ir.op_names() if _C.ir.op_info(n)["row_local"])
BITWISE = {"and_", "or_", "xor", "not_", "shl", "shr"}
COMPARES = {"eq", "ne", "lt", "le", "gt", "ge"}
POSITIVE = {"log", "sqrt", "rsqrt", "div", "divs", "recip", "row_expand_div", "col_expand_div", "expand_div"}
CASTING = {"add_relu_cast", "sub_relu_cast", "mul_cast"}

TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[{R}, {C}], pl.{D}], y: pl.Tensor[[{R}, {C}], pl.{D}], row_in: pl.Tensor[[1, {C}], pl.{D}],
           masks: pl.Tensor[[{R}, {C}], pl.DT_UINT8], out: pl.Tensor[[{R}, {C}], pl.{O}],
           col_out: pl.Tensor[[{R}, 1], pl.{I}]):
    full = pl.TileType(shape=[{R}, {C}], dtype=pl.{D}, valid_shape=[-1, -1])
    a = pl.make_tile(full, addr=0x0)
    b = pl.make_tile(full, addr=0x8000)
    o = pl.make_tile(pl.TileType(shape=[{R}, {C}], dtype=pl.{O}, valid_shape=[-1, -1]), addr=0x10000)
    t = pl.make_tile(full, addr=0x18000)
    m = pl.make_tile(pl.TileType(shape=[{R}, {C}], dtype=pl.DT_UINT8, valid_shape=[-1, -1]), addr=0x20000)
    col = pl.make_tile(pl.TileType(shape=[{R}, 1], dtype=pl.{D}, layout=pl.DN, valid_shape=[-1, -1]), addr=0x22000)
    icol = pl.make_tile(pl.TileType(shape=[{R}, 1], dtype=pl.{I}, layout=pl.DN, valid_shape=[-1, -1]), addr=0x22100)
    row = pl.make_tile(pl.TileType(shape=[1, {C}], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x22200)
    tmp = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_INT32), addr=0x23000)
    with pl.section_vector():
        pl.set_validshape(a, [{VR}, {VC}])
        pl.set_validshape(b, [{VR}, {VC}])
        pl.set_validshape(o, [{VR}, {VC}])
        pl.set_validshape(t, [{VR}, {VC}])
        pl.set_validshape(m, [{VR}, {VC}])
        pl.set_validshape(col, [{VR}, 1])
        pl.set_validshape(icol, [{VR}, 1])
        pl.set_validshape(row, [1, {VC}])
        pl.load(row, row_in, [0, 0])
        pl.load(m, masks, [0, 0])
        pl.expands(o, 0)
        pl.expands(icol, 0)
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
{RUN}
        pl.store(col_out, icol, [0, 0])  # first: a store of a tile the run did not compute keeps fuse_direct off
        pl.store(out, o, [0, 0])
'''


def _run(op):
    """The run under test: a producer where the op needs one, the op, and the op again on its own
    result where the dtypes allow (a dependency inside the strip)."""
    info = _C.ir.op_info(op)
    names = [s[0] for s in info["operand_specs"]]
    if op in COMPARES:
        return [f"pl.{op}(m, a, b)", "pl.select(o, m, a, b, tmp)"]
    if op == "select":
        return ["pl.select(o, m, a, b, tmp)", "pl.select(o, m, o, a, tmp)"]
    if op in ("argmax", "argmin"):
        return ["pl.muls(t, a, 2.0)", f"pl.{op}(icol, t, t)"]
    if op in ("row_sum", "sum", "row_max", "row_min"):
        tmp = "tmp" if info["operand_specs"][2][3] == "any" else "t"
        return [f"pl.{op}(col, a, {tmp})", "pl.row_expand_mul(o, a, col)"]
    if op.startswith("row_expand_") or op.startswith("expand_"):
        return ["pl.row_max(col, b, t)", f"pl.{op}(o, a, col)", f"pl.{op}(o, o, col)"]
    if op.startswith("col_expand_"):
        return [f"pl.{op}(o, a, row)", f"pl.{op}(o, o, row)"]
    if op == "cast":
        return ["pl.muls(t, a, 3.0)", "pl.cast(o, t)"]
    if op in CASTING:
        return [f"pl.{op}(o, a, b, target_type=pl.DT_FP32, mode=pl.RoundMode.CAST_ROUND)",
                f"pl.{op}(o, o, b, target_type=pl.DT_FP32, mode=pl.RoundMode.CAST_ROUND)"]
    if op == "expands":
        return ["pl.expands(o, 2.5)", "pl.add(o, o, a)"]
    if op == "axpy":
        return ["pl.axpy(o, a, 0.5)", "pl.axpy(o, b, 2.0)"]
    if op == "xor":
        return ["pl.xor(o, a, b, t)", "pl.xor(o, o, a, t)"]
    if names[1:] == ["src"]:
        return [f"pl.{op}(o, a)", f"pl.{op}(o, o)" if op not in ("log", "sqrt", "rsqrt", "recip") else f"pl.{op}(t, b)"]
    if len(names) == 3 and info["operand_specs"][2][1] == "scalar":
        return [f"pl.{op}(o, a, 1.5)", f"pl.{op}(o, o, 1.25)"]
    if len(names) == 3:
        return [f"pl.{op}(o, a, b)", f"pl.{op}(o, o, b)"]
    if len(names) == 4:
        return [f"pl.{op}(o, a, b, a)", f"pl.{op}(o, o, b, a)"]
    raise AssertionError(f"no run for {op}: {names}")


def _dtypes(op):
    """(data, out, index column) dtypes of the op's kernel."""
    if op in BITWISE:
        return "DT_INT32", "DT_INT32", "DT_INT32"
    if op == "cast":
        return "DT_FP32", "DT_FP16", "DT_INT32"
    return "DT_FP32", "DT_FP32", "DT_INT32"


def _inputs(op, data):
    g = torch.Generator().manual_seed(sum(map(ord, op)))
    if data == "DT_INT32":
        x = torch.randint(-1000, 1000, (R, C), generator=g, dtype=torch.int32)
        y = torch.randint(0, 8, (R, C), generator=g, dtype=torch.int32) if op in ("shl", "shr") else \
            torch.randint(-1000, 1000, (R, C), generator=g, dtype=torch.int32)
        row = torch.randint(-5, 5, (1, C), generator=g, dtype=torch.int32)
    else:
        x, y = torch.randn(R, C, generator=g), torch.randn(R, C, generator=g)
        row = torch.randn(1, C, generator=g)
        if op in POSITIVE:
            x, y, row = x.abs() + 0.5, y.abs() + 0.5, row.abs() + 0.5
    masks = torch.randint(0, 2, (R, C), generator=g, dtype=torch.uint8)
    return x, y, row, masks



def _both(monkeypatch, fn, name, launch):
    """(unfused results, fused results, the fused instance's fuse_rows IR)."""
    results = []
    for fuse in ("0", "1"):
        monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
        monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
        kernel = pl.jit(fn, name=f"{name}_fuse{fuse}")
        results.append(launch(kernel))
        pypto_pro.runtime.synchronize()
        ir = (Path(kernel.instances()[0].dir) / "ir_7_fuse_rows.txt").read_text()
    return results[0], results[1], ir


def test_every_row_local_op_has_a_case():
    assert len(ROW_LOCAL) > 50
    for op in ROW_LOCAL:
        _run(op)  # raises for an op the table below does not know how to run


@pytest.mark.parametrize("op", ROW_LOCAL)
def test_a_run_of_each_row_local_op_gives_the_unfused_bits(tmp_path, monkeypatch, op):
    data, out_dtype, index = _dtypes(op)
    run = "\n".join(" " * 8 + line for line in _run(op))
    source = TEMPLATE.format(R=R, C=C, D=data, O=out_dtype, I=index, VR=VR, VC=VC, RUN=run)
    module = module_from_source(tmp_path, f"fuse_{op}", source)
    x, y, row, masks = _inputs(op, data)
    torch_out = {"DT_FP32": torch.float32, "DT_FP16": torch.float16, "DT_INT32": torch.int32}[out_dtype]

    def launch(kernel):
        out = torch.full((R, C), 7, dtype=torch_out)
        col = torch.full((R, 1), 7, dtype=torch.int32)
        kernel[None, 1](x, y, row, masks, out, col)
        return out, col

    (out0, col0), (out1, col1), ir = _both(monkeypatch, module.kernel, f"fuse_{op}", launch)
    assert "for row_strip in range(" in ir, ir  # the run was fused
    assert "load_rows(a_rows, x, [0, 0], a, row_strip" in ir, ir  # with the loads heading it
    assert torch.equal(out0, out1) or (out0.dtype.is_floating_point and torch.equal(out0.isnan(), out1.isnan()) and
                                       torch.equal(torch.nan_to_num(out0), torch.nan_to_num(out1)))
    assert torch.equal(col0, col1)


def _example(name):
    return load_example(name, "fuse_example")


def test_the_examples_give_the_unfused_bits(monkeypatch):
    torch.manual_seed(0)
    x = torch.randn(1000, 300) * 3
    softmax, layernorm = _example("softmax"), _example("layernorm")
    gamma, beta = torch.randn(1, 300), torch.randn(1, 300)
    cases = [
        (softmax.softmax_kernel.fn, lambda k: _out(lambda y: k[None, 7](x, y), x)),
        (layernorm.layernorm_kernel.fn, lambda k: _out(lambda y: k[None, 7](x, gamma, beta, y, 1e-5), x)),
    ]
    for fn, launch in cases:
        unfused, fused, ir = _both(monkeypatch, fn, fn.__name__, launch)
        assert "for row_strip in range(" in ir
        assert torch.equal(unfused, fused)
    attention = _example("flash_attention")
    q, k, v = (torch.randn(1, 300, 2, 128).half() for _ in range(3))
    for causal in (False, True):
        runs = []
        for fuse in ("0", "1"):
            monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
            kernel = pl.jit(attention.flash_attention.fn, tiling_key=attention.AttentionKey,
                            name=f"fa_fuse{fuse}")
            out = torch.empty_like(q)
            mask = torch.triu(torch.full((128, 128), float("-inf")), diagonal=1)
            kernel[None, 3, {"Causal": int(causal)}](*(t.view(300, 256) for t in (q, k, v, out)), mask, 300,
                                                    1.0 / 128 ** 0.5)
            pypto_pro.runtime.synchronize()
            runs.append(out)
        assert torch.equal(runs[0], runs[1])


def test_every_example_is_in_the_differential():
    names = {p.stem for p in (ROOT / "examples").glob("*.py")} - {"distributed"}
    assert names == set(EXAMPLE_RUNS)


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
def test_each_example_gives_the_unfused_bits(monkeypatch, name):
    (_, unfused), (_, fused) = example_outputs(monkeypatch, name, "PYPTO_PRO_FUSE_ROWS", ("0", "1"))
    for a, b in zip(unfused, fused):
        assert torch.equal(a, b)


LOAD_FAULT = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[40, 256], pl.DT_FP32], out: pl.Tensor[[40, 256], pl.DT_FP32], start: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x8000)
    with pl.section_vector():
        pl.expands(o, 1.0)
        pl.store(out, o, [0, 0])
        for i in pl.range(start, 3):
            pl.load(t, x, [i * 16, 0])
            pl.muls(o, t, 2.0)
            pl.adds(o, o, 1.0)
            row = i * 16  # (the store apart from the run: not a direct run, docs/device.md#direct-runs)
            pl.store(out, o, [row, 0])
'''


def test_a_fused_load_faults_like_the_load(tmp_path, monkeypatch):
    """The third tile's rows [32, 48) leave x's 40 rows: the fused load faults on its first strip,
    before any op of the run, with the load's line and message, and GM holds what it held unfused."""
    module = module_from_source(tmp_path, "fused_load_fault", LOAD_FAULT)
    x = torch.randn(40, 256)
    faults = []

    def launch(kernel):
        out = torch.zeros(40, 256)
        kernel[None, 1](x, out, 1)
        with pytest.raises(pypto_pro.KernelFault) as info:
            pypto_pro.runtime.synchronize()
        faults.append(info.value)
        return out

    unfused, fused, ir = _both(monkeypatch, module.kernel, "fused_load_fault", launch)
    assert "load_rows(t_rows, x" in ir, ir
    assert torch.equal(unfused, fused)
    assert torch.equal(fused[16:32], x[16:32] * 2 + 1) and torch.equal(fused[32:], torch.zeros(8, 256))
    assert [(f.op, f.line) for f in faults] == [("load", 11)] * 2
    assert str(faults[0]).split("\n")[0].replace("_fuse0", "") == str(faults[1]).split("\n")[0].replace("_fuse1", "")
    assert "GM access out of bounds: tensor 'x' of shape [40, 256], offsets [32, 0], window [16, 256]" in str(faults[1])


TAIL_STORE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[64, 256], pl.DT_FP32], y: pl.Tensor[[64, 256], pl.DT_FP32], rows: pl.DT_INT32,
           shift: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x8000)
    c = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.DT_FP32, layout=pl.DN, valid_shape=[-1, -1]), addr=0x10000)
    with pl.section_vector():
        pl.set_validshape(t, [rows, 256])
        pl.set_validshape(o, [rows, 256])
        pl.set_validshape(c, [rows, 1])
        for i in pl.range(0, 3):
            {LOAD}
            pl.row_max(c, t, o)
            pl.row_expand_sub(o, t, c)
            pl.muls(o, o, 2.0)
            {STORE}
'''
TAIL_FORMS = {
    "load/store": ("pl.load(t, x, [i * 16, 0])", "pl.store(y, o, [i * 16 + shift, 0])"),
    "load_tile/store_tile": ("pl.load_tile(t, x, [i, 0])", "pl.store_tile(y, o, [i + shift // 16, 0])"),
    "load/store_tile": ("pl.load(t, x, [i * 16, 0])", "pl.store_tile(y, o, [i + shift // 16, 0])"),
    "load_tile/store": ("pl.load_tile(t, x, [i, 0])", "pl.store(y, o, [i * 16 + shift, 0])"),
}


TAIL_CASES = [("load/store", *case) for case in [(False, 0, 16), (False, 0, 13), (True, 0, 16), (True, 0, 13),
                                                 (True, 4, 16), (True, 16, 13), (True, 1, 16), (False, 16, 9)]]
TAIL_CASES += [(form, *case) for form in sorted(TAIL_FORMS) if form != "load/store"
               for case in [(True, 0, 13), (True, 16, 16)]]


@pytest.mark.parametrize("form, in_place, shift, rows", TAIL_CASES)
def test_a_run_ending_in_a_store_stores_strip_by_strip_with_the_unfused_bits(tmp_path, monkeypatch, form, in_place,
                                                                           shift, rows):
    """The store after a run stores each strip as it is computed (store_rows) when its GM window and
    the run's load leave later strips' rows alone: separate tensors, or in place on the same rows. A
    store into rows a later strip still loads (in place, shifted) waits for the last strip. Either
    way every byte of GM is the unfused kernel's."""
    load, store = TAIL_FORMS[form]
    name = f"tail_{form.replace('/', '_')}_{int(in_place)}_{shift}_{rows}"
    module = module_from_source(tmp_path, name, TAIL_STORE.replace("{LOAD}", load).replace("{STORE}", store))
    x = torch.randn(64, 256)

    def launch(kernel):
        a = x.clone()
        b = a if in_place else torch.full((64, 256), 7.0)
        kernel[None, 1](a, b, rows, shift)
        pypto_pro.runtime.synchronize()
        return b.clone()

    unfused, fused, ir = _both(monkeypatch, module.kernel, name, launch)
    assert "store_rows" in ir or "store_tile_rows" in ir, ir
    assert torch.equal(unfused, fused)
    if not in_place:  # the documented result: each tile's valid rows, 2 (x - its row's max), at its rows
        for i in range(3):
            tile = x[i * 16:i * 16 + rows]
            torch.testing.assert_close(fused[i * 16 + shift:i * 16 + shift + rows],
                                       (tile - tile.amax(1, keepdim=True)) * 2)


def test_a_fused_store_faults_like_the_store_before_it_writes(tmp_path, monkeypatch):
    """The first tile's store reaches past y's 64 rows: the fused store checks its whole window on the
    first strip and faults with the store's line and message, leaving y as the unfused kernel leaves
    it (untouched)."""
    module = module_from_source(tmp_path, "tail_fault", TAIL_STORE.replace("{LOAD}", TAIL_FORMS["load/store"][0])
                                .replace("{STORE}", TAIL_FORMS["load/store"][1]))
    x = torch.randn(64, 256)
    faults = []

    def launch(kernel):
        y = torch.full((64, 256), 7.0)
        kernel[None, 1](x, y, 16, 50)
        with pytest.raises(pypto_pro.KernelFault) as info:
            pypto_pro.runtime.synchronize()
        faults.append(info.value)
        return y

    unfused, fused, ir = _both(monkeypatch, module.kernel, "tail_fault", launch)
    assert "store_rows(y, o_rows" in ir, ir
    assert torch.equal(unfused, fused) and torch.all(fused == 7.0)
    assert [(f.op, f.line) for f in faults] == [("store", 18)] * 2
    assert str(faults[0]).split("\n")[0].replace("_fuse0", "") == str(faults[1]).split("\n")[0].replace("_fuse1", "")


def _out(launch, like):
    y = torch.empty_like(like)
    launch(y)
    return y


def test_instrumented_instances_are_never_fused(monkeypatch, tmp_path):
    monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
    softmax = _example("softmax")
    checked = pl.jit(softmax.softmax_kernel.fn, sanitizer=True, name="softmax_checked_unfused")
    x = torch.randn(64, 300)
    checked[None, 2](x, torch.empty_like(x))
    pypto_pro.runtime.synchronize()
    ir = (Path(checked.instances()[0].dir) / "ir_7_fuse_rows.txt").read_text()
    assert "row_strip" not in ir
