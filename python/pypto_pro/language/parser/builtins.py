"""The builtins of the pl namespace the parser calls by name: plain functions of a narrow builder
context (the parser: `eval`, `bind_args`, `error`, `span`, `emit`, `fb`, the value conversions and
the tile binders), registered in BUILTINS. The registry's ops are not here: the parser binds them
generically (KernelParser.call_op), with the call forms the registry declares (format_op, per_slot_op)."""

from __future__ import annotations

import ast

from pypto_pro import _C, errors
from pypto_pro.language.parser import aggregates
from pypto_pro.language.planned import planned_message
from pypto_pro.language.parser import gm_views
from pypto_pro.language.parser.values import GroupHandle, PendingTile, Scalar, TensorHandle, TileHandle
from pypto_pro.language.types import DataType, SaturationFlagMode, TileType

ir = _C.ir


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def getval(ctx, node, target_hint):
    """pl.getval(container, offset): one element at a linear offset, a run-time scalar."""
    bound = ctx.bind_args(node, ["container", "offset"], ["container", "offset"])
    container = ctx.eval(bound["container"])
    if isinstance(container, PendingTile):
        container = ctx.bind_tile(None, container, node)
    if not isinstance(container, (TensorHandle, TileHandle)):
        raise ctx.error(errors.ParserTypeError, bound["container"],
                         f"pl.getval reads a tile or a GM tensor, got {ctx.describe(container)}")
    offset = ctx.to_index(ctx.eval(bound["offset"]), bound["offset"], "pl.getval offset")
    return Scalar(ir.element(container.var, offset, *ctx.span(node)))


def dump_data(ctx, node, _):
    """pl.dump_data(data, offsets=None, shapes=None, *, workspace=None, loc=False, flag=None): a window
    of a GM tensor or tile, printed and saved as .npy. offsets and shapes come together (one entry per
    dim of data) or not at all (the whole tensor, the tile's valid window); a shapes entry of -1 runs
    to the end. An Acc tile needs a GM workspace of its dtype."""
    if len(node.args) > 3:
        raise ctx.error(errors.ParserTypeError, node, "pl.dump_data() takes at most 3 positional arguments "
                                                      "(data, offsets, shapes); workspace, loc and flag are keywords")
    bound = ctx.bind_args(node, ["data", "offsets", "shapes", "workspace", "loc", "flag"], ["data"])
    data = ctx.eval(bound["data"])
    if isinstance(data, PendingTile):
        data = ctx.bind_tile(None, data, node)
    if not isinstance(data, (TensorHandle, TileHandle)):
        raise ctx.error(errors.ParserTypeError, bound["data"],
                         f"pl.dump_data dumps a GM tensor or a tile, got {ctx.describe(data)}")
    rank = len(data.dims) if isinstance(data, TensorHandle) else len(data.tile_type.shape)
    window = {}
    for key in ("offsets", "shapes"):
        value = ctx.eval(bound[key]) if key in bound else None
        if value is not None and (not isinstance(value, (list, tuple)) or len(value) != rank):
            raise ctx.error(errors.ParserTypeError, bound[key],
                             f"pl.dump_data {key} needs one entry per dim of '{data.var.name}' ({rank})")
        window[key] = value
    if (window["offsets"] is None) != (window["shapes"] is None):
        raise ctx.error(errors.ParserTypeError, node, "pl.dump_data takes offsets and shapes together, or neither")
    offsets = list(window["offsets"] or [0] * rank)
    shapes = list(window["shapes"] or [-1] * rank)
    if isinstance(data, TileHandle) and rank == 1:  # a 1-D tile is one row
        offsets, shapes = [0] + offsets, [1] + shapes
    loc = ctx.eval(bound["loc"]) if "loc" in bound else False
    if not isinstance(loc, bool):
        raise ctx.error(errors.ParserTypeError, bound["loc"], "pl.dump_data(loc=...) must be True or False")
    flag = ctx.eval(bound["flag"]) if "flag" in bound else None
    if flag is not None and not isinstance(flag, str):
        raise ctx.error(errors.ParserTypeError, bound["flag"], "pl.dump_data(flag=...) must be a compile-time str")
    kwargs = {"loc": loc, "flag": flag or "", "name": data.var.name}
    if "workspace" in bound and ctx.eval(bound["workspace"]) is not None:
        kwargs["workspace"] = ctx.op_operand(ctx.eval(bound["workspace"]), bound["workspace"], "pl.dump_data workspace")
    line, col = ctx.span(node)
    operands = [ir.var_ref(data.var, line, col),
                ctx.op_operand(offsets, node, "pl.dump_data offsets"), ctx.op_operand(shapes, node, "pl.dump_data shapes")]
    ctx.emit(ir.op("dump_data", operands, kwargs, line, col))
    return None


