"""Random cube programs: each seed writes a kernel that loads random windows of A and B (tails of
fractal tiles through compact=1, at random element offsets into larger tensors) into Mat tiles, moves
them to Left/Right, runs a matmul (with a bias table sometimes) and 0-2 matmul_acc steps along K (in
place, or the last into a second Acc tile), and stores the Acc window at a random offset into a larger
output, converting fp32 to fp16/bf16 sometimes. Each program runs compiled and on the tier-0 executor
(docs/jit.md#tier-0-first-launches): every byte of the output and every fault must agree, outside the
window nothing may be written, and inside it must match torch within the accumulation's and the
store's rounding.
The seeds are fixed; PYPTO_PRO_FUZZ_SEEDS=<n> runs n more, drawn from the clock."""

import os
import random
import time

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import module_from_source, synchronize_fault

TORCH = {"DT_FP16": torch.float16, "DT_BF16": torch.bfloat16, "DT_FP32": torch.float32, "DT_INT8": torch.int8,
         "DT_INT32": torch.int32}

TEMPLATE = '''
import pypto_pro.language as pl
M = pl.MemorySpace

def kernel(a: pl.Tensor[[{AR}, {AC}], pl.{D}], b: pl.Tensor[[{BR}, {BC}], pl.{D}],
           bias_in: pl.Tensor[[1, {TN}], pl.{BD}], c: pl.Tensor[[{CR}, {CC}], pl.{OD}]):
    a_mat = pl.make_tile(pl.TileType(shape=[{TM}, {TK}], dtype=pl.{D}, target_memory=M.Mat, valid_shape=[{m}, {k}],
                                     compact=1), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[{TK}, {TN}], dtype=pl.{D}, target_memory=M.Mat, valid_shape=[{k}, {n}],
                                     compact=1), addr=0x20000)
    left = pl.make_tile(pl.TileType(shape=[{TM}, {TK}], dtype=pl.{D}, target_memory=M.Left, valid_shape=[{m}, {k}],
                                    compact=1), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[{TK}, {TN}], dtype=pl.{D}, target_memory=M.Right, valid_shape=[{k}, {n}],
                                     compact=1), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[{TM}, {TN}], dtype=pl.{ACC}, target_memory=M.Acc, valid_shape=[{m}, {n}],
                                   compact=1), addr=0x0)
    acc2 = pl.make_tile(pl.TileType(shape=[{TM}, {TN}], dtype=pl.{ACC}, target_memory=M.Acc, valid_shape=[{m}, {n}],
                                    compact=1), addr=0x10000)
    bias_mat = pl.make_tile(pl.TileType(shape=[1, {TN}], dtype=pl.{BD}, target_memory=M.Mat), addr=0x40000)
    bias_l0 = pl.make_tile(pl.TileType(shape=[1, {TN}], dtype=pl.{BT}, target_memory=M.Bias), addr=0x0)
    with pl.section_cube():
        for step in pl.range({STEPS}):
            pl.load(a_mat, a, [{AOR}, {AOC} + step * {k}])
            pl.load(b_mat, b, [{BOR} + step * {k}, {BOC}])
            pl.system.bar_all()
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            pl.system.bar_all()
            if step == 0:
{FIRST}
            elif step < {STEPS} - 1 or {IN_PLACE}:
                pl.matmul_acc(acc, acc, left, right)
            else:
                pl.matmul_acc(acc2, acc, left, right)
            pl.system.bar_all()
        pl.store(c, {LAST}, [{COR}, {COC}])
'''

FIRST_PLAIN = "                pl.matmul(acc, left, right)"
FIRST_BIAS = """                pl.load(bias_mat, bias_in, [0, 0])
                pl.system.bar_all()
                pl.move(bias_l0, bias_mat)
                pl.system.bar_all()
                pl.matmul(acc, left, right, bias_l0)"""


