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

import itertools


class TilingKeyField:
    """One field of a TilingKey class: `bits` of index space for the candidate `values`."""

    def __init__(self, bits: int, values):
        self.bits = bits
        self.values = list(values) if isinstance(values, (list, tuple)) else values

    def __repr__(self):
        return f"TilingKeyField(bits={self.bits}, values={self.values})"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class TilingKeySchema:
    """A validated TilingKey class: field names, candidates, bit offsets and the is_valid predicate."""

    def __init__(self, cls, kernel_name: str, reserved_names=()):
        where = f"kernel '{kernel_name}': tiling_key"
        if not isinstance(cls, type):
            raise TypeError(f"{where} must be a class with TilingKeyField attributes, got {cls!r}")
        self.cls = cls
        self.name = cls.__name__
        self.fields = []   # (name, TilingKeyField)
        for name, value in vars(cls).items():
            if isinstance(value, TilingKeyField):
                self.fields.append((name, value))
        if not self.fields:
            raise ValueError(f"{where} class {cls.__name__} declares no TilingKeyField")
        self.offsets = []
        offset = 0
        for name, field in self.fields:
            if not _is_int(field.bits) or field.bits <= 0:
                raise ValueError(f"{where} field '{name}': bits must be an int > 0, got {field.bits!r}")
            if not isinstance(field.values, list) or not field.values:
                raise ValueError(f"{where} field '{name}': values must be a non-empty list of ints")
            for v in field.values:
                if not _is_int(v):
                    raise ValueError(f"{where} field '{name}': values must be ints (not bools), got {v!r}")
            if len(set(field.values)) != len(field.values):
                raise ValueError(f"{where} field '{name}': values must be unique, got {field.values}")
            if len(field.values) > 2 ** field.bits:
                raise ValueError(f"{where} field '{name}': {len(field.values)} values do not fit in "
                                 f"{field.bits} bit(s) (at most {2 ** field.bits})")
            if name in reserved_names:
                raise ValueError(f"{where} field '{name}' clashes with the kernel parameter of that name")
            self.offsets.append(offset)
            offset += field.bits
        if offset > 64:
            raise ValueError(f"{where} needs {offset} bits; a TilingKey packs into at most 64")
        self.total_bits = offset
        predicate = getattr(cls, "is_valid", None)
        if predicate is not None and not callable(predicate):
            raise TypeError(f"{where} {cls.__name__}.is_valid must be callable")
        self._predicate = predicate
        self._instance = None

    @property
    def names(self):
        return [name for name, _ in self.fields]

    def is_valid(self, values: tuple) -> bool:
        """Runs the class's is_valid(key) on the field values in definition order; a plain method,
        a @classmethod and a @staticmethod are all called through an instance."""
        if self._predicate is None:
            return True
        if self._instance is None:
            self._instance = self.cls()
        return bool(self._instance.is_valid(tuple(values)))

    def pack(self, key: dict) -> int:
        """The packed key of a launch dict; ValueError naming what is wrong."""
        self.check_dict(key)
        packed = 0
        for (name, field), offset in zip(self.fields, self.offsets):
            packed |= field.values.index(key[name]) << offset
        values = tuple(key[name] for name in self.names)
        if not self.is_valid(values):
            raise ValueError(f"TilingKey {self.describe(key)} is rejected by {self.name}.is_valid")
        return packed

    def unpack(self, packed: int) -> dict:
        out = {}
        for (name, field), offset in zip(self.fields, self.offsets):
            out[name] = field.values[(packed >> offset) & ((1 << field.bits) - 1)]
        return out

    def check_dict(self, key):
        if not isinstance(key, dict):
            raise ValueError(f"the TilingKey of a launch must be a dict {{field: value}}, got {type(key).__name__}")
        missing = [n for n in self.names if n not in key]
        extra = [k for k in key if k not in self.names]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(repr(n) for n in missing))
            if extra:
                parts.append("unknown " + ", ".join(repr(n) for n in extra))
            raise ValueError(f"TilingKey dict for {self.name} has {' and '.join(parts)}; its fields are "
                             f"{', '.join(self.names)}")
        for name, field in self.fields:
            v = key[name]
            if not _is_int(v) or v not in field.values:
                raise ValueError(f"TilingKey field '{name}' = {v!r} is not one of its values {field.values}")

    def describe(self, key: dict) -> str:
        return "{" + ", ".join(f"{n}: {key[n]}" for n in self.names) + "}"

    def enumerate_valid(self) -> list:
        """Every field combination is_valid accepts, as dicts in packing order."""
        out = []
        for combo in itertools.product(*(field.values for _, field in self.fields)):
            if self.is_valid(combo):
                out.append(dict(zip(self.names, combo)))
        return sorted(out, key=self.pack)


__all__ = ["TilingKeyField", "TilingKeySchema"]
