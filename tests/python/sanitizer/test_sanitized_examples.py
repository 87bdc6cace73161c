"""Every example kernel under the sanitizer: no findings (zero false positives) and exactly the numbers
of the plain kernel. Each example module's kernel is swapped for a sanitized build of the same
function, so the example's own launch code runs it."""

import functools

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import load_example



@functools.cache
def load(name):
    return load_example(name, "sanitized")


@functools.cache
def sanitized(module, attr, tiling_key=None):
    """A sanitizer-mode build of the function of the module's kernel `attr`, with its other jit options."""
    kernel = getattr(module, attr)
    return pl.jit(kernel.fn, sanitizer=True, auto_mutex=kernel.auto_mutex, name=f"{kernel.kernel_name}_checked",
                  tiling_key=tiling_key)


def plain_and_sanitized(module, attr, run, **options):
    """run() with the module's plain kernel, then with its sanitized build; both results."""
    plain = getattr(module, attr)
    checked = sanitized(module, attr, **options)
    want = run()
    pypto_pro.runtime.synchronize()
    setattr(module, attr, checked)
    try:
        got = run()
        pypto_pro.runtime.synchronize()  # raises SanitizerError on any finding
    finally:
        setattr(module, attr, plain)
    # The sanitized instance really ran: its launch appended a clean section to its report.
    report = checked.instances()[-1].sanitizer_report
    assert report.read_text().endswith("PyPTO Sanitizer: 0 issue(s) detected\n")
    return want, got


def assert_same(want, got):
    for a, b in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("shape, block_dim", [((128, 128), 1), ((2048, 1024), 64), ((1024, 2048), 7)])
def test_add(shape, block_dim):
    module = load("add")
    torch.manual_seed(shape[0])
    x, y = torch.randn(shape, dtype=torch.float16), torch.randn(shape, dtype=torch.float16)

    def run():
        z = torch.empty_like(x)
        module.add_kernel[None, block_dim](x, y, z)
        return z

    want, got = plain_and_sanitized(module, "add_kernel", run)
    assert_same(want, got)
    assert torch.equal(got, x + y)


@pytest.mark.parametrize("m, n, block_dim", [(256, 256, 1), (512, 512, 32), (1024, 256, 3)])
def test_matmul(m, n, block_dim):
    module = load("matmul")
    torch.manual_seed(m + n)
    a, b = torch.randn(m, module.K, dtype=torch.float16), torch.randn(module.K, n, dtype=torch.float16)

    def run():
        c = torch.empty(m, n)
        module.matmul_kernel[None, block_dim](a, b, c)
        return c

    want, got = plain_and_sanitized(module, "matmul_kernel", run)
    assert_same(want, got)


@pytest.mark.parametrize("shape, block_dim", [((2048, 64), 64), ((777, 300), 7), ((2049, 100), 1)])
def test_softmax(shape, block_dim):
    module = load("softmax")
    torch.manual_seed(shape[0])
    x = torch.randn(shape) * 4
    want, got = plain_and_sanitized(module, "softmax_kernel", lambda: module.softmax(x, block_dim=block_dim))
    assert_same(want, got)


@pytest.mark.parametrize("shape, block_dim", [((1000, 200), 64), ((100, 512), 1)])
def test_layernorm(shape, block_dim):
    module = load("layernorm")
    torch.manual_seed(shape[1])
    x = torch.randn(shape) * 3 + 1
    gamma, beta = torch.randn(shape[1]), torch.randn(shape[1])
    want, got = plain_and_sanitized(module, "layernorm_kernel",
                                    lambda: module.layernorm(x, gamma, beta, block_dim=block_dim))
    assert_same(want, got)


@pytest.mark.parametrize("m, block_dim", [(48, 1), (48, 3), (96, 2)])
def test_fused_softmax_matmul(m, block_dim):
    module = load("fused_softmax_matmul")
    want, got = plain_and_sanitized(module, "fused_softmax_matmul",
                                    lambda: module.run(m=m, block_dim=block_dim, seed=m)[0])
    assert_same(want, got)


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 512, False, 1), (1, 512, True, 5), (2, 512, False, 24),
                                                     (2, 1024, True, 32)])
def test_flash_attention(b, s, causal, block_dim):
    module = load("flash_attention")
    torch.manual_seed(s + b)
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    want, got = plain_and_sanitized(module, "flash_attention",
                                    lambda: module.attention(q, k, v, causal, block_dim=block_dim),
                                    tiling_key=module.AttentionKey)
    assert_same(want, got)
