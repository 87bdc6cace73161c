"""pypto_pro: a JIT compiler and runtime for the pypto_pro tile kernel language of Ascend NPUs,
running kernels on a simulated Ascend device on the host CPU.

    import pypto_pro.language as pl

    @pl.jit
    def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], ...): ...

    kernel[stream, block_dim](x, y, out)
    pypto_pro.runtime.synchronize()
"""

__version__ = "0.1.0"


def _core_missing(exc: ImportError) -> str:
    """Why the compiled core did not import, and what to do, in the words a user needs."""
    import importlib.machinery
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    built = sorted(f for f in os.listdir(here) if f.startswith("_C.") and f.endswith(".so"))
    python = f"Python {sys.version.split()[0]} at {sys.executable}"
    if not built:
        return (f"pypto_pro's compiled core (_C) is not built in {here}: run `make` in the checkout (it builds "
                f"it with CMake for Debian's /usr/bin/python3), then use that Python ({python} is this one)")
    suffixes = [s for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so"]  # this Python's own tags
    if not any(f == "_C" + s for f in built for s in suffixes):
        return (f"pypto_pro's compiled core {built[0]} was built for another Python than this one ({python}, "
                f"which loads {', '.join(suffixes)}): run with /usr/bin/python3, the Python `make` builds it "
                f"for, or a venv made from it with --system-site-packages")
    return (f"pypto_pro's compiled core {built[0]} did not load in {python}: {exc}; rebuild it with `make` for "
            f"/usr/bin/python3, and use that Python or a venv made from it with --system-site-packages")


try:
    from pypto_pro import _C  # noqa: F401  (the compiled core; built by `make`)
except ImportError as _exc:
    raise ImportError(_core_missing(_exc)) from _exc
from pypto_pro import profiler, runtime
from pypto_pro.errors import (BuildDirectoryError, CompilationError, CompileError, CompileTimeoutError,
                              KernelDeadlock, KernelFault, KernelTimeout, ParserError, ParserSyntaxError,
                              ParserTypeError, ParserValueError, PipelineError, PyptoError, PyptoWarning,
                              SanitizerError,
                              SanitizerFinding, TileMemoryError, TileOverlapWarning, UndefinedVariableError,
                              UnsupportedFeatureError, VerifyError)

__all__ = [
    "__version__", "runtime", "profiler", "PyptoError", "CompilationError", "ParserError", "ParserSyntaxError", "ParserTypeError",
    "ParserValueError", "PipelineError", "UndefinedVariableError", "UnsupportedFeatureError", "TileMemoryError", "VerifyError",
    "CompileError",
    "CompileTimeoutError", "BuildDirectoryError", "KernelFault", "KernelDeadlock", "KernelTimeout", "SanitizerError",
    "SanitizerFinding", "PyptoWarning", "TileOverlapWarning",
]


def _finish_background_compiles():
    """At exit: kernel libraries still compiling in the background (first launches the tier-0 executor
    ran, docs/jit.md#tier-0-first-launches) finish, so their artefacts are complete; a failed one is
    reported, as nothing launched the kernel again to raise it."""
    import sys
    for failure in _C.wait_background_compiles():
        sys.stderr.write(f"pypto_pro: a kernel library compiled in the background failed: {failure}\n")


import atexit as _atexit  # noqa: E402

_atexit.register(_finish_background_compiles)
