"""The front end reads a kernel's (and an inlined helper's) source from the file linecache holds,
cut at the code object's lines, instead of tokenizing the file (inspect.getsourcelines): the cut must
give the very definition inspect gives, and fall back to inspect where it cannot."""

import ast
import inspect
import textwrap

import numpy as np
import pytest

from kernels import module_from_source
from pypto_pro.language.parser.parser import parse_function

SHAPES = '''
import pypto_pro.language as pl

def plain(a, b):
    return a + b

def decorated_twice(a):
    return a
decorated_twice = (lambda f: f)(decorated_twice)

@staticmethod
@(lambda f: f)
def with_decorators(a,
                    b):
    c = a * \\
b
    return c

def comment_at_column_0(a):
    a = a + 1
# a commented-out line at column 0 inside the body
    a = a + 2
    return a

def ends_in_pass(a):
    if a:
        a = 1
    else:
        pass

def ends_in_a_string(a):
    a = 1
    """a trailing string statement: no code"""

def string_at_column_0(a):
    text = """first line
second line at column 0"""
    return text

def ends_with_a_string_at_column_0(a):
    a = 1
    """a trailing string
at column 0"""

def outer():
    def inner(x):
        y = x
        return y
    return inner
inner = outer()

class Holder:
    @staticmethod
    def method(a):
        return a
method = Holder.method

def trailing_comment(a):
    return a
    # a comment, then blank lines

a_lambda = lambda a: (a +
    1)
'''


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return module_from_source(tmp_path_factory.mktemp("source"), "source_shapes", SHAPES)


@pytest.mark.parametrize("name", ["plain", "with_decorators", "comment_at_column_0", "ends_in_pass", "ends_in_a_string",
                                  "string_at_column_0", "ends_with_a_string_at_column_0", "inner", "method",
                                  "trailing_comment", "decorated_twice"])
def test_the_cut_is_the_definition_inspect_reads(shapes, name, monkeypatch):
    fn = getattr(shapes, name)
    fn = getattr(fn, "__func__", fn)
    lines, inspect_first = inspect.getsourcelines(fn)
    expected = ast.parse(textwrap.dedent("".join(lines)))
    monkeypatch.setattr(inspect, "getsourcelines", _not_called)  # every shape here is cut, not tokenized
    tree, first, indent = parse_function(fn)
    assert ast.dump(tree, include_attributes=True) == ast.dump(expected, include_attributes=True)
    assert (first, indent) == (inspect_first, len(lines[0]) - len(lines[0].lstrip()))


def _not_called(fn):
    raise AssertionError(f"inspect.getsourcelines({fn.__name__}) called")


def test_a_lambda_is_read_by_inspect(shapes):
    tree, first, _ = parse_function(shapes.a_lambda)
    assert isinstance(tree.body[0], ast.Assign) and first == shapes.a_lambda.__code__.co_firstlineno


def test_source_from_exec_still_reads_through_inspect():
    namespace = {}
    exec(compile("def f(a):\n    return a\n", "<no file>", "exec"), namespace)
    with pytest.raises(OSError):
        parse_function(namespace["f"])


KERNEL = '''
import pypto_pro.language as pl


def scale(t, v):
    pl.muls(t, t, v)
# a column-0 comment in the helper: its last op still runs
    pl.adds(t, t,
1.0)


@pl.jit
def kernel(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
# a column-0 comment in the kernel: the statements after it are still the kernel's
        scale(t, 3.0)
        pl.store(y, t,
[0, 0])
'''


def test_kernels_and_helpers_with_column_0_lines_run_every_statement(tmp_path):
    module = module_from_source(tmp_path, "column_0_kernel", KERNEL)
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64) / 7
    y = np.zeros_like(x)
    module.kernel[None, 1](x, y)
    import pypto_pro
    pypto_pro.runtime.synchronize()
    np.testing.assert_allclose(y, x * 3.0 + 1.0, rtol=1e-6, atol=0)
