"""Seeded defects (issue "auto_mutex and the sanitizer"): one kernel per finding kind with the
defect in it, and its clean twin. The defect is reported with its kind at its source line; the twin
reports nothing and computes exactly what the plain kernel computes.

Each kernel factory takes `defect`; the defect lines run only when it is True (a closure constant,
so the other instance does not even contain them). The line a finding names is the line of the
access or synchronisation that is wrong: for a race, the later of the two accesses."""

import warnings
from dataclasses import dataclass, field

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from san_util import findings_of, kinds_and_lines, line_of

ROWS, COLS = 32, 128
TILE = pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)  # 16 KiB
X = pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32]
V, MTE2, MTE3 = pl.PipeType.V, pl.PipeType.MTE2, pl.PipeType.MTE3


def one(tile_type, addr, mutex_id):
    """A tile auto_mutex orders every pipe on: a one-slot group with a mutex id of its own."""
    return pl.make_tile_group(type=tile_type, addrs=addr, mutex_ids=[mutex_id]).current()


def buffer(addr, mutex_id):
    return one(TILE, addr, mutex_id)


# ---- out of bounds ----

def gm_out_of_bounds(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            row = x.shape[0] - ROWS
            if defect:
                row = row + ROWS // 2
            pl.load(t, x, [row, 0])  # DEFECT: the window runs 16 rows past x
            pl.muls(t, t, 2.0)
            pl.store(y, t, [0, 0])
    return kernel


def tile_element_out_of_bounds(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            last = x.shape[0] * COLS - 1  # a run-time offset: x has one tile of rows
            if defect:
                last = last + 1
            pl.setval(t, last, 7.0)  # DEFECT: one element past the tile
            pl.store(y, t, [0, 0])
    return kernel


def valid_shape_out_of_bounds(defect):
    tile_type = pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, valid_shape=[-1, -1])

    def kernel(x: X, y: X):
        t = one(tile_type, 0x0, 0)
        with pl.section_vector():
            rows = x.shape[0]
            if defect:
                rows = rows + 1
            pl.set_validshape(t, [rows, COLS])  # DEFECT: one row more than the tile has
            pl.load(t, x, [0, 0])
            pl.store(y, t, [0, 0])
    return kernel


# ---- tile placement ----

def tiles_overlap(defect):
    b_addr = 0x3000 if defect else 0x4000  # a covers [0, 0x4000)

    def kernel(x: X, y: X):
        a = buffer(0x0, 0)
        b = pl.make_tile_group(type=TILE, addrs=b_addr, mutex_ids=[1]).current()  # DEFECT: b starts inside a
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.muls(b, a, 2.0)
            pl.store(y, b, [0, 0])
    return kernel


def group_slots_overlap(defect):
    second = 0x2000 if defect else 0x4000

    def kernel(x: X, y: X):
        g = pl.make_tile_group(type=TILE, addrs=[0x0, second], mutex_ids=[0, 1])  # DEFECT: slot 1 inside slot 0
        with pl.section_vector():
            for i in pl.range(x.shape[0] // ROWS):
                t = g.next()
                pl.load_tile(t, x, [i, 0])
                pl.muls(t, t, 2.0)
                pl.store_tile(y, t, [i, 0])
    return kernel


# ---- mutexes ----

def unlock_before_lock(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            if not defect:
                pl.system.mutex_lock(pipe=V, mutex_id=5)
            pl.load(t, x, [0, 0])
            pl.muls(t, t, 2.0)
            pl.system.mutex_unlock(pipe=V, mutex_id=5)  # DEFECT: V never locked mutex 5
            pl.store(y, t, [0, 0])
    return kernel


def unpaired_lock(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            pl.system.mutex_lock(pipe=V, mutex_id=5)  # DEFECT: never unlocked
            pl.load(t, x, [0, 0])
            pl.muls(t, t, 2.0)
            if not defect:
                pl.system.mutex_unlock(pipe=V, mutex_id=5)
            pl.store(y, t, [0, 0])
    return kernel


# ---- pipe races ----

def tile_race(defect):
    def kernel(x: X, y: X):
        t = pl.make_tile(TILE, addr=0x0)  # no mutex ids: the kernel orders its pipes by hand
        u = pl.make_tile(TILE, addr=0x4000)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            if not defect:
                pl.system.sync_src(set_pipe=MTE2, wait_pipe=V, event_id=0)
                pl.system.sync_dst(set_pipe=MTE2, wait_pipe=V, event_id=0)
            pl.muls(u, t, 2.0)  # DEFECT: V reads t while MTE2 may still be loading it
            pl.system.sync_src(set_pipe=V, wait_pipe=MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=V, wait_pipe=MTE3, event_id=1)
            pl.store(y, u, [0, 0])
    return kernel


def gm_race(defect):
    def kernel(x: X, y: X, z: X):
        t = buffer(0x0, 0)
        u = buffer(0x4000, 1)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.store(y, t, [0, 0])  # y: a GM workspace
            if not defect:
                pl.system.sync_src(set_pipe=MTE3, wait_pipe=MTE2, event_id=0)
                pl.system.sync_dst(set_pipe=MTE3, wait_pipe=MTE2, event_id=0)
            pl.load(u, y, [0, 0])  # DEFECT: MTE2 reads y while MTE3 may still be storing it
            pl.store(z, u, [0, 0])
    return kernel


MAT16 = pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
LEFT16 = pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left)
RIGHT16 = pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right)
ACC32 = pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc)
HALF32 = pl.TileType(shape=[8, 16], dtype=pl.DT_FP32)
M16 = pl.Tensor[[16, 16], pl.DT_FP16]
M32 = pl.Tensor[[16, 16], pl.DT_FP32]


def cross_core_race(defect):
    def kernel(a: M16, b: M16, ws: M32, out: M32):
        a_mat, b_mat = one(MAT16, 0x0, 0), one(MAT16, 0x200, 1)
        left, right, acc = one(LEFT16, 0x0, 2), one(RIGHT16, 0x0, 3), one(ACC32, 0x0, 4)
        half = one(HALF32, 0x0, 5)
        with pl.section_cube():
            pl.load(a_mat, a, [0, 0])
            pl.load(b_mat, b, [0, 0])
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            pl.matmul(acc, left, right)
            pl.store(ws, acc, [0, 0])
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)  # WAITED: the vector cores' signal
        with pl.section_vector():
            if not defect:
                pl.system.wait_cross_core(pipe=MTE2, event_id=0)
            row = pl.get_subblock_idx() * 8
            pl.load(half, ws, [row, 0])  # DEFECT: reads ws before the cube core is known to have written it
            pl.store(out, half, [row, 0])
    return kernel


