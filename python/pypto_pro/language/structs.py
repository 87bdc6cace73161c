"""pl.struct, pl.struct_array and pl.make_tuple.

In a kernel the parser builds them (python/pypto_pro/language/parser/aggregates.py,
docs/language.md#structs-and-tuples). Called from plain Python they make the plain objects the
public language makes there: a namespace of the fields, a list of them.
"""

from __future__ import annotations

import types


def struct(*args, **fields):
    """pl.struct(field=value, ...) or pl.struct("Name", field=value, ...): outside a kernel a
    SimpleNamespace of the fields."""
    if len(args) > 1 or (args and not isinstance(args[0], str)):
        raise TypeError("pl.struct takes an optional struct name (a str) and keyword fields")
    return types.SimpleNamespace(**fields)


def struct_array(size, *args, **fields):
    """pl.struct_array(N, field=value, ...) or pl.struct_array(N, "Name", field=value, ...): outside a
    kernel a list of N SimpleNamespaces."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise TypeError(f"pl.struct_array size must be an int >= 1, got {size!r}")
    if len(args) > 1 or (args and not isinstance(args[0], str)):
        raise TypeError("pl.struct_array takes a size, an optional struct name (a str) and keyword fields")
    return [types.SimpleNamespace(**fields) for _ in range(size)]


def make_tuple(**fields):
    """pl.make_tuple(field=value, ...): outside a kernel a SimpleNamespace of the fields."""
    return types.SimpleNamespace(**fields)
