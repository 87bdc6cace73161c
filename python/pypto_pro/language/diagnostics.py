"""Errors that point at the user's kernel source: file:line:col, the line, a caret and a hint."""

from __future__ import annotations

import inspect
import linecache

from pypto_pro import errors

_KIND_TO_CLASS = {
    "syntax": errors.ParserSyntaxError,
    "type": errors.ParserTypeError,
    "undefined": errors.UndefinedVariableError,
    "unsupported": errors.UnsupportedFeatureError,
    "value": errors.ParserValueError,
    "memory": errors.TileMemoryError,
    "internal": errors.VerifyError,
    "pipeline": errors.PipelineError,
}


def source_file(fn) -> str:
    try:
        return inspect.getsourcefile(fn) or fn.__code__.co_filename
    except TypeError:
        return fn.__code__.co_filename


def located(cls, message: str, *, kernel: str, filename: str, line: int, col: int = 0, end_col: int | None = None,
            hint: str | None = None) -> errors.CompilationError:
    source_line = linecache.getline(filename, line) if line else None
    return cls(message, kernel=kernel, filename=filename, lineno=line or None, col=col, source_line=source_line or None,
               hint=hint or None, end_col=end_col)


def from_core(kind: str, message: str, line: int, col: int, hint: str, kernel: str, fn,
              filename: str | None = None) -> errors.CompilationError:
    """A diagnostic of the C++ IR, verifier or passes (the args of a pypto_pro._C.Diagnostic) as its
    located error class; `filename` when the line is in a helper's module rather than the kernel's."""
    cls = _KIND_TO_CLASS.get(kind, errors.VerifyError)
    if cls is errors.VerifyError:
        message = f"internal compiler error: {message} (please report it)"
    return located(cls, message, kernel=kernel, filename=filename or source_file(fn), line=line, col=col, hint=hint)
