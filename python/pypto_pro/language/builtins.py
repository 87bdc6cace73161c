"""The callable names of the pl namespace. They only mean something inside a @pl.jit kernel,
where the parser recognises them; called from plain Python they raise."""

from __future__ import annotations

import sys

from pypto_pro import _C


class Builtin:
    """A pl.<name> the parser handles: `kind` is "op" (a registry op), "planned" (public language,
    not implemented yet) or "special" (range, make_tile, sections, builtins, ...)."""

    def __init__(self, name: str, kind: str, doc: str = "", info: dict | None = None):
        self.name = name
        self.kind = kind
        self.info = info or {}  # ops: the registry entry (call form, per-slot, signature, ...)
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        # An interpreted kernel (pl.jit(interpret=True)) may run on this thread only once its module
        # is imported (it brings numpy, which `import pypto_pro.language` does not need).
        interpreter = sys.modules.get("pypto_pro.interpret")
        if interpreter is not None and interpreter.running():
            return interpreter.active_call(self.name, args, kwargs)
        raise RuntimeError(f"pl.{self.name} can only be used inside a @pl.jit kernel body")

    def __repr__(self):
        return f"<pl.{self.name}>"


SPECIALS = {
    "range": "for i in pl.range(stop) / pl.range(start, stop[, step]): a run-time loop of the kernel",
    "static_range": "for i in pl.static_range(stop) / (start, stop[, step]): unrolled at compile time, i an int",
    "get_block_idx": "index of this block (vector code of mixed kernels: flattened over AIVs)",
    "get_block_num": "number of blocks of the launch",
    "get_subblock_idx": "0/1: which AIV of a mixed block",
    "get_subblock_num": "AIVs per logical block (1, or 2 in mixed kernels)",
    "get_spr": "pl.get_spr(): the core's AR special register (int64; 0 until a vector function's squeeze writes it)",
    "get_ctrl_spr": "pl.get_ctrl_spr(start_bit, end_bit): CTRL bits start_bit..end_bit of this core (int64)",
    "get_saturation_flag": "pl.get_saturation_flag(mode): whether the pl.SaturationFlagMode class saturates (bool)",
    "make_tile": "make_tile(tile_type, addr=A, size=None): one tile at a fixed byte address",
    "make_tile_group": "make_tile_group(type=, addrs=, mutex_ids=None, depth=None): N rotating tile slots",
    "section_vector": "with pl.section_vector(): code for the vector cores (AIV)",
    "section_cube": "with pl.section_cube(): code for the cube cores (AIC)",
    "min": "pl.min(a, b) on scalars",
    "max": "pl.max(a, b) on scalars",
    "const": "pl.const(value, dtype): a typed scalar constant",
    "ssbuf_store": "pl.ssbuf_store(struct_var, offset): copy a pl.struct into the block's SSBUF at a byte offset",
    "ssbuf_load": "pl.ssbuf_load(struct_var, offset): fill a pl.struct from the block's SSBUF at a byte offset",
    "reinterpret": "pl.reinterpret(tile, *, dtype=None, shape=None, layout=None): the tile's bytes as another tile type",
    "constexpr": "if pl.constexpr(cond): / a if pl.constexpr(cond) else b: cond must be known at compile time",
    "getval": "pl.getval(container, offset): one element of a Vec tile or GM tensor (also container[i, j])",
    "make_tensor": "pl.make_tensor(ptr, shape, stride=None, dtype=None): a GM view over a pl.Ptr or GM tensor",
    "make_ptr": "pl.make_ptr(ptr, dtype=None): the same GM address as a pointer to dtype",
    "addptr": "pl.addptr(ptr, offset): a GM pointer offset elements further, in the same buffer",
    "fillpad_expand": "pl.fillpad_expand(out, src): pl.fillpad(out, src, mode=pl.FillPadMode.EXPAND)",
    "fillpad_inplace": "pl.fillpad_inplace(out, src): pl.fillpad(out, src, mode=pl.FillPadMode.INPLACE)",
}

_specials = {name: Builtin(name, "special", doc=doc) for name, doc in SPECIALS.items()}
_ops = {}
for _name in _C.ir.op_names():
    _info = _C.ir.op_info(_name)
    _ops[_name] = Builtin(_name, "op", doc=f"{_info['signature']}: {_info['doc']} (pipe {_info['pipe']})", info=_info)
_planned = {name: Builtin(name, "planned", doc=f"planned: {doc}") for name, doc in _C.ir.planned_ops()}


def top_level() -> dict:
    """Every builtin that lives directly in the pl namespace."""
    names = {}
    names.update({k: v for k, v in _planned.items() if "." not in k})
    names.update({k: v for k, v in _ops.items() if "." not in k})
    names.update(_specials)
    return names


def system_level() -> dict:
    """The pl.system.* builtins (sync, mutexes, barriers, cross-core flags): registry ops named
    "system.<name>", and the planned ones."""
    names = {k.split(".", 1)[1]: v for k, v in _planned.items() if k.startswith("system.")}
    names.update({k.split(".", 1)[1]: v for k, v in _ops.items() if k.startswith("system.")})
    return names
