"""@pl.jit: the kernel object. It reads the kernel's annotations into the signature description
the C++ core keeps (pypto_pro._C.KernelBase), which runs every launch and, on the first launch of
a compile signature, asks _parse() for the kernel's IR under that signature's binding and does the
rest of the compile itself."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field

from pypto_pro import _C, errors
from pypto_pro.language.planned import planned_message
from pypto_pro.language.tiling_data import TilingDataSpec, is_tiling_data_class
from pypto_pro.language.types import DTYPES, DataType, FunctionType, Ptr, Scalar, TensorAnnotation, Tile
from pypto_pro.runtime.tilingkey import TilingKeyField, TilingKeySchema

_DIM_CODES = {"static": -1, "dynamic": -2, "rest": -3}

for _dtype in DTYPES.values():
    _C.register_dtype_object(_dtype, _dtype.name)


@dataclass
class ParamSpec:
    name: str
    kind: str                    # "tensor" | "ptr" | "scalar" | "tiling" | "planned" | "invalid" (refused at launch)
    dtype: DataType | None = None  # ptr: None when its annotation names its datatype variable
    dims: list = field(default_factory=list)  # [('fixed', n) | ('static', -1) | ('dynamic', -1) | ('rest', -1)]
    dt_var: str | None = None    # datatype schema variable giving this tensor's dtype
    tiling: TilingDataSpec | None = None
    planned: tuple | None = None  # "planned": (what, what it will do) of an annotation not built yet; "invalid": (problem,)

    @property
    def is_tensor(self):
        return self.kind == "tensor"


@dataclass
class KernelSpec:
    """The kernel's parameters as its annotations declare them, checked when the kernel is built."""

    name: str
    fn: object
    params: list
    signature: inspect.Signature

    @staticmethod
    def from_function(fn, name: str, datatype: dict | None) -> "KernelSpec":
        sig = inspect.signature(fn)
        try:
            hints = _annotations(fn)
        except Exception as exc:  # a string annotation that does not evaluate
            raise TypeError(f"kernel '{name}': cannot evaluate the parameter annotations: {exc}") from exc
        datatype = datatype or {}
        params = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"kernel '{name}': *args/**kwargs parameters are not supported ('{p.name}')")
            ann = hints.get(p.name, inspect.Parameter.empty)
            if isinstance(ann, Scalar):  # pl.Scalar[dtype] is the dtype
                ann = ann.dtype
            planned = _planned_annotation(ann)
            if planned is not None:
                params.append(ParamSpec(p.name, "planned", planned=planned))
            elif isinstance(ann, Ptr):
                params.append(_ptr_param(name, p.name, ann, datatype.get(p.name)))
            elif isinstance(ann, TensorAnnotation):
                var = datatype.get(p.name)
                dtype = ann.dtype
                if var is not None and (isinstance(dtype, str) and dtype == var):
                    dtype = DTYPES["fp32"]  # placeholder: every launch names the real dtype
                params.append(ParamSpec(p.name, "tensor", dtype, ann.resolve(p.name, allow_dtype_var=var),
                                        dt_var=var))
            elif isinstance(ann, DataType):
                if ann.name in ("fp16", "bf16"):
                    raise TypeError(f"kernel '{name}': scalar parameter '{p.name}' cannot be {ann!r}; "
                                    f"pass it as pl.DT_FP32")
                if not ann.supported:
                    raise TypeError(f"kernel '{name}': scalar parameter '{p.name}' has unsupported dtype {ann!r}")
                params.append(ParamSpec(p.name, "scalar", ann))
            elif is_tiling_data_class(ann):
                params.append(ParamSpec(p.name, "tiling", tiling=TilingDataSpec(ann, p.name, name)))
            else:  # refused at every launch, as the public language parses kernels on their first launch
                params.append(ParamSpec(p.name, "invalid", planned=(_annotation_problem(ann),)))
        tilings = [i for i, p in enumerate(params) if p.kind == "tiling"]
        if len(tilings) > 1:
            raise TypeError(f"kernel '{name}': a kernel takes one TilingData parameter, got "
                            f"{', '.join(params[i].name for i in tilings)}")
        if tilings and tilings[0] != len(params) - 1:
            raise TypeError(f"kernel '{name}': the TilingData parameter '{params[tilings[0]].name}' must be the "
                            f"last parameter")
        return KernelSpec(name, fn, params, sig)

    def param(self, name):
        return next((p for p in self.params if p.name == name), None)