class Program:
    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.dtype = rng.choice(["DT_FP16", "DT_BF16", "DT_FP32", "DT_INT8"])
        self.acc = "DT_INT32" if self.dtype == "DT_INT8" else "DT_FP32"
        self.out = self.acc if self.dtype == "DT_INT8" else rng.choice(["DT_FP32", "DT_FP32", "DT_FP16", "DT_BF16"])
        # tiles of 16-multiples (128 at most: 128 x 128 fp32 fills L0A); windows anywhere inside them
        self.TM, self.TK, self.TN = (16 * rng.randint(1, 8) for _ in range(3))
        self.m, self.k, self.n = (rng.choice([t, rng.randint(1, t)]) for t in (self.TM, self.TK, self.TN))
        self.steps = rng.randint(1, 3)
        self.in_place = rng.random() < 0.5
        self.bias = self.dtype != "DT_INT8" and rng.random() < 0.4
        self.aor, self.aoc, self.bor, self.boc, self.cor, self.coc = (rng.randint(0, 20) for _ in range(6))
        self.AR, self.AC = self.aor + self.m + rng.randint(0, 5), self.aoc + self.k * self.steps + rng.randint(0, 5)
        self.BR, self.BC = self.bor + self.k * self.steps + rng.randint(0, 5), self.boc + self.n + rng.randint(0, 5)
        self.CR, self.CC = self.cor + self.m + rng.randint(0, 5), self.coc + self.n + rng.randint(0, 5)
        # a quarter of the programs read or write one window past its tensor's edge: A's or B's on the
        # last step along K or the first, or C's (a tensor keeps one row and column at least: where
        # the window is a single element at offset 0, the program does not fault)
        self.fault = rng.choice([None, None, None, "a_k", "a_m", "b_k", "b_n", "c"])

        def short(needed, by_at_most):
            """A dim 1 to by_at_most smaller than `needed`, at least 1; None when there is none."""
            most = min(by_at_most, needed - 1)
            return needed - rng.randint(1, most) if most >= 1 else None

        dims = {"a_k": ("AC", self.aoc + self.k * self.steps, self.k), "a_m": ("AR", self.aor + self.m, self.m),
                "b_k": ("BR", self.bor + self.k * self.steps, self.k), "b_n": ("BC", self.boc + self.n, self.n),
                "c": rng.choice([("CR", self.cor + self.m, self.m), ("CC", self.coc + self.n, self.n)])}
        if self.fault is not None:
            attr, needed, by = dims[self.fault]
            dim = short(needed, by)
            if dim is None:
                self.fault = None
            else:
                setattr(self, attr, dim)
        self.input_seed = rng.randrange(1 << 30)

    def source(self):
        last = "acc" if self.steps == 1 or self.in_place else "acc2"
        return TEMPLATE.format(
            D=self.dtype, ACC=self.acc, OD=self.out, BD="DT_FP16", BT="DT_FP32", TM=self.TM, TK=self.TK, TN=self.TN,
            m=self.m, k=self.k, n=self.n, STEPS=self.steps, IN_PLACE=self.in_place, AR=self.AR, AC=self.AC,
            BR=self.BR, BC=self.BC, CR=self.CR, CC=self.CC, AOR=self.aor, AOC=self.aoc, BOR=self.bor, BOC=self.boc,
            COR=self.cor, COC=self.coc, FIRST=FIRST_BIAS if self.bias else FIRST_PLAIN, LAST=last)

    def inputs(self):
        gen = torch.Generator().manual_seed(self.input_seed)
        if self.dtype == "DT_INT8":
            a = torch.randint(-128, 128, (self.AR, self.AC), generator=gen, dtype=torch.int8)
            b = torch.randint(-128, 128, (self.BR, self.BC), generator=gen, dtype=torch.int8)
        else:
            a = torch.randn(self.AR, self.AC, generator=gen).to(TORCH[self.dtype])
            b = torch.randn(self.BR, self.BC, generator=gen).to(TORCH[self.dtype])
        bias = torch.randn(1, self.TN, generator=gen).half()
        return a, b, bias

    def reference(self, a, b, bias):
        """The output tensor the program should leave: the exact sum of its steps' products (+ bias),
        converted like the store, inside the window; the sentinel outside."""
        wide = torch.int64 if self.dtype == "DT_INT8" else torch.float64
        total = torch.zeros(self.m, self.n, dtype=wide)
        for s in range(self.steps):
            aw = a[self.aor:self.aor + self.m, self.aoc + s * self.k:self.aoc + (s + 1) * self.k].to(wide)
            bw = b[self.bor + s * self.k:self.bor + (s + 1) * self.k, self.boc:self.boc + self.n].to(wide)
            total += aw @ bw
        if self.bias:
            total += bias[:, :self.n].to(wide)
        c = self.sentinel()
        if self.dtype == "DT_INT8":
            c[self.cor:self.cor + self.m, self.coc:self.coc + self.n] = total.to(torch.int32)  # no wrap here
        else:
            c[self.cor:self.cor + self.m, self.coc:self.coc + self.n] = total.float().to(TORCH[self.out])
        return c

    def fault_line(self, source):
        """The line of the op that faults first, or None."""
        if self.fault is None:
            return None
        text = {"a": "pl.load(a_mat", "b": "pl.load(b_mat", "c": "pl.store(c"}[self.fault[0]]
        return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)

    def sentinel(self):
        return torch.full((self.CR, self.CC), -7, dtype=TORCH[self.out])


