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
import sys
import threading

import numpy as np

from pypto_pro.errors import KernelDeadlock, KernelFault

_active = threading.local()  # .core: the _Core whose program runs on this thread

_NP_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
              "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64}


def running():
    """Whether an interpreted kernel runs on this thread (pl.<name>(...) then calls `active_call`)."""
    return getattr(_active, "core", None) is not None


def active_call(name, args, kwargs):
    """What pl.<name>(...) does in the interpreted kernel running on this thread."""
    impl = _OPS.get(name)
    if impl is None:
        raise NotImplementedError(f"{_caller_line()}: pl.{name} is not supported by the interpreter yet "
                                  f"(pl.jit(interpret=True)); run the compiled kernel (interpret=False)")
    return impl(_active.core, *args, **kwargs)


def _caller():
    """(file, line) of the kernel code that called into the interpreter."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename == __file__ or
                                 "pypto_pro/language/" in frame.f_code.co_filename):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", None)


def _caller_line():
    file, line = _caller()
    return f"{file}:{line}"


def _np_dtype(dtype):
    try:
        return np.dtype(_NP_DTYPES[dtype.name])
    except KeyError:
        raise NotImplementedError(f"{_caller_line()}: the interpreter has no {dtype.pl_name} elements yet "
                                  f"(numpy has no such type); run the compiled kernel") from None


def _fault(core, op, message):
    file, line = _caller()
    raise KernelFault(f"kernel '{core.kernel}' (interpreted) faulted in {op} at {file}:{line}, block {core.block}: "
                      f"{message}", kernel=core.kernel, block=core.block, core=core.name, source_file=file,
                      line=line, op=op)


_FRACTAL_DEFAULT = {"Mat": "NZ", "Left": "NZ", "Right": "ZN", "Acc": "NZ"}


class _Slot:
    """One tile slot: a typed window at a byte address of a local memory (logical row-major, as the
    simulator keeps it), with its current valid window. `data` is the tile on the core that declared
    it; a cross-core move reaches the same address of the peer core's memory (`on`)."""

    def __init__(self, core, ttype, addr):
        shape = list(ttype.shape)
        self.rows, self.cols = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
        self.ttype = ttype
        self.dtype = _np_dtype(ttype.dtype)
        self.space = ttype.target_memory.name
        self.layout = ttype.layout.name if ttype.layout is not None else _FRACTAL_DEFAULT.get(self.space, "ND")
        self.fractal = self.layout in ("NZ", "ZN")
        self.addr = int(addr)
        self.core = core
        self._views = {}
        if core.has_memory(self.space):
            self.on(core)  # checks that it fits
        valid = list(ttype.valid_shape) if ttype.valid_shape is not None else [-1] * len(shape)
        if len(valid) == 1:
            valid = [1] + valid
        self.valid = [self.rows if valid[0] == -1 else valid[0], self.cols if valid[1] == -1 else valid[1]]

    def on(self, core):
        """The tile's elements in `core`'s memory."""
        view = self._views.get(id(core))
        if view is None:
            memory = core.memory(self.space)
            nbytes = self.rows * self.cols * self.dtype.itemsize
            if self.addr < 0 or self.addr + nbytes > len(memory):
                _fault(self.core, "make_tile", f"a {self.ttype.shape} {self.ttype.dtype.pl_name} tile at "
                                               f"{self.addr:#x} does not fit the {self.space} memory ({len(memory)} bytes)")
            view = np.frombuffer(memory, dtype=self.dtype, count=self.rows * self.cols,
                                 offset=self.addr).reshape(self.rows, self.cols)
            self._views[id(core)] = view
        return view

    @property
    def data(self):
        return self.on(self.core)

    @property
    def window(self):
        """The valid window as a numpy view (what pdb shows)."""
        return self.data[:self.valid[0], :self.valid[1]]

    @property
    def valid_shape(self):
        return list(self.valid)

    def __getitem__(self, key):
        if isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, slice) for k in key):
            return _Subview(self, key)
        return _getval(_active.core, self, key)

    def __setitem__(self, key, value):
        _setval(_active.core, self, key, value)

    def __repr__(self):
        where = f"<tile {self.space} {self.ttype.dtype.pl_name} {[self.rows, self.cols]} at {self.addr:#x}, " \
                f"valid {self.valid}>"
        return f"{where}\n{self.window!r}" if self.core.has_memory(self.space) else where


class _Subview(_Slot):
    """tile[r0:r1, c0:c1]: the same bytes from (r0, c0) with the tile's row stride; its valid window
    is the slice clamped to the tile's window when it is taken, and fixed."""

    def __init__(self, parent, key):
        core = _active.core
        bounds = []
        for k, size in zip(key, (parent.rows, parent.cols)):
            if k.step is not None:
                raise TypeError(f"{_caller_line()}: a tile subview takes no step")
            lo = 0 if k.start is None else int(k.start)
            hi = size if k.stop is None else int(k.stop)
            if not 0 <= lo <= hi <= size:
                _fault(core, "subview", f"the slice [{lo}:{hi}] is outside the tile's dim of {size}")
            bounds.append((lo, hi))
        (r0, r1), (c0, c1) = bounds
        if parent.layout not in ("ND",) or isinstance(parent, _Subview):
            raise NotImplementedError(f"{_caller_line()}: a subview of a {parent.layout} tile (or of a subview) is "
                                      f"not interpreted yet")
        self.parent, self.r0, self.c0 = parent, r0, c0
        self.rows, self.cols = r1 - r0, c1 - c0
        self.ttype, self.dtype, self.space, self.layout = parent.ttype, parent.dtype, parent.space, parent.layout
        self.fractal, self.addr, self.core, self._views = False, parent.addr, parent.core, {}
        self.valid = [max(0, min(r1, parent.valid[0]) - r0), max(0, min(c1, parent.valid[1]) - c0)]

    def on(self, core):
        return self.parent.on(core)[self.r0:self.r0 + self.rows, self.c0:self.c0 + self.cols]


