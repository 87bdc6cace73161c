"""pl.jit(interpret=True): the kernel's own Python run on the host, block after block, with its tiles
as numpy arrays over each core's local memory, so pdb (`breakpoint()`) stops at a kernel line and
prints tiles and scalars as ordinary values (docs/jit.md#interpret-mode).

The op semantics are the compiled path's (docs/language.md): a tile is a window of its core's memory
in logical row-major order, ops work on their output's valid window, fp16 elements are computed in
fp32 and rounded after every op. An op the interpreter does not implement yet raises
NotImplementedError at its line instead of doing anything else. Launches are synchronous.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading

import numpy as np

from pypto_pro.errors import KernelFault

_active = threading.local()  # .core: the _Core whose program runs on this thread

_NP_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
              "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64}


def active_call(name, args, kwargs):
    """What pl.<name>(...) does on this thread: None when no interpreted kernel runs here (the
    caller then says the name only means something in a kernel)."""
    core = getattr(_active, "core", None)
    if core is None:
        return None
    impl = _OPS.get(name)
    if impl is None:
        where = _caller_line()
        raise NotImplementedError(f"{where}: pl.{name} is not supported by the interpreter yet "
                                  f"(pl.jit(interpret=True)); run the compiled kernel (interpret=False)")
    return impl(core, *args, **kwargs)


def running():
    return getattr(_active, "core", None) is not None


def _caller_line():
    frame = sys._getframe(1)
    here = __file__
    while frame is not None and (frame.f_code.co_filename == here or "pypto_pro/language/" in frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


def _np_dtype(dtype):
    try:
        return np.dtype(_NP_DTYPES[dtype.name])
    except KeyError:
        raise NotImplementedError(f"{_caller_line()}: the interpreter has no {dtype.pl_name} elements yet "
                                  f"(numpy has no such type); run the compiled kernel") from None


def _fault(core, op, message):
    where = _caller_line()
    file, _, line = where.rpartition(":")
    raise KernelFault(f"kernel '{core.kernel}' (interpreted) faulted in {op} at {where}, block {core.block}: "
                      f"{message}", kernel=core.kernel, block=core.block, core=core.name, source_file=file,
                      line=int(line) if line.isdigit() else None, op=op)


class _Slot:
    """One tile slot: a typed window of a core's local memory (logical row-major, as the simulator
    keeps it), with its current valid window."""

    def __init__(self, core, ttype, addr):
        shape = list(ttype.shape)
        self.rows, self.cols = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
        self.ttype = ttype
        self.dtype = _np_dtype(ttype.dtype)
        self.space = ttype.target_memory.name
        self.addr = int(addr)
        memory = core.memory(self.space)
        nbytes = self.rows * self.cols * self.dtype.itemsize
        if self.addr < 0 or self.addr + nbytes > len(memory):
            _fault(core, "make_tile", f"a {ttype.shape} {ttype.dtype.pl_name} tile at {self.addr:#x} does not fit "
                                      f"the {self.space} memory ({len(memory)} bytes)")
        self.data = np.frombuffer(memory, dtype=self.dtype, count=self.rows * self.cols,
                                  offset=self.addr).reshape(self.rows, self.cols)
        valid = list(ttype.valid_shape) if ttype.valid_shape is not None else [-1] * len(shape)
        if len(valid) == 1:
            valid = [1] + valid
        self.valid = [self.rows if valid[0] == -1 else valid[0], self.cols if valid[1] == -1 else valid[1]]

    @property
    def window(self):
        """The valid window as a numpy view (what pdb shows)."""
        return self.data[:self.valid[0], :self.valid[1]]

    @property
    def valid_shape(self):
        return list(self.valid)

    def __repr__(self):
        return (f"<tile {self.space} {self.ttype.dtype.pl_name} {[self.rows, self.cols]} at {self.addr:#x}, "
                f"valid {self.valid}>\n{self.window!r}")


class _Group:
    def __init__(self, slots):
        self.slots = slots
        self.cursor = len(slots) - 1

    def next(self):
        self.cursor = (self.cursor + 1) % len(self.slots)
        return self.slots[self.cursor]

    def current(self):
        return self.slots[self.cursor]

    def previous(self):
        return self.slots[(self.cursor - 1) % len(self.slots)]

    def __getitem__(self, i):
        return self.slots[i]


class _Core:
    def __init__(self, kernel, arch, block, block_num, kind):
        self.kernel = kernel
        self.block = block
        self.block_num = block_num
        self.kind = kind  # "vector" or "cube"
        self.name = ("AIV " if kind == "vector" else "AIC ") + str(block)
        self.capacity = arch["capacity"]
        self.memories = {}

    def memory(self, space):
        if space not in self.memories:
            if space not in self.capacity:
                raise NotImplementedError(f"{_caller_line()}: the interpreter has no {space} memory")
            self.memories[space] = bytearray(self.capacity[space])
        return self.memories[space]


def _tile(core, value, op, what):
    if not isinstance(value, _Slot):
        raise TypeError(f"{_caller_line()}: pl.{op} {what} must be a tile, got {value!r}")
    if value.space != "Vec":
        raise NotImplementedError(f"{_caller_line()}: pl.{op} on a {value.space} tile is not interpreted yet")
    return value


def _scalar_as(value, dtype):
    return np.array(value).astype(dtype) if np.issubdtype(dtype, np.integer) else dtype.type(value)


def _compute_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _write(core, out, value):
    """Rounds `value` to the output's element type into its valid window."""
    rows, cols = out.valid
    out.data[:rows, :cols] = np.asarray(value)[:rows, :cols].astype(out.dtype)


