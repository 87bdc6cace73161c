"""Walks a kernel's Python AST and builds the C++ IR through pypto_pro._C.ir.

Compile-time values (module constants, closures, fixed and STATIC dims, TileTypes, dtypes) are
evaluated here; run-time values become IR expressions and variables. Every error points at the
user's source line.
"""

from __future__ import annotations

import ast
import builtins
import enum
import inspect
import linecache
import math
import os
import textwrap
import threading
import types

from pypto_pro import _C, errors
from pypto_pro.language import diagnostics
from pypto_pro.language.builtins import Builtin
from pypto_pro.language.parser import builtins as builtins_
from pypto_pro.language.parser import aggregates
from pypto_pro.language.parser.values import (MISSING, ArrayField, GroupHandle, GroupMethod, Local, PendingTile,
                                              Poisoned, Scalar, ShapeProxy, StructArray, StructSlot, StructValue,
                                              TensorHandle, TileHandle, TilingHandle, TupleValue, ValidShapeProxy)
from pypto_pro.language.planned import planned_info, planned_message
from pypto_pro.language.types import DataType, TensorAnnotation, Tile, TileType
from pypto_pro.language.types import Scalar as ScalarAnnotation
from pypto_pro.language.types import Ptr as PtrAnnotation
from pypto_pro.language.parser import gm_views
from pypto_pro.language.parser.values import PtrHandle

ir = _C.ir

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_BITOPS = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_CONST_ONLY_BINOPS = {ast.Pow: lambda a, b: a ** b, ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
                      ast.BitXor: lambda a, b: a ^ b, ast.LShift: lambda a, b: a << b,
                      ast.RShift: lambda a, b: a >> b}
_PY_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _const_dtype(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int32" if _INT32_MIN <= v <= _INT32_MAX else "int64"
    return "fp32"


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _fold_arith(sym: str, a, b):
    """Compile-time arithmetic with the kernel's semantics: integer / and // truncate toward zero and
    % takes the dividend's sign (like the device's scalar unit); floats behave like fp32 math."""
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if sym == "+":
            return a + b
        if sym == "-":
            return a - b
        if sym == "*":
            return a * b
        if b == 0.0:
            return math.copysign(math.inf, a) if sym == "/" and a != 0 else math.nan
        if sym == "/":
            return a / b
        if sym == "//":
            return float(math.floor(a / b))
        return math.fmod(a, b)
    a, b = int(a), int(b)
    if sym == "+":
        return a + b
    if sym == "-":
        return a - b
    if sym == "*":
        return a * b
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = _trunc_div(a, b)
    return q if sym in ("/", "//") else a - q * b


def _assigned_names(stmts) -> set:
    """Names a block assigns (targets of =, +=, annotated =, for)."""
    names = set()

    def targets(t):
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)

    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets(node.target)
    return names


# CPython 3.11 keeps the recursion depth of its AST conversion per interpreter, not per thread: two
# threads parsing at once (kernels compiling on several threads) fail with "SystemError: AST
# constructor recursion depth mismatch". Parsing takes a millisecond; the compiles stay parallel.
_AST_LOCK = threading.Lock()

# IR lines carry their file above these bits (include/pypto_pro/support/source_line.h).
LINE_FILE_SHIFT = _C.LINE_FILE_SHIFT

# pl.static_range copies its body once per iteration; beyond this many it is surely a mistake.
STATIC_RANGE_LIMIT = 4096


def _new_ast_lock_in_child():  # a thread parsing at fork() does not exist in the child
    global _AST_LOCK
    _AST_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_ast_lock_in_child)


def _parse_source(lines):
    with _AST_LOCK:
        return ast.parse(textwrap.dedent("".join(lines)))


def _last_code_line(code):
    """The last source line any instruction of `code` (or of a function nested in it) comes from."""
    last = max((end for _, end, _, _ in code.co_positions() if end), default=code.co_firstlineno)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_code_line(const))
    return last


def parse_function(fn):
    """(module tree whose body[0] is fn's definition, fn's first source line, the definition's indent).

    The block is cut from the file linecache holds, from the code object's first line (the first
    decorator) on while lines are blank or indented deeper than the definition, and used only when it
    parses as a definition of fn's name reaching the last line fn has code on; otherwise (source from
    exec, a block it cannot cut) inspect.getsourcelines reads it, which tokenizes the file: several ms
    of a new process's first launch. Raises OSError / TypeError when there is no source."""
    code = fn.__code__
    first = code.co_firstlineno
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if 0 < first <= len(lines):
        head = lines[first - 1]
        indent = len(head) - len(head.lstrip())
        if head.lstrip().startswith(("@", "def ", "async def ")):
            last_code = _last_code_line(code)
            end = first
            while end < len(lines) and (not lines[end].strip() or
                                        len(lines[end]) - len(lines[end].lstrip()) > indent or end < last_code):
                end += 1
            try:
                tree = _parse_source(lines[first - 1:end])
            except SyntaxError:
                tree = None
            if (tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
                    and tree.body[0].name == fn.__name__ and tree.body[0].end_lineno + first - 1 >= last_code):
                return tree, first, indent
    lines, first = inspect.getsourcelines(fn)
    return _parse_source(lines), first, len(lines[0]) - len(lines[0].lstrip())


def _closure_cells(fn):
    """{name: cell} of the closure variables of `fn` that are bound."""
    cells = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            cell.cell_contents
        except ValueError:  # not bound yet
            continue
        cells[name] = cell
    return cells


# Builtins with host side effects: calling them from a kernel is a mistake, never a compile-time value.
_HOST_ONLY_BUILTINS = (builtins.print, builtins.input, builtins.open, builtins.breakpoint, builtins.exec,
                       builtins.eval)


