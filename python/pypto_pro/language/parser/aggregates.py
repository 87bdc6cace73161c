"""Aggregates in kernels (docs/language.md#structs-and-tuples): pl.struct, pl.struct_array,
pl.make_tuple, and lists / tuples indexed by run-time values.

A struct is one IR scalar variable per field, so its fields live wherever the kernel's scalars live
and every path of run-time control flow updates the same variables. A run-time index picks a slot
through a dispatch over the slots, after a run-time check of the index (a KernelFault at the line
when it is out of range). A make_tuple emits nothing: its fields are the values it was given.
"""

from __future__ import annotations

import ast
import keyword

from pypto_pro import _C, errors
from pypto_pro.language import structs
from pypto_pro.language.parser.values import (GroupHandle, PendingTile, Scalar, StructArray, StructSlot, StructValue,
                                              TensorHandle, TileHandle, TupleValue)

ir = _C.ir


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _field_dtype(value) -> str | None:
    """The dtype of a struct field holding `value`: integers are int64 (wide enough for any offset the
    kernel computes), floats fp32, bools bool; None for anything that is not a scalar."""
    dtype = value.dtype if isinstance(value, Scalar) else \
        ("bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else
         "fp32" if isinstance(value, float) else None)
    if dtype is None:
        return None
    return dtype if dtype in ("bool", "fp32") else "int64"


def _type_name(ctx, node, args, first):
    """The optional struct type name: a string literal that is a C identifier."""
    if len(args) > first + 1:
        raise ctx.error(errors.ParserSyntaxError, args[first + 1], "a struct takes an optional type name and "
                                                                   "keyword fields (field=initial value)")
    if len(args) == first:
        return None
    arg = args[first]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise ctx.error(errors.ParserSyntaxError, arg, "the struct type name must be a string literal")
    name = arg.value
    if not name.isidentifier() or not name.isascii() or keyword.iskeyword(name):
        raise ctx.error(errors.ParserSyntaxError, arg, f"the struct type name {name!r} is not a C identifier")
    return name


def _fields(ctx, node, what):
    if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
        raise ctx.error(errors.ParserSyntaxError, node, f"{what} does not take *args / **kwargs")
    if not node.keywords:
        raise ctx.error(errors.ParserSyntaxError, node, f"{what} needs at least one keyword field (field=value)")
    return [(k.arg, k.value) for k in node.keywords]


def _new_struct(ctx, node, type_name, base, fields):
    """A StructValue with a fresh variable per field, initialised here."""
    line, col = ctx.span(node)
    tag = ctx.temp_name(base)
    out = {}
    for field, (value, value_node) in fields.items():
        dtype = _field_dtype(value)
        if dtype is None:
            raise ctx.error(errors.ParserTypeError, value_node,
                            f"struct field '{field}' holds a scalar (an int, float, bool or run-time scalar), got "
                            f"{ctx.describe(value)}")
        var = ctx.scalar_var(f"{tag}_{field}", dtype, node)
        ctx.emit(ir.assign(var, ir.cast(ctx.to_expr(value, value_node), dtype, line, col), line, col))
        out[field] = var
    return StructValue(type_name or base, out)


def make_struct(ctx, node, target_hint):
    """pl.struct(["Name",] field=initial, ...)."""
    name = _type_name(ctx, node, node.args, 0)
    fields = {f: (ctx.eval(v), v) for f, v in _fields(ctx, node, "pl.struct")}
    return _new_struct(ctx, node, name, target_hint or name or "struct", fields)


def make_struct_array(ctx, node, target_hint):
    """pl.struct_array(size, ["Name",] field=initial, ...): `size` structs of one layout."""
    if not node.args:
        raise ctx.error(errors.ParserSyntaxError, node, "pl.struct_array(size, \"Name\", field=value, ...) needs a size")
    size = ctx.eval(node.args[0])
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ctx.error(errors.ParserSyntaxError, node.args[0],
                        f"pl.struct_array size must be a compile-time int >= 1, got {ctx.describe(size)}")
    name = _type_name(ctx, node, node.args, 1)
    fields = {f: (ctx.eval(v), v) for f, v in _fields(ctx, node, "pl.struct_array")}
    base = target_hint or name or "structs"
    return StructArray(name or base, [_new_struct(ctx, node, name, f"{base}_{i}", fields) for i in range(size)])


def make_tuple(ctx, node, target_hint):
    """pl.make_tuple(field=value, ...): run-time scalars are kept as they are now (a later change of
    the variable they came from does not change the tuple)."""
    if node.args:
        raise ctx.error(errors.ParserSyntaxError, node.args[0], "pl.make_tuple takes keyword fields only "
                                                                "(field=value)")
    fields = {}
    for field, value_node in _fields(ctx, node, "pl.make_tuple"):
        fields[field] = _snapshot(ctx, ctx.eval(value_node), value_node, f"{target_hint or 'tuple'}_{field}")
    return TupleValue(fields)