def _annotations(fn) -> dict:
    """The evaluated annotations of `fn`; string annotations (`from __future__ import annotations`) may
    name closure variables."""
    closure = {}
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[var] = cell.cell_contents
        except ValueError:
            pass
    return inspect.get_annotations(fn, globals=fn.__globals__, locals=closure, eval_str=True)


def _ptr_param(kernel: str, param: str, ann: Ptr, var: str | None) -> ParamSpec:
    """A pl.Ptr[dtype] parameter: dtype a supported pl.DT_*, or the name of the parameter's datatype=
    variable (then the launch's dtype). TypeError names the parameter."""
    if isinstance(ann.dtype, str):
        if ann.dtype != var:
            raise TypeError(f"kernel '{kernel}': parameter '{param}': pl.Ptr[{ann.dtype!r}] names a dtype variable, "
                            f"but {'datatype= gives it ' + repr(var) if var else 'it is not in datatype='}")
        return ParamSpec(param, "ptr", None, dt_var=var)
    if not ann.dtype.supported:
        raise TypeError(f"kernel '{kernel}': parameter '{param}': pl.Ptr dtype {ann.dtype!r} is not supported yet")
    return ParamSpec(param, "ptr", ann.dtype, dt_var=var)


def _annotation_problem(ann) -> str:
    """What is wrong with a kernel parameter annotation no parameter kind accepts."""
    if ann is inspect.Parameter.empty:
        return ("needs an annotation: pl.Tensor[[dims], dtype] for a GM tensor, pl.Ptr[dtype] for a GM pointer or a "
                "dtype like pl.DT_INT32 for a scalar")
    return (f"has annotation {ann!r}; expected pl.Tensor[[dims], dtype], pl.Ptr[dtype], a scalar dtype like "
            f"pl.DT_INT32 or a TilingData dataclass")


def _planned_annotation(ann):
    """(what, what it will do) when a parameter annotation is part of the public language this version
    does not build (pl.Tile, pl.Tensor with pl.Input / pl.Output or a pl.MemRef), else None."""
    if isinstance(ann, TensorAnnotation):
        return ann.planned()
    if isinstance(ann, Tile):
        return "pl.Tile as a kernel parameter", "tile parameters of kernels (kernels make tiles with pl.make_tile)"
    return None


def _planned_param_error(fn, kernel: str, param: str, what: str, doc: str = None) -> errors.ParserError:
    """UnsupportedFeatureError located at the annotation of kernel parameter `param` (a planned one:
    (what, doc)); ParserTypeError at the parameter for an annotation no kind accepts (what: the problem)."""
    from pypto_pro.language import diagnostics
    from pypto_pro.language.parser.parser import parse_function

    filename = diagnostics.source_file(fn)
    line, col, end_col = fn.__code__.co_firstlineno, 0, None
    try:
        tree, first, indent = parse_function(fn)
        fdef = tree.body[0]
        args = fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs
        arg = next(a for a in args if a.arg == param)
        node = arg.annotation if arg.annotation is not None else arg
        line, col = node.lineno + first - 1, node.col_offset + indent
        if node.end_lineno == node.lineno:
            end_col = node.end_col_offset + indent
    except (OSError, TypeError, SyntaxError, StopIteration, AttributeError, IndexError):
        pass
    if doc is None:
        return diagnostics.located(errors.ParserTypeError, f"kernel '{kernel}': parameter '{param}' {what}",
                                   kernel=kernel, filename=filename, line=line, col=col, end_col=end_col)
    return diagnostics.located(errors.UnsupportedFeatureError, f"parameter '{param}': {planned_message(what, doc)}",
                               kernel=kernel, filename=filename, line=line, col=col, end_col=end_col)