def _linear(core, op, container, key):
    """The element a linear offset, or one index per dim (row-major), names; checked."""
    if isinstance(container, _Slot):
        if container.layout != "ND" or container.space != "Vec":
            raise NotImplementedError(f"{_caller_line()}: pl.{op} on a {container.layout} {container.space} tile is "
                                      f"not interpreted yet")
        shape = (container.rows, container.cols)
    else:
        shape = container.shape
    if isinstance(key, tuple):
        if len(key) != len(shape):
            raise TypeError(f"{_caller_line()}: pl.{op}: {len(key)} indices for {len(shape)} dims")
        offset = 0
        for k, n in zip(key, shape):
            offset = offset * n + int(k)
    else:
        offset = int(key)
    total = int(np.prod(shape))
    if not 0 <= offset < total:
        _fault(core, op, f"element offset {offset} is outside the {list(shape)} "
                         f"{'tile' if isinstance(container, _Slot) else 'tensor'} ({total} elements)")
    return divmod(offset, shape[-1]) if isinstance(container, _Slot) else np.unravel_index(offset, shape)


def _getval(core, container, key):
    index = _linear(core, "getval", container, key)
    value = (container.data if isinstance(container, _Slot) else container)[index]
    return float(value) if np.issubdtype(value.dtype, np.floating) else int(value)


def _setval(core, container, key, value):
    index = _linear(core, "setval", container, key)
    target = container.data if isinstance(container, _Slot) else container
    target[index] = _scalar_as(value, target.dtype)


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
    """One core of a block: its kind, numbering (as the compiled path reports it) and memories."""

    def __init__(self, kernel, arch, block, block_num, kind, subblock=0, mixed=False):
        self.kernel = kernel
        self.block = block
        self.block_num = block_num
        self.kind = kind  # "vector" or "cube"
        self.subblock = subblock
        self.mixed = mixed
        if kind == "cube":
            self.name = "AIC" if mixed else f"AIC {block}"
        else:
            self.name = f"AIV {subblock}" if mixed else f"AIV {block}"
        self.capacity = arch["capacity"]
        self.memories = {}
        self.peers = None  # a mixed block's cores: [AIC, AIV 0, AIV 1]
        self.flags = None  # the block's cross-core counters
        self.turns = None  # how the block's cores take turns

    def has_memory(self, space):
        return (space == "Vec") == (self.kind == "vector") and space in self.capacity

    def memory(self, space):
        if space not in self.memories:
            if not self.has_memory(space):
                raise NotImplementedError(f"{_caller_line()}: a {space} tile on the "
                                          f"{'vector' if self.kind == 'vector' else 'cube'} core is not interpreted")
            self.memories[space] = bytearray(self.capacity[space])
        return self.memories[space]

    @property
    def block_idx(self):
        # AIVs of a mixed kernel are numbered across the launch (docs/language.md#blocks)
        return 2 * self.block + self.subblock if self.mixed and self.kind == "vector" else self.block


def _tile(core, value, op, what, spaces=("Vec",)):
    if not isinstance(value, _Slot):
        raise TypeError(f"{_caller_line()}: pl.{op} {what} must be a tile, got {value!r}")
    if value.space not in spaces:
        raise NotImplementedError(f"{_caller_line()}: pl.{op} on a {value.space} tile is not interpreted yet")
    if value.fractal and value.ttype.compact != 1 and value.valid != [value.rows, value.cols]:
        _fault(core, op, f"the fractal ({value.layout}) tile {what} holds a partial valid window {value.valid} of "
                         f"its shape {[value.rows, value.cols]} without TileType(compact=1)")
    return value


def _scalar_as(value, dtype):
    return np.array(value).astype(dtype) if np.issubdtype(dtype, np.integer) else dtype.type(value)


def _compute_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _write(out, value):
    """`value` (the output's valid window) rounded to the output's element type, into it."""
    rows, cols = out.valid
    out.data[:rows, :cols] = np.asarray(value).astype(out.dtype)


def _operand(src, rows, cols, compute):
    """The [rows, cols] corner of a tile, in the type ops compute in."""
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
            if name in ("div", "divs") and np.issubdtype(out.dtype, np.integer) and (b == 0).any():
                _fault(core, name, "integer division by zero in a tile")
        else:
            b = np.asarray(_scalar_as(rhs, out.dtype)).astype(compute)
            if name in ("div", "divs") and np.issubdtype(out.dtype, np.integer) and b == 0:
                _fault(core, "divs", "integer division by zero")
        with np.errstate(all="ignore"):
            _write(out, fn(a, b))
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
            _write(out, fn(_operand(src, rows, cols, _compute_dtype(out.dtype))))
    return op


def _rsqrt(a):
    return np.float32(1.0) / np.sqrt(a)  # both steps rounded, as the compiled path (and torch.rsqrt)


def _reduce(fn, name, axis):
    """Row (axis 1: out [R, 1]) or column (axis 0: out [1, C]) reductions of the source's window."""
    def op(core, out, src, tmp=None):
        out = _tile(core, out, name, "out")
        src = _tile(core, src, name, "src")
        rows, cols = src.valid
        if rows == 0 or cols == 0:
            return
        result = fn(_operand(src, rows, cols, _compute_dtype(src.dtype)), axis=axis, keepdims=True)
        out.data[:result.shape[0], :result.shape[1]] = result.astype(out.dtype)
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
            _write(out, fn(a, b.astype(compute)))
    return op