def set_vec_mask(ctx, node, _):
    """pl.set_vec_mask(mask_high, mask_low): each half a 64-bit pattern, an int (unsigned like
    0xFFFFFFFFFFFFFFFF or signed like -1) or a run-time integer scalar; the registry checks the kinds."""
    bound = ctx.bind_args(node, ["mask_high", "mask_low"], ["mask_high", "mask_low"])
    operands = []
    for key in ("mask_high", "mask_low"):
        value = ctx.eval(bound[key])
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(1 << 63) <= value < (1 << 64):
                raise ctx.error(errors.ParserValueError, bound[key],
                                 f"pl.set_vec_mask {key}={value} does not fit in 64 bits (expected an int in "
                                 f"[-2**63, 2**64 - 1]: a bit pattern)")
            if value >= 1 << 63:
                value -= 1 << 64  # the same 64 bits as an int64
        operands.append(ctx.op_operand(value, bound[key], f"pl.set_vec_mask {key}"))
    ctx.emit(ir.op("set_vec_mask", operands, {}, *ctx.span(node)))
    return None


def _saturation_mode(ctx, node, where):
    mode = ctx.eval(node)
    if not isinstance(mode, SaturationFlagMode):
        raise ctx.error(errors.ParserTypeError, node,
                         f"{where} mode must be a pl.SaturationFlagMode member "
                         f"({', '.join(m.name for m in SaturationFlagMode)}), got {ctx.describe(mode)}")
    return mode


def set_saturation_flag(ctx, node, _):
    """pl.set_saturation_flag(mode, enable), positional or by keyword: a pl.SaturationFlagMode member and
    a compile-time bool."""
    bound = ctx.bind_args(node, ["mode", "enable"], ["mode", "enable"])
    mode = _saturation_mode(ctx, bound["mode"], "pl.set_saturation_flag")
    enable = ctx.eval(bound["enable"])
    if not isinstance(enable, bool):
        raise ctx.error(errors.ParserTypeError, bound["enable"],
                         f"pl.set_saturation_flag enable must be a compile-time bool (True or False), got "
                         f"{ctx.describe(enable)}")
    ctx.emit(ir.op("set_saturation_flag", [], {"mode": mode.name, "enable": enable}, *ctx.span(node)))
    return None


def get_spr(ctx, node, _):
    """pl.get_spr(): the core's AR register, an int64 scalar."""
    _no_args(ctx, node)
    return Scalar(ir.register_read("get_spr", [], *ctx.span(node)))


def get_ctrl_spr(ctx, node, _):
    """pl.get_ctrl_spr(start_bit, end_bit): CTRL bits start_bit..end_bit (compile-time), an int64 scalar."""
    bound = ctx.bind_args(node, ["start_bit", "end_bit"], ["start_bit", "end_bit"])
    args = [ctx.op_operand(ctx.eval(bound[k]), bound[k], f"pl.get_ctrl_spr {k}") for k in ("start_bit", "end_bit")]
    return Scalar(ir.register_read("get_ctrl_spr", args, *ctx.span(node)))


