"""TilingKey: a finite set of compile-time modes, one compiled instance per valid key (docs/jit.md#tilingkey-and-tilingdata).

    class AttnKey:
        HasMask = TilingKeyField(bits=1, values=[0, 1])
        BlockM = TilingKeyField(bits=8, values=[64, 128])

        def is_valid(self, key):          # optional (also a classmethod or staticmethod); key in field order
            has_mask, block_m = key
            return has_mask == 0 or block_m == 128

Fields pack in definition order from bit 0; each field stores the *index* of its value.
"""

from __future__ import annotations

from pypto_pro import _C


class TilingKeyField:
    """One field of a TilingKey class: `bits` of index space for the candidate `values`."""

    def __init__(self, bits: int, values):
        self.bits = bits
        self.values = list(values) if isinstance(values, (list, tuple)) else values

    def __repr__(self):
        return f"TilingKeyField(bits={self.bits}, values={self.values})"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def TilingKeySchema(cls, kernel_name: str, reserved_names=()):
    """Reads a TilingKey class's fields (definition order) and is_valid; the C++ schema
    (pypto_pro._C.TilingKeySchema) checks the declaration, packs launch dicts, unpacks keys for the
    parser and enumerates the valid ones."""
    where = f"kernel '{kernel_name}': tiling_key"
    if not isinstance(cls, type):
        raise TypeError(f"{where} must be a class with TilingKeyField attributes, got {cls!r}")
    fields = []
    for name, value in vars(cls).items():
        if not isinstance(value, TilingKeyField):
            continue
        if not _is_int(value.bits):
            raise ValueError(f"{where} field '{name}': bits must be an int > 0, got {value.bits!r}")
        if not isinstance(value.values, list):
            raise ValueError(f"{where} field '{name}': values must be a non-empty list of ints")
        for v in value.values:
            if not _is_int(v):
                raise ValueError(f"{where} field '{name}': values must be ints (not bools), got {v!r}")
        fields.append((name, value.bits, value.values))
    predicate = getattr(cls, "is_valid", None)
    if predicate is not None and not callable(predicate):
        raise TypeError(f"{where} {cls.__name__}.is_valid must be callable")
    accept = None
    if predicate is not None:
        instance = []

        def accept(values):  # a plain method, a @classmethod and a @staticmethod all work on an instance
            if not instance:
                instance.append(cls())
            return bool(instance[0].is_valid(tuple(values)))

    return _C.TilingKeySchema(kernel_name, cls.__name__, fields, list(reserved_names), accept)


__all__ = ["TilingKeyField", "TilingKeySchema"]