def _gm_window(core, op, tensor, offsets, rows, cols, order):
    """The tensor's elements a tile window reads or writes, as a [rows, cols] numpy view: rows along
    axis order[0], columns along order[1] (default: the last two axes), the other axes at their
    offsets. Out of the tensor is a KernelFault."""
    ndim = tensor.ndim
    offsets = [int(o) for o in offsets]
    if len(offsets) != ndim:
        raise TypeError(f"{_caller_line()}: pl.{op}: {len(offsets)} offsets for a {ndim}-D tensor")
    r_axis, c_axis = (ndim - 2, ndim - 1) if order is None else (int(order[0]), int(order[1]))
    if ndim == 1:
        r_axis, c_axis = None, 0
    extent = [1] * ndim
    if r_axis is not None:
        extent[r_axis] = rows
    extent[c_axis] = cols
    if r_axis is None and rows > 1:
        _fault(core, op, f"a [{rows}, {cols}] window on a 1-D tensor")
    if any(o < 0 or o + e > n for o, e, n in zip(offsets, extent, tensor.shape)):
        _fault(core, op, f"GM access out of bounds: tensor of shape {list(tensor.shape)}, offsets {offsets}, "
                         f"window [{rows}, {cols}]")
    index = tuple(slice(o, o + e) if axis in (r_axis, c_axis) else o
                  for axis, (o, e) in enumerate(zip(offsets, extent)))
    view = tensor[index]
    if r_axis is None:
        return view.reshape(1, cols)
    return view.T if r_axis > c_axis else view


def _load(core, dst, src, offsets, *, order=None):
    dst = _tile(core, dst, "load", "dst", ("Vec", "Mat"))
    if dst.ttype.pad:
        raise NotImplementedError(f"{_caller_line()}: pl.load into a tile with pad= is not interpreted yet")
    rows, cols = dst.valid
    if src.dtype != dst.dtype:
        raise TypeError(f"{_caller_line()}: pl.load: the tile is {dst.ttype.dtype.pl_name}, the tensor {src.dtype}")
    dst.data[:rows, :cols] = _gm_window(core, "load", src, offsets, rows, cols, order)


def _store(core, dst, src, offsets, *, relu_pre_mode=None, scale=None, order=None, atomic=None, phase=None):
    if phase is not None:
        raise NotImplementedError(f"{_caller_line()}: pl.store with phase= is not interpreted yet")
    src = _tile(core, src, "store", "src", ("Vec", "Acc"))
    rows, cols = src.valid
    out_dtype = dst.dtype
    values = src.data[:rows, :cols]
    if src.space == "Acc":
        values = _fixpipe(core, "store", values, out_dtype, relu_pre_mode, scale)
    elif relu_pre_mode is not None or scale is not None:
        raise ValueError(f"{_caller_line()}: pl.store: relu_pre_mode= and scale= need an Acc source (the fixpipe)")
    elif out_dtype != src.dtype:
        raise TypeError(f"{_caller_line()}: pl.store: the tile is {src.ttype.dtype.pl_name}, the tensor {dst.dtype}")
    region = _gm_window(core, "store", dst, offsets, rows, cols, order)  # a view: writes land in the tensor
    if atomic is not None and atomic.name == "AtomicAdd":
        compute = _compute_dtype(region.dtype)
        with np.errstate(all="ignore"):
            region[...] = (region.astype(compute) + values.astype(compute)).astype(region.dtype)
    else:
        region[...] = values


def _fixpipe(core, op, acc, out_dtype, relu_pre_mode, scale):
    """The fixpipe's path out of Acc: ReLU, the per-tensor factor, then the conversion
    (docs/language.md#the-fixpipe)."""
    if scale is not None and not isinstance(scale, (int, float)):
        raise NotImplementedError(f"{_caller_line()}: pl.{op}(scale=) with a tile or run-time scalar is not "
                                  f"interpreted yet")
    values = acc
    if relu_pre_mode is not None:
        values = np.maximum(values, 0)
    integer_acc = np.issubdtype(acc.dtype, np.integer)
    if scale is not None:
        values = values.astype(np.float32) * np.float32(scale)
    elif integer_acc and out_dtype != np.int32:
        raise ValueError(f"{_caller_line()}: pl.{op}: an int32 accumulator writes {out_dtype} only with scale=")
    if out_dtype == np.int8:
        if scale is None:
            raise ValueError(f"{_caller_line()}: pl.{op}: fp32 -> int8 needs scale= (quantisation)")
        with np.errstate(invalid="ignore"):
            return np.clip(np.nan_to_num(np.rint(values), nan=0.0), -128, 127).astype(np.int8)
    if out_dtype == np.int32 and not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{_caller_line()}: pl.{op}: an fp32 accumulator does not write int32")
    return values.astype(out_dtype)


def _matmul(core, dst, lhs, rhs, bias=None, acc=None, op="matmul"):
    dst = _tile(core, dst, op, "dst", ("Acc",))
    lhs = _tile(core, lhs, op, "lhs", ("Left",))
    rhs = _tile(core, rhs, op, "rhs", ("Right",))
    m, k = lhs.valid
    n = rhs.valid[1]
    for name, value in (("M", m), ("K", k), ("N", n)):
        if not 1 <= value <= 4095:
            _fault(core, op, f"{name} = {value} is outside 1..4095")
    if rhs.valid[0] < k:
        _fault(core, op, f"rhs holds {rhs.valid[0]} valid rows, lhs has K = {k} columns")
    if m > dst.rows or n > dst.cols:
        _fault(core, op, f"the [{m}, {n}] product does not fit dst {[dst.rows, dst.cols]}")
    if np.issubdtype(lhs.dtype, np.integer):
        product = lhs.data[:m, :k].astype(np.int64) @ rhs.data[:k, :n].astype(np.int64)
    else:
        product = lhs.data[:m, :k].astype(np.float32) @ rhs.data[:k, :n].astype(np.float32)
    if acc is not None:
        acc = _tile(core, acc, op, "acc", ("Acc",))
        product = acc.data[:m, :n].astype(product.dtype) + product
    if bias is not None:
        bias = _tile(core, bias, op, "bias", ("Bias",))
        product = product + bias.data[:1, :n].astype(product.dtype)
    with np.errstate(all="ignore"):
        dst.data[:m, :n] = product.astype(dst.dtype)