def _check_bool(value, what):
    if not isinstance(value, bool):
        raise TypeError(f"pl.jit: {what} must be a bool, got {value!r}")


def _datatype_schema(datatype, fn, kernel_name):
    """Validates datatype={param: var}; returns (params in order, var of each, var names)."""
    where = f"kernel '{kernel_name}': datatype"
    if not isinstance(datatype, dict) or not datatype:
        raise TypeError(f"{where} must be a non-empty dict {{parameter: variable name}}, got {datatype!r}")
    names = list(inspect.signature(fn).parameters)
    for param, var in datatype.items():
        if param not in names:
            raise ValueError(f"{where} names '{param}', which is not a parameter (parameters: {', '.join(names)})")
        if not isinstance(var, str) or not var.isidentifier():
            raise ValueError(f"{where}['{param}'] must be a variable name (an identifier string), got {var!r}")
        if var in names:
            raise ValueError(f"{where} variable '{var}' clashes with the kernel parameter of that name")
    params = [n for n in names if n in datatype]
    var_names = list(dict.fromkeys(datatype[p] for p in params))
    return params, [var_names.index(datatype[p]) for p in params], var_names


def _interprets(options):
    """Whether a kernel is interpreted: interpret=True, or PYPTO_PRO_INTERPRET=1 for a kernel without
    interpret= and without datatype= (which the interpreter does not run)."""
    import os
    interpret = options.get("interpret")
    if interpret is None:
        return os.environ.get("PYPTO_PRO_INTERPRET", "0") == "1" and options.get("datatype") is None
    return interpret is True