def _operand(src, rows, cols, compute):
    return src.data[:rows, :cols].astype(compute)


def _binary(fn, name):
    def op(core, out, lhs, rhs):
        out = _tile(core, out, name, "out")
        lhs = _tile(core, lhs, name, "lhs")
        rows, cols = out.valid
        compute = _compute_dtype(out.dtype)
        a = _operand(lhs, rows, cols, compute)
        if isinstance(rhs, _Slot):
            b = _operand(_tile(core, rhs, name, "rhs"), rows, cols, compute)
            if name == "div" and np.issubdtype(out.dtype, np.integer) and (b == 0).any():
                _fault(core, name, "integer division by zero in a tile")
        else:
            b = np.asarray(_scalar_as(rhs, out.dtype)).astype(compute)
            if name == "div" and np.issubdtype(out.dtype, np.integer) and b == 0:
                _fault(core, "divs", "integer division by zero")
        with np.errstate(all="ignore"):
            _write(core, out, fn(a, b))
    return op


def _int_div(a, b):
    """Integer division truncates toward zero (as C does); floats divide."""
    if not np.issubdtype(a.dtype, np.integer):
        return a / b
    b = np.broadcast_to(b, a.shape)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _unary(fn, name):
    def op(core, out, src):
        out = _tile(core, out, name, "out")
        src = _tile(core, src, name, "src")
        rows, cols = out.valid
        with np.errstate(all="ignore"):
            _write(core, out, fn(_operand(src, rows, cols, _compute_dtype(out.dtype))))
    return op


def _rsqrt(a):
    return np.float32(1.0) / np.sqrt(a)  # both steps rounded, as the compiled path (and torch.rsqrt)


def _row_reduce(fn, name):
    def op(core, out, src, tmp=None):
        out = _tile(core, out, name, "out")
        src = _tile(core, src, name, "src")
        rows, cols = src.valid
        if cols == 0:
            return
        values = src.data[:rows, :cols].astype(_compute_dtype(src.dtype))
        result = fn(values, axis=1, keepdims=True)
        out.data[:rows, :1] = result.astype(out.dtype)
    return op


def _col_reduce(fn, name):
    def op(core, out, src, tmp=None):
        out = _tile(core, out, name, "out")
        src = _tile(core, src, name, "src")
        rows, cols = src.valid
        if rows == 0:
            return
        values = src.data[:rows, :cols].astype(_compute_dtype(src.dtype))
        out.data[:1, :cols] = fn(values, axis=0, keepdims=True).astype(out.dtype)
    return op


