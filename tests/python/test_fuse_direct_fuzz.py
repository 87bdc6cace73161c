"""Random programs against the direct runs (docs/device.md#direct-runs): each seed writes a vector
kernel whose loop loads four tiles from two tensors at random windows, computes 1-6 random
element-wise ops over them and stores 1-3 of them, into an output or in place into a tensor it
also loads (windows shifted, overlapping or apart), on full or run-time windows, sometimes with tiles
that share bytes, a later statement that reads a tile of the run, or a window past the tensor's edge
(a fault). It runs fused (the default), unfused (PYPTO_PRO_FUSE_ROWS=0) and on the tier-0 executor
and compares every byte of GM and the fault (op, line, message), and GM with a torch model of the
statements in program order. 30 fixed programs; PYPTO_PRO_FUZZ_SEEDS=<n> runs n more. Its finding: a
run whose second store faulted skipped the first store's GM writes (now checked without faulting)."""

import os
import random
import time

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import module_from_source, synchronize_fault
from test_fuse_direct import BINARY, NO_BF16, SCALAR, TORCH_DTYPE, UNARY
from test_fuse_fuzz import SHORT, UNARY_MODEL, _binary, _same_values

ROWS = 64
TILES = ("t0", "t1", "t2", "t3")
# (Tiles sharing bytes are the point of some programs.)
pytestmark = pytest.mark.filterwarnings("ignore::pypto_pro.TileOverlapWarning")

HEADER = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[{R}, {C}], pl.{D}], w: pl.Tensor[[{R}, {C}], pl.{D}], y: pl.Tensor[[{R}, {C}], pl.{D}],
           rows: pl.DT_INT32, cols: pl.DT_INT32):
    tt = pl.TileType(shape=[{T}, {TC}], dtype=pl.{D}{VALID})
{DECLS}
    with pl.section_vector():
        for i in pl.range({N}):