class JitFunction(_C.KernelBase):
    """A @pl.jit kernel. Launch it with kernel[stream, block_dim](*args)."""

    def __new__(cls, fn=None, *args, **kwargs):
        # A kernel with a parameter annotation that is not built yet imports, and refuses every launch.
        if cls is JitFunction and inspect.isfunction(fn) and _has_refused_params(fn, kwargs.get("datatype")):
            cls = _PlannedParamKernel
        elif cls is JitFunction and _interprets(kwargs):
            cls = _InterpretedKernel
        return super().__new__(cls)

    def __init__(self, fn, *, arch=None, auto_mutex=True, name=None, pipeline=None, sanitizer=False,
                 tiling_key=None, datatype=None, compile_timeout=None, cache=None, debug=None, interpret=None):
        if not inspect.isfunction(fn):
            raise TypeError(f"pl.jit decorates a Python function, got {fn!r}")
        if arch is not None:
            if not isinstance(arch, str):
                raise TypeError(f"pl.jit: arch must be a str, got {arch!r}")
            if arch not in _C.arch_names():
                raise ValueError(f"pl.jit: unknown arch '{arch}'; known: {', '.join(_C.arch_names())}")
        _check_bool(auto_mutex, "auto_mutex")
        _check_bool(sanitizer, "sanitizer")
        if cache is not None:
            _check_bool(cache, "cache")
        if debug is not None:
            _check_bool(debug, "debug")
        if interpret is not None:
            _check_bool(interpret, "interpret")
            if interpret and datatype is not None:
                raise NotImplementedError(f"pl.jit(interpret=True) on kernel '{fn.__name__}': datatype= is not "
                                          f"interpreted yet")
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
            from pypto_pro.language.pipeline import PipelineConfig
            if not isinstance(pipeline, PipelineConfig):
                raise TypeError(f"pl.jit: pipeline must be a pl.pipeline.PipelineConfig, got {pipeline!r}")
        self.pipeline = pipeline
        self.fn = fn
        self.kernel_name = name or fn.__name__
        self.auto_mutex = auto_mutex
        self.sanitizer = sanitizer
        self.compile_timeout = compile_timeout
        param_names = list(inspect.signature(fn).parameters)
        tiling_key_schema = None
        if tiling_key is not None:
            tiling_key_schema = TilingKeySchema(tiling_key, self.kernel_name, param_names)
        self._tiling_key_names = list(tiling_key_schema.names) if tiling_key_schema is not None else []
        self._tiling_key_schema = tiling_key_schema
        self.datatype = None
        if datatype is not None:
            self.datatype = _datatype_schema(datatype, fn, self.kernel_name)
            if tiling_key_schema is not None:
                for var in self.datatype[2]:
                    if var in tiling_key_schema.names:
                        raise ValueError(f"kernel '{self.kernel_name}': datatype variable '{var}' clashes with the "
                                         f"TilingKey field of that name")
        self.spec = KernelSpec.from_function(fn, self.kernel_name, datatype)
        dt_entry = {p: i for i, p in enumerate(self.datatype[0])} if self.datatype else {}
        params = []
        for p in self.spec.params:
            d = {"name": p.name, "kind": p.kind}
            if p.kind in ("planned", "invalid"):  # never launched (_PlannedParamKernel): a placeholder slot
                d.update(kind="scalar", dtype="int64")
            elif p.kind == "tensor":
                d.update(dtype=p.dtype.name, dims=[n if kind == "fixed" else _DIM_CODES[kind] for kind, n in p.dims])
                if p.name in dt_entry:
                    d["dt_entry"] = dt_entry[p.name]
            elif p.kind == "ptr":  # no dtype in the annotation: its datatype entry gives the argument's
                d["dtype"] = p.dtype.name if p.dtype is not None else "uint8"
                if p.name in dt_entry:
                    d["dt_entry"] = dt_entry[p.name]
            elif p.kind == "scalar":
                d["dtype"] = p.dtype.name
            else:
                d.update(cls=p.tiling.cls, size=p.tiling.size, fields=p.tiling.field_layout())
            params.append(d)
        schema = {}
        if tiling_key_schema is not None:
            schema["tiling_key"] = tiling_key_schema
        if self.datatype is not None:
            schema["datatype"] = {"params": self.datatype[0], "var_of": self.datatype[1],
                                  "var_names": self.datatype[2]}
        options = {"fn": fn, "arch": arch, "auto_mutex": auto_mutex, "sanitizer": sanitizer,
                   "compile_timeout": float(compile_timeout) if compile_timeout is not None else None,
                   "cache": cache, "debug": debug,
                   "pipeline": (pipeline.preload, pipeline.sync_only) if pipeline is not None else None}
        _C.KernelBase.__init__(self, self.kernel_name, params, schema, self._parse, self._bind, options)
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

    def _parse(self, binding):
        """The kernel's IR under one compile signature's binding: {static_dims: {tensor: [values of its
        STATIC and '...' dims]}, tiling_key: {field: value}, datatype: {param: dtype name},
        variables: {datatype variable: dtype name}}. Returns (ir.Function, captured globals)."""
        from pypto_pro.language.parser import parse_kernel

        variables = {var: DTYPES[name] for var, name in binding["variables"].items()}
        try:
            return parse_kernel(self.fn, self.spec, binding["static_dims"],
                                constants={**binding["tiling_key"], **variables},
                                dtypes={p: DTYPES[name] for p, name in binding["datatype"].items()})
        except errors.CompilationError as exc:
            # The error names the kernel's file, line and column with a caret: the parser's own frames
            # say nothing to the kernel's author (PYPTO_PRO_TRACEBACK=full keeps them).
            if _C.get_env("PYPTO_PRO_TRACEBACK") == "full":
                raise
            raise exc.with_traceback(None)

    # ---- introspection ----
    def tiling_key_fields(self) -> list:
        """The names of the kernel's TilingKey fields (empty without tiling_key=)."""
        return list(self._tiling_key_names)

    def instances(self) -> list:
        """The compiled instances of this kernel, in compile order (pypto_pro._C.Instance)."""
        return self._instances()

    def dumps(self) -> list:
        """What pl.dump_data saved in this process, over every instance of this kernel, oldest first
        (pypto_pro.debug.Dump: the window as numpy in `data`, with its block, core, line, name, ...).
        Synchronise first: launches run asynchronously."""
        from pypto_pro.debug import load_dumps

        found = [d for inst in self._instances() for d in load_dumps(inst.dir)]
        return sorted(found, key=lambda d: d.seq)

    def signatures(self) -> list:
        """What each instance (same order as instances()) was specialised on: {dir, static_dims,
        tiling_key, datatype}."""
        return self._signatures()

    def cache_info(self) -> dict:
        """{'compiles', 'hits', 'misses', 'instances', 'stale'} of this kernel object ('stale': times a
        changed module global or closure variable it was compiled with dropped its instances)."""
        return self._cache_info()

    def compile_stats(self) -> list:
        """Per-instance milliseconds of parse, passes, codegen, write, compile and load; 'tier0': its
        first launches ran on the tier-0 executor while the library compiled in the background,
        'tier0_refused': why they did not ("" if they did), 'compiled': that library is loaded
        (docs/jit.md#tier-0-first-launches)."""
        return [dict(inst.stats, dir=str(inst.dir)) for inst in self._instances()]

    def wait_compiled(self) -> None:
        """Waits until every instance's library is compiled and loaded (first launches the tier-0
        executor runs return before it is); raises CompileError if a background compile failed."""
        for inst in self._instances():
            inst.wait_compiled()

    def enumerate_tiling_keys(self) -> list:
        """Every TilingKey dict its class's is_valid accepts (empty without a tiling_key)."""
        return self.tiling_key.enumerate_valid() if self.tiling_key is not None else []

    def __repr__(self):
        return f"<pl.jit kernel '{self.kernel_name}' arch={self.arch or 'auto'}>"


