"""pl.jit parameters and kernel signatures are validated when the kernel object is built (parameters without an
annotation any kind accepts: at launch)."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl


def body(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])


def run(kernel, launch=lambda k: k[None, 1]):
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    y = torch.zeros_like(x)
    launch(kernel)(x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, x + 1)


def test_bare_and_called_forms():
    run(pl.jit(body))
    run(pl.jit()(body))
    run(pl.jit(name="renamed", arch="a3", auto_mutex=False, compile_timeout=30)(body))
    kernel = pl.jit(body)
    assert kernel.__name__ == "body" and kernel.kernel_name == "body"
    run(kernel, launch=lambda k: k)               # kernel(...): current stream, one block
    run(kernel, launch=lambda k: k[3])            # kernel[block_dim](...)


def test_unknown_keyword():
    with pytest.raises(TypeError, match="unexpected keyword argument 'block_dim'"):
        pl.jit(body, block_dim=4)


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(arch="a9"), ValueError, "unknown arch 'a9'; known: a5, a3, a2"),
    (dict(arch=5), TypeError, "arch must be a str"),
    (dict(auto_mutex=1), TypeError, "auto_mutex must be a bool, got 1"),
    (dict(sanitizer="yes"), TypeError, "sanitizer must be a bool"),
    (dict(name="a/b"), ValueError, "name must be a non-empty str"),
    (dict(name=""), ValueError, "name must be a non-empty str"),
    (dict(compile_timeout=0), ValueError, "compile_timeout must be > 0 seconds, got 0"),
    (dict(compile_timeout="1"), TypeError, "compile_timeout must be a number of seconds"),
    (dict(compile_timeout=True), TypeError, "compile_timeout must be a number of seconds"),
    (dict(pipeline="on"), TypeError, "pipeline must be a pl.pipeline.PipelineConfig"),
    (dict(tiling_key=object), ValueError, "tiling_key class object declares no TilingKeyField"),
    (dict(tiling_key=3), TypeError, "tiling_key must be a class with TilingKeyField attributes"),
    (dict(datatype={"w": "T"}), ValueError, "datatype names 'w', which is not a parameter"),
    (dict(datatype={"x": "y"}), ValueError, "datatype variable 'y' clashes with the kernel parameter"),
    (dict(datatype={"x": "not a name"}), ValueError, "must be a variable name"),
    (dict(datatype=[]), TypeError, "datatype must be a non-empty dict"),
])
def test_invalid_parameters(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        pl.jit(body, **kwargs)


def make(annotation_x):
    def k(x: annotation_x):
        pass
    return k


@pytest.mark.parametrize("annotation, message", [
    (pl.Tensor[[0, 4], pl.DT_FP32], r"parameter 'x': dim 0 must be a positive int, pl.DYNAMIC, pl.STATIC or a "
                                    r"trailing '...', got 0"),
    (pl.Tensor[[4, -2], pl.DT_FP32], "dim 1 must be a positive int.*got -2"),
    (pl.Tensor[[True, 4], pl.DT_FP32], "dim 0 must be a positive int.*got True"),
    (pl.Tensor[[4, ..., 4], pl.DT_FP32], r"'\.\.\.' may only end the dims list"),
    (pl.Tensor[[], pl.DT_FP32], "needs a non-empty list of dims"),
    (pl.Tensor[[4], "fp32"], "dtype must be a pl.DT_\\* value"),
    (pl.Tensor[[4], pl.DT_FP8E4M3FN], "is not supported yet"),
    (pl.DT_FP16, "scalar parameter 'x' cannot be pl.DT_FP16"),
    (pl.Tensor[[4], pl.DT_FP32, pl.ZN], r"the layout of a pl.Tensor must be pl.ND, pl.DN or pl.NZ, got pl.ZN"),
])
def test_bad_annotations(annotation, message):
    with pytest.raises(TypeError, match=message):
        pl.jit(make(annotation))


def test_tensor_layouts_other_than_nd_are_refused_not_ignored():
    pl.jit(make(pl.Tensor[[4], pl.DT_FP32, pl.ND]))  # the default, spelled out
    for layout in (pl.DN, pl.NZ):
        with pytest.raises(NotImplementedError, match=rf"parameter 'x': GM tensors in {layout!r} layout are not "
                                                      r"implemented yet; pl.ND \(row-major, the default\) is"):
            pl.jit(make(pl.Tensor[[4], pl.DT_FP32, layout]))


def test_missing_or_foreign_annotation_is_refused_at_launch():
    # As in the public language, which parses a kernel on its first launch, the module defining it imports.
    def k(x):
        pass

    kernel = pl.jit(k)
    with pytest.raises(pypto_pro.ParserTypeError,
                       match=r"parameter 'x' needs an annotation: pl.Tensor\[\[dims\], dtype\]") as info:
        kernel[None, 1](np.zeros(4, np.float32))
    assert "def k(x):" in str(info.value)
    with pytest.raises(TypeError, match=r"parameter 'x' has annotation <class 'int'>; expected pl.Tensor"):
        pl.jit(make(int))(3)


def test_pl_names_outside_kernels_raise():
    with pytest.raises(RuntimeError, match="pl.add can only be used inside a @pl.jit kernel body"):
        pl.add(1, 2, 3)
    with pytest.raises(TypeError, match="pl.Tensor is a type annotation"):
        pl.Tensor([4], pl.DT_FP32)


def test_tile_type_validation():
    with pytest.raises(ValueError, match="TileType shape must be a list of 1 or 2 positive ints"):
        pl.TileType(shape=[1, 2, 3], dtype=pl.DT_FP32)
    with pytest.raises(ValueError, match="valid_shape entries must be -1"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, valid_shape=[17, 16])
    with pytest.raises(TypeError, match="target_memory must be a pl.MemorySpace member"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory="Vec")
    with pytest.raises(ValueError, match="cannot be DDR"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.DDR)
    tt = pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Acc)
    assert tt.layout is pl.NZ and tt.nbytes == 1024


def test_star_import_gives_the_language_not_its_modules():
    import types as _t
    modules = sorted(n for n in pl.__all__ if isinstance(getattr(pl, n), _t.ModuleType))
    assert modules == ["parser", "pipeline", "system"]  # the public language's namespaces
    assert "annotations" not in pl.__all__ and "jit" in pl.__all__ and callable(pl.jit)
    assert issubclass(pypto_pro.VerifyError, pypto_pro.CompilationError) and "VerifyError" in pypto_pro.__all__
