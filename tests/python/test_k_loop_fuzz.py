"""Random K loops (docs/device.md#k-loops): each seed writes the benchmarks' K-loop kernel (tile groups,
in-place loads, forwarded moves, matmul then matmul_acc over `steps` k tiles) with random tile shapes,
dtypes, step counts, an output grid of 1-3 x 1-3 tiles over larger tensors, and a random store of the
accumulator after the loop: store_tile, store at element offsets, store_tile with relu, into fp32 /
int32 or converting to fp16 / bf16. Some programs fault (A or B one step short, C one tile short), some
hold values one GEMM cannot take (bf16 products below 2^-103, an fp16 infinity): their loops run as
written. Each program runs compiled without the fusion passes, with them, and on the tier-0 executor
where it covers the program: every byte of the output and every fault must agree, and the output must
match torch within the accumulation's and the store's rounding.
The seeds are fixed; PYPTO_PRO_FUZZ_SEEDS=<n> runs n more, drawn from the clock."""

import os
import random
import time
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import module_from_source, synchronize_fault

TORCH = {"DT_FP16": torch.float16, "DT_BF16": torch.bfloat16, "DT_FP32": torch.float32, "DT_INT8": torch.int8,
         "DT_INT32": torch.int32}
SIZE = {"DT_FP16": 2, "DT_BF16": 2, "DT_INT8": 1}

TEMPLATE = '''
import pypto_pro.language as pl
M = pl.MemorySpace

def kernel(a: pl.Tensor[[{AR}, {AC}], pl.{D}], b: pl.Tensor[[{BR}, {BC}], pl.{D}], c: pl.Tensor[[{CR}, {CC}], pl.{OD}]):
    a_mat = pl.make_tile_group(type=pl.TileType(shape=[{TM}, {TK}], dtype=pl.{D}, target_memory=M.Mat),
                               addrs=0x0, mutex_ids=[0, 1])
    b_mat = pl.make_tile_group(type=pl.TileType(shape=[{TK}, {TN}], dtype=pl.{D}, target_memory=M.Mat),
                               addrs=0x20000, mutex_ids=[2, 3])
    left = pl.make_tile_group(type=pl.TileType(shape=[{TM}, {TK}], dtype=pl.{D}, target_memory=M.Left),
                              addrs=0x0, mutex_ids=[4, 5])
    right = pl.make_tile_group(type=pl.TileType(shape=[{TK}, {TN}], dtype=pl.{D}, target_memory=M.Right),
                               addrs=0x0, mutex_ids=[6, 7])
    acc = pl.make_tile(pl.TileType(shape=[{TM}, {TN}], dtype=pl.{ACC}, target_memory=M.Acc), addr=0)
    with pl.section_cube():
        col_tiles = {CT}
        for t in pl.range(pl.get_block_idx(), {RT} * col_tiles, pl.get_block_num()):
            i = t // col_tiles
            j = t % col_tiles
            for kk in pl.range({STEPS}):
                ta, tb, tl, tr = a_mat.next(), b_mat.next(), left.next(), right.next()
                pl.load_tile(ta, a, [i, kk])
                pl.load_tile(tb, b, [kk, j])
                pl.move(tl, ta)
                pl.move(tr, tb)
                if kk == 0:
                    pl.matmul(acc, tl, tr)
                else:
                    pl.matmul_acc(acc, acc, tl, tr)
            {STORE}
'''

STORES = {"tile": "pl.store_tile(c, acc, [i, j])",
          "elements": "pl.store(c, acc, [i * {TM} + {COR}, j * {TN} + {COC}])",
          "relu": "pl.store_tile(c, acc, [i, j], relu_pre_mode=pl.ReluPreMode.NormalRelu)"}


