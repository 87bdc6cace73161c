"""pypto_pro: a JIT compiler and runtime for the pypto_pro tile kernel language of Ascend NPUs,
running kernels on a simulated Ascend device on the host CPU.

    import pypto_pro.language as pl

    @pl.jit
    def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], ...): ...

    kernel[stream, block_dim](x, y, out)
    pypto_pro.runtime.synchronize()
"""

from pypto_pro import _C  # noqa: F401  (the compiled core; built by `make`)
from pypto_pro import profiler, runtime
from pypto_pro.errors import (BuildDirectoryError, CompilationError, CompileError, CompileTimeoutError,
                              KernelDeadlock, KernelFault, KernelTimeout, ParserError, ParserSyntaxError,
                              ParserTypeError, ParserValueError, PipelineError, PyptoError, PyptoWarning,
                              SanitizerError,
                              SanitizerFinding, TileMemoryError, TileOverlapWarning, UndefinedVariableError,
                              UnsupportedFeatureError, VerifyError)

__all__ = [
    "runtime", "profiler", "PyptoError", "CompilationError", "ParserError", "ParserSyntaxError", "ParserTypeError",
    "ParserValueError", "PipelineError", "UndefinedVariableError", "UnsupportedFeatureError", "TileMemoryError", "VerifyError",
    "CompileError",
    "CompileTimeoutError", "BuildDirectoryError", "KernelFault", "KernelDeadlock", "KernelTimeout", "SanitizerError",
    "SanitizerFinding", "PyptoWarning", "TileOverlapWarning",
]