def get_saturation_flag(ctx, node, _):
    """pl.get_saturation_flag(mode): whether the class of a pl.SaturationFlagMode member saturates, a bool."""
    bound = ctx.bind_args(node, ["mode"], ["mode"])
    mode = _saturation_mode(ctx, bound["mode"], "pl.get_saturation_flag")
    index = ir.const_int(int(mode), *ctx.span(bound["mode"]))
    return Scalar(ir.register_read("get_saturation_flag", [index], *ctx.span(node)))


def init_output(ctx, func_node, target_hint):
    """pl.init_output(tensor, *, offset=0, size, value=0): the registry op with its defaults filled."""
    node = func_node
    if len(node.args) > 1:
        raise ctx.error(errors.ParserTypeError, node.args[1], "pl.init_output(tensor, *, offset=0, size, value=0) "
                                                              "takes offset, size and value as keywords")
    bound = ctx.bind_args(node, ["tensor", "offset", "size", "value"], ["tensor", "size"])
    tensor = ctx.eval(bound["tensor"])
    if not isinstance(tensor, TensorHandle):
        raise ctx.error(errors.ParserTypeError, bound["tensor"],
                        f"pl.init_output fills a GM tensor, got {ctx.describe(tensor)}")
    operands = [ir.var_ref(tensor.var, *ctx.span(bound["tensor"]))]
    for key, default in (("offset", 0), ("size", None), ("value", 0)):
        value = ctx.eval(bound[key]) if key in bound else default
        where = bound.get(key, node)
        if key == "value":
            operands.append(ctx.op_operand(value, where, "pl.init_output value"))
        else:
            operands.append(ctx.to_index(value, where, f"pl.init_output {key}"))
    ctx.emit(ir.op("init_output", operands, {}, *ctx.span(node)))
    return None


def reinterpret(ctx, node, target_hint):
    """pl.reinterpret(tile, *, dtype=None, shape=None, layout=None): a view of the tile's bytes as
    another tile type of its memory (the verifier checks the bytes fit). Its whole shape is valid."""
    if len(node.args) > 1:
        raise ctx.error(errors.ParserTypeError, node.args[1],
                        "pl.reinterpret(tile, *, dtype=None, shape=None, layout=None) takes dtype, shape and layout "
                        "as keywords")
    bound = ctx.bind_args(node, ["tile", "dtype", "shape", "layout"], ["tile"])
    tile = ctx.eval(bound["tile"])
    if isinstance(tile, GroupHandle):
        raise ctx.error(errors.UnsupportedFeatureError, bound["tile"],
                        "reinterpreting a whole tile group is not implemented yet; reinterpret the tile a selection "
                        "gives (pl.reinterpret(group.next(), ...))")
    if isinstance(tile, PendingTile):
        tile = ctx.bind_tile(None, tile, bound["tile"])
    if not isinstance(tile, TileHandle):
        raise ctx.error(errors.ParserTypeError, bound["tile"], f"pl.reinterpret takes a tile, got {ctx.describe(tile)}")
    given = {k: ctx.eval(bound[k]) for k in ("dtype", "shape", "layout") if k in bound}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        raise ctx.error(errors.ParserTypeError, node, "pl.reinterpret needs at least one of dtype=, shape= and layout=")
    if "dtype" in given and "shape" not in given:
        raise ctx.error(errors.ParserTypeError, node, "pl.reinterpret: changing the dtype needs shape= too (the "
                                                      "element count changes with the element size)")
    src = tile.tile_type
    shape = given.get("shape", list(src.shape))
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise ctx.error(errors.ParserTypeError, bound.get("shape", node),
                        f"pl.reinterpret shape= is a list of compile-time ints, got {ctx.describe(shape)}")
    dtype = given.get("dtype", src.dtype)
    if not isinstance(dtype, DataType):
        raise ctx.error(errors.ParserTypeError, bound["dtype"], f"pl.reinterpret dtype= is a pl.DT_* value, got "
                                                                f"{ctx.describe(dtype)}")
    try:
        view_type = TileType(list(shape), dtype, src.target_memory, layout=given.get("layout", src.layout))
    except (TypeError, ValueError) as exc:
        cls = errors.ParserTypeError if isinstance(exc, TypeError) else errors.ParserValueError
        raise ctx.error(cls, node, f"pl.reinterpret: {exc}") from None
    _refuse_planned_tile_type(ctx, node, view_type)
    var = ctx.tile_var(target_hint or ctx.temp_name(tile.var.name + "_as"), view_type, node)
    ctx.emit(ir.reinterpret(var, tile.var, *ctx.span(node)))
    return TileHandle(var, view_type)


