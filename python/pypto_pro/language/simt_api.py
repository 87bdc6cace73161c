"""pl.simt: SIMT functions (many threads of scalar code launched from a vector section): planned.

@pl.simt.function works at import time (it marks the function); a kernel that calls a SIMT function,
or any pl.simt.* name, raises UnsupportedFeatureError at that line (docs/language.md#planned).
"""

from __future__ import annotations

from pypto_pro.language.planned import Namespace, PlannedFunction, mark

# pl.simt.<name>: what each will do.
FUNCTIONS = {
    "launch": "run a @pl.simt.function(max_threads=...) on a 1- to 3-D thread block from a vector section",
    "thread_idx": "this thread's coordinates in its thread block",
    "block_dim": "the dimensions of the thread block",
    "block_idx": "this block's coordinates in the kernel's grid",
    "grid_dim": "the dimensions of the kernel's grid",
    "linear_thread_idx": "this thread's x-major index in its block",
    "warp_size": "the SIMT warp size",
    "syncthreads": "barrier of every thread of the block",
    "threadfence_block": "order this thread's memory accesses for the threads of its block",
    "threadfence": "order this thread's memory accesses for the whole device",
    "cast": "a scalar converted to another dtype (mode=pl.RoundMode)",
    "bitcast": "a scalar's bits read as another dtype of the same width",
    "abs": "absolute value of a scalar",
    "min": "minimum of two scalars",
    "max": "maximum of two scalars",
    "sqrt": "square root of a float scalar",
    "rsqrt": "reciprocal square root of a float scalar",
    "exp": "e^x of a float scalar",
    "exp2": "2^x of a float scalar",
    "log": "natural logarithm of a float scalar",
    "log2": "base-2 logarithm of a float scalar",
    "log1p": "log(1 + x) of an fp32 scalar",
    "sin": "sine of a float scalar",
    "cos": "cosine of a float scalar",
    "tanh": "hyperbolic tangent of a float scalar",
    "rint": "a float scalar rounded to the nearest integer (ties to even)",
    "round": "a float scalar rounded to the nearest integer (ties away from zero)",
    "floor": "a float scalar rounded down",
    "ceil": "a float scalar rounded up",
    "trunc": "a float scalar rounded toward zero",
    "isnan": "whether a float scalar is NaN",
    "isinf": "whether a float scalar is infinite",
    "isfinite": "whether a float scalar is finite",
    "popcount": "the number of set bits of an unsigned scalar",
    "mul_hi": "the high half of the full product of two integers",
    "fmod": "the fp32 remainder of a division truncated toward zero",
    "fma": "fused multiply-add of three float scalars",
    "atomic_add": "atomically add to one tile or tensor element",
    "atomic_sub": "atomically subtract from one element",
    "atomic_exch": "atomically replace one element",
    "atomic_max": "atomically keep the maximum in one element",
    "atomic_min": "atomically keep the minimum in one element",
    "atomic_inc": "atomically increment a wrapping unsigned counter element",
    "atomic_dec": "atomically decrement a wrapping unsigned counter element",
    "atomic_cas": "atomically compare and exchange one element",
    "atomic_and": "atomically and one element",
    "atomic_or": "atomically or one element",
    "atomic_xor": "atomically xor one element",
}

_FUNCTION_DOC = "a SIMT function: scalar code run by many threads, launched with pl.simt.launch"


def function(fn=None, *, max_threads=None):
    """@pl.simt.function (a SIMT helper) or @pl.simt.function(max_threads=N) (launchable with
    pl.simt.launch): marks the function and returns it. A kernel that uses it raises
    UnsupportedFeatureError (planned: SIMT)."""
    if fn is None and max_threads is None:
        raise TypeError("@pl.simt.function needs max_threads= or a function to decorate")
    if max_threads is not None and (not isinstance(max_threads, int) or isinstance(max_threads, bool)
                                    or max_threads <= 0):
        raise TypeError(f"pl.simt.function(max_threads=...) must be a positive int, got {max_threads!r}")

    def decorate(f):
        if not callable(f):
            raise TypeError(f"pl.simt.function decorates a Python function, got {f!r}")
        f.__pypto_simt_function__ = True
        f.__pypto_simt_max_threads__ = max_threads
        return mark(f, f"@pl.simt.function '{getattr(f, '__name__', f)}'", _FUNCTION_DOC)

    return decorate if fn is None else decorate(fn)


mark(function, "pl.simt.function", _FUNCTION_DOC)

simt = Namespace("pl.simt", "SIMT functions and their thread queries, atomics and math: planned.",
                 {"function": function,
                  **{name: PlannedFunction(f"pl.simt.{name}", doc) for name, doc in FUNCTIONS.items()}})
