"""What kernel-body expressions evaluate to while parsing.

Compile-time values are plain Python objects (ints, floats, dtypes, TileTypes, lists, modules ...).
Everything that exists only at run time, or names a GM tensor or a tile, is one of the classes
below and wraps C++ IR objects (pypto_pro._C.ir.Var / Expr). They compare by identity.
"""

from __future__ import annotations

from dataclasses import dataclass

_value = dataclass(slots=True, eq=False)


@_value
class Local:
    """A name bound to an IR variable (scalar or tile)."""
    var: object


@_value
class Scalar:
    """A run-time scalar expression."""
    expr: object

    @property
    def dtype(self) -> str:
        return self.expr.dtype


@_value
class TensorHandle:
    """A GM tensor parameter (or an alias of one), or a GM view (pl.make_tensor: `view`, with its dtype)."""
    var: object
    name: str
    dims: list  # per axis: an int (fixed or specialised STATIC) or None (DYNAMIC)
    dtype: object = None  # views: their DataType (a parameter's comes from the signature)
    view: bool = False


@_value
class PtrHandle:
    """A GM pointer: a pl.Ptr parameter, or what pl.addptr / pl.make_ptr made of one."""
    var: object
    dtype: object  # the DataType it points to


@_value
class ShapeProxy:
    """`tensor.shape`: indexing it gives a compile-time int or a run-time dim."""
    tensor: TensorHandle


@_value
class TileHandle:
    """A tile variable: a pointer to one slot of a tile group."""
    var: object
    tile_type: object


@_value
class GroupHandle:
    """The slots of a pl.make_tile_group (with their cursor)."""
    var: object
    tile_type: object
    depth: int


@_value
class GroupMethod:
    """`group.next` / `.current` / `.previous` before the call."""
    group: GroupHandle
    method: str


@_value
class PendingTile:
    """A tile selected from a group, not yet bound: binding it emits the selection (next() advances
    the cursor once, where the selection stands in the source)."""
    group: GroupHandle
    mode: str
    index: object = None


@_value
class TilingHandle:
    """The TilingData parameter: its fields are run-time scalars."""
    var: object
    spec: object


@_value
class ArrayField:
    """`tiling.arr` before `[index]`."""
    tiling: TilingHandle
    name: str
    count: int


@_value
class ValidShapeProxy:
    """`tile.valid_shape` before `[axis]`."""
    tile: TileHandle


@_value
class Poisoned:
    """A name whose compile-time value depends on which run-time branch ran."""
    line: int


MISSING = object()


@_value
class StructValue:
    """A pl.struct in a kernel: one IR scalar variable per field (name -> Var), in declaration order."""
    type_name: str
    fields: dict


@_value
class StructArray:
    """A pl.struct_array in a kernel: its slots (StructValues of one layout)."""
    type_name: str
    slots: list


@_value
class StructSlot:
    """A struct picked from a list of structs by a run-time index (checked, held in `index`, an IR
    scalar variable): field reads and writes dispatch over the slots."""
    slots: list
    index: object


@_value
class TupleValue:
    """A pl.make_tuple in a kernel: its fields (name -> value), read as t.name; nothing is emitted."""
    fields: dict