def _run(tmp_path, monkeypatch, seed):
    p = Program(seed)
    source = p.source()
    module = module_from_source(tmp_path, f"cube_fuzz_{seed}", source)
    a, b, bias = p.inputs()
    outs = []
    for tier0 in ("0", "always"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", tier0)
        kernel = pl.jit(module.kernel, name=f"cube_fuzz_{seed}_{tier0}")
        c = p.sentinel()
        kernel[None, 1](a, b, bias, c)
        fault = synchronize_fault()
        if tier0 == "always":
            assert kernel.compile_stats()[-1]["tier0"], f"seed {seed}: the tier-0 executor runs these ops\n{source}"
        outs.append((c, fault))
    (compiled, fault), (first, fault_first) = outs
    assert fault == fault_first, f"seed {seed}: fault {fault} compiled, {fault_first} on tier-0\n{source}"
    assert torch.equal(compiled.view(torch.uint8) if compiled.dtype != torch.int32 else compiled,
                       first.view(torch.uint8) if first.dtype != torch.int32 else first), \
        f"seed {seed}: tier-0 and compiled outputs differ\n{source}"
    if p.fault_line(source) is not None:
        assert fault is not None and fault[1] == p.fault_line(source), \
            f"seed {seed}: fault {fault}, expected at line {p.fault_line(source)}\n{source}"
        assert "out of bounds" in fault[2], fault
        assert torch.equal(compiled, p.sentinel()), f"seed {seed}: written before the fault\n{source}"
        return
    assert fault is None, f"seed {seed}: unexpected fault {fault}\n{source}"
    want = p.reference(a, b, bias)
    outside = torch.ones_like(want, dtype=torch.bool)
    outside[p.cor:p.cor + p.m, p.coc:p.coc + p.n] = False
    assert torch.equal(compiled[outside], want[outside]), f"seed {seed}: written outside the window\n{source}"
    if p.dtype == "DT_INT8":
        assert torch.equal(compiled, want), f"seed {seed}\n{source}"
    else:
        # fp32 sums of <= 384 products (fp32 inputs: each product rounded too), then the store's rounding
        tol = {"DT_FP32": 2e-3, "DT_FP16": 2e-2, "DT_BF16": 8e-2}[p.out]
        torch.testing.assert_close(compiled.float(), want.float(), rtol=tol, atol=tol, msg=f"seed {seed}\n{source}")


@pytest.mark.parametrize("seed", range(16))
def test_random_cube_program(tmp_path, monkeypatch, seed):
    _run(tmp_path, monkeypatch, 1000 + seed)


def test_more_random_cube_programs(tmp_path, monkeypatch):
    count = int(os.environ.get("PYPTO_PRO_FUZZ_SEEDS", "0"))
    if count == 0:
        pytest.skip("PYPTO_PRO_FUZZ_SEEDS=<n> runs n programs drawn from the clock")
    base = time.time_ns() % (1 << 40)
    for i in range(count):
        _run(tmp_path, monkeypatch, base + i)