def _has_refused_params(fn, datatype) -> bool:
    """Whether a parameter's annotation is planned or of no parameter kind (its launches are refused)."""
    try:
        spec = KernelSpec.from_function(fn, fn.__name__, datatype)
    except Exception:  # reported when the kernel object is built
        return False
    return any(p.kind in ("planned", "invalid") for p in spec.params)


class _PlannedParamKernel(JitFunction):
    """A kernel with a parameter annotation that is not built yet (pl.Tile, ...), missing, or of no
    parameter kind: it imports (the public language parses a kernel on its first launch), and every
    launch raises at the parameter (UnsupportedFeatureError / ParserTypeError)."""

    def _refusal(self):
        p = next(p for p in self.spec.params if p.kind in ("planned", "invalid"))
        return _planned_param_error(self.fn, self.kernel_name, p.name, *p.planned)

    def __call__(self, *args, **kwargs):
        raise self._refusal()

    def __getitem__(self, launch):
        raise self._refusal()

    def _parse(self, binding):
        raise self._refusal()


class _InterpretedKernel(JitFunction):
    """pl.jit(interpret=True): every launch runs the kernel's own Python on the calling thread
    (pypto_pro.interpret), after the stream's earlier work, and returns when it is done; nothing
    compiles. pdb and breakpoint() work inside the kernel."""

    _interpreter = None

    def __getitem__(self, launch):
        entries = launch if isinstance(launch, tuple) else (launch,)
        keyed = self._tiling_key_schema is not None
        constants = {}
        if keyed:
            if len(entries) != 3 or not isinstance(entries[2], dict):
                raise ValueError(f"kernel '{self.kernel_name}' has a tiling_key: launch it with "
                                 f"kernel[stream, block_dim, {{field: value, ...}}](...)")
            stream, block_dim, fields = entries
            constants = self._tiling_key_schema.unpack(self._tiling_key_schema.pack(fields))
        elif len(entries) == 1:
            stream, block_dim = None, entries[0]
        elif len(entries) == 2:
            stream, block_dim = entries
        else:
            raise ValueError(f"kernel '{self.kernel_name}': launch with kernel[stream, block_dim](...) or "
                             f"kernel[block_dim](...), got {len(entries)} entries")
        if not isinstance(block_dim, int) or isinstance(block_dim, bool) or not 1 <= block_dim <= 65535:
            raise ValueError(f"kernel '{self.kernel_name}': block_dim must be an int in 1..65535, got {block_dim!r}")
        from pypto_pro import runtime
        if stream is not None and not isinstance(stream, runtime.Stream):
            raise TypeError(f"kernel '{self.kernel_name}': stream must be a pypto_pro.runtime.Stream or None, "
                            f"got {stream!r}")
        return lambda *args, **kwargs: self._interpret(stream, block_dim, args, kwargs, constants)

    def __call__(self, *args, **kwargs):
        if self._tiling_key_schema is not None:
            raise ValueError(f"kernel '{self.kernel_name}' has a tiling_key: launch it with "
                             f"kernel[stream, block_dim, {{field: value, ...}}](...)")
        return self._interpret(None, 1, args, kwargs, {})

    def _interpret(self, stream, block_dim, args, kwargs, constants):
        from pypto_pro import interpret, runtime
        from pypto_pro.runtime.platform import _arch_name
        values = self._bind(args, kwargs)
        (stream or runtime.current_stream()).synchronize()  # the inputs earlier launches write
        if self._interpreter is None:  # built at the first launch, its arch then fixed, as a compiled kernel's
            self._interpreter = interpret.Interpreter(self.fn, self.kernel_name, pipeline=self.pipeline is not None)
            self._arch_info = _C.arch_info(self.arch or _arch_name())
        self._interpreter.launch(self._arch_info, block_dim,
                                 interpret.host_arguments(self.kernel_name, self.spec, values), constants)


