"""Exceptions of pypto_pro.

Compile-time errors point at the user's kernel source (file:line:col, the line and a caret);
launch-time argument errors are plain TypeError / ValueError naming the parameter; faults of a
running kernel are raised as KernelFault by the next synchronisation of its stream, and what a
sanitizer-mode kernel (pl.jit(sanitizer=True)) found as SanitizerError.
"""

from __future__ import annotations

from dataclasses import dataclass


class PyptoError(Exception):
    """Base class of every pypto_pro error."""


class CompilationError(PyptoError):
    """An error in a kernel's source, located at the offending line."""

    def __init__(self, message, *, kernel=None, filename=None, lineno=None, col=None, source_line=None,
                 hint=None, end_col=None):
        self.message = message
        self.kernel = kernel
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self.source_line = source_line
        self.hint = hint
        self.end_col = end_col
        super().__init__(self._render())

    def _render(self):
        text = self.message
        if self.filename is not None and self.lineno:
            where = f"{self.filename}:{self.lineno}:{(self.col or 0) + 1}"
            if self.kernel:
                where += f" in kernel '{self.kernel}'"
            text += f"\n  --> {where}"
            if self.source_line is not None:
                gutter = str(self.lineno)
                line = self.source_line.rstrip("\n").expandtabs(4)
                start = min(self.col or 0, len(line))
                end = self.end_col if self.end_col and self.end_col > start else start + 1
                end = min(end, max(len(line), start + 1))
                pad = " " * len(gutter)
                text += f"\n{pad} |\n{gutter} | {line}\n{pad} | {' ' * start}{'^' * (end - start)}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class ParserError(CompilationError):
    """The kernel body cannot be parsed into the IR."""


class ParserSyntaxError(ParserError):
    """A construct the kernel language does not have (a `for` without pl.range, a bad `with`, ...)."""


class ParserTypeError(ParserError, TypeError):
    """A value of the wrong kind or type (a mutex id out of range, a tile of the wrong memory, ...)."""


class ParserValueError(ParserError, ValueError):
    """A compile-time value out of its allowed range."""


class PipelineError(ParserError, ValueError):
    """A kernel pl.jit(pipeline=...) cannot schedule: stages that do not alternate cube and vector, a
    cross-core buffer used by other than one stage on each core, ids that clash, ..."""


class UndefinedVariableError(ParserError, NameError):
    """A name the kernel reads that is not defined in it, its closure or its module."""


class UnsupportedFeatureError(ParserError, NotImplementedError):
    """Part of the public language this version does not implement yet."""


class TileMemoryError(CompilationError, ValueError):
    """A tile outside its memory on the target arch, or at a misaligned address."""


class VerifyError(CompilationError):
    """The IR broke one of its invariants: a bug in pypto_pro, please report it."""


class CompileError(PyptoError):
    """The host C++ compiler failed on the generated code; kernel.cpp and compile.log are kept."""

    def __init__(self, message, *, kernel=None, instance_dir=None, log=None):
        super().__init__(message)
        self.kernel = kernel
        self.instance_dir = instance_dir
        self.log = log


class CompileTimeoutError(CompileError, TimeoutError):
    """The host compiler ran past the kernel's compile_timeout and was stopped."""

    def __init__(self, message, *, kernel=None, instance_dir=None, limit=None):
        super().__init__(message, kernel=kernel, instance_dir=instance_dir)
        self.limit = limit


class BuildDirectoryError(CompileError, OSError):
    """The kernel build directory cannot be created or written (a read-only working directory, a
    full disk). The message names it; ASCEND_WORK_PATH moves the artefact tree elsewhere."""

    def __init__(self, message, *, instance_dir=None):
        super().__init__(message, instance_dir=instance_dir)


class KernelFault(PyptoError, RuntimeError):
    """A running kernel failed a check (out-of-bounds access, ...); raised at synchronisation."""

    def __init__(self, message, *, kernel=None, block=None, core=None, source_file=None, line=None, op=None,
                 detail=None):
        super().__init__(message)
        self.kernel = kernel
        self.block = block
        self.core = core
        self.source_file = source_file
        self.line = line
        self.op = op
        self.detail = detail


class KernelDeadlock(KernelFault):
    """Every unfinished core of a mixed kernel's block waited for a cross-core flag no core would set.
    The message lists each waiting core (AIC / AIV 0 / AIV 1 of block b), its source line and the
    flag it waits for; `core` and `line` are those of the first one."""


class PyptoWarning(UserWarning):
    """Base class of the warnings pypto_pro gives about a kernel."""


class TileOverlapWarning(PyptoWarning):
    """Two tiles (or slots of a tile group) at constant addresses share bytes of one memory without
    being the same view; reported at the later declaration. Filter it (warnings.filterwarnings) where
    the reuse is deliberate."""


class KernelTimeout(KernelFault, TimeoutError):
    """A launch ran past synchronize(timeout=) or PYPTO_PRO_KERNEL_TIMEOUT and was stopped at a loop
    back-edge; `line` is the source line it was at. A synchronize that timed out also dropped the
    launches queued behind it. The stream stays usable."""


@dataclass(frozen=True)
class SanitizerFinding:
    """One defect a sanitizer-mode launch found: every hit of one kind at one source line."""

    kind: str      # "PIPE_RACE", "GM_OUT_OF_BOUNDS", "TILE_OUT_OF_BOUNDS", "TILE_OVERLAP", ...
    message: str   # what happened, as of the first hit
    hint: str      # how to fix it, in one line
    kernel: str
    file: str
    line: int
    hits: int      # how often the launch hit it (over all blocks and cores)
    block: int     # where it was first hit
    core: str      # "AIV 3", or "AIC" / "AIV 0" / "AIV 1" of `block` in a mixed kernel


class SanitizerError(KernelFault):
    """A launch of a pl.jit(sanitizer=True) kernel found defects (out-of-bounds accesses, overlapping
    tiles, unpaired mutexes or flags, pipe races). `findings` lists them (SanitizerFinding); they are
    also in `report`, the pypto_sanitizer_report.txt of the kernel's instance directory. `line`,
    `core` and `block` are those of the first finding."""

    def __init__(self, message, *, kernel=None, source_file=None, findings=(), report=None):
        self.findings = [SanitizerFinding(**f) for f in findings]
        first = self.findings[0] if self.findings else None
        super().__init__(message, kernel=kernel, source_file=source_file,
                         line=first.line if first else None, core=first.core if first else None,
                         block=first.block if first else None)
        self.report = report