def _copy_window(core, op, dst_view, dst, src_values):
    rows, cols = src_values.shape
    if rows > dst.rows or cols > dst.cols:
        _fault(core, op, f"the source window [{rows}, {cols}] does not fit the destination {[dst.rows, dst.cols]}")
    dst_view[:rows, :cols] = src_values


def _move(core, dst, src, offset=None, *, acc_to_vec_mode=None, relu_pre_mode=None, scale=None):
    path = (src.space, dst.space)
    if path in (("Mat", "Left"), ("Mat", "Right")):
        dst = _tile(core, dst, "move", "dst", ("Left", "Right"))
        src = _tile(core, src, "move", "src", ("Mat",))
        rows, cols = src.valid
        values = src.data[:rows, :cols]
        swapped = [dst.rows, dst.cols] == [src.cols, src.rows] and dst.rows != dst.cols and dst.layout != src.layout
        if offset is not None:
            r0, c0 = int(offset[0]), int(offset[1])
            dr, dc = dst.valid
            if swapped or (dst.layout != src.layout and (dr > rows or dc > cols)):
                if r0 + dc > rows or c0 + dr > cols:
                    _fault(core, "move", f"the transposed [{dc}, {dr}] window at {[r0, c0]} is outside the source's "
                                         f"valid window {src.valid}")
                dst.data[:dr, :dc] = src.data[r0:r0 + dc, c0:c0 + dr].T
                return
            if r0 + dr > rows or c0 + dc > cols:
                _fault(core, "move", f"the [{dr}, {dc}] window at {[r0, c0]} is outside the source's valid window "
                                     f"{src.valid}")
            dst.data[:dr, :dc] = src.data[r0:r0 + dr, c0:c0 + dc]
            return
        _copy_window(core, "move", dst.data, dst, values.T if swapped else values)
        return
    if path == ("Acc", "Vec"):
        src = _tile(core, src, "move", "src", ("Acc",))
        if offset is not None:
            raise NotImplementedError(f"{_caller_line()}: pl.move(offset=) from Acc is not interpreted yet")
        values = _fixpipe(core, "move", src.data[:src.valid[0], :src.valid[1]], dst.dtype, relu_pre_mode, scale)
        mode = acc_to_vec_mode.name if acc_to_vec_mode is not None else "SingleModeVec0"
        if not core.mixed:
            raise NotImplementedError(f"{_caller_line()}: pl.move Acc -> Vec outside a mixed kernel is not interpreted")
        aiv0, aiv1 = core.peers[1], core.peers[2]
        if mode == "SingleModeVec0":
            parts = [(aiv0, values)]
        elif mode == "SingleModeVec1":
            parts = [(aiv1, values)]
        elif mode == "DualModeSplitM":
            half = values.shape[0] // 2
            parts = [(aiv0, values[:half]), (aiv1, values[half:])]
        else:
            half = values.shape[1] // 2
            parts = [(aiv0, values[:, :half]), (aiv1, values[:, half:])]
        for aiv, part in parts:
            _copy_window(core, "move", dst.on(aiv), dst, part)
        return
    if path == ("Vec", "Mat"):
        _insert(core, dst, src, [0, 0], op="move")
        return
    if path == ("Vec", "Vec"):
        dst = _tile(core, dst, "move", "dst")
        src = _tile(core, src, "move", "src")
        if offset is not None:
            raise NotImplementedError(f"{_caller_line()}: pl.move(offset=) between Vec tiles is not interpreted yet")
        _copy_window(core, "move", dst.data, dst, src.data[:src.valid[0], :src.valid[1]])
        return
    raise NotImplementedError(f"{_caller_line()}: pl.move {src.space} -> {dst.space} is not interpreted yet")


def _insert(core, dst, src, offset, op="insert"):
    """Vec -> Mat: into the AIC's L1 in a mixed kernel; an NZ source lands transposed in a ZN tile."""
    src = _tile(core, src, op, "src")
    if not isinstance(dst, _Slot) or dst.space != "Mat":
        raise TypeError(f"{_caller_line()}: pl.{op}: the destination must be a Mat tile")
    target = core.peers[0] if core.mixed else core
    view = dst.on(target)
    rows, cols = src.valid
    r0, c0 = int(offset[0]), int(offset[1])
    values = src.data[:rows, :cols]
    if dst.layout == "ZN":
        if c0 + cols > dst.rows or r0 + rows > dst.cols:
            _fault(core, op, f"the transposed [{cols}, {rows}] window at {[c0, r0]} does not fit the destination "
                             f"{[dst.rows, dst.cols]}")
        view[c0:c0 + cols, r0:r0 + rows] = values.T
        return
    if r0 + rows > dst.rows or c0 + cols > dst.cols:
        _fault(core, op, f"the [{rows}, {cols}] window at {[r0, c0]} does not fit the destination "
                         f"{[dst.rows, dst.cols]}")
    view[r0:r0 + rows, c0:c0 + cols] = values


def _directed(exact, rounded, mode):
    """`rounded` (nearest-even of `exact`, in the target float type) moved to the neighbour `mode`
    asks for (docs/device.md#numerics)."""
    r64 = rounded.astype(np.float64)
    with np.errstate(all="ignore"):
        up = np.nextafter(rounded, np.asarray(np.inf, rounded.dtype))
        down = np.nextafter(rounded, np.asarray(-np.inf, rounded.dtype))
        if mode == "CAST_FLOOR":
            return np.where(r64 > exact, down, rounded)
        if mode == "CAST_CEIL":
            return np.where(r64 < exact, up, rounded)
        if mode == "CAST_TRUNC":
            return np.where(np.abs(r64) > np.abs(exact), np.where(exact > 0, down, up), rounded)
        # CAST_ROUND: ties away from zero (nearest-even picked the neighbour toward zero on half of them)
        other = np.where(exact > r64, up, down)
        tie = np.abs(exact - r64) == np.abs(other.astype(np.float64) - exact)
        return np.where(tie & (np.abs(r64) < np.abs(exact)), other, rounded)