def _snapshot(ctx, value, node, name):
    if isinstance(value, Scalar) and not value.expr.is_const:
        var = ctx.scalar_var(ctx.temp_name(name), value.dtype, node)
        ctx.emit(ir.assign(var, value.expr, *ctx.span(node)))
        return Scalar(ir.var_ref(var, *ctx.span(node)))
    if isinstance(value, PendingTile):
        return ctx.bind_tile(None, value, node)
    if isinstance(value, tuple):
        return tuple(_snapshot(ctx, v, node, name) for v in value)
    return value


def ssbuf_op(kind):
    """pl.ssbuf_store / pl.ssbuf_load(struct_var, offset): the struct's field variables, copied to or
    from the SSBUF at a byte offset (pipe S)."""
    def build(ctx, node, _):
        bound = ctx.bind_args(node, ["struct_var", "offset"], ["struct_var", "offset"])
        struct = ctx.eval(bound["struct_var"])
        if isinstance(struct, StructSlot):
            raise ctx.error(errors.UnsupportedFeatureError, bound["struct_var"],
                            f"pl.{kind} takes a struct picked with a compile-time index (arr[0]), not a run-time one")
        if not isinstance(struct, StructValue):
            raise ctx.error(errors.ParserTypeError, bound["struct_var"],
                            f"pl.{kind} takes a pl.struct, got {ctx.describe(struct)}")
        offset = ctx.to_index(ctx.eval(bound["offset"]), bound["offset"], f"pl.{kind} offset")
        line, col = ctx.span(node)
        fields = [ir.var_ref(v, line, col) for v in struct.fields.values()]
        ctx.emit(ir.ssbuf_op(kind, offset, fields, struct.type_name, line, col))
        return None
    return build


BUILDERS = {structs.struct: make_struct, structs.struct_array: make_struct_array, structs.make_tuple: make_tuple}


# ---- dispatch over the entries a checked run-time index picks ----

def _pick_value(index_var, values, line, col):
    """values[0] if index == 0 else values[1] if ... else the last (the index was checked)."""
    expr = values[-1]
    for i in range(len(values) - 2, -1, -1):
        cond = ir.binary("==", ir.var_ref(index_var, line, col), ir.const_int(i, line, col, "int32"), line, col)
        expr = ir.ternary(cond, values[i], expr, line, col)
    return expr


def _pick_stmt(index_var, stmts, line, col):
    """if index == 0: stmts[0] elif ...: ... else: the last (the index was checked)."""
    chain = ir.seq([stmts[-1]])
    for i in range(len(stmts) - 2, -1, -1):
        cond = ir.binary("==", ir.var_ref(index_var, line, col), ir.const_int(i, line, col, "int32"), line, col)
        chain = ir.if_(cond, ir.seq([stmts[i]]), chain, line, col)
    return chain


# ---- fields ----

def _struct_fields(base):
    return base.fields if isinstance(base, StructValue) else base.slots[0].fields


def _no_field(ctx, node, base, attr):
    names = ", ".join(_struct_fields(base))
    type_name = base.type_name if isinstance(base, StructValue) else "the struct"
    return ctx.error(errors.UndefinedVariableError, node, f"struct {type_name} has no field '{attr}' (fields: {names})")


def read_field(ctx, base, attr, node):
    """s.field of a struct (a run-time scalar), a struct picked at run time, or a make_tuple."""
    line, col = ctx.span(node)
    if isinstance(base, TupleValue):
        if attr not in base.fields:
            raise ctx.error(errors.UndefinedVariableError, node,
                            f"the tuple has no field '{attr}' (fields: {', '.join(base.fields)})")
        return base.fields[attr]
    if isinstance(base, StructArray):
        raise ctx.error(errors.ParserTypeError, node, f"a pl.struct_array has no fields; index it first "
                                                      f"(arr[i].{attr})")
    if attr not in _struct_fields(base):
        raise _no_field(ctx, node, base, attr)
    if isinstance(base, StructValue):
        return Scalar(ir.var_ref(base.fields[attr], line, col))
    fields = [ir.var_ref(slot.fields[attr], line, col) for slot in base.slots]
    return Scalar(_pick_value(base.index, fields, line, col))