def _expand(fn, name, axis):
    def op(core, out, src, other):
        out = _tile(core, out, name, "out")
        src = _tile(core, src, name, "src")
        other = _tile(core, other, name, "the expanded operand")
        rows, cols = out.valid
        compute = _compute_dtype(out.dtype)
        a = _operand(src, rows, cols, compute)
        b = other.data[:rows, :1] if axis == 0 else other.data[:1, :cols]
        with np.errstate(all="ignore"):
            _write(core, out, fn(a, b.astype(compute)))
    return op


def _check_window(core, op, tensor, offsets, rows, cols):
    shape = tensor.shape
    if len(offsets) != 2 or tensor.ndim != 2:
        raise NotImplementedError(f"{_caller_line()}: pl.{op} on a {tensor.ndim}-D tensor is not interpreted yet")
    r0, c0 = int(offsets[0]), int(offsets[1])
    if r0 < 0 or c0 < 0 or r0 + rows > shape[0] or c0 + cols > shape[1]:
        _fault(core, op, f"GM access out of bounds: tensor of shape {list(shape)}, offsets [{r0}, {c0}], "
                         f"window [{rows}, {cols}]")
    return r0, c0


def _load(core, dst, src, offsets, *, order=None):
    if order is not None:
        raise NotImplementedError(f"{_caller_line()}: pl.load(order=) is not interpreted yet")
    dst = _tile(core, dst, "load", "dst")
    rows, cols = dst.valid
    if src.dtype != dst.dtype:
        raise TypeError(f"{_caller_line()}: pl.load: the tile is {dst.ttype.dtype.pl_name}, the tensor {src.dtype}")
    r0, c0 = _check_window(core, "load", src, offsets, rows, cols)
    dst.data[:rows, :cols] = src[r0:r0 + rows, c0:c0 + cols]
    pad = dst.ttype.pad
    if pad:
        raise NotImplementedError(f"{_caller_line()}: pl.load into a tile with pad= is not interpreted yet")


def _store(core, dst, src, offsets, *, relu_pre_mode=None, scale=None, order=None, atomic=None, phase=None):
    if any(v is not None for v in (relu_pre_mode, scale, order, phase)) or \
            (atomic is not None and atomic.name != "AtomicNone"):
        raise NotImplementedError(f"{_caller_line()}: pl.store with relu_pre_mode/scale/order/atomic/phase is not "
                                  f"interpreted yet")
    src = _tile(core, src, "store", "src")
    rows, cols = src.valid
    if dst.dtype != src.dtype:
        raise TypeError(f"{_caller_line()}: pl.store: the tile is {src.ttype.dtype.pl_name}, the tensor {dst.dtype}")
    r0, c0 = _check_window(core, "store", dst, offsets, rows, cols)
    dst[r0:r0 + rows, c0:c0 + cols] = src.data[:rows, :cols]


def _tile_offsets(tile, idx):
    return [int(idx[0]) * tile.rows, int(idx[1]) * tile.cols]


def _make_tile(core, tile_type, addr=None, size=None):
    if addr is None or size is not None:
        raise NotImplementedError(f"{_caller_line()}: pl.make_tile without addr= (or with size=) is not interpreted yet")
    return _Slot(core, tile_type, addr)


def _make_tile_group(core, type=None, addrs=None, mutex_ids=None, depth=None, fwd_ids=None, bwd_ids=None):
    if depth is None:
        depth = len(mutex_ids) if isinstance(mutex_ids, (list, tuple)) else (len(addrs) if isinstance(addrs, (list, tuple)) else 1)
    if isinstance(addrs, (list, tuple)):
        places = [int(a) for a in addrs]
    else:
        places = [int(addrs) + i * type.nbytes for i in range(depth)]
    return _Group([_Slot(core, type, a) for a in places])


