"""@pl.jit: the kernel object. Parsing happens on the first launch of each compile signature;
the launch itself (kernel[stream, block_dim](...)) runs in C++ (pypto_pro._C.KernelBase)."""

from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass, field

from pypto_pro import _C
from pypto_pro.language import diagnostics
from pypto_pro.language.types import DataType, TensorAnnotation

_ARCH_ENV = "PYPTOPRO_JIT_ARCH"


class TilingKeyField:
    """`Name = pl.TilingKeyField(bits=B, values=[...])` in a TilingKey class (JIT.md section 6)."""

    def __init__(self, bits: int, values):
        self.bits = bits
        self.values = list(values)

    def __repr__(self):
        return f"pl.TilingKeyField(bits={self.bits}, values={self.values})"


@dataclass
class ParamSpec:
    name: str
    is_tensor: bool
    dtype: DataType
    dims: list = field(default_factory=list)  # [('fixed', n) | ('static', -1) | ('dynamic', -1) | ('rest', -1)]


@dataclass
class KernelSpec:
    """The kernel's parameters as its annotations declare them, checked when the kernel is built."""

    name: str
    fn: object
    params: list
    signature: inspect.Signature

    @staticmethod
    def from_function(fn, name: str) -> "KernelSpec":
        sig = inspect.signature(fn)
        try:
            hints = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:  # a string annotation that does not evaluate
            raise TypeError(f"kernel '{name}': cannot evaluate the parameter annotations: {exc}") from exc
        params = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"kernel '{name}': *args/**kwargs parameters are not supported ('{p.name}')")
            ann = hints.get(p.name, inspect.Parameter.empty)
            if isinstance(ann, TensorAnnotation):
                params.append(ParamSpec(p.name, True, ann.dtype, ann.resolve(p.name)))
            elif isinstance(ann, DataType):
                if ann.name in ("fp16", "bf16"):
                    raise TypeError(f"kernel '{name}': scalar parameter '{p.name}' cannot be {ann!r}; "
                                    f"pass it as pl.DT_FP32")
                if not ann.supported:
                    raise TypeError(f"kernel '{name}': scalar parameter '{p.name}' has unsupported dtype {ann!r}")
                params.append(ParamSpec(p.name, False, ann))
            elif ann is inspect.Parameter.empty:
                raise TypeError(f"kernel '{name}': parameter '{p.name}' needs an annotation: "
                                f"pl.Tensor[[dims], dtype] for a GM tensor or a dtype like pl.DT_INT32 for a scalar")
            elif isinstance(ann, type) and hasattr(ann, "__dataclass_fields__"):
                raise NotImplementedError(f"kernel '{name}': TilingData parameter '{p.name}' is not implemented yet "
                                          f"(compile signatures and specialisation, issue 3)")
            else:
                raise TypeError(f"kernel '{name}': parameter '{p.name}' has annotation {ann!r}; expected "
                                f"pl.Tensor[[dims], dtype] or a scalar dtype like pl.DT_INT32")
        return KernelSpec(name, fn, params, sig)


def _check_bool(value, what):
    if not isinstance(value, bool):
        raise TypeError(f"pl.jit: {what} must be a bool, got {value!r}")