KernelDef = JitFunction  # the public language's name for a kernel captured for deferred compilation


def kernel(func=None, meta_data=None, *, name=None, func_type=None, strict_ssa=False, auto_mutex=True,
           pipeline=None):
    """@pl.kernel / @pl.kernel(name=, auto_mutex=, ...): the public language's decorator that captures a
    kernel for deferred compilation (a KernelDef). Here that is the @pl.jit kernel object: the same
    kernel, compiled on its first launch. meta_data=, a func_type other than pl.FunctionType.Opaque and
    strict_ssa=True are not implemented yet (NotImplementedError)."""
    if meta_data is not None:
        raise NotImplementedError("pl.kernel(meta_data=...) is not implemented yet")
    if func_type is not None and func_type is not FunctionType.Opaque:
        raise NotImplementedError(f"pl.kernel(func_type={func_type!r}) is not implemented yet; kernels are "
                                  f"pl.FunctionType.Opaque")
    if not isinstance(strict_ssa, bool):
        raise TypeError(f"pl.kernel: strict_ssa must be a bool, got {strict_ssa!r}")
    if strict_ssa:
        raise NotImplementedError("pl.kernel(strict_ssa=True) (single assignment per variable) is not "
                                  "implemented yet")
    return jit(func, name=name, auto_mutex=auto_mutex, pipeline=pipeline)


def jit(fn=None, *, arch=None, auto_mutex=True, name=None, pipeline=None, sanitizer=False, tiling_key=None,
        datatype=None, compile_timeout=None, cache=None, debug=None, interpret=None):
    """Declares a kernel, compiled on its first launch: `@pl.jit` or `@pl.jit(arch="a5", ...)`."""
    options = dict(arch=arch, auto_mutex=auto_mutex, name=name, pipeline=pipeline, sanitizer=sanitizer,
                   tiling_key=tiling_key, datatype=datatype, compile_timeout=compile_timeout, cache=cache,
                   debug=debug, interpret=interpret)
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)


__all__ = ["jit", "JitFunction", "KernelDef", "TilingKeyField", "kernel"]
