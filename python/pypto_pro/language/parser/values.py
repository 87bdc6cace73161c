"""What kernel-body expressions evaluate to while parsing.

Compile-time values are plain Python objects (ints, floats, dtypes, TileTypes, lists, modules ...).
Everything that exists only at run time, or names a GM tensor or a tile, is one of the classes
below and wraps C++ IR objects (pypto_pro._C.ir.Var / Expr).
"""

from __future__ import annotations


class Local:
    """A name bound to an IR variable (scalar or tile)."""

    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var


class Scalar:
    """A run-time scalar expression."""

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    @property
    def dtype(self) -> str:
        return self.expr.dtype


class TensorHandle:
    """A GM tensor parameter (or an alias of one)."""

    __slots__ = ("var", "name", "dims")

    def __init__(self, var, name, dims):
        self.var = var
        self.name = name
        self.dims = dims  # per axis: an int (fixed or specialised STATIC) or None (DYNAMIC)


class ShapeProxy:
    """`tensor.shape`: indexing it gives a compile-time int or a run-time dim."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


class TileHandle:
    """A tile variable: a pointer to one slot of a tile group."""

    __slots__ = ("var", "tile_type")

    def __init__(self, var, tile_type):
        self.var = var
        self.tile_type = tile_type


class GroupHandle:
    """The slots of a pl.make_tile_group (with their cursor)."""

    __slots__ = ("var", "tile_type", "depth")

    def __init__(self, var, tile_type, depth):
        self.var = var
        self.tile_type = tile_type
        self.depth = depth


class GroupMethod:
    """`group.next` / `.current` / `.previous` before the call."""

    __slots__ = ("group", "method")

    def __init__(self, group, method):
        self.group = group
        self.method = method


class PendingTile:
    """A tile selected from a group, not yet bound: binding it emits the selection (next() advances
    the cursor once, where the selection stands in the source)."""

    __slots__ = ("group", "mode", "index")

    def __init__(self, group, mode, index=None):
        self.group = group
        self.mode = mode
        self.index = index


class TilingHandle:
    """The TilingData parameter: its fields are run-time scalars."""

    __slots__ = ("var", "spec")

    def __init__(self, var, spec):
        self.var = var
        self.spec = spec


class ArrayField:
    """`tiling.arr` before `[index]`."""

    __slots__ = ("tiling", "name", "count")

    def __init__(self, tiling, name, count):
        self.tiling = tiling
        self.name = name
        self.count = count


class ValidShapeProxy:
    """`tile.valid_shape` before `[axis]`."""

    __slots__ = ("tile",)

    def __init__(self, tile):
        self.tile = tile


class Poisoned:
    """A name whose compile-time value depends on which run-time branch ran."""

    __slots__ = ("line",)

    def __init__(self, line):
        self.line = line


MISSING = object()