def write_field(ctx, base, attr, value, node):
    """s.field = value: converted to the field's dtype (a float into an integer field is refused)."""
    if isinstance(base, TupleValue):
        raise ctx.error(errors.ParserTypeError, node, "the fields of a pl.make_tuple cannot be assigned; it is "
                                                      "a name for its values (use pl.struct for mutable fields)")
    if isinstance(base, StructArray):
        raise ctx.error(errors.ParserTypeError, node, f"a pl.struct_array has no fields; index it first "
                                                      f"(arr[i].{attr} = ...)")
    if attr not in _struct_fields(base):
        raise _no_field(ctx, node, base, attr)
    line, col = ctx.span(node)
    dtype = _struct_fields(base)[attr].dtype
    if not (isinstance(value, Scalar) or _is_number(value)):
        raise ctx.error(errors.ParserTypeError, node,
                        f"struct field '{attr}' holds a {dtype} scalar, got {ctx.describe(value)}")
    value_dtype = value.dtype if isinstance(value, Scalar) else _field_dtype(value)
    if value_dtype == "fp32" and dtype != "fp32":
        raise ctx.error(errors.ParserTypeError, node,
                        f"struct field '{attr}' is {dtype}; assigning a float would drop its fraction",
                        hint="convert explicitly if that is meant (pl.const(..., pl.DT_INT64))")
    expr = ir.cast(ctx.to_expr(value, node), dtype, line, col)
    if isinstance(base, StructValue):
        ctx.emit(ir.assign(base.fields[attr], expr, line, col))
        return
    if not isinstance(value, Scalar) or value.expr.is_const:
        rhs = expr
    else:  # evaluated once, before the dispatch
        tmp = ctx.scalar_var(ctx.temp_name(f"{attr}_value"), dtype, node)
        ctx.emit(ir.assign(tmp, expr, line, col))
        rhs = ir.var_ref(tmp, line, col)
    writes = [ir.assign(slot.fields[attr], rhs, line, col) for slot in base.slots]
    ctx.emit(_pick_stmt(base.index, writes, line, col))


# ---- indexing ----

def _checked_index(ctx, index, count, what, node):
    """A run-time index, checked against [0, count) and held in a variable for the dispatch."""
    line, col = ctx.span(node)
    expr = ctx.to_index(index, node, f"the index of {what}")
    ctx.emit(ir.check_index(expr, 0, count - 1, what, line, col))
    var = ctx.scalar_var(ctx.temp_name("index"), expr.dtype, node)
    ctx.emit(ir.assign(var, expr, line, col))
    return var


def subscript(ctx, base, index, node, name):
    """base[index] for a pl.struct_array, or a run-time index into a Python list / tuple. None when
    this is not such a subscript."""
    slots = base.slots if isinstance(base, StructArray) else None
    runtime = isinstance(index, Scalar)
    if slots is None and not (runtime and isinstance(base, (list, tuple))):
        return None
    items = slots if slots is not None else list(base)
    what = f"'{name}'" if name else ("the struct_array" if slots is not None else "the list")
    if not runtime:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ctx.error(errors.ParserTypeError, node.slice,
                            f"a pl.struct_array index is an int, got {ctx.describe(index)} (slices, negative "
                            f"indices and iteration are not supported)")
        if not 0 <= index < len(items):
            raise ctx.error(errors.ParserValueError, node.slice,
                            f"index {index} is out of bounds for {what} with {len(items)} elements")
        return items[index]
    if not items:
        raise ctx.error(errors.ParserValueError, node, f"{what} is empty; it cannot be indexed")
    items = [ctx.bind_tile(None, v, node) if isinstance(v, PendingTile) else v for v in items]
    if all(isinstance(v, StructValue) for v in items):
        layout = [(f, v.dtype) for f, v in items[0].fields.items()]
        if any([(f, v.dtype) for f, v in s.fields.items()] != layout for s in items):
            raise ctx.error(errors.ParserTypeError, node, f"the structs of {what} differ in their fields; a run-time "
                                                          f"index picks among structs of one layout")
        return StructSlot(items, _checked_index(ctx, index, len(items), what, node))
    if all(isinstance(v, Scalar) or _is_number(v) for v in items):
        var = _checked_index(ctx, index, len(items), what, node)
        line, col = ctx.span(node)
        return Scalar(_pick_value(var, [ctx.to_expr(v, node) for v in items], line, col))
    if all(isinstance(v, TileHandle) for v in items):
        tile_type = items[0].tile_type
        if any(v.tile_type != tile_type for v in items):
            raise ctx.error(errors.ParserTypeError, node,
                            f"the tiles of {what} differ in type; a run-time index picks among tiles of one "
                            f"TileType")
        var = _checked_index(ctx, index, len(items), what, node)
        line, col = ctx.span(node)
        tile = ctx.tile_var(ctx.temp_name(f"{name or 'tiles'}_pick"), tile_type, node)
        ctx.emit(_pick_stmt(var, [ir.assign(tile, ir.var_ref(v.var, line, col), line, col) for v in items], line, col))
        return TileHandle(tile, tile_type)
    kinds = sorted({ctx.describe(v) if isinstance(v, (TensorHandle, GroupHandle)) else type(v).__name__
                    for v in items})
    raise ctx.error(errors.UnsupportedFeatureError, node,
                    f"a run-time index picks among scalars, tiles of one type or structs of one layout; {what} "
                    f"holds {', '.join(kinds)}")