class Program:
    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.dtype = rng.choice(["DT_BF16", "DT_BF16", "DT_FP16", "DT_INT8"])
        self.acc = "DT_INT32" if self.dtype == "DT_INT8" else "DT_FP32"
        self.out = self.acc if self.dtype == "DT_INT8" else rng.choice(["DT_FP32"] * 3 + ["DT_FP16", "DT_BF16"])
        size = SIZE[self.dtype]
        # whole 32 x 32 blocks mostly (the one GEMM's condition), 16-row or -column tiles sometimes
        self.TM, self.TN = (rng.choice([16, 32, 64, 64, 128, 128, 128]) for _ in range(2))
        ks = {"DT_BF16": [32, 64, 128], "DT_FP16": [16, 32, 64, 128], "DT_INT8": [64, 128, 256]}[self.dtype]
        # two slots of each L0 group in its 64 KiB
        self.TK = rng.choice([k for k in ks if max(self.TM, self.TN) * k * size <= 32768])
        self.steps = rng.choice([1, 2, 2, 3, 4, 5])
        self.RT, self.CT = rng.randint(1, 3), rng.randint(1, 3)
        self.store = rng.choice(["tile"] * 3 + ["elements"] * 2 + ["relu"])
        self.cor, self.coc = (rng.randint(0, 20), rng.randint(0, 20)) if self.store == "elements" else (0, 0)
        self.AR, self.AC = self.RT * self.TM + rng.randint(0, 9), self.steps * self.TK + rng.randint(0, 9)
        self.BR, self.BC = self.steps * self.TK + rng.randint(0, 9), self.CT * self.TN + rng.randint(0, 9)
        self.CR = self.cor + self.RT * self.TM + rng.randint(0, 9)
        self.CC = self.coc + self.CT * self.TN + rng.randint(0, 9)
        # a fault: A's or B's last k tile past its tensor (the load of the last step), or C's last row of
        # tiles (its stores); one block then, so that the tiles before the fault are the same ones
        self.fault = rng.choice([None] * 6 + ["a", "b", "c"])
        if self.fault == "a":
            self.AC = self.steps * self.TK - rng.randint(1, self.TK)
        elif self.fault == "b":
            self.BR = self.steps * self.TK - rng.randint(1, self.TK)
        elif self.fault == "c":
            self.CR = self.cor + self.RT * self.TM - rng.randint(1, self.TM)
        self.block_dim = 1 if self.fault else rng.randint(1, 4)
        # values one GEMM cannot give the steps' bits for: bf16 products near 2^-110, an fp16 infinity
        self.special = rng.random() < 0.2 and self.dtype != "DT_INT8"
        self.input_seed = rng.randrange(1 << 30)

    def source(self):
        store = STORES[self.store].format(TM=self.TM, TN=self.TN, COR=self.cor, COC=self.coc)
        return TEMPLATE.format(D=self.dtype, ACC=self.acc, OD=self.out, TM=self.TM, TK=self.TK, TN=self.TN,
                               RT=self.RT, CT=self.CT, STEPS=self.steps, AR=self.AR, AC=self.AC, BR=self.BR,
                               BC=self.BC, CR=self.CR, CC=self.CC, STORE=store)

    def inputs(self):
        gen = torch.Generator().manual_seed(self.input_seed)
        if self.dtype == "DT_INT8":
            return (torch.randint(-128, 128, (self.AR, self.AC), generator=gen, dtype=torch.int8),
                    torch.randint(-128, 128, (self.BR, self.BC), generator=gen, dtype=torch.int8))
        a = torch.randn(self.AR, self.AC, generator=gen)
        b = torch.randn(self.BR, self.BC, generator=gen)
        if self.special and self.dtype == "DT_BF16":
            a, b = a * 2.0 ** -55, b * 2.0 ** -55
        a, b = a.to(TORCH[self.dtype]), b.to(TORCH[self.dtype])
        if self.special and self.dtype == "DT_FP16":
            a[0, min(3, self.AC - 1)] = float("inf")
        return a, b

    def scale(self):
        """What the outputs are divided by before they are compared with torch."""
        return 2.0 ** -110 if self.special and self.dtype == "DT_BF16" else 1.0

    def reference(self, a, b):
        """The output tensor: each tile's exact sum over the steps (relu'd, converted like the store)
        in its window, the sentinel outside."""
        wide = torch.int64 if self.dtype == "DT_INT8" else torch.float64
        c = self.sentinel()
        for i in range(self.RT):
            for j in range(self.CT):
                rows, cols = slice(i * self.TM, (i + 1) * self.TM), slice(j * self.TN, (j + 1) * self.TN)
                total = a[rows, :self.steps * self.TK].to(wide) @ b[:self.steps * self.TK, cols].to(wide)
                if self.store == "relu":
                    total = total.clamp(min=0)
                window = c[self.cor + i * self.TM:self.cor + (i + 1) * self.TM,
                           self.coc + j * self.TN:self.coc + (j + 1) * self.TN]
                window.copy_(total.to(torch.int32) if self.dtype == "DT_INT8" else total.float().to(TORCH[self.out]))
        return c

    def sentinel(self):
        return torch.full((self.CR, self.CC), -7, dtype=TORCH[self.out])