def _set_validshape(core, tile, shape):
    for slot in (tile.slots if isinstance(tile, _Group) else [tile]):
        shape2 = [1, int(shape[0])] if len(shape) == 1 else [int(shape[0]), int(shape[1])]
        if not (0 <= shape2[0] <= slot.rows and 0 <= shape2[1] <= slot.cols):
            _fault(core, "set_validshape", f"valid shape {shape2} is outside the tile's shape {[slot.rows, slot.cols]}")
        slot.valid = shape2


def _expands(core, out, scalar):
    out = _tile(core, out, "expands", "out")
    rows, cols = out.valid
    out.data[:rows, :cols] = _scalar_as(scalar, out.dtype)


def _pto_assert(core, cond, fmt=None, *args, loc=False):
    if not cond:
        text = (fmt % tuple(args)) if fmt else ""
        print(f"[block {core.block} {'AIV' if core.kind == 'vector' else 'AIC'}] {_caller_line()}: Assertion failed"
              f"{': ' + text if text else ''}", flush=True)


def _trap(core):
    _fault(core, "trap", "pl.trap()")


def _nothing(core, *args, **kwargs):
    """Synchronisation: the interpreter runs every op in program order, so flags and barriers hold."""


def _printf(core, fmt, *args, loc=False):
    prefix = f"[block {core.block} {'AIV' if core.kind == 'vector' else 'AIC'}] "
    print(prefix + (fmt % tuple(args)), end="", flush=True)


_OPS = {
    "range": lambda core, *a: range(*[int(v) for v in a]),
    "static_range": lambda core, *a: range(*[int(v) for v in a]),
    "get_block_idx": lambda core: core.block,
    "get_block_num": lambda core: core.block_num,
    "get_subblock_idx": lambda core: 0,
    "get_subblock_num": lambda core: 1,
    "min": lambda core, a, b: min(a, b),
    "max": lambda core, a, b: max(a, b),
    "make_tile": _make_tile,
    "make_tile_group": _make_tile_group,
    "set_validshape": _set_validshape,
    "load": _load,
    "load_tile": lambda core, dst, src, idx, order=None: _load(core, dst, src, _tile_offsets(dst, idx), order=order),
    "store": _store,
    "store_tile": lambda core, dst, src, idx, **kw: _store(core, dst, src, _tile_offsets(src, idx), **kw),
    "add": _binary(np.add, "add"),
    "sub": _binary(np.subtract, "sub"),
    "mul": _binary(np.multiply, "mul"),
    "div": _binary(_int_div, "div"),
    "maximum": _binary(np.maximum, "maximum"),
    "minimum": _binary(np.minimum, "minimum"),
    "adds": _binary(np.add, "adds"),
    "subs": _binary(np.subtract, "subs"),
    "muls": _binary(np.multiply, "muls"),
    "divs": _binary(_int_div, "divs"),
    "maxs": _binary(np.maximum, "maxs"),
    "mins": _binary(np.minimum, "mins"),
    "exp": _unary(np.exp, "exp"),
    "log": _unary(np.log, "log"),
    "sqrt": _unary(np.sqrt, "sqrt"),
    "rsqrt": _unary(_rsqrt, "rsqrt"),
    "recip": _unary(lambda a: np.asarray(1, a.dtype) / a, "recip"),
    "abs": _unary(np.abs, "abs"),
    "neg": _unary(np.negative, "neg"),
    "relu": _unary(lambda a: np.maximum(a, 0), "relu"),
    "expands": _expands,
    "row_sum": _row_reduce(np.sum, "row_sum"),
    "row_max": _row_reduce(np.max, "row_max"),
    "row_min": _row_reduce(np.min, "row_min"),
    "col_sum": _col_reduce(np.sum, "col_sum"),
    "col_max": _col_reduce(np.max, "col_max"),
    "col_min": _col_reduce(np.min, "col_min"),
    "pto_assert": _pto_assert,
    "trap": _trap,
    "printf": _printf,
}
for _op, _fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
                 ("max", np.maximum), ("min", np.minimum)):
    _OPS[f"row_expand_{_op}"] = _expand(_fn, f"row_expand_{_op}", 0)
    _OPS[f"col_expand_{_op}"] = _expand(_fn, f"col_expand_{_op}", 1)