def per_slot_op(ctx, func, node):
    """An op the registry marks per-slot, given a whole TileGroup: applied to every slot
    (pl.set_validshape(group, shape))."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise ctx.error(errors.UnsupportedFeatureError, node, "*args / **kwargs calls are not supported")
    group = ctx.eval(node.args[0])
    args = [ctx.op_operand(ctx.eval(a), a, f"pl.{func.name} argument {i + 2}")
            for i, a in enumerate(node.args[1:])]
    kwargs = {k.arg: ctx.op_keyword(ctx.eval(k.value), k.value, f"pl.{func.name} keyword '{k.arg}'")
              for k in node.keywords}
    for slot in range(group.depth):
        tile = ctx.bind_tile(None, PendingTile(group, "index", slot), node)
        ctx.emit(ir.op(func.name, [ir.var_ref(tile.var, *ctx.span(node))] + args, kwargs, *ctx.span(node)))
    return None


def format_op(ctx, func, node):
    """The registry's format call forms: `format` is pl.printf(fmt, *args, loc=False), `assert` is
    pl.pto_assert(cond, fmt=None, *args, loc=False). The format is a compile-time string, the
    arguments run-time scalars; the registry checks the format against them."""
    if any(isinstance(a, ast.Starred) for a in node.args):
        raise ctx.error(errors.UnsupportedFeatureError, node, "*args calls are not supported")
    values = [ctx.eval(a) for a in node.args]
    keywords = {k.arg: ctx.eval(k.value) for k in node.keywords}
    loc = keywords.pop("loc", False)
    if not isinstance(loc, bool):
        raise ctx.error(errors.ParserTypeError, node, f"pl.{func.name}(loc=...) must be True or False")
    if func.info["call_form"] == "format":
        if not values or not isinstance(values[0], str):
            raise ctx.error(errors.ParserTypeError, node, f"pl.{func.name} needs a compile-time format string first")
        fmt, operands, extra = values[0], [], {}
        rest = values[1:]
    else:
        if not values:
            raise ctx.error(errors.ParserTypeError, node, f"pl.{func.name} needs a condition")
        cond, rest = values[0], values[1:]
        fmt = keywords.pop("fmt", keywords.pop("format_str", None))
        if rest and isinstance(rest[0], str) and fmt is None:
            fmt, rest = rest[0], rest[1:]
        if not isinstance(cond, Scalar):
            if cond:
                return None  # holds at compile time: nothing to check
            # false at compile time: legal, and reported each time the kernel gets here, as on the NPU
            cond = Scalar(ir.const_bool(False, *ctx.span(node)))
        extra = {"cond": ast.unparse(node.args[0])}
        fmt = "" if fmt is None else fmt
        operands = [cond.expr]
    if keywords:
        raise ctx.error(errors.ParserTypeError, node,
                         f"pl.{func.name} got an unexpected keyword '{next(iter(keywords))}'")
    if not isinstance(fmt, str):
        raise ctx.error(errors.ParserTypeError, node, f"the format of pl.{func.name} must be a compile-time str")
    for v in rest:
        if not (isinstance(v, Scalar) or isinstance(v, (bool, int, float))):
            raise ctx.error(errors.ParserTypeError, node,
                             f"pl.{func.name} arguments must be scalars, got {ctx.describe(v)}")
    line, col = ctx.span(node)
    operands.append(ir.tuple([ctx.to_expr(v, node) for v in rest], line, col))
    ctx.emit(ir.op(func.name, operands, {"fmt": fmt, "loc": loc, **extra}, line, col))
    return None


def _no_args(ctx, node):
    if node.args or node.keywords:
        raise ctx.error(errors.ParserTypeError, node, f"{ast.unparse(node.func)}() takes no arguments")


def range_(ctx, node, _):
    raise ctx.error(errors.ParserSyntaxError, node,
                    f"{ast.unparse(node.func)}(...) can only be the iterable of a for loop")


def section(ctx, node, _):
    name = ast.unparse(node.func)
    raise ctx.error(errors.ParserSyntaxError, node, f"{name}() is used as `with {name}():`")


def _minmax(ctx, node, sym):
    bound = ctx.bind_args(node, ["a", "b"], ["a", "b"])
    a, b = ctx.eval(bound["a"]), ctx.eval(bound["b"])
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        return Scalar(ir.binary(sym, ctx.to_expr(a, node), ctx.to_expr(b, node), *ctx.span(node)))
    if not (_is_number(a) and _is_number(b)):
        raise ctx.error(errors.ParserTypeError, node, f"pl.{sym} takes two scalars")
    return min(a, b) if sym == "min" else max(a, b)


def min_(ctx, node, _):
    return _minmax(ctx, node, "min")


def max_(ctx, node, _):
    return _minmax(ctx, node, "max")


def const(ctx, node, _):
    bound = ctx.bind_args(node, ["value", "dtype"], ["value", "dtype"])
    value, dtype = ctx.eval(bound["value"]), ctx.eval(bound["dtype"])
    if not isinstance(dtype, DataType) or dtype.name in ("fp16", "bf16") or not dtype.supported:
        raise ctx.error(errors.ParserTypeError, bound["dtype"],
                         f"pl.const dtype must be a scalar dtype (int, fp32 or bool), got {dtype!r}")
    if not _is_number(value):
        raise ctx.error(errors.ParserTypeError, bound["value"], "pl.const value must be a compile-time number")
    line, col = ctx.span(node)
    if dtype.name == "fp32":
        return Scalar(ir.const_float(float(value), line, col))
    if dtype.name == "bool":
        return Scalar(ir.const_bool(bool(value), line, col))
    if isinstance(value, float) and not value.is_integer():
        raise ctx.error(errors.ParserValueError, bound["value"], f"{value} is not an integer for {dtype!r}")
    return Scalar(ir.const_int(int(value), line, col, dtype.name))


def _const_int(ctx, node, what, value, minimum=0):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ctx.error(errors.ParserTypeError, node,
                         f"{what} must be a compile-time int >= {minimum}, got {ctx.describe(value)}")
    return value


def _refuse_planned_tile_type(ctx, node, tile_type):
    """A tile type naming a memory or layout the public language has and this version does not model
    (pl.MemorySpace.ScaleLeft, pl.NN, ...) can be built, not placed."""
    planned = tile_type.planned()
    if planned is not None:
        raise ctx.error(errors.UnsupportedFeatureError, node, planned_message(*planned))


def fillpad_mode(mode):
    """pl.fillpad_expand / pl.fillpad_inplace(out, src): pl.fillpad(out, src, mode=<mode>)."""
    def build(ctx, node, _):
        name = ast.unparse(node.func)
        for k in node.keywords:
            raise ctx.error(errors.ParserTypeError, k.value if k.arg else node,
                             f"{name}(out, src) takes no keyword arguments; its mode is {mode}")
        return ctx.call_op("fillpad", node, extra_kwargs={"mode": mode})
    return build


def make_tile(ctx, node, target_hint):
    bound = ctx.bind_args(node, ["tile_type", "addr", "size"], ["tile_type"])
    tile_type = ctx.eval(bound["tile_type"])
    if not isinstance(tile_type, TileType):
        raise ctx.error(errors.ParserTypeError, bound["tile_type"],
                         f"pl.make_tile needs a pl.TileType, got {ctx.describe(tile_type)}")
    _refuse_planned_tile_type(ctx, bound["tile_type"], tile_type)
    if "addr" not in bound:
        raise ctx.error(errors.ParserTypeError, node, "pl.make_tile needs addr=: tiles are placed by hand "
                                                       "at a byte address of their memory")
    addr = _const_int(ctx, bound["addr"], "pl.make_tile addr", ctx.eval(bound["addr"]))
    if "size" in bound:
        size = ctx.eval(bound["size"])
        if size is not None:
            size = _const_int(ctx, bound["size"], "pl.make_tile size", size, 1)
            if size < tile_type.nbytes:
                raise ctx.error(errors.ParserValueError, bound["size"],
                                 f"pl.make_tile size={size} is smaller than the tile's {tile_type.nbytes} bytes")
    name = target_hint or ctx.temp_name("tile")
    line, col = ctx.span(node)
    group = ctx.fb.group_var(name + "_slot", tile_type.spec(), [addr], [], 1, True, line, col)
    ctx.emit(ir.decl_tiles(group, line, col))
    var = ctx.tile_var(name, tile_type, node)
    ctx.emit(ir.select_tile(var, group, "index", ir.const_int(0, line, col), line, col))
    return TileHandle(var, tile_type)


def _cross_core_ids(ctx, bound, depth):
    """fwd_ids= / bwd_ids= of a cross-core buffer of the pipeline transform: one cross-core event id
    (0..15) per slot, all different. Kept in the IR; only pl.jit(pipeline=...) uses them."""
    out = {}
    for key in ("fwd_ids", "bwd_ids"):
        value = ctx.eval(bound[key]) if key in bound else None
        if value is None:
            continue
        where = bound[key]
        if not isinstance(value, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                           for i in value):
            raise ctx.error(errors.ParserTypeError, where,
                            f"make_tile_group {key}= is a list of compile-time ints, got {ctx.describe(value)}")
        if len(value) != depth:
            raise ctx.error(errors.ParserValueError, where,
                            f"make_tile_group {key}= has {len(value)} ids but the group has {depth} slots (one id "
                            f"per slot)")
        bad = [i for i in value if not 0 <= i <= 15]
        if bad:
            raise ctx.error(errors.ParserValueError, where,
                            f"make_tile_group {key}= id {bad[0]} is out of range [0, 15] (cross-core event ids)")
        if len(set(value)) != len(value):
            raise ctx.error(errors.ParserValueError, where, f"make_tile_group {key}= repeats an id: {list(value)}")
        out[key] = list(value)
    shared = set(out.get("fwd_ids", ())) & set(out.get("bwd_ids", ()))
    if shared:
        raise ctx.error(errors.ParserValueError, bound["bwd_ids"],
                        f"make_tile_group fwd_ids= and bwd_ids= share id {min(shared)}; each direction needs its own")
    return out


def make_tile_group(ctx, node, target_hint):
    bound = ctx.bind_args(node, ["type", "addrs", "mutex_ids", "depth", "fwd_ids", "bwd_ids"], ["type", "addrs"])
    tile_type = ctx.eval(bound["type"])
    if not isinstance(tile_type, TileType):
        raise ctx.error(errors.ParserTypeError, bound["type"],
                         f"pl.make_tile_group type= must be a pl.TileType, got {ctx.describe(tile_type)}")
    _refuse_planned_tile_type(ctx, bound["type"], tile_type)
    mutex_node = bound.get("mutex_ids")
    raw_ids = ctx.eval(mutex_node) if mutex_node is not None else None
    mutex_ids = []
    if raw_ids is not None:
        if isinstance(raw_ids, int) and not isinstance(raw_ids, bool):
            raw_ids = [raw_ids]
        if not isinstance(raw_ids, (list, tuple)):
            raise ctx.error(errors.ParserTypeError, mutex_node,
                             f"mutex_ids must be a list of ints (or of int lists), got {ctx.describe(raw_ids)}")
        for entry in raw_ids:
            ids = list(entry) if isinstance(entry, (list, tuple)) else [entry]
            for i in ids:
                if not isinstance(i, int) or isinstance(i, bool):
                    raise ctx.error(errors.ParserTypeError, mutex_node,
                                     f"mutex ids must be compile-time ints, got {ctx.describe(i)}")
                if not 0 <= i <= 31:
                    raise ctx.error(errors.ParserTypeError, mutex_node,
                                     f"mutex id {i} is out of range [0, 31]")
            if len(set(ids)) != len(ids):
                raise ctx.error(errors.ParserValueError, mutex_node, f"a slot repeats a mutex id: {ids}")
            mutex_ids.append(ids)
        if len({len(ids) for ids in mutex_ids}) > 1:
            raise ctx.error(errors.ParserValueError, mutex_node,
                             "every slot needs the same number of mutex ids")
    depth = None
    if "depth" in bound:
        depth = ctx.eval(bound["depth"])
        if depth is not None:
            depth = _const_int(ctx, bound["depth"], "make_tile_group depth", depth, 1)
    if mutex_ids:
        if depth is not None and depth != len(mutex_ids):
            raise ctx.error(errors.ParserValueError, bound["depth"],
                             f"depth={depth} but mutex_ids has {len(mutex_ids)} entries")
        depth = len(mutex_ids)
    elif depth is None:
        raise ctx.error(errors.ParserTypeError, node, "make_tile_group needs depth= when it has no mutex_ids")
    addrs_value = ctx.eval(bound["addrs"])
    if isinstance(addrs_value, int) and not isinstance(addrs_value, bool):
        base = _const_int(ctx, bound["addrs"], "make_tile_group addrs", addrs_value)
        addrs = [base + i * tile_type.nbytes for i in range(depth)]
    elif isinstance(addrs_value, (list, tuple)):
        addrs = [_const_int(ctx, bound["addrs"], "a make_tile_group address", a) for a in addrs_value]
        if len(addrs) != depth:
            raise ctx.error(errors.ParserValueError, bound["addrs"],
                             f"addrs has {len(addrs)} entries but the group has depth {depth}")
    else:
        raise ctx.error(errors.ParserTypeError, bound["addrs"],
                         f"addrs must be a compile-time int or list of ints, got {ctx.describe(addrs_value)}")
    cross = _cross_core_ids(ctx, bound, depth)
    name = target_hint or ctx.temp_name("group")
    line, col = ctx.span(node)
    group = ctx.fb.group_var(name, tile_type.spec(), addrs, mutex_ids, depth, False, line, col, **cross)
    ctx.emit(ir.decl_tiles(group, line, col))
    return GroupHandle(group, tile_type, depth)


def _block_builtin(name):
    """pl.get_block_idx() and its siblings: a run-time index of the executing core."""
    def build(ctx, node, _):
        _no_args(ctx, node)
        return Scalar(ir.builtin(name, *ctx.span(node)))
    return build


# pl.<name> -> build(ctx, call node, target_hint): the value of the call (None for statements).
BUILTINS = {
    "getval": getval,
    "range": range_,
    "static_range": range_,
    "section_vector": section,
    "section_cube": section,
    "min": min_,
    "max": max_,
    "const": const,
    "make_tile": make_tile,
    "make_tile_group": make_tile_group,
    "fillpad_expand": fillpad_mode("EXPAND"),
    "fillpad_inplace": fillpad_mode("INPLACE"),
    "reinterpret": reinterpret,
    "ssbuf_store": aggregates.ssbuf_op("ssbuf_store"),
    "ssbuf_load": aggregates.ssbuf_op("ssbuf_load"),
    "get_spr": get_spr,
    "get_ctrl_spr": get_ctrl_spr,
    "get_saturation_flag": get_saturation_flag,
}
# Registry ops whose arguments the front end completes before the registry binds them.
OP_FRONT_ENDS = {"dump_data": dump_data, "set_vec_mask": set_vec_mask, "set_saturation_flag": set_saturation_flag,
                 "init_output": init_output}

BUILTINS.update({name: _block_builtin(name)
                 for name in ("get_block_idx", "get_block_num", "get_subblock_idx", "get_subblock_num")})
BUILTINS.update(gm_views.BUILTINS)  # pl.make_tensor, pl.make_ptr, pl.addptr