class KernelParser:
    def __init__(self, fn, spec, shapes, constants=None, dtypes=None, promoted=frozenset()):
        self.fn = fn
        # (scope, name) of int32 variables a later int64 assignment widens: they are int64 from the
        # start (parse_kernel parses again when it finds one).
        self.promoted = promoted
        self.fixed_types = set()  # (scope, name) whose type is given: parameters, annotated variables
        self.spec = spec
        self.kernel = spec.name
        self.filename = diagnostics.source_file(fn)
        self.file_index = 0  # of self.filename among the function's source files (0: the kernel's)
        try:
            tree, first_line, indent = parse_function(fn)
        except (OSError, TypeError) as exc:
            raise errors.ParserError(f"cannot read the source of kernel '{self.kernel}': {exc}",
                                     kernel=self.kernel) from None
        self.fdef = tree.body[0]
        self.line_offset = first_line - 1
        self.col_offset = indent
        self.globals = fn.__globals__
        self.closure = _closure_cells(fn)
        # Every module global and closure variable the kernel read: (dict or cell, name, value). The
        # launch path compares them with their current values and recompiles when one changed.
        self.captures = {}
        self.shapes = shapes or {}    # tensor name -> values of its STATIC (and '...') dims
        self.dtypes = dtypes or {}    # tensor name -> DataType, from the datatype dict of the launch
        self.fb = ir.FunctionBuilder(self.kernel, self.filename)
        self.env = dict(constants or {})  # TilingKey fields and datatype variables: compile-time constants
        self.typed_vars = {}       # (name, type key) -> IR var, so every branch binds the same variable
        self.block = []            # IR statements of the block being parsed
        self.runtime_depth = 0     # > 0 inside run-time loops and branches
        self.loop_depth = 0
        self.in_static_loop = False  # the innermost loop is a pl.static_range (no break/continue)
        self.section = None
        self.temp_counter = 0
        self.scope = 0             # 0: the kernel; each inlined helper call gets its own
        self.scopes = 0
        self.inline = None         # the helper call being inlined: (return slot, runtime depth at entry)
        self.block_ended = False   # the last parse_block ended at an inlined helper's return
        self.stage = None          # the @pl.pipeline.stage being inlined

    # ---- errors ----
    def span(self, node):
        """(line, col) of `node` for the IR: the line carries its file (docs/jit.md: helpers from other
        modules), `file_index << LINE_FILE_SHIFT | line`."""
        return (node.lineno + self.line_offset) | (self.file_index << LINE_FILE_SHIFT), node.col_offset + self.col_offset

    def source_span(self, node):
        """(line, col) of `node` in self.filename, for messages."""
        return node.lineno + self.line_offset, node.col_offset + self.col_offset

    def error(self, cls, node, message, hint=None):
        line, col = self.source_span(node)
        end_col = None
        if getattr(node, "end_lineno", None) == node.lineno and node.end_col_offset is not None:
            end_col = node.end_col_offset + self.col_offset
        return diagnostics.located(cls, message, kernel=self.kernel, filename=self.filename, line=line, col=col,
                                   end_col=end_col, hint=hint)

    # ---- entry ----
    def parse(self):
        try:
            self._bind_params()
            body = self.parse_block(self.fdef.body)
            return self.fb.finish(body)
        except _C.Diagnostic as diag:
            kind, message, line, col, hint = diag.args
            files = self.fb.source_files
            file = line >> LINE_FILE_SHIFT if line > 0 else 0
            raise diagnostics.from_core(kind, message, line & ((1 << LINE_FILE_SHIFT) - 1) if line > 0 else line, col,
                                        hint, self.kernel, self.fn, files[file] if file < len(files) else None) from None

    def _bind_params(self):
        args = {a.arg: a for a in self.fdef.args.args + self.fdef.args.kwonlyargs + self.fdef.args.posonlyargs}
        for p in self.spec.params:
            node = args.get(p.name, self.fdef)
            line, col = self.span(node)
            if p.kind == "planned":  # pl.Ptr, pl.Tile, pl.Tensor[..., pl.Input] ...: not built yet
                raise self.error(errors.UnsupportedFeatureError, getattr(node, "annotation", None) or node,
                                 f"parameter '{p.name}': {planned_message(*p.planned)}")
            if p.kind == "tensor":
                statics = iter(self.shapes.get(p.name, ()))
                dims, values = [], []
                for kind, n in p.dims:
                    if kind == "rest":  # every remaining dim is STATIC
                        for value in statics:
                            dims.append(("static", value))
                            values.append(value)
                        continue
                    if kind == "static":
                        n = next(statics)
                    dims.append((kind, n))
                    values.append(None if kind == "dynamic" else n)
                dtype = self.dtypes.get(p.name, p.dtype)
                var = self.fb.tensor_param(p.name, dtype.name, dims, line, col)
                self.env[p.name] = TensorHandle(var, p.name, values)
            elif p.kind == "ptr":  # a pl.Ptr["T"] points to its datatype variable's dtype
                dtype = p.dtype if p.dtype is not None else self.dtypes[p.name]
                self.env[p.name] = PtrHandle(self.fb.ptr_param(p.name, dtype.name, line, col), dtype)
            elif p.kind == "tiling":
                fields = [(name, dtype, count) for name, dtype, count, _ in p.tiling.fields]
                var = self.fb.tiling_param(p.name, p.tiling.cls.__name__, fields, line, col)
                self.env[p.name] = TilingHandle(var, p.tiling)
            else:
                var = self.fb.scalar_param(p.name, p.dtype.name, line, col)
                self.typed_vars[(0, p.name, p.dtype.name)] = var
                self.fixed_types.add((0, p.name))
                self.env[p.name] = Local(var)

    # ---- blocks ----
    def parse_block(self, stmts):
        saved = self.block
        self.block = []
        self.block_ended = False
        try:
            try:
                self.parse_stmts(stmts)
            except _BlockEnds:  # an inlined helper returned here: the rest of the block is dead
                self.block_ended = True
            return ir.seq(self.block)
        finally:
            self.block = saved

    def parse_stmts(self, stmts):
        """Statements into the current block. In an inlined helper, after a statement that may have
        returned at run time, the rest runs only if it did not (a loop breaks instead)."""
        for i, stmt in enumerate(stmts):
            inline = self.inline
            early = inline["early"] if inline is not None else 0
            self.parse_stmt(stmt)
            if inline is None or inline["early"] == early or i + 1 == len(stmts):
                continue
            line, col = self.span(stmt)
            flag = ir.var_ref(inline["flag"], line, col)
            if self.loop_depth > 0:
                self.emit(ir.if_(flag, ir.seq([ir.break_(line, col)]), None, line, col))
                continue
            if self.runtime_if(ir.unary("not", flag, line, col), stmts[i + 1:], stmts[i + 1]):
                raise _BlockEnds()  # every path through here has returned
            return

    def runtime_if(self, cond, stmts, node):
        """`if cond: stmts` at run time (no else), with the bindings merged as for a source `if`."""
        self.materialize(_assigned_names(stmts), node)
        before = dict(self.env)
        self.runtime_depth += 1
        try:
            body = self.parse_block(stmts)
            ended = self.block_ended
        finally:
            self.runtime_depth -= 1
        self.env = self.merge(self.env, before, node)
        self.emit(ir.if_(cond, body, None, *self.span(node)))
        return ended

    def emit(self, stmt):
        self.block.append(stmt)

    def parse_stmt(self, node):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.error(errors.UnsupportedFeatureError, node,
                             f"'{type(node).__name__}' statements are not supported in kernels")
        method(node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        value = self.eval(node.value)
        if isinstance(value, PendingTile):
            self.bind_tile(None, value, node)  # a bare g.next() still advances the cursor

    def stmt_Assign(self, node):
        value = self.eval(node.value, target_hint=self._target_hint(node.targets[0]))
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AugAssign(self, node):
        if isinstance(node.target, ast.Attribute):  # s.field += v
            current = self.eval(node.target)
            self.assign(node.target, self.binop(node.op, current, self.eval(node.value), node), node)
            return
        if not isinstance(node.target, ast.Name):
            raise self.error(errors.UnsupportedFeatureError, node.target,
                             "augmented assignment is only supported on names and struct fields")
        current = self.read_name(node.target.id, node.target)
        value = self.binop(node.op, current, self.eval(node.value), node)
        self.assign(node.target, value, node)

    def stmt_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.error(errors.UnsupportedFeatureError, node, "annotated assignments need a name and a value")
        dtype = self.eval(node.annotation)
        if isinstance(dtype, ScalarAnnotation):  # pl.Scalar[dtype] is the dtype
            dtype = dtype.dtype
        if isinstance(dtype, (Tile, TensorAnnotation, PtrAnnotation)):
            return self.annotated_handle(node, dtype)
        if not isinstance(dtype, DataType):
            raise self.error(errors.ParserTypeError, node.annotation,
                             f"a variable annotation must be a scalar dtype like pl.DT_INT32, pl.Scalar[dtype], "
                             f"pl.Tile[shape, dtype] or pl.Tensor[dims, dtype], got {dtype!r}")
        value = self.eval(node.value)
        expr = ir.cast(self.to_expr(value, node.value), dtype.name, *self.span(node))
        self.fixed_types.add((self.scope, node.target.id))
        var = self.scalar_var(node.target.id, dtype.name, node)
        self.emit(ir.assign(var, expr, *self.span(node)))
        self.env[node.target.id] = Local(var)

    def annotated_handle(self, node, ann):
        """`t: pl.Tile[[r, c], dtype] = <a tile>` and `x: pl.Tensor[[dims], dtype] = <a GM tensor>`: the
        value must have the annotated shape and dtype; then it is a plain assignment."""
        if isinstance(ann, Tile) and ann.memref is not None:
            raise self.error(errors.UnsupportedFeatureError, node.annotation,
                             planned_message("a pl.MemRef in a pl.Tile annotation",
                                             "explicit memory references in tile annotations"))
        if isinstance(ann, TensorAnnotation) and ann.planned() is not None:
            raise self.error(errors.UnsupportedFeatureError, node.annotation, planned_message(*ann.planned()))
        value = self.eval(node.value, target_hint=node.target.id)
        if isinstance(ann, Tile):
            tile_type = value.group.tile_type if isinstance(value, PendingTile) else \
                value.tile_type if isinstance(value, TileHandle) else None
            if tile_type is None:
                raise self.error(errors.ParserTypeError, node.value,
                                 f"{ann!r} annotates a tile, got {self.describe(value)}")
            if tuple(tile_type.shape) != ann.shape or tile_type.dtype is not ann.dtype:
                raise self.error(errors.ParserTypeError, node.annotation,
                                 f"the annotation {ann!r} does not match the tile's shape {list(tile_type.shape)} "
                                 f"and dtype {tile_type.dtype!r}")
        elif isinstance(ann, PtrAnnotation):
            gm_views.check_ptr_annotation(self, node, ann, value)
        else:
            if not isinstance(value, TensorHandle):
                raise self.error(errors.ParserTypeError, node.value,
                                 f"a pl.Tensor annotation annotates a GM tensor, got {self.describe(value)}")
            param = self.spec_param(value.name)
            dtype = value.dtype if value.view else self.dtypes.get(value.name, param.dtype if param else None)
            if ann.dtype is not dtype or len(ann.dims) != len(value.dims):
                raise self.error(errors.ParserTypeError, node.annotation,
                                 f"the annotation {ann!r} does not match GM tensor '{value.name}' "
                                 f"({len(value.dims)} dims of {dtype!r})")
        self.assign(node.target, value, node)

    def stmt_Return(self, node):
        if self.inline is not None:
            value = self.eval(node.value) if node.value is not None else None
            if self.runtime_depth == self.inline["depth"]:
                self.inline["value"] = value
                raise _HelperReturn()
            self.early_return(value, node)
            raise _BlockEnds()
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            raise self.error(errors.ParserSyntaxError, node.value, "kernels return nothing",
                             hint="write results to an output tensor with pl.store")
        self.emit(ir.return_(*self.span(node)))

    def early_return(self, value, node):
        """`return value` inside run-time control flow of an inlined helper: the value goes to the
        helper's result variable, its returned flag is set, and a loop of the helper is left."""
        inline = self.inline
        if self.in_static_loop and self.loop_depth == 0:
            raise self.error(errors.UnsupportedFeatureError, node,
                             "a helper cannot return from inside pl.static_range within run-time control flow",
                             hint="compute the value into a variable and return it after the loop")
        line, col = self.span(node)
        if value is None:
            inline["kinds"].add("none")
        else:
            inline["kinds"].add("value")
            if isinstance(value, PendingTile):
                value = self.bind_tile(None, value, node)
            result = inline["result"]
            if isinstance(value, TileHandle):
                if result is None:
                    result = inline["result"] = self.tile_var(inline["name"], value.tile_type, node)
                if result.kind != "tile" or _tile_type_of(result) != value.tile_type:
                    raise self.error(errors.ParserTypeError, node,
                                     f"'{inline['fn']}' returns {self.describe(value)} here but another type on "
                                     f"another path; a helper returns one type")
                self.emit(ir.assign(result, ir.var_ref(value.var, line, col), line, col))
            elif isinstance(value, Scalar) or _is_number(value):
                dtype = value.dtype if isinstance(value, Scalar) else _const_dtype(value)
                if result is None:
                    result = inline["result"] = self.scalar_var(inline["name"], dtype, node)
                if result.kind != "scalar":
                    raise self.error(errors.ParserTypeError, node,
                                     f"'{inline['fn']}' returns a scalar here but a tile on another path")
                if result.dtype == "int32" and dtype == "int64":
                    raise _Promote((self.scope, inline["name"]))
                if result.dtype in ("int32", "int64", "bool") and dtype == "fp32":
                    raise self.error(errors.ParserTypeError, node,
                                     f"'{inline['fn']}' returns an fp32 value here but {result.dtype} on an earlier "
                                     f"path; a helper returns one type")
                self.emit(ir.assign(result, ir.cast(self.to_expr(value, node), result.dtype, line, col), line, col))
            else:
                raise self.error(errors.UnsupportedFeatureError, node,
                                 f"a helper that returns inside run-time control flow returns scalars or tiles, "
                                 f"not {self.describe(value)}")
        self.emit(ir.assign(inline["flag"], ir.const_bool(True, line, col), line, col))
        if self.loop_depth > 0:
            self.emit(ir.break_(line, col))
        inline["early"] += 1

    def _no_static_jump(self, node, word):
        if self.in_static_loop:
            raise self.error(errors.UnsupportedFeatureError, node,
                             f"'{word}' inside pl.static_range is not supported: the loop is unrolled at compile "
                             "time", hint="use a compile-time 'if' around the body, or pl.range")

    def stmt_Break(self, node):
        self._no_static_jump(node, "break")
        if self.loop_depth == 0:
            raise self.error(errors.ParserSyntaxError, node, "'break' outside a loop")
        self.emit(ir.break_(*self.span(node)))

    def stmt_Continue(self, node):
        self._no_static_jump(node, "continue")
        if self.loop_depth == 0:
            raise self.error(errors.ParserSyntaxError, node, "'continue' outside a loop")
        self.emit(ir.continue_(*self.span(node)))

    def stmt_Assert(self, node):
        cond = self.eval(node.test)
        if isinstance(cond, Scalar):
            raise self.error(errors.UnsupportedFeatureError, node,
                             "a run-time assert needs pl.pto_assert(cond, fmt, *args)")
        if not cond:
            msg = self.eval(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(errors.ParserValueError, node, f"compile-time assertion failed: {msg}")

    def stmt_With(self, node):
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            raise self.error(errors.ParserSyntaxError, node,
                             "a kernel 'with' takes exactly pl.section_vector() or pl.section_cube()")
        ctx = node.items[0].context_expr
        func = self.eval(ctx.func) if isinstance(ctx, ast.Call) else self.eval(ctx)
        if not (isinstance(func, Builtin) and func.name in ("section_vector", "section_cube")
                and isinstance(ctx, ast.Call) and not ctx.args and not ctx.keywords):
            raise self.error(errors.ParserSyntaxError, ctx,
                             "a kernel 'with' takes exactly pl.section_vector() or pl.section_cube()")
        if self.section is not None:
            raise self.error(errors.ParserSyntaxError, node, "sections cannot be nested")
        kind = "vector" if func.name == "section_vector" else "cube"
        self.section = kind
        try:
            body = self.parse_block(node.body)
        finally:
            self.section = None
        self.emit(ir.section(kind, body, *self.span(node)))

    def condition(self, test):
        """An if / conditional expression's test; `pl.constexpr(cond)` insists cond is compile-time."""
        if isinstance(test, ast.Call):
            func = self.eval(test.func)
            if isinstance(func, Builtin) and func.name == "constexpr":
                if len(test.args) != 1 or test.keywords:
                    raise self.error(errors.ParserTypeError, test, "pl.constexpr(cond) takes one condition")
                cond = self.eval(test.args[0])
                if isinstance(cond, Scalar):
                    raise self.error(errors.ParserSyntaxError, test.args[0],
                                     f"pl.constexpr() needs a compile-time condition, got {self.describe(cond)}: "
                                     f"{ast.unparse(test.args[0])}",
                                     hint="drop pl.constexpr for a run-time branch")
                self._check_compile_time_cond(cond, test.args[0])
                return bool(cond)
        return self.eval(test)

    def stmt_If(self, node):
        cond = self.condition(node.test)
        if not isinstance(cond, Scalar):
            self._check_compile_time_cond(cond, node.test)
            self.parse_stmts(node.body if cond else node.orelse)
            return
        self.materialize(_assigned_names(node.body + node.orelse), node)
        cond_expr = cond.expr
        before = dict(self.env)
        self.runtime_depth += 1
        try:
            then_body = self.parse_block(node.body)
            env_then = self.env
            self.env = dict(before)
            else_body = self.parse_block(node.orelse) if node.orelse else None
            env_else = self.env
        finally:
            self.runtime_depth -= 1
        self.env = self.merge(env_then, env_else, node)
        self.emit(ir.if_(cond_expr, then_body, else_body, *self.span(node)))

    def stmt_While(self, node):
        if node.orelse:
            raise self.error(errors.UnsupportedFeatureError, node, "'while ... else' is not supported in kernels")
        self.materialize(_assigned_names(node.body), node)
        cond = self.eval(node.test)
        if not isinstance(cond, Scalar):
            self._check_compile_time_cond(cond, node.test)
            if not cond:
                return
        cond_expr = self.to_expr(cond, node.test)
        body = self._loop_body(node)
        self.emit(ir.while_(cond_expr, body, *self.span(node)))

    def stmt_For(self, node):
        it = node.iter
        func = self.eval(it.func) if isinstance(it, ast.Call) else None
        if not (isinstance(func, Builtin) and func.name in ("range", "static_range")):
            raise self.error(errors.ParserSyntaxError, it, "a kernel 'for' loop must iterate over pl.range(...)",
                             hint="write `for i in pl.range(start, stop, step):` (or pl.static_range(...) to "
                                  "unroll at compile time); Python's range, lists and other iterables are not "
                                  "kernel loops")
        if node.orelse:
            raise self.error(errors.UnsupportedFeatureError, node, "'for ... else' is not supported in kernels")
        if not isinstance(node.target, ast.Name):
            raise self.error(errors.ParserSyntaxError, node.target, "the loop variable must be a plain name")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(errors.ParserTypeError, it, f"pl.{func.name} takes (stop), (start, stop) or "
                                                         "(start, stop, step) positional arguments")
        if func.name == "static_range":
            return self.static_for(node, it)
        bounds = [self.eval(a) for a in it.args]
        if len(bounds) == 1:
            bounds = [0, bounds[0], 1]
        elif len(bounds) == 2:
            bounds.append(1)
        exprs = []
        for value, arg in zip(bounds, it.args if len(it.args) == 3 else [it] * 3):
            exprs.append(self.to_index(value, arg, "pl.range bound"))
        step = bounds[2]
        if not isinstance(step, Scalar) and step == 0:
            raise self.error(errors.ParserValueError, it, "pl.range step must not be zero")
        dtype = "int64" if any(e.dtype == "int64" for e in exprs) else "int32"
        name = node.target.id
        self.materialize(_assigned_names(node.body) - {name}, node)
        loop_var = self.scalar_var(name, dtype, node.target)
        self.env[name] = Local(loop_var)
        body = self._loop_body(node)
        self.env[name] = Local(loop_var)
        self.emit(ir.for_(loop_var, exprs[0], exprs[1], exprs[2], body, *self.span(node)))

    def _loop_body(self, node):
        before = dict(self.env)
        self.runtime_depth += 1
        self.loop_depth += 1
        saved_static, self.in_static_loop = self.in_static_loop, False
        try:
            body = self.parse_block(node.body)
        finally:
            self.runtime_depth -= 1
            self.loop_depth -= 1
            self.in_static_loop = saved_static
        self.env = self.merge(before, self.env, node)
        return body

    def static_for(self, node, it):
        """for i in pl.static_range(...): unrolled here, the body parsed once per value with `i` a
        compile-time int (so it may index Python lists of ops, tiles or shapes)."""
        bounds = []
        for arg in it.args:
            value = self.eval(arg)
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(errors.ParserTypeError, arg,
                                 f"pl.static_range bounds must be compile-time ints, got {self.describe(value)}",
                                 hint="use pl.range for a loop over run-time values")
            bounds.append(value)
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.error(errors.ParserValueError, it, "pl.static_range step must not be zero")
        values = range(*bounds)
        if len(values) > STATIC_RANGE_LIMIT:
            raise self.error(errors.ParserValueError, it,
                             f"pl.static_range unrolls {len(values)} iterations; at most {STATIC_RANGE_LIMIT} are "
                             "allowed", hint="use pl.range for long loops")
        saved_static, self.in_static_loop = self.in_static_loop, True
        try:
            for value in values:
                self.env[node.target.id] = value
                for stmt in node.body:
                    self.parse_stmt(stmt)
        finally:
            self.in_static_loop = saved_static

    def _check_compile_time_cond(self, cond, node):
        if not isinstance(cond, (bool, int, float, DataType, enum.Enum, str, type(None))):
            raise self.error(errors.ParserTypeError, node,
                             f"a condition must be a scalar, got {self.describe(cond)}")

    # ---- bindings ----
    def merge(self, a, b, node):
        """The bindings after two paths join: a name bound differently on the two paths is an error
        to read afterwards (unless both hold the same IR variable)."""
        out = {}
        for name in set(a) | set(b):
            x, y = a.get(name, MISSING), b.get(name, MISSING)
            if x is MISSING or y is MISSING or x is y:
                out[name] = y if x is MISSING else x
            elif isinstance(x, Local) and isinstance(y, Local) and x.var.id == y.var.id:
                out[name] = x
            elif not isinstance(x, (Local, Scalar)) and not isinstance(y, (Local, Scalar)) and self._same(x, y):
                out[name] = x
            else:
                out[name] = Poisoned(self.source_span(node)[0])
        return out

    @staticmethod
    def _same(x, y):
        try:
            return type(x) is type(y) and bool(x == y)
        except Exception:
            return False

    def materialize(self, names, node):
        """Before run-time control flow: names it assigns that hold compile-time scalars become IR
        variables, initialised here, so every path updates the same variable."""
        for name in sorted(names):
            value = self.env.get(name, MISSING)
            if _is_number(value) or isinstance(value, Scalar):  # e.g. a helper's parameter
                dtype = value.dtype if isinstance(value, Scalar) else _const_dtype(value)
                var = self.scalar_var(name, dtype, node)
                self.emit(ir.assign(var, self.expr_of_type(value, var.dtype, node), *self.span(node)))
                self.env[name] = Local(var)

    def scalar_var(self, name, dtype, node):
        if dtype == "int32" and (self.scope, name) in self.promoted:
            dtype = "int64"
        key = (self.scope, name, dtype)
        if key not in self.typed_vars:
            self.typed_vars[key] = self.fb.scalar_var(name, dtype, *self.span(node))
        return self.typed_vars[key]

    def tile_var(self, name, tile_type, node):
        key = (self.scope, name, tile_type)
        if key not in self.typed_vars:
            self.typed_vars[key] = self.fb.tile_var(name, tile_type.spec(), *self.span(node))
        return self.typed_vars[key]

    def _target_hint(self, target):
        return target.id if isinstance(target, ast.Name) else None

    def assign(self, target, value, node):
        if isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (tuple, list)) else None
            if items is None or len(items) != len(target.elts):
                raise self.error(errors.ParserTypeError, target,
                                 f"cannot unpack {self.describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign(t, v, node)
            return
        if isinstance(target, ast.Subscript):
            container = self.eval(target.value)
            if isinstance(container, PendingTile):
                container = self.bind_tile(None, container, target)
            if not isinstance(container, (TensorHandle, TileHandle)):
                raise self.error(errors.ParserTypeError, target, f"cannot assign an element of "
                                                                 f"{self.describe(container)}")
            offset = self.linear_offset(container, self.eval(target.slice), target)
            line, col = self.span(target)
            self.emit(ir.op("setval", [ir.var_ref(container.var, line, col), offset, self.to_expr(value, node)], {},
                            line, col))
            return
        if isinstance(target, ast.Attribute):
            base = self.eval(target.value)
            if isinstance(base, _AGGREGATES):
                return aggregates.write_field(self, base, target.attr, value, target)
        if not isinstance(target, ast.Name):
            raise self.error(errors.UnsupportedFeatureError, target,
                             "only names, elements (x[i, j]) and struct fields (s.field) can be assigned in kernels")
        name = target.id
        current = self.env.get(name, MISSING)
        if isinstance(value, PendingTile):
            self.bind_tile(name, value, node)
        elif isinstance(value, TileHandle):
            var = self.tile_var(name, value.tile_type, node)
            if var.id != value.var.id:
                self.emit(ir.assign(var, ir.var_ref(value.var, *self.span(node)), *self.span(node)))
            self.env[name] = Local(var)
        elif gm_views.is_gm_handle(value):  # a GM view or pointer: the name's own variable takes a copy
            self.env[name] = gm_views.bind(self, name, value, node)
        elif isinstance(value, Scalar) or (_is_number(value) and (self.runtime_depth > 0 or (
                isinstance(current, Local) and current.var.kind == "scalar"))):
            self.assign_scalar(name, value, current, node)
        else:
            if isinstance(current, Local) and self.runtime_depth > 0:
                raise self.error(errors.ParserTypeError, node,
                                 f"'{name}' holds a run-time value; it cannot become {self.describe(value)} here")
            self.env[name] = value

    def assign_scalar(self, name, value, current, node):
        dtype = value.dtype if isinstance(value, Scalar) else _const_dtype(value)
        if isinstance(current, Local) and current.var.kind == "scalar":
            var = current.var
            if var.dtype != dtype:
                if _is_number(value) and not (isinstance(value, float) and var.dtype != "fp32"):
                    dtype = var.dtype  # a constant adopts the variable's type
                elif self.runtime_depth > 0 and var.dtype == "int32" and dtype == "int64" and \
                        (self.scope, name) not in self.fixed_types:
                    raise _Promote((self.scope, name))  # int32 then int64: the variable is int64 throughout
                elif self.runtime_depth > 0:
                    raise self.error(errors.ParserTypeError, node,
                                     f"'{name}' is {var.dtype} but this assigns a {dtype} value",
                                     hint=f"give '{name}' one type on every path, e.g. start it as "
                                          f"pl.const(0, pl.DT_{dtype.upper()})")
                else:
                    var = None
            if var is not None:
                expr = ir.cast(self.to_expr(value, node), var.dtype, *self.span(node))
                self.emit(ir.assign(var, expr, *self.span(node)))
                return
        var = self.scalar_var(name, dtype, node)
        self.emit(ir.assign(var, self.expr_of_type(value, var.dtype, node), *self.span(node)))
        self.env[name] = Local(var)

    def expr_of_type(self, value, dtype, node):
        """`value` as an expression of `dtype` (a variable widened to int64 takes int32 values)."""
        expr = self.to_expr(value, node)
        return expr if expr.dtype == dtype else ir.cast(expr, dtype, *self.span(node))

    def bind_tile(self, name, pending, node):
        group = pending.group
        var = self.tile_var(name or self.temp_name(group.var.name), group.tile_type, node)
        index = None
        if pending.mode == "index":
            index = self.to_index(pending.index, node, "tile group index")
        self.emit(ir.select_tile(var, group.var, pending.mode, index, *self.span(node)))
        if name is not None:
            self.env[name] = Local(var)
        return TileHandle(var, group.tile_type)

    def temp_name(self, base):
        self.temp_counter += 1
        return f"{base}_t{self.temp_counter}"

    # ---- reading names ----
    def read_name(self, name, node):
        value = self.env.get(name, MISSING)
        if value is MISSING:
            if name in self.closure:
                cell = self.closure[name]
                value = self.refuse_planned(cell.cell_contents, node)
                self.captures[(id(cell), name)] = (cell, name, value)
                return value
            if name in self.globals:
                value = self.refuse_planned(self.globals[name], node)
                self.captures[(id(self.globals), name)] = (self.globals, name, value)
                return value
            if hasattr(builtins, name):
                return getattr(builtins, name)
            raise self.error(errors.UndefinedVariableError, node, f"name '{name}' is not defined")
        if isinstance(value, Poisoned):
            raise self.error(errors.ParserTypeError, node,
                             f"'{name}' holds different compile-time values depending on the run-time branch "
                             f"that ran (line {value.line})",
                             hint="assign it before the branch, or keep it a run-time scalar")
        if isinstance(value, Local):
            var = value.var
            if var.kind == "tile":
                return TileHandle(var, _tile_type_of(var))
            if var.kind in ("tensor", "ptr"):  # a GM view or pointer variable
                return gm_views.handle_of(var)
            return Scalar(ir.var_ref(var, *self.span(node)))
        return value

    # ---- expressions ----
    def eval(self, node, target_hint=None):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(errors.UnsupportedFeatureError, node,
                             f"'{type(node).__name__}' expressions are not supported in kernels")
        if type(node).__name__ == "Call":
            return method(node, target_hint)
        return method(node)

    def expr_Constant(self, node):
        return node.value

    def expr_Name(self, node):
        return self.read_name(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.eval(e) for e in node.elts)

    def expr_List(self, node):
        return [self.eval(e) for e in node.elts]

    def expr_Dict(self, node):
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}

    def expr_Attribute(self, node):
        base = self.eval(node.value)
        attr = node.attr
        if isinstance(base, PtrHandle) or (isinstance(base, TensorHandle) and base.view and attr == "dtype"):
            return gm_views.attribute(self, base, attr, node)
        if isinstance(base, TensorHandle):
            if attr == "shape":
                return ShapeProxy(base)
            if attr == "dtype":  # the launch's dtype for a datatype= parameter, else the annotated one
                param = self.spec_param(base.name)
                return self.dtypes.get(base.name, param.dtype) if param else None
            raise self.error(errors.ParserTypeError, node, f"GM tensor '{base.name}' has no attribute '{attr}' "
                                                           f"in kernels (use .shape)")
        if isinstance(base, TilingHandle):
            field = base.spec.field(attr)
            if field is None:
                names = ", ".join(f[0] for f in base.spec.fields)
                raise self.error(errors.UndefinedVariableError, node,
                                 f"{base.spec.cls.__name__} has no field '{attr}' (fields: {names})")
            if field[2] > 0:
                return ArrayField(base, attr, field[2])
            return Scalar(ir.field(base.var, attr, None, *self.span(node)))
        if isinstance(base, _AGGREGATES):
            return aggregates.read_field(self, base, attr, node)
        if isinstance(base, GroupHandle):
            if attr in ("next", "current", "previous"):
                return GroupMethod(base, attr)
            raise self.error(errors.ParserTypeError, node,
                             f"a tile group has next(), current(), previous() and [i], not '{attr}'")
        if isinstance(base, TileHandle):
            if attr == "shape":
                return tuple(base.tile_type.shape)
            if attr == "dtype":
                return base.tile_type.dtype
            if attr == "valid_shape":
                return ValidShapeProxy(base)
            raise self.error(errors.ParserTypeError, node, f"a tile has no attribute '{attr}' in kernels")
        if isinstance(base, (Scalar, ShapeProxy, PendingTile)):
            raise self.error(errors.ParserTypeError, node, f"{self.describe(base)} has no attribute '{attr}'")
        try:
            value = getattr(base, attr)
        except AttributeError:
            raise self.error(errors.UndefinedVariableError, node, self.no_attribute(base, attr, node)) from None
        return self.refuse_planned(value, node)

    def no_attribute(self, base, attr, node):
        """What `base.attr` that does not exist says: for the language's modules (pl, pl.system, pl.pipeline,
        ...) the dotted name as the kernel wrote it, and the closest names it has."""
        import difflib

        names = [n for n in dir(base) if not n.startswith("_")]
        if isinstance(base, types.ModuleType) and base.__name__.startswith("pypto_pro.language"):
            written = ast.unparse(node.value) if hasattr(ast, "unparse") else base.__name__
            close = difflib.get_close_matches(attr, names, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(f'{written}.{c}' for c in close)}?" if close else ""
            return f"{written}.{attr} is no name of the language{hint}"
        close = difflib.get_close_matches(attr, names, n=1, cutoff=0.75)
        return f"{self.describe(base)} has no attribute '{attr}'" + (f"; did you mean '{close[0]}'?" if close else "")

    def refuse_planned(self, value, node):
        """`value`, unless it is part of the public language that is not built yet (pl.Vf.*, pl.simt.*,
        pl.Ptr, a planned enum, a @pl.vector_function helper, ...): then UnsupportedFeatureError here."""
        info = planned_info(value)
        if info is not None:
            raise self.error(errors.UnsupportedFeatureError, node, planned_message(*info))
        return value

    def spec_param(self, name):
        for p in self.spec.params:
            if p.name == name:
                return p
        return None

    def expr_Subscript(self, node):
        base = self.eval(node.value)
        if isinstance(base, (TileHandle, PendingTile)) and _is_slicing(node.slice):
            if isinstance(base, PendingTile):
                base = self.bind_tile(None, base, node)
            return self.subview(base, node)
        index = self.eval(node.slice)
        if isinstance(base, ShapeProxy):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.error(errors.ParserTypeError, node.slice,
                                 "tensor.shape[i] needs a compile-time int index")
            dims = base.tensor.dims
            if not -len(dims) <= index < len(dims):
                raise self.error(errors.ParserValueError, node.slice,
                                 f"shape index {index} is out of range for the {len(dims)}-D tensor "
                                 f"'{base.tensor.name}'")
            dim = dims[index]
            if dim is not None:
                return dim
            return Scalar(ir.shape_dim(base.tensor.var, index, *self.span(node)))
        if isinstance(base, ArrayField):
            expr = self.to_index(index, node.slice, f"the index of {base.name}")
            return Scalar(ir.field(base.tiling.var, base.name, expr, *self.span(node)))
        if isinstance(base, GroupHandle):
            if isinstance(index, Scalar) or (isinstance(index, int) and not isinstance(index, bool)):
                if isinstance(index, int) and not 0 <= index < base.depth:
                    raise self.error(errors.ParserTypeError, node.slice,
                                     f"index {index} is out of range for tile group '{base.var.name}' of depth "
                                     f"{base.depth}")
                return PendingTile(base, "index", index)
            raise self.error(errors.ParserTypeError, node.slice, "a tile group index must be an int")
        if isinstance(base, ValidShapeProxy):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.error(errors.ParserTypeError, node.slice, "tile.valid_shape[i] needs a compile-time int")
            return Scalar(ir.valid_shape(base.tile.var, index, *self.span(node)))
        if isinstance(base, PendingTile):
            base = self.bind_tile(None, base, node)
        if isinstance(base, (TensorHandle, TileHandle)):
            return Scalar(ir.element(base.var, self.linear_offset(base, index, node), *self.span(node)))
        picked = aggregates.subscript(self, base, index, node, _name_of(node.value))
        if picked is not None:
            return picked
        if isinstance(base, Scalar) or isinstance(index, Scalar):
            raise self.error(errors.ParserTypeError, node, "run-time values cannot be indexed here")
        try:
            return base[index]
        except Exception as exc:
            raise self.error(errors.ParserTypeError, node, f"cannot index {self.describe(base)}: {exc}") from None

    def subview(self, tile, node):
        """tile[r0:r1, c0:c1]: a new tile variable viewing the same bytes (docs/language.md#subviews)."""
        from pypto_pro.language.types import TileType
        t = tile.tile_type
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(t.shape) != 2 or len(parts) != 2:
            raise self.error(errors.ParserTypeError, node,
                             f"a subview slices a 2-D tile as tile[r0:r1, c0:c1]; '{tile.var.name}' is "
                             f"{list(t.shape)} and the subscript has {len(parts)} part(s)")
        bounds = []
        for axis, part in enumerate(parts):
            if not isinstance(part, ast.Slice):
                raise self.error(errors.ParserTypeError, part,
                                 "a subview takes a slice on both axes (tile[r0:r1, c0:c1]); tile[i, j] reads one "
                                 "element")
            if part.step is not None:
                raise self.error(errors.UnsupportedFeatureError, part.step, "a subview slice cannot have a step")
            for end, default in ((part.lower, 0), (part.upper, t.shape[axis])):
                value = default if end is None else self.eval(end)
                if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= t.shape[axis]:
                    raise self.error(errors.ParserValueError, end,
                                     f"subview bound {value} is outside [0, {t.shape[axis]}] of axis {axis} of "
                                     f"'{tile.var.name}' {list(t.shape)}")
                bounds.append(self.to_index(value, end if end is not None else node, "a subview bound"))
        view_type = TileType(list(t.shape), t.dtype, t.target_memory, valid_shape=[-1, -1], layout=t.layout)
        var = self.tile_var(self.temp_name(tile.var.name + "_view"), view_type, node)
        self.emit(ir.subview(var, tile.var, bounds, *self.span(node)))
        return TileHandle(var, view_type)

    def container_dims(self, container):
        """The dims that linearise `container[i, j]`: ints, or run-time dims of DYNAMIC tensors."""
        if isinstance(container, TileHandle):
            return list(container.tile_type.shape)
        return [d if d is not None else Scalar(ir.shape_dim(container.var, axis, 0, 0))
                for axis, d in enumerate(container.dims)]

    def linear_offset(self, container, index, node):
        """Row-major linear element offset of `container[index]` (one index per dim)."""
        indices = list(index) if isinstance(index, tuple) else [index]
        dims = self.container_dims(container)
        if len(indices) != len(dims):
            what = f"tile '{container.var.name}'" if isinstance(container, TileHandle) else \
                f"tensor '{container.name}'"
            raise self.error(errors.ParserTypeError, node, f"{what} has {len(dims)} dims; index it with "
                                                           f"{len(dims)} indices, got {len(indices)}")
        offset = 0
        for i, (idx, dim) in enumerate(zip(indices, dims)):
            if not (isinstance(idx, Scalar) or (isinstance(idx, int) and not isinstance(idx, bool))):
                raise self.error(errors.ParserTypeError, node, f"index {i} must be an integer, got {self.describe(idx)}")
            offset = idx if i == 0 else self.binop(ast.Add(), self.binop(ast.Mult(), offset, dim, node), idx, node)
        return self.to_index(offset, node, "element offset")

    def expr_BinOp(self, node):
        return self.binop(node.op, self.eval(node.left), self.eval(node.right), node)

    def binop(self, op, a, b, node):
        if isinstance(a, Scalar) or isinstance(b, Scalar):
            sym = _BINOPS.get(type(op)) or _BITOPS.get(type(op))
            if sym is None:
                raise self.error(errors.UnsupportedFeatureError, node,
                                 f"operator '{type(op).__name__}' is not supported on run-time scalars")
            return Scalar(ir.binary(sym, self.to_expr(a, node), self.to_expr(b, node), *self.span(node)))
        if _is_number(a) and _is_number(b):
            sym = _BINOPS.get(type(op))
            try:
                if sym is not None:
                    return _fold_arith(sym, a, b)
                return _CONST_ONLY_BINOPS[type(op)](a, b)
            except (ZeroDivisionError, KeyError, ValueError, OverflowError) as exc:
                raise self.error(errors.ParserValueError, node, f"cannot evaluate this constant: {exc}") from None
        self.reject_runtime_handles(node, a, b)
        try:
            return _PY_BINOP[type(op)](a, b)
        except Exception as exc:
            raise self.error(errors.ParserTypeError, node,
                             f"unsupported operands {self.describe(a)} and {self.describe(b)}: {exc}") from None

    def expr_UnaryOp(self, node):
        v = self.eval(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(v, Scalar):
            if isinstance(node.op, ast.USub):
                return Scalar(ir.unary("-", v.expr, *self.span(node)))
            if isinstance(node.op, ast.Not):
                return Scalar(ir.unary("not", v.expr, *self.span(node)))
            return Scalar(ir.unary("~", v.expr, *self.span(node)))
        self.reject_runtime_handles(node, v)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Not):
            return not v
        return ~v

    def expr_BoolOp(self, node):
        values = [self.eval(v) for v in node.values]
        sym = "and" if isinstance(node.op, ast.And) else "or"
        if not any(isinstance(v, Scalar) for v in values):
            result = values[0]
            for v in values[1:]:
                result = (result and v) if sym == "and" else (result or v)
            return result
        expr = self.to_expr(values[0], node)
        for v in values[1:]:
            expr = ir.binary(sym, expr, self.to_expr(v, node), *self.span(node))
        return Scalar(expr)

    def expr_Compare(self, node):
        left = self.eval(node.left)
        result = None
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator)
            if isinstance(op, (ast.In, ast.NotIn)) and self._has_scalar(left, right):
                value = self.membership(left, right, isinstance(op, ast.NotIn), comparator)
            elif isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                self.reject_runtime_handles(node, left, right)
                value = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
                         ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
            else:
                sym = _CMPOPS[type(op)]
                if isinstance(left, Scalar) or isinstance(right, Scalar):
                    value = Scalar(ir.binary(sym, self.to_expr(left, node), self.to_expr(right, node),
                                             *self.span(node)))
                else:
                    self.reject_runtime_handles(node, left, right)
                    value = _PY_CMP[sym](left, right)
            if result is None:
                result = value
            elif isinstance(result, Scalar) or isinstance(value, Scalar):
                result = Scalar(ir.binary("and", self.to_expr(result, node), self.to_expr(value, node),
                                          *self.span(node)))
            else:
                result = result and value
            left = right
        return result

    @staticmethod
    def _has_scalar(left, right):
        return isinstance(left, Scalar) or (isinstance(right, (tuple, list)) and
                                            any(isinstance(v, Scalar) for v in right))

    def membership(self, left, items, negate, node):
        """`x in (a, b, ...)` with run-time values: x == a or x == b ... (False for no items)."""
        if not isinstance(items, (tuple, list, set, frozenset)):
            raise self.error(errors.ParserTypeError, node, f"'in' with a run-time value needs a tuple or list of "
                                                           f"scalars, got {self.describe(items)}")
        line, col = self.span(node)
        expr = None
        for item in items:
            if not (isinstance(item, Scalar) or _is_number(item)):
                raise self.error(errors.ParserTypeError, node,
                                 f"'in' compares scalars; the container holds {self.describe(item)}")
            eq = ir.binary("==", self.to_expr(left, node), self.to_expr(item, node), line, col)
            expr = eq if expr is None else ir.binary("or", expr, eq, line, col)
        if expr is None:
            expr = ir.const_bool(False, line, col)
        return Scalar(ir.unary("not", expr, line, col) if negate else expr)

    def expr_IfExp(self, node):
        cond = self.condition(node.test)
        if not isinstance(cond, Scalar):
            return self.eval(node.body) if cond else self.eval(node.orelse)
        a, b = self.eval(node.body), self.eval(node.orelse)
        return Scalar(ir.ternary(cond.expr, self.to_expr(a, node.body), self.to_expr(b, node.orelse),
                                 *self.span(node)))

    def expr_JoinedStr(self, node):
        raise self.error(errors.UnsupportedFeatureError, node, "f-strings are only meaningful in pl.printf")

    # ---- calls ----
    def expr_Call(self, node, target_hint=None):
        func = self.refuse_planned(self.eval(node.func), node.func)
        build = next((b for f, b in aggregates.BUILDERS.items() if func is f), None)
        if build is not None:  # pl.struct, pl.struct_array, pl.make_tuple
            return build(self, node, target_hint)
        if isinstance(func, Builtin):
            return self.call_builtin(func, node, target_hint)
        if isinstance(func, GroupMethod):
            if node.args or node.keywords:
                raise self.error(errors.ParserTypeError, node, f"group.{func.method}() takes no arguments")
            return PendingTile(func.group, func.method)
        if isinstance(func, (Scalar, TensorHandle, TileHandle, GroupHandle, PendingTile, ShapeProxy)):
            raise self.error(errors.ParserTypeError, node.func, f"{self.describe(func)} is not callable")
        if isinstance(func, types.FunctionType) and not getattr(func, "__module__", "").startswith("pypto_pro"):
            if getattr(func, "__pypto_pipeline_stage__", False):
                return self.inline_stage(func, node)
            return self.inline_helper(func, node)
        if any(func is b for b in _HOST_ONLY_BUILTINS):
            name = func.__name__
            if func is builtins.print:
                raise self.error(errors.ParserSyntaxError, node,
                                 "print() inside a kernel would run once, on the host, while the kernel compiles",
                                 hint="print from the device with pl.printf(\"fmt %d\\n\", value)")
            raise self.error(errors.ParserSyntaxError, node,
                             f"{name}() inside a kernel would run once, on the host, while the kernel compiles; "
                             f"kernels cannot call it")
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(errors.UnsupportedFeatureError, node, "*args / **kwargs calls are not supported")
        self.reject_runtime_handles(node, *args, *kwargs.values())
        name = getattr(func, "__name__", repr(func))
        try:
            return func(*args, **kwargs)
        except NotImplementedError as exc:
            raise self.error(errors.UnsupportedFeatureError, node, f"{name}(...): {exc}") from None
        except ValueError as exc:
            raise self.error(errors.ParserValueError, node, f"{name}(...): {exc}") from None
        except TypeError as exc:
            raise self.error(errors.ParserTypeError, node, f"{name}(...): {exc}") from None
        except Exception as exc:
            raise self.error(errors.ParserError, node, f"{name}(...) raised {type(exc).__name__}: {exc}") from None

    def inline_helper(self, fn, node):
        """A plain Python function called from a kernel is inlined: its body is parsed here with its
        parameters bound to the call's values (compile-time or run-time), in a scope of its own."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(errors.UnsupportedFeatureError, node, "*args / **kwargs calls are not supported")
        helper_file = diagnostics.source_file(fn)
        try:
            tree, first_line, indent = parse_function(fn)
        except (OSError, TypeError) as exc:
            raise self.error(errors.ParserError, node, f"cannot read the source of '{fn.__name__}': {exc}") from None
        fdef = tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise self.error(errors.UnsupportedFeatureError, node, f"'{fn.__name__}' is not a plain function")
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(errors.ParserTypeError, node, f"{fn.__name__}(): {exc}") from None
        bound.apply_defaults()
        self.check_helper_annotations(fn, bound.arguments, node)
        closure = _closure_cells(fn)
        if self.scopes > 64 and self.inline is not None:
            raise self.error(errors.UnsupportedFeatureError, node, "helpers nest too deeply (recursion?)")
        saved = (self.env, self.globals, self.closure, self.line_offset, self.col_offset, self.scope, self.inline,
                 self.loop_depth, self.in_static_loop, self.filename, self.file_index)
        self.scopes += 1
        self.scope = self.scopes
        self.env = dict(bound.arguments)
        self.globals = fn.__globals__
        self.closure = closure
        self.filename = helper_file
        self.file_index = self.fb.add_source_file(helper_file)
        self.line_offset = first_line - 1
        self.col_offset = indent
        # early: returns inside run-time control flow so far; they set `flag` and leave the value in
        # `result` (a variable made by the first one that returns a value).
        self.inline = {"value": None, "depth": self.runtime_depth, "early": 0, "flag": None, "result": None,
                       "kinds": set(), "fn": fn.__name__, "name": self.temp_name(fn.__name__ + "_result")}
        self.loop_depth = 0  # break/continue cannot leave the helper
        self.in_static_loop = False
        fell_off = False
        try:
            if _has_nested_return(fdef.body):
                line, col = self.span(node)
                self.inline["flag"] = self.scalar_var(self.temp_name(fn.__name__ + "_returned"), "bool", node)
                self.emit(ir.assign(self.inline["flag"], ir.const_bool(False, line, col), line, col))
            self.parse_stmts(fdef.body)
            fell_off = True
        except (_HelperReturn, _BlockEnds):
            pass
        finally:
            inline = self.inline
            (self.env, self.globals, self.closure, self.line_offset, self.col_offset, self.scope, self.inline,
             self.loop_depth, self.in_static_loop, self.filename, self.file_index) = saved
        if inline["early"] == 0:
            return inline["value"]
        if "value" not in inline["kinds"]:
            return None
        if fell_off or "none" in inline["kinds"]:
            raise self.error(errors.ParserTypeError, node,
                             f"'{fn.__name__}' returns a value on some paths and nothing on others (or falls off "
                             f"its end); a helper called for its value returns one on every path")
        result = inline["result"]
        if result.kind == "tile":
            return TileHandle(result, _tile_type_of(result))
        return Scalar(ir.var_ref(result, *self.span(node)))

    def inline_stage(self, fn, node):
        """A @pl.pipeline.stage helper: inlined into a stage node (plain code unless pl.jit(pipeline=...)
        schedules the stages). Stages do not nest and return nothing."""
        if self.stage is not None:
            raise self.error(errors.ParserSyntaxError, node,
                             f"pipeline stage '{fn.__name__}' is called inside stage '{self.stage}'; stages do not "
                             f"nest", hint="call both stages from the pipeline loop, each in its own section")
        saved_block, self.block, self.stage = self.block, [], fn.__name__
        try:
            result = self.inline_helper(fn, node)
            body = ir.seq(self.block)
        finally:
            self.block, self.stage = saved_block, None
        if result is not None:
            raise self.error(errors.ParserSyntaxError, node,
                             f"pipeline stage '{fn.__name__}' returns a value; a stage returns nothing (its results "
                             f"go through tiles and GM)")
        self.emit(ir.stage(fn.__name__, body, *self.span(node)))
        return None

    def check_helper_annotations(self, fn, arguments, node):
        """A helper's pl.Tile / pl.Tensor / pl.Scalar (or dtype) parameter annotations: tiles and tensors
        must match, scalars take the annotated dtype (in place in `arguments`)."""
        from pypto_pro.language.jit import _annotations
        try:
            hints = _annotations(fn)
        except Exception:  # annotations a kernel cannot evaluate are only hints to Python tools
            return
        for name, ann in hints.items():
            if name not in arguments:
                continue
            value = arguments[name]
            what = f"argument '{name}' of {fn.__name__}()"
            if isinstance(ann, ScalarAnnotation):
                ann = ann.dtype
            if isinstance(ann, Tile):
                tile = value.group.tile_type if isinstance(value, PendingTile) else \
                    value.tile_type if isinstance(value, TileHandle) else None
                if tile is None or tuple(tile.shape) != ann.shape or tile.dtype is not ann.dtype:
                    got = self.describe(value) if tile is None else \
                        f"a tile of shape {list(tile.shape)} and dtype {tile.dtype!r}"
                    raise self.error(errors.ParserTypeError, node, f"{what} is annotated {ann!r}, got {got}")
            elif isinstance(ann, TensorAnnotation):
                if not isinstance(value, TensorHandle):
                    raise self.error(errors.ParserTypeError, node,
                                     f"{what} is annotated as a GM tensor, got {self.describe(value)}")
                param = self.spec_param(value.name)
                dtype = self.dtypes.get(value.name, param.dtype if param else None)
                if (isinstance(ann.dtype, DataType) and ann.dtype is not dtype) or len(ann.dims) != len(value.dims):
                    raise self.error(errors.ParserTypeError, node,
                                     f"{what} is annotated {ann!r}, got GM tensor '{value.name}' "
                                     f"({len(value.dims)} dims of {dtype!r})")
            elif isinstance(ann, DataType):
                arguments[name] = self.as_scalar_of(value, ann, what, node)

    def as_scalar_of(self, value, dtype, what, node):
        """`value` as a scalar of `dtype`: run-time values cast, compile-time numbers converted."""
        if isinstance(value, Scalar):
            if value.dtype == dtype.name:
                return value
            return Scalar(ir.cast(value.expr, dtype.name, *self.span(node)))
        if not _is_number(value):
            raise self.error(errors.ParserTypeError, node, f"{what} is annotated {dtype!r}, got {self.describe(value)}")
        if dtype.name == "bool":
            return bool(value)
        if dtype.name in ("fp32", "fp16", "bf16"):
            return float(value)
        if isinstance(value, float) and not value.is_integer():
            raise self.error(errors.ParserTypeError, node, f"{what} is annotated {dtype!r}, got the float {value!r}")
        return int(value)

    def call_builtin(self, func, node, target_hint):
        if func.kind == "planned":  # the registry says what it will do
            self.emit(ir.op(func.name, [], {}, *self.span(node)))
        front = builtins_.OP_FRONT_ENDS.get(func.name) if func.kind == "op" else None
        if front is not None:  # an op whose arguments the front end completes first
            return front(self, node, target_hint)
        if func.kind == "op":
            form = func.info["call_form"]
            if form != "operands":
                return builtins_.format_op(self, func, node)
            if func.info["per_slot"] and node.args and isinstance(self.eval(node.args[0]), GroupHandle):
                return builtins_.per_slot_op(self, func, node)
            return self.call_op(func.name, node)
        if func.name == "constexpr":
            raise self.error(errors.ParserSyntaxError, node,
                             "pl.constexpr(cond) can only be the condition of an 'if' or of a conditional "
                             "expression ('a if pl.constexpr(cond) else b')")
        build = builtins_.BUILTINS.get(func.name)
        if build is None:
            raise self.error(errors.ParserSyntaxError, node, f"pl.{func.name} cannot be called here")
        return build(self, node, target_hint)

    def bind_args(self, node, names, required):
        """Binds a builtin call's positional and keyword arguments to `names` (unevaluated nodes)."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(errors.UnsupportedFeatureError, node, "*args / **kwargs calls are not supported")
        fname = ast.unparse(node.func)
        if len(node.args) > len(names):
            raise self.error(errors.ParserTypeError, node,
                             f"{fname}() takes at most {len(names)} positional arguments ({', '.join(names)})")
        bound = dict(zip(names, node.args))
        for k in node.keywords:
            if k.arg not in names:
                raise self.error(errors.ParserTypeError, k.value,
                                 f"{fname}() got an unexpected keyword '{k.arg}'; it takes {', '.join(names)}")
            if k.arg in bound:
                raise self.error(errors.ParserTypeError, k.value, f"{fname}() got '{k.arg}' twice")
            bound[k.arg] = k.value
        for r in required:
            if r not in bound:
                raise self.error(errors.ParserTypeError, node, f"{fname}() is missing its '{r}' argument")
        return bound

    def call_op(self, name, node, extra_kwargs=None):
        """pl.<op>(...): operands become IR expressions, keyword options compile-time values; the C++
        registry binds them (scalar forms, dispatch keywords like dim=, defaults) and checks them.
        `extra_kwargs`: options an alias fixes (pl.fillpad_expand is fillpad with mode EXPAND)."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(errors.UnsupportedFeatureError, node, "*args / **kwargs calls are not supported")
        args = [self.op_operand(self.eval(a), a, f"pl.{name} argument {i + 1}") for i, a in enumerate(node.args)]
        kwargs = dict(extra_kwargs or {})
        for k in node.keywords:
            kwargs[k.arg] = self.op_keyword(self.eval(k.value), k.value, f"pl.{name} keyword '{k.arg}'")
        self.emit(ir.op(name, args, kwargs, *self.span(node)))
        return None

    def op_keyword(self, value, node, what):
        """A keyword of an op call: an operand given by name, or a compile-time option."""
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, DataType):
            return value.pl_name
        return self.op_operand(value, node, what)

    def op_operand(self, value, node, what):
        if isinstance(value, PendingTile):
            value = self.bind_tile(None, value, node)
        if isinstance(value, TileHandle):
            return ir.var_ref(value.var, *self.span(node))
        if isinstance(value, TensorHandle):
            return ir.var_ref(value.var, *self.span(node))
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, (TileHandle, TensorHandle, PendingTile)) for v in value):  # sync_all's workspaces
                return ir.tuple([self.op_operand(v, node, what + " entry") for v in value], *self.span(node))
            if value and all(isinstance(v, (Scalar, bool, int, float)) for v in value) and \
                    any(isinstance(v, float) or (isinstance(v, Scalar) and v.dtype in ("fp32", "bool"))
                        for v in value):
                return ir.tuple([self.to_expr(v, node) for v in value], *self.span(node))  # printf arguments
            return ir.tuple([self.to_index(v, node, what + " entry") for v in value], *self.span(node))
        if isinstance(value, Scalar) or _is_number(value):
            return self.to_expr(value, node)
        raise self.error(errors.ParserTypeError, node, f"{what} cannot be {self.describe(value)}")

    # ---- conversions ----
    def to_expr(self, value, node):
        line, col = self.span(node)
        if isinstance(value, Scalar):
            return value.expr
        if isinstance(value, bool):
            return ir.const_bool(value, line, col)
        if isinstance(value, int):
            if not -(1 << 63) <= value < (1 << 63):
                raise self.error(errors.ParserValueError, node, f"{value} does not fit in int64")
            return ir.const_int(value, line, col, _const_dtype(value))
        if isinstance(value, float):
            return ir.const_float(value, line, col)
        raise self.error(errors.ParserTypeError, node, f"expected a scalar, got {self.describe(value)}")

    def to_index(self, value, node, what):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, Scalar):
            if value.dtype in ("fp32", "bool"):
                raise self.error(errors.ParserTypeError, node, f"{what} must be an integer, got a {value.dtype} value")
            return value.expr
        if isinstance(value, int) and not isinstance(value, bool):
            return self.to_expr(value, node)
        raise self.error(errors.ParserTypeError, node, f"{what} must be an integer, got {self.describe(value)}")

    def reject_runtime_handles(self, node, *values):
        for v in values:
            if isinstance(v, (list, tuple)):
                self.reject_runtime_handles(node, *v)
            elif isinstance(v, dict):
                self.reject_runtime_handles(node, *v.keys(), *v.values())
            elif isinstance(v, (Scalar, TensorHandle, TileHandle, GroupHandle, PendingTile, ShapeProxy, GroupMethod,
                                TilingHandle, ArrayField, PtrHandle)):
                hint = None
                if isinstance(v, Scalar):
                    hint = ("this needs a compile-time value: a literal, a module constant, a fixed or STATIC dim, "
                            "a TilingKey field; run-time scalars (DYNAMIC dims, TilingData, block indices) cannot "
                            "size tiles")
                raise self.error(errors.ParserTypeError, node,
                                 f"{self.describe(v)} cannot be used in compile-time Python here", hint=hint)

    @staticmethod
    def describe(value) -> str:
        if isinstance(value, Scalar):
            return f"a run-time {value.dtype} scalar"
        if isinstance(value, TensorHandle):
            return f"GM {'view' if value.view else 'tensor'} '{value.name}'"
        if isinstance(value, PtrHandle):
            return f"pointer '{value.var.name}' ({value.dtype!r})"
        if isinstance(value, TileHandle):
            return f"tile '{value.var.name}'"
        if isinstance(value, GroupHandle):
            return f"tile group '{value.var.name}'"
        if isinstance(value, PendingTile):
            return "a tile"
        if isinstance(value, ShapeProxy):
            return "a tensor shape"
        if isinstance(value, TilingHandle):
            return f"TilingData '{value.var.name}'"
        if isinstance(value, ArrayField):
            return f"the array field '{value.name}'"
        if isinstance(value, (StructValue, StructSlot)):
            return "a struct"
        if isinstance(value, StructArray):
            return f"a pl.struct_array of {len(value.slots)}"
        if isinstance(value, TupleValue):
            return "a pl.make_tuple"
        if isinstance(value, (bool, int, float, str)) or value is None:
            return repr(value)
        return f"{type(value).__name__} {value!r}"


_PY_BINOP = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
             **_CONST_ONLY_BINOPS}

_AGGREGATES = (StructValue, StructArray, StructSlot, TupleValue)


def _name_of(node):
    """The source text of a subscripted name (for messages), or None for an expression."""
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def _is_slicing(subscript) -> bool:
    parts = subscript.elts if isinstance(subscript, ast.Tuple) else [subscript]
    return any(isinstance(p, ast.Slice) for p in parts)


def _tile_type_of(var) -> TileType:
    from pypto_pro.language.types import DTYPES, MemorySpace, TensorLayout
    dtype, shape, memory, layout, valid, pad, compact = var.tile
    return TileType(shape, DTYPES[dtype], MemorySpace(memory), valid_shape=valid, layout=TensorLayout(layout),
                    pad=pad or None, compact=compact or None)


class _Promote(Exception):
    """A variable bound to int32 values is assigned an int64 one: parse again with it int64."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _has_nested_return(stmts) -> bool:
    """Whether a `return` sits inside an if / loop / with of these statements (not a nested def)."""
    def walk(node, nested):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(node, ast.Return):
            return nested
        inner = nested or isinstance(node, (ast.If, ast.For, ast.While, ast.With))
        return any(walk(child, inner) for child in ast.iter_child_nodes(node))
    return any(walk(stmt, False) for stmt in stmts)


class _BlockEnds(Exception):
    """Unwinds the rest of a block after an inlined helper's early return."""


class _HelperReturn(Exception):
    """Unwinds the parse of an inlined helper at its `return`."""


def parse_kernel(fn, spec, shapes=None, constants=None, dtypes=None):
    """Parses kernel `fn` into a pypto_pro._C.ir.Function for one compile signature: `shapes` binds the
    STATIC dims of each tensor, `constants` the TilingKey fields and datatype variables, `dtypes` the
    dtype of each tensor the datatype dict names. Returns (function, captures): the module globals
    and closure variables it read, as (dict or cell, name, value)."""
    promoted = frozenset()
    while True:
        parser = KernelParser(fn, spec, shapes, constants, dtypes, promoted)
        try:
            func = parser.parse()
        except _Promote as p:
            if p.key in promoted:  # cannot happen: the variable is int64 now
                raise errors.ParserError(f"internal: widening '{p.key[1]}' to int64 did not settle",
                                         kernel=spec.name) from None
            promoted = promoted | {p.key}
            continue
        return func, list(parser.captures.values())