for _name in ("sync_src", "sync_dst", "bar_all", "bar_v", "bar_mte2", "bar_mte3", "bar_m", "bar_mte1", "bar_fix",
              "mutex_lock", "mutex_unlock"):
    _OPS[f"system.{_name}"] = _nothing


class _Sections(ast.NodeTransformer):
    """`with pl.section_vector():` becomes `if __pl_section__("vector"):` on the same lines."""

    def __init__(self):
        self.kinds = set()

    def visit_With(self, node):
        self.generic_visit(node)
        if len(node.items) == 1 and isinstance(node.items[0].context_expr, ast.Call):
            func = node.items[0].context_expr.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("section_vector", "section_cube"):
                kind = name[len("section_"):]
                self.kinds.add(kind)
                test = ast.Call(func=ast.Name(id="__pl_section__", ctx=ast.Load()), args=[ast.Constant(kind)],
                                keywords=[])
                return ast.copy_location(ast.If(test=ast.copy_location(test, node), body=node.body, orelse=[]), node)
        return node


class Interpreter:
    """Runs one kernel's Python function as its blocks' programs."""

    def __init__(self, fn, kernel_name):
        self.kernel = kernel_name
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
        func = tree.body[0]
        if not isinstance(func, ast.FunctionDef):
            raise TypeError(f"pl.jit(interpret=True): kernel '{kernel_name}' is not a plain function")
        func.decorator_list = []
        sections = _Sections()
        tree = ast.fix_missing_locations(sections.visit(tree))
        ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
        if sections.kinds == {"vector", "cube"}:
            self.kind = "mixed"
        else:
            self.kind = "cube" if sections.kinds == {"cube"} else "vector"
        namespace = dict(fn.__globals__)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            namespace[name] = cell.cell_contents
        namespace["__pl_section__"] = self._section
        exec(compile(tree, fn.__code__.co_filename, "exec"), namespace)
        self.fn = namespace[func.name]

    @staticmethod
    def _section(kind):
        return _active.core.kind == kind

    def launch(self, arch, block_dim, args):
        if self.kind != "vector":
            raise NotImplementedError(f"pl.jit(interpret=True): kernel '{self.kernel}' has a cube section; the "
                                      f"interpreter runs vector-only kernels so far (run the compiled kernel)")
        previous = getattr(_active, "core", None)
        try:
            for block in range(block_dim):
                _active.core = _Core(self.kernel, arch, block, block_dim, self.kind)
                self.fn(*args)
        finally:
            _active.core = previous


def host_arguments(kernel_name, spec, values):
    """The launch's arguments as the interpreter hands them to the kernel: tensors as numpy arrays
    that share the caller's memory (stores land in the caller's tensors), scalars as Python numbers."""
    out = []
    for param, value in zip(spec.params, values):
        if param.kind == "tensor":
            array = value.detach().numpy() if hasattr(value, "detach") else value
            if not isinstance(array, np.ndarray):
                raise TypeError(f"{kernel_name}: argument '{param.name}' must be a torch tensor or numpy array, "
                                f"got {type(value).__name__}")
            expected = _NP_DTYPES.get(param.dtype.name) if param.dtype is not None else None
            if expected is not None and array.dtype != np.dtype(expected):
                raise TypeError(f"{kernel_name}: argument '{param.name}' must be {param.dtype.pl_name}, got {array.dtype}")
            out.append(array)
        elif param.kind == "scalar":
            if param.dtype.name.startswith(("fp", "bf")):
                out.append(float(np.float32(value)) if param.dtype.name == "fp32" else float(value))
            else:
                out.append(int(value))
        else:
            raise NotImplementedError(f"{kernel_name}: a {param.kind} parameter ('{param.name}') is not interpreted "
                                      f"yet; run the compiled kernel")
    return out


__all__ = ["Interpreter", "active_call", "running"]