'''


class Program:
    """One random kernel: windows, statements (text, model) and the line of each statement."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.dtype = rng.choice(["DT_FP32"] * 3 + ["DT_FP16", "DT_BF16"])
        self.C = rng.choice([64, 128, 200])
        self.T, self.TC = rng.choice([8, 16]), rng.choice([c for c in (16, 48, 64, 128) if c <= self.C])
        self.iters = rng.randint(1, 3)
        self.dynamic = rng.random() < 0.3  # run-time valid windows (rows, cols), the same for every tile
        self.rows = rng.randint(1, self.T) if self.dynamic else self.T
        self.cols = rng.randint(1, self.TC) if self.dynamic else self.TC
        # Tiles: each its own bytes, or now and then two sharing theirs (no direct run may skip them).
        self.shared = rng.random() < 0.25
        self.stmts = []  # (text, model step)
        row_step = rng.choice([self.T, self.T // 2])
        for t in TILES:
            self.stmts.append(self._load(rng, t, row_step))
        live = list(TILES)
        for _ in range(rng.randint(1, 6)):
            self.stmts.append(self._op(rng, live))
        for _ in range(rng.randint(1, 3)):
            self.stmts.append(self._store(rng, rng.choice(TILES), row_step))
        if rng.random() < 0.3:  # a later statement reads a tile the run computed
            t = rng.choice(TILES)
            self.stmts.append((f"pl.adds({t}, {t}, 0.5)", ("scalar", "adds", t, t, 0.5)))
            self.stmts.append(self._store(rng, t, row_step))

    def _window(self, rng, row_step):
        """Row and column offsets of a window at iteration i: (expression, function of i)."""
        dr = rng.choice([0, 0, 0, 1, -1, self.T // 2, 3])
        col = rng.choice(range(0, self.C - self.TC + 1, 16)) if self.C > self.TC else 0
        if rng.random() < 0.08:  # past the edge: a fault
            if rng.random() < 0.5:
                dr = ROWS  # past the last row
            else:
                col = self.C - self.TC + 16 if self.TC < self.C else 16
        return f"[i * {row_step} + {dr}, {col}]", (row_step, dr, col)

    def _load(self, rng, tile, row_step):
        src = rng.choice(["x", "w"])
        text, where = self._window(rng, row_step)
        return f"pl.load({tile}, {src}, {text})", ("load", tile, src, where)

    def _store(self, rng, tile, row_step):
        dst = rng.choice(["w", "y", "y"])
        text, where = self._window(rng, row_step)
        return f"pl.store({dst}, {tile}, {text})", ("store", tile, dst, where)

    def _op(self, rng, live):
        dst, a, b = rng.choice(live), rng.choice(live), rng.choice(live)
        if self.shared:  # no op between the two tiles sharing bytes: partly overlapping operands
            a, b = (dst if {dst, a} == {"t2", "t3"} else a), (dst if {dst, b} == {"t2", "t3"} else b)
        kind = rng.choice(["binary"] * 3 + ["scalar", "unary"])
        if kind == "binary":
            name = rng.choice(BINARY)
            return f"pl.{name}({dst}, {a}, {b})", ("binary", name, dst, a, b)
        if kind == "scalar":
            name, s = rng.choice(SCALAR), rng.choice([1.5, -0.75, 3.0])
            return f"pl.{name}({dst}, {a}, {s!r})", ("scalar", name, dst, a, s)
        name = rng.choice([u for u in UNARY if not (self.dtype == "DT_BF16" and u in NO_BF16)])
        return f"pl.{name}({dst}, {a})", ("unary", name, dst, a)

    def source(self):
        size = self.T * self.TC * {"DT_FP32": 4, "DT_FP16": 2, "DT_BF16": 2}[self.dtype]
        addrs = [k * size for k in range(4)]
        if self.shared:
            addrs[3] = addrs[2] + size // 2  # t3 shares half of t2's bytes
        decls = "\n".join(f"    {t} = pl.make_tile(tt, addr={a:#x})" for t, a in zip(TILES, addrs))
        valid = ", valid_shape=[-1, -1]" if self.dynamic else ""
        head = HEADER.format(R=ROWS, C=self.C, D=self.dtype, T=self.T, TC=self.TC, VALID=valid, DECLS=decls,
                             N=self.iters)
        body = []
        if self.dynamic:
            body += [f"            pl.set_validshape({t}, [rows, cols])" for t in TILES]
        first = head.count("\n") + len(body) + 1  # the line of the first statement
        self.lines = [first + k for k in range(len(self.stmts))]
        body += ["            " + text for text, _ in self.stmts]
        return head + "\n".join(body) + "\n"

    def inputs(self):
        g = torch.Generator().manual_seed(self.seed)
        cast = TORCH_DTYPE[self.dtype]
        return [(torch.randn(ROWS, self.C, generator=g) * 2).to(cast) for _ in range(3)]

    def model(self, x, w, y):
        """GM after the statements in program order, and the index of the faulting statement (or None).
        A fault stops the launch before its statement writes anything."""
        cast = TORCH_DTYPE[self.dtype]
        gm = {"x": x.clone(), "w": w.clone(), "y": y.clone()}
        size = self.T * self.TC * (4 if self.dtype == "DT_FP32" else 2)
        tiles = {t: torch.zeros(self.T, self.TC).to(cast) for t in TILES}
        r, c = self.rows, self.cols
        for i in range(self.iters):
            for k, (_, step) in enumerate(self.stmts):
                kind = step[0]
                if kind in ("load", "store"):
                    row_step, dr, col = step[3]
                    r0 = i * row_step + dr
                    if r0 < 0 or r0 + r > ROWS or col + c > self.C:
                        return gm, k
                    if kind == "load":
                        tiles[step[1]][:r, :c] = gm[step[2]][r0:r0 + r, col:col + c]
                        if self.shared and step[1] in ("t2", "t3"):
                            self._alias(tiles, step[1], size)
                    else:
                        gm[step[2]][r0:r0 + r, col:col + c] = tiles[step[1]][:r, :c]
                    continue
                dst, a = step[2], tiles[step[3]][:r, :c].float()
                if kind == "binary":
                    v = _binary(SHORT.get(step[1], step[1]), a, tiles[step[4]][:r, :c].float())
                elif kind == "scalar":
                    v = _binary(SHORT[step[1]], a, torch.tensor(step[4]).to(cast).float().expand_as(a))
                else:
                    v = UNARY_MODEL[step[1]](a)
                tiles[dst][:r, :c] = v.to(cast)
                if self.shared and dst in ("t2", "t3"):  # t3's first half of rows is t2's second half
                    self._alias(tiles, dst, size)
        return gm, None

    def _alias(self, tiles, written, size):
        """t3 starts half of t2's bytes in: rows [T/2, T) of t2 are rows [0, T/2) of t3."""
        half = self.T // 2
        if written == "t2":
            tiles["t3"][:half] = tiles["t2"][half:]
        else:
            tiles["t2"][half:] = tiles["t3"][:half]


def _run(tmp_path, monkeypatch, seed):
    p = Program(seed)
    source = p.source()
    module = module_from_source(tmp_path, f"dfuzz_{seed}", source)
    x, w0, y0 = p.inputs()
    results = []
    for mode, (fuse, tier0) in {"unfused": ("0", "0"), "fused": ("1", "0"), "tier-0": ("1", "always")}.items():
        monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
        monkeypatch.setenv("PYPTO_PRO_TIER0", tier0)
        kernel = pl.jit(module.kernel, name=f"dfuzz_{seed}_{mode.replace('-', '')}")
        w, y = w0.clone(), y0.clone()
        kernel[None, 1](x, w, y, p.rows, p.cols)
        fault = synchronize_fault()
        results.append((mode, w, y, fault))
    (_, w_u, y_u, fault_u) = results[0]
    for mode, w, y, fault in results[1:]:
        assert _same_values(w, w_u) and _same_values(y, y_u), f"seed {seed}: GM differs {mode} / unfused\n{source}"
        assert fault == fault_u, f"seed {seed}: fault {fault} {mode}, {fault_u} unfused\n{source}"
    gm, k = p.model(x, w0, y0)
    if k is None:
        assert fault_u is None, f"seed {seed}: unexpected fault {fault_u}\n{source}"
    else:
        assert fault_u is not None and fault_u[1] == p.lines[k], f"seed {seed}: fault {fault_u}, model line {p.lines[k]}\n{source}"
        assert "out of bounds" in fault_u[2], fault_u
    tol = {"DT_FP32": 2e-5, "DT_FP16": 4e-3, "DT_BF16": 3e-2}[p.dtype]
    for name, got in (("w", w_u), ("y", y_u)):
        torch.testing.assert_close(got.float(), gm[name].float(), rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m, n=name: f"seed {seed}: {n} vs the model: {m}\n{source}")


SEEDS = list(range(1, 31))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_direct_runs_give_the_statements_bytes_and_faults(tmp_path, monkeypatch, seed):
    _run(tmp_path, monkeypatch, seed)


def test_the_seeds_cover_the_cases():
    """Between them the fixed programs fault, share bytes, take run-time windows, store in place and
    read a tile of the run later."""
    programs = [Program(s) for s in SEEDS]
    for p in programs:
        p.source()
    faults = [p.model(*p.inputs())[1] is not None for p in programs]
    assert sum(faults) >= 3 and sum(p.shared for p in programs) >= 3 and sum(p.dynamic for p in programs) >= 3
    assert any(step[0] == "store" and step[2] == "w" for p in programs for _, step in p.stmts)
    assert any(text.startswith("pl.adds") and step[3] == step[2] for p in programs for text, step in p.stmts)


@pytest.mark.skipif(not os.environ.get("PYPTO_PRO_FUZZ_SEEDS"), reason="PYPTO_PRO_FUZZ_SEEDS=<n> runs n more")
def test_more_random_direct_runs(tmp_path, monkeypatch):
    base = int(time.time())
    for seed in range(base, base + int(os.environ["PYPTO_PRO_FUZZ_SEEDS"])):
        _run(tmp_path, monkeypatch, seed)
