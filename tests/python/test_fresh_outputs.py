"""Fresh outputs (docs/device.md#memory): a large output whose pages the launch found never
touched is faulted in first (or, where it cannot be, stored through the caches), one already written
is streamed to; each store path (a direct run, a fused pass's strip store, a plain store, the tier-0
executor) gives the same values either way, and the launch leaves a fresh output's pages in memory.
The decisions themselves are unit-tested in C++ (FreshBuffers, GmStores)."""

import ctypes
import mmap
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import pypto_pro

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from add import add_kernel  # noqa: E402
from softmax import softmax_kernel  # noqa: E402

sync = pypto_pro.runtime.synchronize


def _resident_share(t):
    """The share of the pages of tensor t in memory (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    start = t.data_ptr() // page * page
    end = (t.data_ptr() + t.numel() * t.element_size() + page - 1) // page * page
    vec = (ctypes.c_ubyte * ((end - start) // page))()
    assert libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(end - start), vec) == 0
    return sum(v & 1 for v in vec) / len(vec)


def _fresh(shape, dtype):
    """An output in pages nothing touched yet: an anonymous mapping of its own (an allocator may hand
    out reused pages)."""
    n = int(np.prod(shape)) * torch.tensor([], dtype=dtype).element_size()
    buf = mmap.mmap(-1, n)
    t = torch.frombuffer(buf, dtype=dtype, count=n // torch.tensor([], dtype=dtype).element_size()).view(shape)
    t._keep = buf  # the mapping lives as long as the tensor
    return t


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "touched"])
@pytest.mark.parametrize("tier0", ["0", "always"])
def test_the_add_example_into_a_large_output(fresh, tier0, monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_TIER0", tier0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2048, 2048, generator=g).half()  # 8 MiB each
    y = torch.randn(2048, 2048, generator=g).half()
    z = _fresh(x.shape, x.dtype) if fresh else torch.full_like(x, 7)
    assert _resident_share(z) == (0 if fresh else 1)
    add_kernel[None, 8](x, y, z)
    sync()
    assert torch.equal(z, (x.float() + y.float()).half())


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "touched"])
@pytest.mark.parametrize("fuse", ["1", "0"], ids=["fused", "unfused"])
def test_the_softmax_example_into_a_large_output(fresh, fuse, monkeypatch):
    """Fused: the strip store inside the pass; unfused: the store statement's own copy."""
    monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
    monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
    x = torch.randn(4096, 512, generator=torch.Generator().manual_seed(2)) * 3  # 8 MiB
    y = _fresh(x.shape, x.dtype) if fresh else torch.full_like(x, 7)
    kernel = pypto_pro.language.jit(softmax_kernel.fn, name=f"softmax_fresh_{fuse}")
    kernel[None, 16](x, y)
    sync()
    torch.testing.assert_close(y, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)
    code = Path(kernel.instances()[0].dir, "kernel.cpp").read_text()
    assert "pto::detail::MarkFresh(ctx, pto::MakeGm<float, 2>(args.a_y" in code