def _cast(core, out, src, mode=None):
    out = _tile(core, out, "cast", "out")
    src = _tile(core, src, "cast", "src")
    mode = mode.name if mode is not None else "CAST_ROUND"
    rows, cols = out.valid
    values = src.data[:rows, :cols]
    target = out.dtype
    if mode == "CAST_ODD" or values.dtype.itemsize > 4 and np.issubdtype(values.dtype, np.integer):
        raise NotImplementedError(f"{_caller_line()}: pl.cast with {mode} from {values.dtype} is not interpreted yet")
    exact = values.astype(np.float64)  # every fp16/fp32/int8..32 value exactly
    with np.errstate(all="ignore"):
        if np.issubdtype(target, np.floating):
            if np.issubdtype(values.dtype, np.floating) and target.itemsize >= values.dtype.itemsize:
                result = values.astype(target)  # widening: exact
            else:
                result = exact.astype(target)
                if mode not in ("CAST_RINT", "CAST_NONE"):
                    result = _directed(exact, result, mode)
        elif np.issubdtype(values.dtype, np.integer):
            result = values.astype(target)  # int -> int wraps
        else:
            rounding = {"CAST_RINT": np.rint, "CAST_NONE": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil,
                        "CAST_TRUNC": np.trunc,
                        "CAST_ROUND": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}[mode]
            info = np.iinfo(target)
            result = np.clip(np.nan_to_num(rounding(exact), nan=0.0), info.min, info.max).astype(target)
    out.data[:rows, :cols] = result


def _overlap(core, op, a, b, what):
    """A KernelFault when two tiles of one memory share bytes (ops whose operands must not)."""
    if a.space == b.space and a is not b:
        a0, b0 = a.addr, b.addr
        a1, b1 = a0 + a.rows * a.cols * a.dtype.itemsize, b0 + b.rows * b.cols * b.dtype.itemsize
        if a0 < b1 and b0 < a1:
            _fault(core, op, f"{what} overlap")


def _bits(value, dtype):
    """An integer scalar as a bit pattern of the element's width."""
    return np.array(int(value) & ((1 << (8 * dtype.itemsize)) - 1), dtype=np.uint64).astype(dtype)


def _bitwise(fn, name):
    def op(core, out, lhs, rhs, tmp=None):
        out, lhs = _tile(core, out, name, "out"), _tile(core, lhs, name, "lhs")
        rows, cols = out.valid
        a = lhs.data[:rows, :cols]
        if isinstance(rhs, _Slot):
            b = _tile(core, rhs, name, "rhs").data[:rows, :cols]
        else:
            b = _bits(rhs, out.dtype)
        if tmp is not None:
            tmp = _tile(core, tmp, name, "tmp")
            for other, label in ((out, "tmp and out"), (lhs, "tmp and lhs"), (rhs, "tmp and rhs")):
                _overlap(core, name, tmp, other, label)
        _write(out, fn(a, b))
    return op


def _not(core, out, src):
    out, src = _tile(core, out, "not_", "out"), _tile(core, src, "not_", "src")
    _write(out, np.invert(_operand(src, *out.valid, src.dtype)))


def _shift(left):
    name = "shl" if left else "shr"

    def op(core, out, lhs, rhs):
        out, lhs, rhs = (_tile(core, t, name, w) for t, w in ((out, "out"), (lhs, "lhs"), (rhs, "rhs")))
        rows, cols = out.valid
        amounts = rhs.data[:rows, :cols]
        bits = 8 * out.dtype.itemsize
        bad = np.argwhere((amounts.astype(np.int64) < 0) | (amounts.astype(np.int64) >= bits))
        if len(bad):
            r, c = bad[0]
            _fault(core, name, f"shift amount {amounts[r, c]} in 'rhs' (element [{r}, {c}]) is outside [0, {bits}): "
                               f"the amount must be at least 0 and less than the element's bit width")
        a = lhs.data[:rows, :cols]
        with np.errstate(all="ignore"):
            out.data[:rows, :cols] = (np.left_shift(a, amounts.astype(a.dtype)) if left
                                      else np.right_shift(a, amounts.astype(a.dtype)))
    return op


def _compare(fn, name):
    def op(core, mask, lhs, rhs):
        mask, lhs = _tile(core, mask, name, "out"), _tile(core, lhs, name, "lhs")
        rows, cols = mask.valid
        if rows <= 0 or cols <= 0:
            return
        a = lhs.data[:rows, :cols].astype(np.float64 if lhs.dtype.kind == "f" else np.int64)
        if isinstance(rhs, _Slot):
            b = _tile(core, rhs, name, "rhs").data[:rows, :cols].astype(a.dtype)
        else:
            b = np.asarray(_scalar_as(rhs, lhs.dtype)).astype(a.dtype)
        packed = np.packbits(fn(a, b), axis=1, bitorder="little")  # element c in bit c % 8 of byte c // 8
        mask.data[:rows, :packed.shape[1]] = packed
    return op


