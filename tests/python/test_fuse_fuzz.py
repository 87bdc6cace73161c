"""Random programs against the fusion passes (docs/device.md#fused-ops): each seed writes a vector
kernel of 2-9 random element-wise, scalar, unary, broadcast and row-sum ops over four tiles (in place,
one tile read twice, a tile written twice, a column tile summed into and then broadcast, tail rows
and columns of tiles 16, 64 or 208 wide, sometimes one tile on a different window, sometimes
infinities, NaN and zeros in the inputs), compiles it with the fusion passes (the default) and
without (PYPTO_PRO_FUSE_ROWS=0) and on the tier-0 executor (docs/jit.md#tier-0-first-launches), and
compares every byte of every output (a NaN with a NaN: which of two
NaN operands an op returns is unspecified, docs/device.md#numerics); then the fused results with a
torch model of the ops' documented semantics. Then random runs of 2-4 of the registry's row-local
ops (test_fuse_rows' cases, fp32: reductions, broadcasts, compares and select, fused forms, argmax...)
on a run-time window, cut into strips by fuse_rows: every output byte fused, unfused and on tier-0.
The seeds are fixed (the same programs on every run); PYPTO_PRO_FUZZ_SEEDS=<n> runs n more of each
kind, drawn from the clock, and prints each failing seed's program."""

import os
import random
import time
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import fused_and_unfused, module_from_source
from test_fuse_direct import BINARY, NO_BF16, SCALAR, TORCH_DTYPE, UNARY, _same_values

BROADCAST_FNS = ("add", "sub", "mul", "div", "max", "min")
SCALARS = (1.5, -0.75, 3.0, 0.001, 0.0, -2.0)
TILES = ("t0", "t1", "t2", "t3")
COLUMNS = ("c0", "c1")

TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x0: pl.Tensor[[32, {C}], pl.{D}], x1: pl.Tensor[[32, {C}], pl.{D}], x2: pl.Tensor[[32, {C}], pl.{D}],
           x3: pl.Tensor[[32, {C}], pl.{D}], col: pl.Tensor[[32, 1], pl.{D}], row: pl.Tensor[[1, {C}], pl.{D}],
           o0: pl.Tensor[[32, {C}], pl.{D}], o1: pl.Tensor[[32, {C}], pl.{D}], o2: pl.Tensor[[32, {C}], pl.{D}],
           o3: pl.Tensor[[32, {C}], pl.{D}], oc0: pl.Tensor[[32, 1], pl.{D}], oc1: pl.Tensor[[32, 1], pl.{D}],
           rows: pl.DT_INT32, cols: pl.DT_INT32, rows2: pl.DT_INT32, cols2: pl.DT_INT32):
    tt = pl.TileType(shape=[16, {C}], dtype=pl.{D}, valid_shape=[-1, -1])
    ct = pl.TileType(shape=[16, 1], dtype=pl.{D}, layout=pl.DN, valid_shape=[-1, -1])
    t0 = pl.make_tile(tt, addr=0x0)
    t1 = pl.make_tile(tt, addr=0x8000)
    t2 = pl.make_tile(tt, addr=0x10000)
    t3 = pl.make_tile(tt, addr=0x18000)
    tmp = pl.make_tile(tt, addr=0x20000)
    c0 = pl.make_tile(ct, addr=0x28000)
    c1 = pl.make_tile(ct, addr=0x28100)
    r0 = pl.make_tile(pl.TileType(shape=[1, {C}], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x28200)
    with pl.section_vector():
        pl.set_validshape(tmp, [rows, cols])
        pl.set_validshape(r0, [1, {C}])
        pl.load(r0, row, [0, 0])
        pl.set_validshape(r0, [1, cols])
        for i in pl.range(2):
{LOADS}
{OPS}
{STORES}
'''


class Program:
    """One random kernel: its dtype, tile width, windows, ops (text and model) and inputs."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.dtype = rng.choice(["DT_FP32"] * 3 + ["DT_FP16", "DT_BF16"])
        self.C = rng.choice([16, 64, 208])
        self.rows, self.cols = rng.randint(1, 16), rng.randint(1, self.C)
        # Half the programs load each tile on its window (which lets fuse_rows cut the loop into
        # strips and fuse_direct run loads, ops and stores through registers); the others load whole
        # tiles and then set the windows, now and then one tile's differing (no fused pass may run).
        self.straight = rng.random() < 0.5
        self.odd = rng.choice(TILES) if not self.straight and rng.random() < 0.4 else None
        self.rows2, self.cols2 = rng.randint(1, 16), rng.randint(1, self.C)
        self.specials = rng.random() < 0.3
        self.ops = [self._op(rng) for _ in range(rng.randint(2, 9))]

    def _op(self, rng):
        kinds = ["binary"] * 4 + ["scalar"] * 2 + ["unary"] * 2 + ["row"] * 2 + ["col"] * 2
        if self.dtype != "DT_BF16":
            kinds += ["sum"] * 2  # (row_sum's registry dtypes: fp16 and fp32)
        kind = rng.choice(kinds)
        dst, a, b = rng.choice(TILES), rng.choice(TILES), rng.choice(TILES)
        if rng.random() < 0.3:
            a = dst  # in place
        if kind == "binary":
            return ("binary", rng.choice(BINARY), dst, a, b)
        if kind == "scalar":
            return ("scalar", rng.choice(SCALAR), dst, a, rng.choice(SCALARS))
        if kind == "unary":
            ops = [u for u in UNARY if not (self.dtype == "DT_BF16" and u in NO_BF16)]
            return ("unary", rng.choice(ops), dst, a)
        if kind == "row":
            return ("row", rng.choice(BROADCAST_FNS), dst, a, rng.choice(COLUMNS))
        if kind == "col":
            return ("col", rng.choice(BROADCAST_FNS), dst, a, "r0")
        return ("sum", "row_sum", rng.choice(COLUMNS), a)

    def window(self, tile):
        return (self.rows2, self.cols2) if tile == self.odd else (self.rows, self.cols)

    def source(self):
        ind = " " * 12
        loads = []
        if self.straight:
            loads += [f"{ind}pl.set_validshape({t}, [rows, cols])" for t in TILES]
            loads += [f"{ind}pl.set_validshape({c}, [rows, 1])" for c in COLUMNS]
            loads += [f"{ind}pl.load({t}, x{k}, [i * 16, 0])" for k, t in enumerate(TILES)]
            loads += [f"{ind}pl.load({c}, col, [i * 16, 0])" for c in COLUMNS]
        else:
            for k, t in enumerate(TILES):
                loads += [f"{ind}pl.set_validshape({t}, [16, {self.C}])", f"{ind}pl.load({t}, x{k}, [i * 16, 0])"]
            for c in COLUMNS:
                loads += [f"{ind}pl.set_validshape({c}, [16, 1])", f"{ind}pl.load({c}, col, [i * 16, 0])"]
            for t in TILES:
                r, c = ("rows2", "cols2") if t == self.odd else ("rows", "cols")
                loads.append(f"{ind}pl.set_validshape({t}, [{r}, {c}])")
            loads += [f"{ind}pl.set_validshape({c}, [rows, 1])" for c in COLUMNS]
        ops = []
        for op in self.ops:
            kind, name = op[0], op[1]
            if kind == "binary":
                ops.append(f"pl.{name}({op[2]}, {op[3]}, {op[4]})")
            elif kind == "scalar":
                ops.append(f"pl.{name}({op[2]}, {op[3]}, {op[4]!r})")
            elif kind == "unary":
                ops.append(f"pl.{name}({op[2]}, {op[3]})")
            elif kind in ("row", "col"):
                ops.append(f"pl.{kind}_expand_{name}({op[2]}, {op[3]}, {op[4]})")
            else:
                ops.append(f"pl.row_sum({op[2]}, {op[3]}, tmp)")
        stores = [f"{ind}pl.store(o{k}, {t}, [i * 16, 0])" for k, t in enumerate(TILES)]
        stores += [f"{ind}pl.store(oc{k}, {c}, [i * 16, 0])" for k, c in enumerate(COLUMNS)]
        return TEMPLATE.format(C=self.C, D=self.dtype, LOADS="\n".join(loads),
                               OPS="\n".join(ind + o for o in ops), STORES="\n".join(stores))

    def inputs(self):
        g = torch.Generator().manual_seed(self.seed)
        cast = TORCH_DTYPE[self.dtype]
        xs = [torch.randn(32, self.C, generator=g) * 2 for _ in TILES]
        col, row = torch.randn(32, 1, generator=g) + 0.5, torch.randn(1, self.C, generator=g) + 0.5
        if self.specials:
            for x in xs + [col, row]:
                flat = x.view(-1)
                at = torch.randint(0, flat.numel(), (4,), generator=g)
                flat[at] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
        return [x.to(cast) for x in xs] + [col.to(cast), row.to(cast)]


def _binary(name, a, b):
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "max": lambda: torch.where(a > b, a, b), "min": lambda: torch.where(a < b, a, b)}[name]()


def row_sums(v):
    """fp32 sums of the rows of v in row_sum's own order (vector_reduce.h SumRun: four 16-lane
    accumulators over 64 columns at a time, then 16 at a time into the first, the zero-padded tail into
    the second, then (a0 + a1) + (a2 + a3) and the lanes pairwise 8, 4, 2, 1): the device's bits."""
    rows, n = v.shape
    acc = [torch.zeros(rows, 16) for _ in range(4)]
    i = 0
    while i + 64 <= n:
        for k in range(4):
            acc[k] = acc[k] + v[:, i + 16 * k:i + 16 * k + 16]
        i += 64
    while i + 16 <= n:
        acc[0] = acc[0] + v[:, i:i + 16]
        i += 16
    if i < n:
        tail = torch.zeros(rows, 16)
        tail[:, :n - i] = v[:, i:]
        acc[1] = acc[1] + tail
    total = (acc[0] + acc[1]) + (acc[2] + acc[3])
    for width in (8, 4, 2, 1):
        total = total[:, :width] + total[:, width:2 * width]
    return total[:, 0]


UNARY_MODEL = {"neg": lambda a: -a, "abs": torch.abs, "relu": lambda a: torch.where(a < 0, torch.zeros_like(a), a),
               "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": lambda a: 1 / torch.sqrt(a),
               "recip": lambda a: 1 / a}
SHORT = {"maximum": "max", "minimum": "min", "adds": "add", "subs": "sub", "muls": "mul", "divs": "div",
         "maxs": "max", "mins": "min"}


def model(p, xs, col, row):
    """The outputs by the documented semantics: each op computes in fp32 over its destination's window
    (sources read at the same positions), rounded to the element type; a row sum over its source's."""
    cast = TORCH_DTYPE[p.dtype]
    rnd = lambda v: v.to(cast).float()  # noqa: E731
    outs = [torch.full((32, p.C), 7.0) for _ in TILES] + [torch.full((32, 1), 7.0) for _ in COLUMNS]
    r0 = row.float()
    for i in range(2):
        t = {name: xs[k][i * 16:(i + 1) * 16].float().clone() for k, name in enumerate(TILES)}
        t.update({c: col[i * 16:(i + 1) * 16].float().clone() for c in COLUMNS})
        for op in p.ops:
            kind, name = op[0], op[1]
            if kind == "sum":
                r, c = p.window(op[3])
                t[op[2]][:r, 0] = rnd(row_sums(t[op[3]][:r, :c]))
                continue
            r, c = p.window(op[2])
            a = t[op[3]][:r, :c]
            if kind == "binary":
                v = _binary(SHORT.get(name, name), a, t[op[4]][:r, :c])
            elif kind == "scalar":
                v = _binary(SHORT[name], a, rnd(torch.tensor(op[4])).expand_as(a))
            elif kind == "unary":
                v = UNARY_MODEL[name](a)
            elif kind == "row":
                v = _binary(name, a, t[op[4]][:r, :].expand_as(a))
            else:
                v = _binary(name, a, r0[:, :c].expand_as(a))
            t[op[2]][:r, :c] = rnd(v)
        for k, name in enumerate(TILES):
            r, c = p.window(name)
            outs[k][i * 16:i * 16 + r, :c] = t[name][:r, :c]
        for k, name in enumerate(COLUMNS):
            outs[4 + k][i * 16:i * 16 + p.rows, :] = t[name][:p.rows, :]
    return [o.to(cast) for o in outs]


def _run(tmp_path, monkeypatch, seed):
    p = Program(seed)
    source = p.source()
    module = module_from_source(tmp_path, f"fuzz_{seed}", source)
    inputs = p.inputs()
    cast = TORCH_DTYPE[p.dtype]

    def launch(kernel):
        outs = [torch.full((32, p.C), 7.0).to(cast) for _ in TILES] + [torch.full((32, 1), 7.0).to(cast)
                                                                       for _ in COLUMNS]
        kernel[None, 1](*inputs, *outs, p.rows, p.cols, p.rows2, p.cols2)
        return outs

    unfused, fused, ir, _ = fused_and_unfused(monkeypatch, module.kernel, f"fuzz_{seed}", launch,
                                              "ir_8_fuse_ops.txt")
    monkeypatch.setenv("PYPTO_PRO_TIER0", "always")  # and every launch on the tier-0 executor
    tier0 = pl.jit(module.kernel, name=f"fuzz_{seed}_tier0")
    first = launch(tier0)
    pypto_pro.runtime.synchronize()
    assert tier0.compile_stats()[-1]["tier0"], "the tier-0 executor runs these ops"
    names = [f"o{k}" for k in range(4)] + ["oc0", "oc1"]
    for name, a, b, c in zip(names, unfused, fused, first):
        assert _same_values(a, b), f"seed {seed}: {name} differs fused / unfused\n{source}"
        assert _same_values(a, c), f"seed {seed}: {name} differs tier-0 / compiled\n{source}"
    # Near-cancellations and the math functions' last bits, rounded to a narrow type each op, take a
    # few ulps of the larger operand: tolerances in units of the type's precision.
    tol = {"DT_FP32": 2e-5, "DT_FP16": 4e-3, "DT_BF16": 3e-2}[p.dtype]
    for name, got, want in zip(names, fused, model(p, inputs[:4], inputs[4], inputs[5])):
        torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m, n=name: f"seed {seed}: {n} vs the model: {m}\n{source}")
    return ir


SEEDS = list(range(1, 41))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_give_the_unfused_bits_and_the_model(tmp_path, monkeypatch, seed):
    _run(tmp_path, monkeypatch, seed)


def test_the_seeds_cover_fusion():
    """The fixed programs fuse: most of them (statically) have a fused run, and between them every
    kind of op is drawn."""
    programs = [Program(s) for s in SEEDS]
    kinds = {op[0] for p in programs for op in p.ops}
    assert kinds == {"binary", "scalar", "unary", "row", "col", "sum"}
    assert {p.dtype for p in programs} == {"DT_FP32", "DT_FP16", "DT_BF16"}
    assert sum(p.odd is not None for p in programs) >= 3 and sum(p.specials for p in programs) >= 5


@pytest.mark.skipif(not os.environ.get("PYPTO_PRO_FUZZ_SEEDS"), reason="PYPTO_PRO_FUZZ_SEEDS=<n> runs n more")
def test_more_random_programs(tmp_path, monkeypatch):
    base = int(time.time())
    for seed in range(base, base + int(os.environ["PYPTO_PRO_FUZZ_SEEDS"])):
        _run(tmp_path, monkeypatch, seed)


# ---- row strips: random runs of the registry's row-local ops (fuse_rows), differential only ----

ROW_TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 512], pl.DT_FP32], y: pl.Tensor[[16, 512], pl.DT_FP32],
           row_in: pl.Tensor[[1, 512], pl.DT_FP32], masks: pl.Tensor[[16, 512], pl.DT_UINT8],
           out: pl.Tensor[[16, 512], pl.DT_FP32], col_out: pl.Tensor[[16, 1], pl.DT_INT32],
           t_out: pl.Tensor[[16, 512], pl.DT_FP32], c_out: pl.Tensor[[16, 1], pl.DT_FP32],
           m_out: pl.Tensor[[16, 512], pl.DT_UINT8], vr: pl.DT_INT32, vc: pl.DT_INT32):
    full = pl.TileType(shape=[16, 512], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    a = pl.make_tile(full, addr=0x0)
    b = pl.make_tile(full, addr=0x8000)
    o = pl.make_tile(full, addr=0x10000)
    t = pl.make_tile(full, addr=0x18000)
    m = pl.make_tile(pl.TileType(shape=[16, 512], dtype=pl.DT_UINT8, valid_shape=[-1, -1]), addr=0x20000)
    col = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.DT_FP32, layout=pl.DN, valid_shape=[-1, -1]), addr=0x22000)
    icol = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.DT_INT32, layout=pl.DN, valid_shape=[-1, -1]), addr=0x22100)
    row = pl.make_tile(pl.TileType(shape=[1, 512], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x22200)
    tmp = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_INT32), addr=0x23000)
    with pl.section_vector():
        pl.set_validshape(a, [vr, vc])
        pl.set_validshape(b, [vr, vc])
        pl.set_validshape(o, [vr, vc])
        pl.set_validshape(t, [vr, vc])
        pl.set_validshape(m, [vr, vc])
        pl.set_validshape(col, [vr, 1])
        pl.set_validshape(icol, [vr, 1])
        pl.set_validshape(row, [1, vc])
        pl.load(row, row_in, [0, 0])
        pl.load(m, masks, [0, 0])
        pl.expands(o, 0.0)
        pl.expands(t, 1.0)
        pl.expands(col, 0.0)
        pl.expands(icol, 0)
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
{RUN}
        pl.store(col_out, icol, [0, 0])
        pl.store(out, o, [0, 0])
        pl.store(t_out, t, [0, 0])
        pl.store(c_out, col, [0, 0])
        pl.store(m_out, m, [0, 0])
'''


def _row_program(seed):
    """A random run: the snippets of 2-4 random fp32 row-local ops (test_fuse_rows' cases), and the
    valid window."""
    from test_fuse_rows import BITWISE, ROW_LOCAL, _run
    rng = random.Random(seed)
    ops = [op for op in ROW_LOCAL if op not in BITWISE and op not in ("cast",)]
    chosen = [rng.choice(ops) for _ in range(rng.randint(2, 4))]
    lines = [line for op in chosen for line in _run(op)]
    return chosen, lines, rng.randint(1, 16), rng.randint(1, 512)


def _run_rows(tmp_path, monkeypatch, seed):
    chosen, lines, vr, vc = _row_program(seed)
    source = ROW_TEMPLATE.replace("{RUN}", "\n".join(" " * 8 + line for line in lines))
    module = module_from_source(tmp_path, f"rfuzz_{seed}", source)
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(16, 512, generator=g).abs() + 0.5, torch.randn(16, 512, generator=g).abs() + 0.5
    row, masks = torch.randn(1, 512, generator=g).abs() + 0.5, torch.randint(0, 2, (16, 512), generator=g,
                                                                            dtype=torch.uint8)
    results = []
    for fuse, tier0 in (("0", "0"), ("1", "0"), ("1", "always")):
        monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
        monkeypatch.setenv("PYPTO_PRO_TIER0", tier0)
        monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
        kernel = pl.jit(module.kernel, name=f"rfuzz_{seed}_{fuse}_{tier0}")
        outs = [torch.full((16, 512), 7.0), torch.full((16, 1), 7, dtype=torch.int32), torch.full((16, 512), 7.0),
                torch.full((16, 1), 7.0), torch.full((16, 512), 7, dtype=torch.uint8)]
        kernel[None, 1](x, y, row, masks, *outs, vr, vc)
        pypto_pro.runtime.synchronize()
        results.append(outs)
        if fuse == "1" and tier0 == "0":
            ir = (Path(kernel.instances()[0].dir) / "ir_7_fuse_rows.txt").read_text()
    for mode, outs in zip(("fused", "tier-0"), results[1:]):
        for name, u, f in zip(("out", "col_out", "t_out", "c_out", "m_out"), results[0], outs):
            assert _same_values(u, f) if u.is_floating_point() else torch.equal(u, f), \
                f"seed {seed} ({' '.join(chosen)}): {name} differs {mode} / unfused\n{source}"
    return ir


ROW_SEEDS = list(range(1, 21))


@pytest.mark.parametrize("seed", ROW_SEEDS)
def test_random_row_strip_runs_give_the_unfused_bytes(tmp_path, monkeypatch, seed):
    ir = _run_rows(tmp_path, monkeypatch, seed)
    assert "for row_strip in range(" in ir, ir  # the run was cut into strips


@pytest.mark.skipif(not os.environ.get("PYPTO_PRO_FUZZ_SEEDS"), reason="PYPTO_PRO_FUZZ_SEEDS=<n> runs n more")
def test_more_random_row_strip_runs(tmp_path, monkeypatch):
    base = int(time.time())
    for seed in range(base, base + int(os.environ["PYPTO_PRO_FUZZ_SEEDS"])):
        _run_rows(tmp_path, monkeypatch, seed)