def _bytes(t):
    return t.view(torch.uint8) if t.dtype != torch.int32 else t


def _run(tmp_path, monkeypatch, seed):
    p = Program(seed)
    source = p.source()
    module = module_from_source(tmp_path, f"k_loop_fuzz_{seed}", source)
    a, b = p.inputs()
    runs = {}
    for fuse, tier0 in (("0", "0"), ("1", "0"), ("1", "always")):
        monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
        monkeypatch.setenv("PYPTO_PRO_TIER0", tier0)
        kernel = pl.jit(module.kernel, name=f"k_loop_fuzz_{seed}_{fuse}_{tier0}")
        c = p.sentinel()
        kernel[None, p.block_dim](a, b, c)
        fault = synchronize_fault()
        if tier0 == "always" and not kernel.compile_stats()[-1]["tier0"]:
            continue  # a program the tier-0 executor does not cover waited for its library
        runs[(fuse, tier0)] = (c, fault)
        if (fuse, tier0) == ("1", "0"):
            code = (Path(kernel.instances()[0].dir) / "kernel.cpp").read_text()
            assert "pto::k_loop_matmul" in code, f"seed {seed}: the K loop is not marked\n{source}"
            joined = "k_loop_matmul_store" in code
            assert joined == (p.store != "relu"), f"seed {seed}: the store {'is' if joined else 'is not'} joined"
    unfused, unfused_fault = runs.pop(("0", "0"))
    for (fuse, tier0), (c, fault) in runs.items():
        assert fault == unfused_fault, f"seed {seed}: fault {fault} ({fuse}, {tier0}), {unfused_fault} unfused\n{source}"
        assert torch.equal(_bytes(c), _bytes(unfused)), f"seed {seed}: ({fuse}, {tier0}) differs from unfused\n{source}"
    if p.fault:
        assert unfused_fault is not None and "out of bounds" in unfused_fault[2], f"seed {seed}: {unfused_fault}"
        return
    assert unfused_fault is None, f"seed {seed}: unexpected fault {unfused_fault}\n{source}"
    want = p.reference(a, b)
    if p.dtype == "DT_INT8":
        assert torch.equal(unfused, want), f"seed {seed}\n{source}"
        return
    got, want = unfused.double() / p.scale(), want.double() / p.scale()
    if p.special and p.dtype == "DT_FP16":  # row 0 holds inf x B: compare where the sums are finite
        finite = want.isfinite()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~finite], want[~finite]), f"seed {seed}"
        got, want = got[finite], want[finite]
    tol = {"DT_FP32": 1e-3, "DT_FP16": 2e-2, "DT_BF16": 8e-2}[p.out]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * (p.steps * p.TK) ** 0.5, msg=f"seed {seed}\n{source}")


@pytest.mark.parametrize("seed", range(32))
def test_random_k_loop(tmp_path, monkeypatch, seed):
    _run(tmp_path, monkeypatch, 2000 + seed)


def test_more_random_k_loops(tmp_path, monkeypatch):
    count = int(os.environ.get("PYPTO_PRO_FUZZ_SEEDS", "0"))
    if not count:
        pytest.skip("PYPTO_PRO_FUZZ_SEEDS=<n> runs n programs drawn from the clock")
    base = int(time.time())
    for seed in range(base, base + count):
        _run(tmp_path, monkeypatch, seed)
