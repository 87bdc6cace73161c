"""TilingData: a @dataclass of run-time parameters passed to a kernel as a C struct (docs/jit.md#tilingkey-and-tilingdata).

    @dataclass
    class OpTiling:
        n: int            # int64
        scale: float      # fp32
        flags: int[8]     # a fixed array (with `from __future__ import annotations`)

Fields are laid out in order with natural alignment; <Class>_tiling.h declares the same struct.
"""

from __future__ import annotations

import ast
import dataclasses

from pypto_pro import _C

_SCALARS = {"int": "int64", "float": "fp32", "bool": "bool", int: "int64", float: "fp32", bool: "bool"}
MAX_ARRAY = 2048


def is_tiling_data_class(obj) -> bool:
    return isinstance(obj, type) and dataclasses.is_dataclass(obj)


def _parse_annotation(annotation, where):
    """int / float / bool, or T[N] (a string when `from __future__ import annotations` is on)."""
    if annotation in _SCALARS:
        return _SCALARS[annotation], 0
    if isinstance(annotation, str):
        try:
            node = ast.parse(annotation, mode="eval").body
        except SyntaxError:
            node = None
        if isinstance(node, ast.Name) and node.id in _SCALARS:
            return _SCALARS[node.id], 0
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _SCALARS:
            size = node.slice
            if not (isinstance(size, ast.Constant) and type(size.value) is int):
                raise TypeError(f"{where}: the length of an array field must be an int literal, got "
                                f"'{annotation}'")
            if not 1 <= size.value <= MAX_ARRAY:
                raise ValueError(f"{where}: array length {size.value} is outside 1..{MAX_ARRAY}")
            return _SCALARS[node.value.id], size.value
    raise TypeError(f"{where}: a TilingData field must be int, float, bool or T[N], got {annotation!r}")


class TilingDataSpec:
    """The C layout of a TilingData class (computed by the C++ core, the one source of truth)."""

    def __init__(self, cls, param: str, kernel: str):
        self.cls = cls
        self.param = param
        fields = dataclasses.fields(cls)
        if not fields:
            raise TypeError(f"kernel '{kernel}': TilingData class {cls.__name__} of parameter '{param}' has no fields")
        annotations = {}
        for klass in reversed(cls.__mro__):
            annotations.update(getattr(klass, "__annotations__", {}))
        declared = []
        for f in fields:
            dtype, count = _parse_annotation(annotations.get(f.name, f.type),
                                             f"kernel '{kernel}': {cls.__name__}.{f.name}")
            declared.append((f.name, dtype, count))
        self.fields, self.size = _C.ir.struct_layout(cls.__name__, declared)

    def field_layout(self):
        """[(name, dtype, count, offset)] for the launch path's packer."""
        return list(self.fields)

    def field(self, name):
        return next((f for f in self.fields if f[0] == name), None)