class JitFunction(_C.KernelBase):
    """A @pl.jit kernel. Launch it with kernel[stream, block_dim](*args)."""

    def __init__(self, fn, *, arch=None, auto_mutex=True, name=None, pipeline=None, sanitizer=False,
                 tiling_key=None, datatype=None, compile_timeout=None):
        if not inspect.isfunction(fn):
            raise TypeError(f"pl.jit decorates a Python function, got {fn!r}")
        if arch is not None:
            if not isinstance(arch, str):
                raise TypeError(f"pl.jit: arch must be a str, got {arch!r}")
            if arch not in _C.arch_names():
                raise ValueError(f"pl.jit: unknown arch '{arch}'; known: {', '.join(_C.arch_names())}")
        _check_bool(auto_mutex, "auto_mutex")
        _check_bool(sanitizer, "sanitizer")
        if name is not None:
            if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-." for c in name):
                raise ValueError(f"pl.jit: name must be a non-empty str of letters, digits, '_', '-' or '.', "
                                 f"got {name!r}")
        if compile_timeout is not None:
            if not isinstance(compile_timeout, (int, float)) or isinstance(compile_timeout, bool):
                raise TypeError(f"pl.jit: compile_timeout must be a number of seconds, got {compile_timeout!r}")
            if compile_timeout <= 0:
                raise ValueError(f"pl.jit: compile_timeout must be > 0 seconds, got {compile_timeout!r}")
        if pipeline is not None:
            raise NotImplementedError("pl.jit(pipeline=...): the automatic cube/vector pipeline transform is not "
                                      "implemented yet (LANGUAGE.md section 8, tier 2)")
        if sanitizer:
            raise NotImplementedError("pl.jit(sanitizer=True): sanitizer mode is not implemented yet "
                                      "(auto_mutex and the sanitizer, issue 5)")
        if tiling_key is not None:
            raise NotImplementedError("pl.jit(tiling_key=...): TilingKey instances are not implemented yet "
                                      "(compile signatures and specialisation, issue 3)")
        if datatype is not None:
            raise NotImplementedError("pl.jit(datatype=...): datatype specialisation is not implemented yet "
                                      "(compile signatures and specialisation, issue 3)")

        self.fn = fn
        self.kernel_name = name or fn.__name__
        self.arch = arch  # None: resolved from PYPTOPRO_JIT_ARCH at the first launch, then fixed
        self.auto_mutex = auto_mutex
        self.sanitizer = sanitizer
        self.compile_timeout = compile_timeout
        self.spec = KernelSpec.from_function(fn, self.kernel_name)
        for p in self.spec.params:
            if p.is_tensor and p.dims and p.dims[-1][0] == "rest":
                raise NotImplementedError(f"kernel '{self.kernel_name}': a trailing '...' in the dims of "
                                          f"'{p.name}' is not implemented yet (issue 3)")
        params = [(p.name, p.is_tensor, p.dtype.name,
                   [n if kind == "fixed" else (-1 if kind == "static" else -2) for kind, n in p.dims])
                  for p in self.spec.params]
        _C.KernelBase.__init__(self, self.kernel_name, params, self._compile_signature, self._bind, False)
        functools.update_wrapper(self, fn, updated=())

    # ---- called by the C++ launch path ----
    def _bind(self, args, kwargs):
        try:
            bound = self.spec.signature.bind(*args, **kwargs)
        except TypeError as exc:
            names = ", ".join(p.name for p in self.spec.params)
            raise TypeError(f"{self.kernel_name}({names}): {exc}") from None
        bound.apply_defaults()
        return tuple(bound.arguments[p.name] for p in self.spec.params)

    def _resolved_arch(self) -> str:
        if self.arch is None:
            arch = _C.getenv(_ARCH_ENV)
            if arch not in _C.arch_names():
                raise ValueError(f"{_ARCH_ENV}={arch!r} is not a known arch; known: {', '.join(_C.arch_names())}")
            self.arch = arch
        return self.arch

    def _compile_signature(self, statics: tuple):
        from pypto_pro.language.parser import parse_kernel

        arch = self._resolved_arch()
        t0 = time.perf_counter()
        func = parse_kernel(self.fn, self.spec, statics)
        parse_ms = (time.perf_counter() - t0) * 1e3
        static_sig = ""
        if statics:
            static_sig = ";".join(f"{p.name}:" + ",".join(str(n) for n in self._static_dims(p, statics))
                                  for p in self.spec.params if p.is_tensor and any(k == "static" for k, _ in p.dims))
        inst_dir = _C.instance_dir(self.kernel_name, arch, static_sig)
        timeout = self.compile_timeout if self.compile_timeout is not None else float(
            _C.getenv("PYPTO_PRO_COMPILE_TIMEOUT"))
        dump_ir = _C.getenv("PYPTO_PRO_DUMP_IR").lower() in ("1", "true", "yes", "on")
        try:
            inst = _C.build_instance(func, arch, str(inst_dir), float(timeout), self.auto_mutex, dump_ir)
        except _C.Diagnostic as diag:
            raise diagnostics.from_core(diag, self.kernel_name, self.spec.fn) from None
        inst.set_parse_ms(parse_ms)
        return inst

    def _static_dims(self, param, statics):
        index = 0
        for p in self.spec.params:
            for kind, _ in (p.dims if p.is_tensor else []):
                if kind == "static":
                    if p is param:
                        yield statics[index]
                    index += 1

    # ---- introspection ----
    def instances(self) -> list:
        """The compiled instances of this kernel, in compile order (pypto_pro._C.Instance)."""
        return self._instances()

    def cache_info(self) -> dict:
        """{'compiles': n, 'hits': n, 'misses': n, 'instances': n} for this kernel object."""
        return self._cache_info()

    def compile_stats(self) -> list:
        """Per-instance milliseconds of parse, passes, codegen, write, compile and load."""
        return [dict(inst.stats, dir=str(inst.dir)) for inst in self._instances()]

    def __repr__(self):
        return f"<pl.jit kernel '{self.kernel_name}' arch={self.arch or 'auto'}>"


def jit(fn=None, *, arch=None, auto_mutex=True, name=None, pipeline=None, sanitizer=False, tiling_key=None,
        datatype=None, compile_timeout=None):
    """Declares a kernel, compiled on its first launch: `@pl.jit` or `@pl.jit(arch="a5", ...)`."""
    options = dict(arch=arch, auto_mutex=auto_mutex, name=name, pipeline=pipeline, sanitizer=sanitizer,
                   tiling_key=tiling_key, datatype=datatype, compile_timeout=compile_timeout)
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)

