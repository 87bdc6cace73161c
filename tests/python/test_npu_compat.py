"""Host code written for torch_npu runs unchanged through pypto_pro.npu_compat (docs/npu_compat.md), and
pypto_pro.runtime.platform reports the arch model. The layer changes torch process-wide, so every
script runs in a subprocess of its own."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pypto_pro
from pypto_pro.runtime.platform import get_platform_info

PYTHON_DIR = Path(pypto_pro.__file__).resolve().parents[1]

# The quick-start add operator of the public tutorial, host side as written for torch_npu.
TUTORIAL_ADD = '''
import os
import pypto_pro.language as pl
import torch
import torch_npu

@pl.jit(auto_mutex=True)
def add_kernel(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
               out: pl.Tensor[[64, 64], pl.DT_FP16]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    group_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    group_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    group_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        ta, tb, to = group_a.current(), group_b.current(), group_out.current()
        pl.load(ta, a, [0, 0])
        pl.load(tb, b, [0, 0])
        pl.add(to, ta, tb)
        pl.store(out, to, [0, 0])

device = f"npu:{int(os.environ.get('TILE_FWK_DEVICE_ID', 0))}"
torch.npu.set_device(device)
torch.manual_seed(0)
a = torch.rand(64, 64, device=device, dtype=torch.float16)
b = torch.rand(64, 64, device=device, dtype=torch.float16)
out = torch.empty(64, 64, device=device, dtype=torch.float16)
add_kernel(a, b, out)
torch.npu.synchronize()
torch.testing.assert_close(out, a + b, rtol=1e-2, atol=1e-2)
print("Add kernel passed!")
'''


def run_script(tmp_path, source, *, via_module=True, extra_env=None):
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), **(extra_env or {}))
    command = [sys.executable, "-m", "pypto_pro.npu_compat", str(script)] if via_module else \
        [sys.executable, str(script)]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_tutorials_host_code_runs_unchanged_through_the_module_runner(tmp_path):
    result = run_script(tmp_path, TUTORIAL_ADD)
    assert result.returncode == 0, result.stderr
    assert "Add kernel passed!" in result.stdout


def test_streams_events_and_tensor_methods_of_torch_npu(tmp_path):
    result = run_script(tmp_path, '''
        import pypto_pro.npu_compat
        import torch, torch_npu
        import pypto_pro, pypto_pro.language as pl

        @pl.jit
        def double(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
            t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(t, x, [0, 0])
                pl.system.bar_all()
                pl.muls(t, t, 2.0)
                pl.system.bar_all()
                pl.store(y, t, [0, 0])

        assert torch.npu.is_available() and torch.npu.device_count() == 1 and torch.npu.current_device() == 0
        x = torch.arange(512, dtype=torch.float32).reshape(8, 64).npu()
        y = torch.zeros(8, 64).to("npu:0")
        assert x.is_npu and y.device.type == "cpu"
        s = torch.npu.Stream()
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record(s)
        double[s, 1](x, y)
        end.record(s)
        end.synchronize()
        assert start.elapsed_time(end) >= 0
        assert torch.equal(y.cpu(), 2 * x)
        with torch.npu.stream(s):
            assert torch.npu.current_stream() is s
            double[None, 1](y, x)
        torch.npu.synchronize()
        assert torch.equal(x, 4 * torch.arange(512, dtype=torch.float32).reshape(8, 64))
        z = torch.full((2, 3), 7.0, device="npu")
        assert z.new_zeros(4, device="npu:0").device.type == "cpu"
        for bad in (lambda: torch.npu.set_device("npu:1"), lambda: torch.zeros(2, device="npu:3")):
            try:
                bad()
            except ValueError as e:
                assert "the simulated NPU has 1 device (npu:0)" in str(e), e
            else:
                raise AssertionError("no ValueError")
        print("ok")
    ''', via_module=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_kernel_fault_reaches_the_script_through_torch_npu_synchronize(tmp_path):
    result = run_script(tmp_path, '''
        import torch, torch_npu
        import pypto_pro, pypto_pro.language as pl

        @pl.jit
        def overrun(x: pl.Tensor[[8, 64], pl.DT_FP32]):
            t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(t, x, [4, 0])

        overrun[None, 1](torch.zeros(8, 64, device="npu:0"))
        try:
            torch.npu.synchronize()
        except pypto_pro.KernelFault as e:
            print("fault:", "host.py" in str(e))
    ''')
    assert result.returncode == 0, result.stderr
    assert "fault: True" in result.stdout


def test_the_module_runner_explains_itself():
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    result = subprocess.run([sys.executable, "-m", "pypto_pro.npu_compat"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "usage: python -m pypto_pro.npu_compat script.py" in result.stdout


@pytest.mark.parametrize("arch, soc, cores, aivs, ub", [("a5", "DAV_3510", 32, 64, 253952),
                                                       ("a3", "DAV_2201", 24, 48, 196608)])
def test_platform_info_reports_the_arch_model(arch, soc, cores, aivs, ub):
    info = get_platform_info(arch=arch)
    assert (info.arch, info.soc_version, info.core_num, info.aic_num, info.aiv_num) == (arch, soc, cores, cores, aivs)
    assert info.memory["Vec"] == ub and info.memory["Mat"] == 512 * 1024


def test_platform_info_follows_the_default_arch(monkeypatch):
    monkeypatch.delenv("PYPTOPRO_JIT_ARCH", raising=False)
    assert get_platform_info().arch == "a5"
    monkeypatch.setenv("PYPTOPRO_JIT_ARCH", "a2")
    assert get_platform_info(force_refresh=True).soc_version == "DAV_2201"
    monkeypatch.setenv("PYPTOPRO_JIT_ARCH", "a9")
    with pytest.raises(ValueError, match="PYPTOPRO_JIT_ARCH must be one of a5, a3, a2, got 'a9'"):
        get_platform_info()