# ---- flags ----

def flag_never_waited(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.system.sync_src(set_pipe=MTE2, wait_pipe=V, event_id=3)  # DEFECT: nobody waits for it
            if not defect:
                pl.system.sync_dst(set_pipe=MTE2, wait_pipe=V, event_id=3)
            pl.muls(t, t, 2.0)
            pl.store(y, t, [0, 0])
    return kernel


def flag_never_set(defect):
    def kernel(x: X, y: X):
        t = buffer(0x0, 0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            if not defect:
                pl.system.sync_src(set_pipe=MTE2, wait_pipe=V, event_id=3)
            pl.system.sync_dst(set_pipe=MTE2, wait_pipe=V, event_id=3)  # DEFECT: waits for a flag never set
            pl.muls(t, t, 2.0)
            pl.store(y, t, [0, 0])
    return kernel


# ---- the cases ----

def xy(rows=ROWS, outputs=1):
    """Launch arguments x [rows, COLS] and `outputs` zeroed [ROWS, COLS] tensors."""
    gen = torch.Generator().manual_seed(rows)
    return [torch.randn(rows, COLS, generator=gen)] + [torch.zeros(ROWS, COLS) for _ in range(outputs)]


def matrices():
    gen = torch.Generator().manual_seed(16)
    a, b = (torch.randn(16, 16, generator=gen).half() for _ in range(2))
    return [a, b, torch.zeros(16, 16), torch.zeros(16, 16)]


@dataclass
class Case:
    name: str
    make: object                 # make(defect) -> the kernel function
    expected: list               # (kind, text of the line it is reported at) of the defect instance
    args: object = xy            # () -> launch arguments; outputs are every argument after the first
    block_dim: int = 1
    outputs: list = field(default_factory=lambda: [1])  # indices of the output arguments


CASES = [
    Case("gm_out_of_bounds", gm_out_of_bounds, [("GM_OUT_OF_BOUNDS", "# DEFECT")], lambda: xy(2 * ROWS)),
    Case("tile_element_out_of_bounds", tile_element_out_of_bounds, [("TILE_OUT_OF_BOUNDS", "# DEFECT")]),
    Case("valid_shape_out_of_bounds", valid_shape_out_of_bounds, [("TILE_OUT_OF_BOUNDS", "# DEFECT")]),
    Case("tiles_overlap", tiles_overlap, [("TILE_OVERLAP", "# DEFECT")]),
    Case("group_slots_overlap", group_slots_overlap, [("TILE_OVERLAP", "# DEFECT")]),
    Case("unlock_before_lock", unlock_before_lock, [("MUTEX_UNLOCK_BEFORE_LOCK", "# DEFECT")]),
    Case("unpaired_lock", unpaired_lock, [("UNPAIRED_MUTEX_LOCK", "# DEFECT")]),
    Case("tile_race", tile_race, [("PIPE_RACE", "# DEFECT")]),
    Case("gm_race", gm_race, [("PIPE_RACE", "# DEFECT")], lambda: xy(outputs=2), outputs=[1, 2]),
    Case("cross_core_race", cross_core_race, [("PIPE_RACE", "# DEFECT"), ("FLAG_NEVER_WAITED", "# WAITED")],
         matrices, outputs=[3]),
    Case("flag_never_waited", flag_never_waited, [("FLAG_NEVER_WAITED", "# DEFECT")]),
    Case("flag_never_set", flag_never_set, [("FLAG_NEVER_SET", "# DEFECT")]),
]


def run(kernel, case):
    """(findings, outputs) of one launch of `kernel` on the case's arguments."""
    args = case.args()
    findings = findings_of(lambda: kernel[None, case.block_dim](*args))
    return findings, [args[i] for i in case.outputs]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_seeded_defect_is_reported_with_its_kind_at_its_line(case):
    fn = case.make(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        findings, _ = run(pl.jit(fn, sanitizer=True, name=f"seeded_{case.name}"), case)
    assert kinds_and_lines(findings) == sorted((kind, line_of(fn, text)) for kind, text in case.expected), findings
    # Tiles placed over each other are already a compile-time warning at the later declaration.
    overlaps = [(w.filename, w.lineno) for w in caught if issubclass(w.category, pypto_pro.TileOverlapWarning)]
    static = [line_of(fn, text) for kind, text in case.expected if kind == "TILE_OVERLAP"]
    assert overlaps == [(fn.__code__.co_filename, line) for line in static], overlaps
    for f in findings:
        assert f.message and f.hint and f.hits >= 1
        assert f.kernel == f"seeded_{case.name}" and f.file.endswith("test_seeded_defects.py")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_clean_twin_reports_nothing_and_computes_like_the_plain_kernel(case):
    fn = case.make(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto_pro.TileOverlapWarning)
        findings, sanitized = run(pl.jit(fn, sanitizer=True, name=f"twin_{case.name}"), case)
    assert findings == []
    plain_findings, plain = run(pl.jit(fn, name=f"plain_{case.name}"), case)
    assert plain_findings == []
    for got, want in zip(sanitized, plain):
        assert torch.equal(got, want)
