"""GM pointers and views in kernels: pl.make_tensor, pl.make_ptr and pl.addptr (builtins the parser
handles; pl.set_stride is a registry op), and how names bind them.

A pl.Ptr parameter reads as a PtrHandle. pl.addptr / pl.make_ptr build pointer expressions and
pl.make_tensor a view expression (docs/language.md#gm-views); each is assigned to a variable of the
kernel, one per name and type in each scope (as tiles are), so a name bound again in a loop or on both
paths of a run-time branch keeps one variable. What the arguments must be is checked here, at the
call's line; the sizes and addresses only known at run time are checked where the kernel runs (a
KernelFault at the line): negative dims or strides, misaligned addresses, a pointer moved outside its
buffer, and every access through a view against the launch buffer it lies in.
"""

from __future__ import annotations

from pypto_pro import _C, errors
from pypto_pro.language.parser.values import Local, PtrHandle, Scalar, TensorHandle
from pypto_pro.language.types import DTYPES, DataType

ir = _C.ir

MAX_RANK = 8


def handle_of(var):
    """What a name bound to GM view or pointer variable `var` reads as."""
    if var.kind == "ptr":
        return PtrHandle(var, DTYPES[var.dtype])
    return TensorHandle(var, var.name, list(var.dims), DTYPES[var.dtype], view=True)


def is_gm_handle(value) -> bool:
    """A pointer or a view: values a name binds through a variable of its own."""
    return isinstance(value, PtrHandle) or (isinstance(value, TensorHandle) and value.view)


def _variable(ctx, name, expr, node):
    """The kernel variable holding values of `expr`'s type under `name` (one per name and type)."""
    key = (ctx.scope, name, "gm", expr.type)
    if key not in ctx.typed_vars:
        ctx.typed_vars[key] = ctx.fb.value_var(name, expr, *ctx.span(node))
    return ctx.typed_vars[key]


def bind(ctx, name, value, node):
    """`name = value` for a view or pointer: the name's own variable takes a copy of the descriptor, so
    binding the source's name again later leaves this one as it was. Returns what the name holds."""
    line, col = ctx.span(node)
    ref = ir.var_ref(value.var, line, col)
    var = _variable(ctx, name, ref, node)
    if var.id != value.var.id:
        ctx.emit(ir.assign(var, ref, line, col))
    return Local(var)


def _assigned(ctx, expr, target_hint, base, node):
    line, col = ctx.span(node)
    var = _variable(ctx, target_hint or ctx.temp_name(base), expr, node)
    ctx.emit(ir.assign(var, expr, line, col))
    return handle_of(var)


def dtype_of(handle) -> DataType:
    """The element dtype of a GM tensor, view or pointer (a datatype= parameter's: the launch's)."""
    return handle.dtype if isinstance(handle, PtrHandle) else DTYPES[handle.var.dtype]


def attribute(ctx, base, attr, node):
    """`view.dtype`, `ptr.dtype`; a pointer has no other attribute."""
    if attr == "dtype":
        return dtype_of(base)
    raise ctx.error(errors.ParserTypeError, node, f"{ctx.describe(base)} has no attribute '{attr}' in kernels",
                    hint="a pointer has no shape: view it with pl.make_tensor(ptr, shape, stride)")


def _dtype_arg(ctx, bound, key, default, what):
    node = bound.get(key)
    value = ctx.eval(node) if node is not None else None
    if value is None:
        return default
    if not isinstance(value, DataType):
        raise ctx.error(errors.ParserTypeError, node,
                        f"{what} dtype= must be a pl.DT_* value, got {ctx.describe(value)}")
    if not value.supported:
        raise ctx.error(errors.ParserTypeError, node, f"{what} dtype {value!r} is not supported yet")
    return value


def _pointer_arg(ctx, bound, what):
    ptr = ctx.eval(bound["ptr"])
    if not isinstance(ptr, PtrHandle):
        hint = ("a GM tensor is viewed with pl.make_tensor(tensor, shape, stride), which starts at its first "
                "element" if isinstance(ptr, TensorHandle) else None)
        raise ctx.error(errors.ParserTypeError, bound["ptr"], f"{what} takes a pl.Ptr, got {ctx.describe(ptr)}",
                        hint=hint)
    return ptr


