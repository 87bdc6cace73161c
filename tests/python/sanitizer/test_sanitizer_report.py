"""What sanitizer mode produces besides the findings themselves: the report file (a section per launch),
SanitizerError and its findings, hits collapsed per (kind, line) over blocks, and a sanitized kernel
being an instance of its own that leaves the plain one untouched."""

import re

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from san_util import findings_of, line_of

V, MTE2 = pl.PipeType.V, pl.PipeType.MTE2
TILE = pl.TileType(shape=[32, 128], dtype=pl.DT_FP32)


def racy_scale(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
    t = pl.make_tile(TILE, addr=0x0)
    u = pl.make_tile(TILE, addr=0x4000)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 32, pl.get_block_num()):
            pl.load_tile(t, x, [i, 0])
            pl.muls(u, t, 2.0)  # RACE: nothing orders MTE2's load before V
            pl.system.sync_src(set_pipe=V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store_tile(y, u, [i, 0])
            pl.system.bar_all()


@pytest.fixture(scope="module")
def racy():
    return pl.jit(racy_scale, sanitizer=True)


def compiled(kernel):
    """The kernel's instance, compiled here unless an earlier test did (pytest -n may run any test alone)."""
    if not kernel.instances():
        findings_of(lambda: launch(kernel))
    return kernel.instances()[0]


def launch(kernel, rows=128, block_dim=4):
    x = torch.randn(rows, 128)
    y = torch.zeros_like(x)
    kernel[None, block_dim](x, y)
    return x, y


def test_findings_collapse_per_line_and_count_every_hit(racy):
    findings = findings_of(lambda: launch(racy, rows=32 * 8, block_dim=4))  # 4 blocks x 2 row tiles
    assert len(findings) == 1
    (f,) = findings
    assert (f.kind, f.line, f.hits) == ("PIPE_RACE", line_of(racy_scale, "# RACE"), 8)
    assert f.block == 0 and f.core == "AIV 0" and f.kernel == "racy_scale"
    assert f.message.startswith("read-after-write: V reads tile 't' (Vec bytes [0x0, 0x4000)) that MTE2 wrote at "
                                f"line {line_of(racy_scale, 'pl.load_tile(t, x')}")
    assert f.hint == "order the two pipes with pl.system.sync_src/sync_dst, a TileGroup mutex (auto_mutex) or a barrier"


def test_sanitizer_error(racy):
    launch(racy)
    with pytest.raises(pypto_pro.SanitizerError) as info:
        pypto_pro.runtime.synchronize()
    error = info.value
    assert isinstance(error, pypto_pro.KernelFault)
    assert error.kernel == "racy_scale" and error.source_file.endswith("test_sanitizer_report.py")
    assert (error.line, error.core, error.block) == (error.findings[0].line, "AIV 0", 0)
    assert str(error).startswith("kernel 'racy_scale': the sanitizer found 1 issue(s) (report: ")
    assert f"  PIPE_RACE: read-after-write: V reads tile 't'" in str(error)
    assert error.report == str(racy.instances()[0].sanitizer_report)
    # The error cleared with the synchronisation: the stream is usable.
    pypto_pro.runtime.synchronize()


def test_report_has_a_section_per_launch(racy):
    report = compiled(racy).sanitizer_report
    assert report.name == "pypto_sanitizer_report.txt"
    before = report.read_text() if report.exists() else ""
    findings_of(lambda: launch(racy))
    findings_of(lambda: launch(racy))
    added = report.read_text()[len(before):]
    header = f"===== kernel 'racy_scale' ({report.parent}) =====\n"  # the instance directory
    assert report.parent.samefile(racy.instances()[0].dir)
    assert added.count(header) == 2
    section = added[len(header):added.index(header, 1)]
    lines = section.splitlines()
    assert lines[0] == "PyPTO Sanitizer: 1 issue(s) detected"
    assert re.fullmatch(r"\[1/1\] PIPE_RACE: read-after-write: .* \(4 hits, first on AIV 0 of block 0\) at "
                        rf"{re.escape(racy_scale.__code__.co_filename)}:{line_of(racy_scale, '# RACE')}", lines[1])
    assert lines[2] == "    Hint: order the two pipes with pl.system.sync_src/sync_dst, a TileGroup mutex (auto_mutex) " \
                       "or a barrier"
    assert len(lines) == 3


def test_a_sanitized_kernel_is_an_instance_of_its_own(racy):
    compiled(racy)
    plain = pl.jit(racy_scale)
    x, y = launch(plain)
    pypto_pro.runtime.synchronize()  # the plain kernel runs each core in order: no error, right numbers
    assert torch.equal(y, 2 * x)
    plain_dir, checked_dir = plain.instances()[0].dir, racy.instances()[0].dir
    assert plain_dir.parent.name == "racy_scale__a5" and checked_dir.parent.name == "racy_scale__a5__sanitizer"
    assert plain.instances()[0].sanitizer_report is None
    assert not (plain_dir / "pypto_sanitizer_report.txt").exists()
    plain_code = (plain_dir / "kernel.cpp").read_text()
    checked_code = (checked_dir / "kernel.cpp").read_text()
    assert "pto::san" not in plain_code and "sanitizer.h" not in plain_code
    assert '#include "pypto_pro/sanitizer.h"' in checked_code
    assert "pto::san::CoreScope sanitizer(ctx, raw_args, " in checked_code
    muls = line_of(racy_scale, "# RACE")
    # Every operand in the window the op's registry entry gives it: reads first, then writes.
    assert (f"if (pto::san::Op(ctx, {muls}, pto::kPipeV, {{pto::san::Rect(*v_t, pto::san::kRead, 0, 0, (*v_u).valid_rows, "
            f"(*v_u).valid_cols, \"muls\", \"t\"), pto::san::Rect(*v_u, pto::san::kWrite, 0, 0, ") in checked_code
    assert f"pto::san::Sync(ctx, {muls + 1}, PTO_SAN_FLAG_SET, pto::kPipeV, pto::kPipeMTE3, 0)" in checked_code
    assert "pto::san::Sync(ctx, " in checked_code and "PTO_SAN_BARRIER, pto::kPipeALL" in checked_code


@pl.jit(sanitizer=True)
def asserting(x: pl.Tensor[[32, 128], pl.DT_FP32], limit: pl.DT_INT32):
    with pl.section_vector():
        pl.pto_assert(limit > 0, "limit must be positive, got %d", limit)


def test_faults_of_a_sanitized_kernel_stay_kernel_faults(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_ASSERT", "raise")
    asserting[None, 1](torch.zeros(32, 128), 0)
    with pytest.raises(pypto_pro.KernelFault, match="limit must be positive, got 0") as info:
        pypto_pro.runtime.synchronize()
    assert not isinstance(info.value, pypto_pro.SanitizerError)
    asserting[None, 1](torch.zeros(32, 128), 1)
    pypto_pro.runtime.synchronize()


@pl.jit(sanitizer=True)
def views(x: pl.Tensor[[1, 32], pl.DT_FP32], y: pl.Tensor[[1, 32], pl.DT_FP32]):
    row = pl.make_tile_group(type=pl.TileType(shape=[1, 32], dtype=pl.DT_FP32), addrs=0x100, mutex_ids=[0]).current()
    col = pl.make_tile_group(type=pl.TileType(shape=[32, 1], dtype=pl.DT_FP32, layout=pl.DN), addrs=0x100,
                             mutex_ids=[0]).current()
    with pl.section_vector():
        pl.load(row, x, [0, 0])
        pl.muls(col, col, 3.0)  # the same 32 values seen as a column
        pl.store(y, row, [0, 0])


def test_two_tiles_viewing_the_same_bytes_are_not_an_overlap():
    """docs/device.md#memory: a [32, 1] DN column and a [1, 32] row at one address are the same 32 values;
    kernels do this on purpose, so only partly overlapping tiles are TILE_OVERLAP."""
    x, y = torch.randn(1, 32), torch.zeros(1, 32)
    assert findings_of(lambda: views[None, 1](x, y)) == []
    assert torch.equal(y, 3 * x)