def _select(core, out, mask, lhs, rhs, tmp=None):
    out, mask, lhs = (_tile(core, t, "select", w) for t, w in ((out, "out"), (mask, "mask"), (lhs, "lhs")))
    rows, cols = out.valid
    if rows <= 0 or cols <= 0:
        return
    picks = np.unpackbits(mask.data[:rows, :(cols + 7) // 8], axis=1, bitorder="little")[:, :cols].astype(bool)
    other = _tile(core, rhs, "select", "rhs").data[:rows, :cols] if isinstance(rhs, _Slot) else \
        _scalar_as(rhs, out.dtype)
    out.data[:rows, :cols] = np.where(picks, lhs.data[:rows, :cols], other)


def _transpose(core, out, src):
    out, src = _tile(core, out, "transpose", "out"), _tile(core, src, "transpose", "src")
    if out.layout != "ND" or src.layout != "ND":
        raise NotImplementedError(f"{_caller_line()}: pl.transpose of DN tiles is not interpreted yet")
    _overlap(core, "transpose", out, src, "out and src")
    rows, cols = src.valid
    out.data[:cols, :rows] = src.data[:rows, :cols].T


def _fill_index(core, out, start):
    out = _tile(core, out, "fill_index", "out")
    cols = out.valid[1]
    out.data[0, :cols] = (np.arange(cols, dtype=np.int64) + int(start)).astype(out.dtype)


def _relu_into(sign, name):
    def op(core, out, lhs, rhs):
        out, lhs = _tile(core, out, name, "out"), _tile(core, lhs, name, "lhs")
        rhs = _tile(core, rhs, name, "rhs")
        rows, cols = out.valid
        compute = _compute_dtype(out.dtype)
        with np.errstate(all="ignore"):
            total = (lhs.data[:rows, :cols].astype(compute) + sign * rhs.data[:rows, :cols].astype(compute))
            lhs.data[:rows, :cols] = total.astype(lhs.dtype)  # lhs keeps the rounded intermediate
            out.data[:rows, :cols] = np.maximum(lhs.data[:rows, :cols], 0).astype(out.dtype)
    return op


def _addc(core, out, a, b, c):
    out, a, b, c = (_tile(core, t, "addc", w) for t, w in ((out, "out"), (a, "a"), (b, "b"), (c, "c")))
    rows, cols = out.valid
    compute = _compute_dtype(out.dtype)
    with np.errstate(all="ignore"):
        first = (a.data[:rows, :cols].astype(compute) + b.data[:rows, :cols].astype(compute)).astype(out.dtype)
        out.data[:rows, :cols] = (first.astype(compute) + c.data[:rows, :cols].astype(compute)).astype(out.dtype)


class _Flags:
    """A mixed block's cross-core counters (as the compiled path's CrossCoreFlags): per direction and
    event id, the sets not yet waited for."""

    AIC_TO_AIV0, AIV0_TO_AIC, AIV0_TO_AIV1 = 0, 2, 4

    def __init__(self):
        self.pending = {}

    @staticmethod
    def route(set_, index, mode, event):
        aic = index == 0
        aiv = index - 1
        if mode == "INTRA_BLOCK":
            if aic:
                first = _Flags.AIC_TO_AIV0 if set_ else _Flags.AIV0_TO_AIC
                return [(first, event), (first + 1, event)]
            return [((_Flags.AIV0_TO_AIC if set_ else _Flags.AIC_TO_AIV0) + aiv, event)]
        if mode == "UNICAST_BLOCK":
            if aic:
                return [((_Flags.AIC_TO_AIV0 if set_ else _Flags.AIV0_TO_AIC) + event // 16, event % 16)]
            return [((_Flags.AIV0_TO_AIC if set_ else _Flags.AIC_TO_AIV0) + aiv, event)]
        if mode == "INTER_SUBBLOCK":
            return [(_Flags.AIV0_TO_AIV1 + (aiv if set_ else 1 - aiv), event)]
        raise NotImplementedError(f"{_caller_line()}: sync_mode={mode} is not interpreted yet")

    def set(self, route):
        for key in route:
            self.pending[key] = self.pending.get(key, 0) + 1

    def ready(self, route):
        return all(self.pending.get(key, 0) > 0 for key in route)

    def take(self, route):
        for key in route:
            self.pending[key] -= 1


def _index(core):
    return 0 if core.kind == "cube" else 1 + core.subblock


def _mode(sync_mode):
    return sync_mode.name if sync_mode is not None else "INTRA_BLOCK"


def _set_cross_core(core, pipe=None, event_id=None, sync_mode=None):
    if not core.mixed:
        raise NotImplementedError(f"{_caller_line()}: pl.system.set_cross_core outside a mixed kernel is not "
                                  f"interpreted yet")
    core.flags.set(_Flags.route(True, _index(core), _mode(sync_mode), int(event_id)))


def _wait_cross_core(core, pipe=None, event_id=None, sync_mode=None):
    if not core.mixed:
        raise NotImplementedError(f"{_caller_line()}: pl.system.wait_cross_core outside a mixed kernel is not "
                                  f"interpreted yet")
    route = _Flags.route(False, _index(core), _mode(sync_mode), int(event_id))
    if not core.flags.ready(route):
        core.turns.wait_until(core, lambda: core.flags.ready(route),
                              f"pl.system.wait_cross_core(event_id={int(event_id)}, sync_mode={_mode(sync_mode)}) "
                              f"at {_caller_line()}")
    core.flags.take(route)


def _tile_offsets(tile, idx, order=None):
    """load_tile/store_tile: the tile index times the tile's shape along the two axes the tile spans
    (the last two, or order's); other axes are element offsets."""
    offsets = [int(i) for i in idx]
    if len(offsets) == 1:
        return [offsets[0] * tile.cols]
    r_axis, c_axis = (len(offsets) - 2, len(offsets) - 1) if order is None else (int(order[0]), int(order[1]))
    offsets[r_axis] *= tile.rows
    offsets[c_axis] *= tile.cols
    return offsets


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
    if isinstance(tile, _Subview):
        raise TypeError(f"{_caller_line()}: pl.set_validshape on a subview (set the viewed tile's window first)")
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
        print(f"{_prefix(core)}{_caller_line()}: Assertion failed"
              f"{': ' + text if text else ''}", flush=True)


def _trap(core):
    _fault(core, "trap", "pl.trap()")


def _nothing(core, *args, **kwargs):
    """Synchronisation: the interpreter runs every op in program order, so flags and barriers hold."""


def _printf(core, fmt, *args, loc=False):
    print(_prefix(core) + (fmt % tuple(args)), end="", flush=True)


def _prefix(core):
    """The compiled path's line prefix: "[block 3 AIV] ", "[block 3 AIV 1] " in a mixed kernel."""
    unit = "AIC" if core.kind == "cube" else ("AIV " + str(core.subblock) if core.mixed else "AIV")
    return f"[block {core.block} {unit}] "


_OPS = {
    "range": lambda core, *a: range(*[int(v) for v in a]),
    "static_range": lambda core, *a: range(*[int(v) for v in a]),
    "get_block_idx": lambda core: core.block_idx,
    "get_block_num": lambda core: core.block_num,
    "get_subblock_idx": lambda core: core.subblock,
    "get_subblock_num": lambda core: 2 if core.mixed and core.kind == "vector" else 1,
    "min": lambda core, a, b: min(a, b),
    "max": lambda core, a, b: max(a, b),
    "make_tile": _make_tile,
    "make_tile_group": _make_tile_group,
    "set_validshape": _set_validshape,
    "load": _load,
    "load_tile": lambda core, dst, src, idx, order=None: _load(core, dst, src, _tile_offsets(dst, idx, order),
                                                                order=order),
    "store": _store,
    "store_tile": lambda core, dst, src, idx, **kw: _store(core, dst, src, _tile_offsets(src, idx, kw.get("order")),
                                                           **kw),
    "exp": _unary(np.exp, "exp"),
    "log": _unary(np.log, "log"),
    "sqrt": _unary(np.sqrt, "sqrt"),
    "rsqrt": _unary(_rsqrt, "rsqrt"),
    "recip": _unary(lambda a: np.asarray(1, a.dtype) / a, "recip"),
    "abs": _unary(np.abs, "abs"),
    "neg": _unary(np.negative, "neg"),
    "relu": _unary(lambda a: np.maximum(a, 0), "relu"),
    "expands": _expands,
    "cast": _cast,
    "and_": _bitwise(np.bitwise_and, "and_"),
    "or_": _bitwise(np.bitwise_or, "or_"),
    "xor": _bitwise(np.bitwise_xor, "xor"),
    "not_": _not,
    "shl": _shift(True),
    "shr": _shift(False),
    "eq": _compare(np.equal, "eq"),
    "ne": _compare(np.not_equal, "ne"),
    "lt": _compare(np.less, "lt"),
    "le": _compare(np.less_equal, "le"),
    "gt": _compare(np.greater, "gt"),
    "ge": _compare(np.greater_equal, "ge"),
    "select": _select,
    "transpose": _transpose,
    "fill_index": _fill_index,
    "add_relu": _relu_into(1, "add_relu"),
    "sub_relu": _relu_into(-1, "sub_relu"),
    "addc": _addc,
    "getval": _getval,
    "setval": _setval,
    "matmul": _matmul,
    "matmul_acc": lambda core, dst, acc, lhs, rhs: _matmul(core, dst, lhs, rhs, acc=acc, op="matmul_acc"),
    "move": _move,
    "insert": _insert,
    "system.set_cross_core": _set_cross_core,
    "system.wait_cross_core": _wait_cross_core,
    "pto_assert": _pto_assert,
    "trap": _trap,
    "printf": _printf,
}
for _tile_form, _scalar_form, _fn in (("add", "adds", np.add), ("sub", "subs", np.subtract),
                                      ("mul", "muls", np.multiply), ("div", "divs", _int_div),
                                      ("maximum", "maxs", np.maximum), ("minimum", "mins", np.minimum)):
    _OPS[_tile_form] = _binary(_fn, _tile_form)
    _OPS[_scalar_form] = _binary(_fn, _scalar_form)
for _what, _fn in (("sum", np.sum), ("max", np.max), ("min", np.min)):
    _OPS[f"row_{_what}"] = _reduce(_fn, f"row_{_what}", 1)
    _OPS[f"col_{_what}"] = _reduce(_fn, f"col_{_what}", 0)
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

    def __init__(self, fn, kernel_name, pipeline=False):
        from pypto_pro.language.parser.parser import parse_function  # the parser imports this module
        self.kernel = kernel_name
        tree = parse_function(fn)[0]
        func = tree.body[0]
        if not isinstance(func, ast.FunctionDef):
            raise TypeError(f"pl.jit(interpret=True): kernel '{kernel_name}' is not a plain function")
        func.decorator_list = []
        sections = _Sections()
        tree = ast.fix_missing_locations(sections.visit(tree))
        ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
        if sections.kinds == {"vector", "cube"}:
            self.kind = "mixed"  # a kernel with both sections runs as mixed blocks (AIC, AIV 0, AIV 1)
        else:
            self.kind = "cube" if sections.kinds == {"cube"} else "vector"
        # The kernel runs in a copy of its module's globals (plus its closure's values), so what the
        # interpreter puts there (the sections' test, gated stages, TilingKey fields) never reaches
        # the module; `launch` refreshes the copy, as the compiled path re-reads what it captured.
        self.source_fn = fn
        self.overrides = {"__pl_section__": self._section}
        namespace = self._current_names()
        exec(compile(tree, fn.__code__.co_filename, "exec"), namespace)
        self.fn = namespace[func.name]
        self.namespace = namespace
        self.stage_sites = {}
        if pipeline:
            self._gate_stages(tree, namespace)

    def _gate_stages(self, tree, namespace):
        """pl.jit(pipeline=...): the pass promises the serial loop's results, so the interpreter runs
        the stages in the serial order (iteration by iteration, stage by stage), each waiting for the
        stage before it on whichever core that ran."""
        sites = []  # (line of the call, core kind) of each stage call in the stage loop, in order
        for loop in ast.walk(tree):
            if not isinstance(loop, ast.For):
                continue
            for node in loop.body:
                if not (isinstance(node, ast.If) and isinstance(node.test, ast.Call) and
                        getattr(node.test.func, "id", None) == "__pl_section__"):
                    continue
                kind = node.test.args[0].value
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                            getattr(namespace.get(call.func.id), "__pypto_pipeline_stage__", False):
                        sites.append((range(call.lineno, call.end_lineno + 1), kind, call.func.id))
        if not sites:
            raise NotImplementedError(f"pl.jit(interpret=True): kernel '{self.kernel}' has pipeline= but the "
                                      f"interpreter finds no loop of @pl.pipeline.stage calls in its sections")
        self.stage_sites = {line: (index, kind) for index, (lines, kind, _) in enumerate(sites) for line in lines}
        self.stage_count = len(sites)
        for name in {name for _, _, name in sites}:
            self.overrides[name] = self._gated(namespace[name])
        namespace.update(self.overrides)

    def _gated(self, stage):
        def gated(*args, **kwargs):
            core = _active.core
            site = self.stage_sites.get(sys._getframe(1).f_lineno)
            if core.turns is None:
                return stage(*args, **kwargs)
            if site is None:
                raise NotImplementedError(f"{_caller_line()}: a pipeline stage called outside the stage loop is not "
                                          f"interpreted")
            core.turns.stage_begin(core, site[0], self.stage_count, site[1])
            stage(*args, **kwargs)
            core.turns.stage_end(core, site[0], self.stage_count, site[1])
        gated.__wrapped__ = stage
        return gated

    def _current_names(self):
        from pypto_pro.language.parser.parser import _closure_cells
        names = dict(self.source_fn.__globals__)
        names.update({name: cell.cell_contents for name, cell in _closure_cells(self.source_fn).items()})
        names.update(self.overrides)
        return names

    @staticmethod
    def _section(kind):
        return _active.core.kind == kind

    def launch(self, arch, block_dim, args, constants=None):
        """Runs `block_dim` blocks; `constants` (the TilingKey's fields) are names the kernel reads."""
        self.namespace.update(self._current_names())
        self.namespace.update(constants or {})
        previous = getattr(_active, "core", None)
        try:
            for block in range(block_dim):
                if self.kind == "mixed":
                    cores = [_Core(self.kernel, arch, block, block_dim, "cube", 0, True),
                             _Core(self.kernel, arch, block, block_dim, "vector", 0, True),
                             _Core(self.kernel, arch, block, block_dim, "vector", 1, True)]
                    flags = _Flags()
                    turns = _Turns(self.kernel, block, cores)
                    for core in cores:
                        core.peers, core.flags, core.turns = cores, flags, turns
                    turns.run(self.fn, args)
                else:
                    _active.core = _Core(self.kernel, arch, block, block_dim, self.kind)
                    self.fn(*args)
        finally:
            _active.core = previous


class _Cancelled(BaseException):
    """Ends a core's thread when another core of its block failed."""


class _Turns:
    """The three cores of a mixed block take turns, one at a time and round robin, as the compiled
    path's fibers do: a core runs until it waits for a flag that is not set yet, or ends. Each core is a
    thread of its own (breakpoint() works in it), but only the one whose turn it is runs."""

    def __init__(self, kernel, block, cores):
        self.kernel = kernel
        self.block = block
        self.cores = cores
        self.cond = threading.Condition()
        self.turn = None       # the core running now
        self.waits = {}        # core -> (can it go on?, what it waits for)
        self.done = set()
        self.cancelled = False
        self.error = None
        self.stage_runs = {}      # (core, site) -> times that core has run that stage
        self.stage_left = {}      # serial step -> cores still to finish it
        self.stages_done = 0      # serial steps finished, in order

    def run(self, fn, args):
        threads = [threading.Thread(target=self._core_main, args=(core, fn, args), name=f"block{self.block}/"
                                    f"{core.name.replace(' ', '')}", daemon=True) for core in self.cores]
        for thread in threads:
            thread.start()
        with self.cond:
            while len(self.done) < len(self.cores) and self.error is None:
                runnable = [c for c in self.cores if c not in self.done and
                            (c not in self.waits or self.waits[c][0]())]
                if not runnable:
                    self.error = self._deadlock()
                    break
                for core in runnable:  # one round: each runnable core until it waits or ends
                    if core in self.waits and not self.waits[core][0]():
                        continue
                    self.turn = core
                    self.cond.notify_all()
                    self.cond.wait_for(lambda: self.turn is None)
                    if self.error is not None:
                        break
            self.cancelled = True
            self.turn = "cancel"
            self.cond.notify_all()
        for thread in threads:
            thread.join()
        if self.error is not None:
            raise self.error

    def _core_main(self, core, fn, args):
        with self.cond:
            self.cond.wait_for(lambda: self.turn is core or self.cancelled)
        try:
            if not self.cancelled:
                _active.core = core
                fn(*args)
        except _Cancelled:
            pass
        except BaseException as error:  # noqa: B036 (handed to the launching thread)
            with self.cond:
                if self.error is None:
                    self.error = error
        finally:
            _active.core = None
            with self.cond:
                self.done.add(core)
                if self.turn is core:
                    self.turn = None
                self.cond.notify_all()

    def wait_until(self, core, ready, what):
        """On `core`'s thread: gives the turn away until `ready()` holds and the turn comes back."""
        with self.cond:
            self.waits[core] = (ready, what)
            self.turn = None
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.turn is core or self.cancelled)
            del self.waits[core]
            if self.cancelled:
                raise _Cancelled()

    def stage_begin(self, core, site, count, kind):
        step = self.stage_runs.get((core, site), 0) * count + site
        if self.stages_done < step:
            self.wait_until(core, lambda: self.stages_done >= step,
                            f"pipeline stage {site + 1} of {count} (serial step {step}) at {_caller_line()}")

    def stage_end(self, core, site, count, kind):
        runs = self.stage_runs.get((core, site), 0)
        self.stage_runs[(core, site)] = runs + 1
        step = runs * count + site
        self.stage_left[step] = self.stage_left.get(step, 2 if kind == "vector" else 1) - 1
        while self.stage_left.get(self.stages_done) == 0:
            del self.stage_left[self.stages_done]
            self.stages_done += 1

    def _deadlock(self):
        lines = [f"kernel '{self.kernel}' (interpreted): every unfinished core of block {self.block} waits for a "
                 f"cross-core flag that no other core will set:"]
        for core in self.cores:
            state = "has finished" if core in self.done else f"waits in {self.waits[core][1]}"
            lines.append(f"  {core.name} of block {self.block} {state}")
        return KernelDeadlock("\n".join(lines), kernel=self.kernel, block=self.block)


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