def _extents(ctx, node, what):
    """The shape or stride list of pl.make_tensor: 1..8 integers (compile-time or run-time), none
    negative at compile time."""
    value = ctx.eval(node)
    if not isinstance(value, (list, tuple)):
        raise ctx.error(errors.ParserTypeError, node,
                        f"pl.make_tensor {what} must be a list of integers, got {ctx.describe(value)}")
    if not 1 <= len(value) <= MAX_RANK:
        raise ctx.error(errors.ParserTypeError, node,
                        f"pl.make_tensor {what} needs 1 to {MAX_RANK} entries, got {len(value)}")
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, int) and not isinstance(entry, bool) and entry < 0:
            raise ctx.error(errors.ParserValueError, node,
                            f"pl.make_tensor {what} entry {i} is {entry}; it must not be negative")
        if isinstance(entry, Scalar) and entry.dtype in ("fp32", "bool"):
            raise ctx.error(errors.ParserTypeError, node,
                            f"pl.make_tensor {what} entry {i} must be an integer, got a {entry.dtype} value")
        out.append(ctx.to_index(entry, node, f"pl.make_tensor {what} entry {i}"))
    return out


def make_tensor(ctx, node, target_hint):
    """pl.make_tensor(ptr, shape, stride=None, dtype=None): a view over a pl.Ptr or a GM tensor, from its
    first element; stride (in elements of the view's dtype) defaults to the row-major strides of
    shape, dtype to the source's (another dtype reads the same bytes as that dtype)."""
    bound = ctx.bind_args(node, ["ptr", "shape", "stride", "dtype"], ["ptr", "shape"])
    src = ctx.eval(bound["ptr"])
    if not isinstance(src, (PtrHandle, TensorHandle)):
        raise ctx.error(errors.ParserTypeError, bound["ptr"],
                        f"pl.make_tensor views a pl.Ptr or a GM tensor, got {ctx.describe(src)}")
    shape = _extents(ctx, bound["shape"], "shape")
    stride = []
    if "stride" in bound and ctx.eval(bound["stride"]) is not None:
        stride = _extents(ctx, bound["stride"], "stride")
        if len(stride) != len(shape):
            raise ctx.error(errors.ParserTypeError, bound["stride"],
                            f"pl.make_tensor stride needs one entry per shape entry ({len(shape)}), got {len(stride)}")
    dtype = _dtype_arg(ctx, bound, "dtype", dtype_of(src), "pl.make_tensor")
    line, col = ctx.span(node)
    expr = ir.make_view(ir.var_ref(src.var, line, col), shape, stride, dtype.name, line, col)
    return _assigned(ctx, expr, target_hint, "view", node)


def addptr(ctx, node, target_hint):
    """pl.addptr(ptr, offset): the pointer `offset` elements of its dtype further (same dtype)."""
    bound = ctx.bind_args(node, ["ptr", "offset"], ["ptr", "offset"])
    ptr = _pointer_arg(ctx, bound, "pl.addptr")
    offset = ctx.to_index(ctx.eval(bound["offset"]), bound["offset"], "pl.addptr offset")
    line, col = ctx.span(node)
    expr = ir.ptr_offset(ir.var_ref(ptr.var, line, col), offset, ptr.dtype.name, line, col)
    return _assigned(ctx, expr, target_hint, "ptr", node)


def make_ptr(ctx, node, target_hint):
    """pl.make_ptr(ptr, dtype=None): the same address as a pointer to `dtype` (its own without dtype)."""
    bound = ctx.bind_args(node, ["ptr", "dtype"], ["ptr"])
    ptr = _pointer_arg(ctx, bound, "pl.make_ptr")
    dtype = _dtype_arg(ctx, bound, "dtype", ptr.dtype, "pl.make_ptr")
    line, col = ctx.span(node)
    expr = ir.ptr_offset(ir.var_ref(ptr.var, line, col), ir.const_int(0, line, col), dtype.name, line, col)
    return _assigned(ctx, expr, target_hint, "ptr", node)


def check_ptr_annotation(ctx, node, ann, value):
    """`p: pl.Ptr[dtype] = <a pointer>`: the value must be a pointer to that dtype."""
    if not isinstance(value, PtrHandle):
        raise ctx.error(errors.ParserTypeError, node.value, f"{ann!r} annotates a pointer, got {ctx.describe(value)}")
    if ann.dtype is not value.dtype:
        raise ctx.error(errors.ParserTypeError, node.annotation,
                        f"the annotation {ann!r} does not match pointer '{value.var.name}' to {value.dtype!r}")


BUILTINS = {"make_tensor": make_tensor, "addptr": addptr, "make_ptr": make_ptr}
