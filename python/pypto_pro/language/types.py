"""Types of the kernel language: dtypes, GM tensor annotations, tile types, memories, pipes."""

from __future__ import annotations

import enum
from typing import Sequence

from pypto_pro import _C
from pypto_pro.language.planned import mark, planned_enum


class DataType:
    """An element dtype, e.g. pl.DT_FP16. Compared by identity; usable as a compile-time value."""

    __slots__ = ("name", "pl_name", "bits", "supported")

    def __init__(self, name: str, pl_name: str, bits: int, supported: bool):
        self.name = name
        self.pl_name = pl_name
        self.bits = bits
        self.supported = supported

    def __repr__(self):
        return f"pl.{self.pl_name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


# Every table of the hardware's vocabulary comes from the C++ core (hw_tables.h), declared once there.
_HW = _C.hw_tables()
DTYPES = {name: DataType(name, pl_name, bits, ok) for name, pl_name, bits, _is_float, ok in _HW["dtypes"]}


def _dtype_by_name(name: str) -> DataType:
    return DTYPES[name]


class _ShapePolicy:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"pl.{self.name}"


DYNAMIC = _ShapePolicy("DYNAMIC")
STATIC = _ShapePolicy("STATIC")


def _hw_enum(name: str, table: str, doc: str, repr_prefix: str | None = None, planned_table: str | None = None):
    """An enum whose members are the hardware's names for `table`, each valued by its name, followed by
    the public language's names this version does not model yet (`planned_table`)."""
    names = list(_HW[table]) + (list(_HW[planned_table]) if planned_table else [])
    cls = enum.Enum(name, [(n, n) for n in names], module=__name__, qualname=name)
    cls.__doc__ = doc
    if repr_prefix is not None:
        cls.__repr__ = lambda self: f"{repr_prefix}{self.name}"
    return cls


MemorySpace = _hw_enum("MemorySpace", "memories", "Where a tile lives: DDR (GM) or a local memory of a core.",
                       "pl.MemorySpace.", planned_table="planned_memories")
TensorLayout = _hw_enum("TensorLayout", "layouts", "How a tile's elements are laid out (ND row-major, DN, NZ, ZN; "
                        "NN and ZZ planned).", "pl.", planned_table="planned_layouts")
ND, DN, NZ, ZN = TensorLayout.ND, TensorLayout.DN, TensorLayout.NZ, TensorLayout.ZN
NN, ZZ = TensorLayout.NN, TensorLayout.ZZ
# Members the public language names that tiles cannot use yet: a tile type naming one is refused where a
# kernel places the tile (pl.make_tile / make_tile_group), with what the member is for.
PLANNED_MEMORIES = {MemorySpace[n]: "the scale buffers of the MX matmul (pl.matmul_mx)"
                    for n in _HW["planned_memories"]}
PLANNED_LAYOUTS = {TensorLayout[n]: "the fractal layouts of MX scale tiles (and of L0A on A3)"
                   for n in _HW["planned_layouts"]}
PipeType = _hw_enum("PipeType", "pipes", "The pipes (instruction queues) of a core.")
RoundMode = _hw_enum("RoundMode", "round_modes", "Rounding modes of pl.cast(mode=).")
CrossCoreSyncMode = _hw_enum("CrossCoreSyncMode", "cross_core_sync_modes",
                             "Who a cross-core flag pairs (modes 0..3 of the hardware; INTRA_BLOCK is the default).")


class AtomicType(enum.Enum):
    AtomicNone = "AtomicNone"
    AtomicAdd = "AtomicAdd"


class FillPadMode(enum.Enum):
    """pl.fillpad(mode=): NORMAL (same shape, another address), EXPAND (a larger out), INPLACE (same address)."""
    NORMAL = "NORMAL"
    EXPAND = "EXPAND"
    INPLACE = "INPLACE"


class SyncCoreType(enum.Enum):
    """pl.system.sync_all(core_type=): which cores the barrier holds."""
    AIV_ONLY = "AIV_ONLY"
    AIC_ONLY = "AIC_ONLY"
    MIX = "MIX"


class SyncAllMode(enum.Enum):
    """pl.system.sync_all(mode=): the hardware barrier (HARD) or one through a GM workspace (SOFT)."""
    HARD = "HARD"
    SOFT = "SOFT"


class CacheLine(enum.Enum):
    """pl.system.dcci(cache_line=): the 64-byte line of the address, or the whole data cache."""
    SINGLE_CACHE_LINE = "SINGLE_CACHE_LINE"
    ENTIRE_DATA_CACHE = "ENTIRE_DATA_CACHE"


class DcciDst(enum.Enum):
    """pl.system.dcci(dst=): which cache the operation targets."""
    AUTO = "AUTO"
    CACHELINE_OUT = "CACHELINE_OUT"
    CACHELINE_UB = "CACHELINE_UB"
    CACHELINE_ALL = "CACHELINE_ALL"
    CACHELINE_ATOMIC = "CACHELINE_ATOMIC"


class AccToVecMode(enum.Enum):
    """Which UB an Acc -> Vec move writes (pl.move(..., acc_to_vec_mode=))."""
    SingleModeVec0 = "SingleModeVec0"
    SingleModeVec1 = "SingleModeVec1"
    DualModeSplitM = "DualModeSplitM"
    DualModeSplitN = "DualModeSplitN"


class ReluPreMode(enum.Enum):
    """ReLU fused into an Acc -> Vec move or an Acc -> GM store (relu_pre_mode=)."""
    NormalRelu = "NormalRelu"


class AccPhase(enum.Enum):
    """matmul / matmul_acc phase=: the unit_flag handshake between the cube and the fixpipe
    (Unspecified: no handshake, as phase=None)."""
    Unspecified = "Unspecified"
    Partial = "Partial"
    Final = "Final"


class STPhase(enum.Enum):
    """store / store_tile phase=: the fixpipe side of the unit_flag handshake."""
    Unspecified = "Unspecified"
    Partial = "Partial"
    Final = "Final"


# The mode of pl.set_saturation_flag / pl.get_saturation_flag: which CTRL bit (hw_tables.h), numbered
# as the public language numbers them.
SaturationFlagMode = enum.IntEnum("SaturationFlagMode", [(n, i) for i, n in enumerate(_HW["saturation_flags"])],
                                  module="pypto_pro.language", qualname="SaturationFlagMode")
SaturationFlagMode.__doc__ = ("The saturation class pl.set_saturation_flag / pl.get_saturation_flag address: "
                              "FLOAT (CTRL bit 48), FLOAT8 (50), INT (53), CAST (59).")
SaturationFlagMode.__repr__ = SaturationFlagMode.__str__ = lambda self: f"pl.SaturationFlagMode.{self.name}"

# Planned enums: the options of planned names only (docs/language.md#planned).
QuantMode = planned_enum("QuantMode", ["SYM", "ASYM"], "Symmetric or asymmetric quantisation (pl.quant(mode=)).",
                         use="the mode of pl.quant")
FunctionType = planned_enum("FunctionType", ["Opaque", "Orchestration", "InCore"],
                            "The kind of a standalone IR function (pl.function(type=)).",
                            use="the kind of a @pl.function (standalone IR functions)")


# Default layout per memory when TileType(layout=None) (the a5 column of the public TileType table).
_DEFAULT_LAYOUT = {
    MemorySpace.Vec: ND, MemorySpace.Mat: NZ, MemorySpace.Left: NZ, MemorySpace.Right: ZN, MemorySpace.Acc: NZ,
    MemorySpace.Bias: ND, MemorySpace.Scaling: ND, MemorySpace.ScaleLeft: ZZ, MemorySpace.ScaleRight: NN,
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class MemRef:
    """pl.MemRef(memory_space, addr, size, id=0): an explicit memory allocation, the optional last element
    of a pl.Tile / pl.Tensor annotation in the public language. Planned: this version places tiles with
    pl.make_tile(addr=) and tensors are the launch's arguments."""

    def __init__(self, memory_space, addr, size, id=0):  # noqa: A002 (the public keyword)
        if not isinstance(memory_space, MemorySpace):
            raise TypeError(f"pl.MemRef memory_space must be a pl.MemorySpace member, got {memory_space!r}")
        self.memory_space = memory_space
        self.addr = addr
        self.size = size
        self.id = id

    def __repr__(self):
        return f"pl.MemRef({self.memory_space!r}, addr={self.addr!r}, size={self.size!r})"


mark(MemRef, "pl.MemRef", "explicit memory references in tile and tensor annotations")


class DirectionMarker:
    """pl.Input / pl.Output: the direction of a GM tensor parameter, an extra element of its
    annotation (pl.Tensor[[dims], dtype, pl.Input]). Planned."""

    def __init__(self, name: str):
        self.name = name
        mark(self, f"pl.{name}", f"marking a pl.Tensor parameter as the kernel's {name.lower()}")

    def __repr__(self):
        return f"pl.{self.name}"


Input = DirectionMarker("Input")
Output = DirectionMarker("Output")


class TensorAnnotation:
    """What `pl.Tensor[[dims], dtype]` evaluates to: checked when the kernel object is built."""

    def __init__(self, dims, dtype, layout=None, memref=None, direction=None):
        self.dims = dims
        self.dtype = dtype
        self.layout = layout
        self.memref = memref
        self.direction = direction

    def planned(self):
        """(name, what it will do) of a planned part of the annotation (a direction marker, a memref), or
        None."""
        if self.direction is not None:
            return (f"{self.direction!r} in a pl.Tensor annotation",
                    f"marking a pl.Tensor parameter as the kernel's {self.direction.name.lower()}")
        if self.memref is not None:
            return "a pl.MemRef in a pl.Tensor annotation", "explicit memory references in tensor annotations"
        return None

    def resolve(self, param: str, allow_dtype_var: str | None = None) -> list:
        """The dims as ('fixed', n) / ('static', -1) / ('dynamic', -1) / ('rest', -1); TypeError names
        `param`. With a datatype schema the dtype may be the schema's variable name."""
        if not isinstance(self.dims, (list, tuple)) or len(self.dims) == 0:
            raise TypeError(f"parameter '{param}': pl.Tensor needs a non-empty list of dims, got {self.dims!r}")
        if allow_dtype_var is not None and self.dtype == allow_dtype_var:
            pass
        elif not isinstance(self.dtype, DataType):
            raise TypeError(f"parameter '{param}': pl.Tensor dtype must be a pl.DT_* value"
                            f"{' or its datatype variable ' + repr(allow_dtype_var) if allow_dtype_var else ''}, "
                            f"got {self.dtype!r}")
        elif not self.dtype.supported:
            raise TypeError(f"parameter '{param}': dtype {self.dtype!r} is not supported yet")
        if self.layout is not None and self.layout is not ND:
            if self.layout in (DN, NZ):
                raise NotImplementedError(f"parameter '{param}': GM tensors in {self.layout!r} layout are not "
                                          f"implemented yet; pl.ND (row-major, the default) is")
            raise TypeError(f"parameter '{param}': the layout of a pl.Tensor must be pl.ND, pl.DN or pl.NZ, "
                            f"got {self.layout!r}")
        out = []
        for i, dim in enumerate(self.dims):
            if dim is Ellipsis:
                if i != len(self.dims) - 1:
                    raise TypeError(f"parameter '{param}': '...' may only end the dims list, found at position {i}")
                out.append(("rest", -1))
            elif dim is DYNAMIC:
                out.append(("dynamic", -1))
            elif dim is STATIC:
                out.append(("static", -1))
            elif _is_int(dim) and dim > 0:
                out.append(("fixed", dim))
            else:
                raise TypeError(f"parameter '{param}': dim {i} must be a positive int, pl.DYNAMIC, pl.STATIC or a "
                                f"trailing '...', got {dim!r}")
        return out

    def __repr__(self):
        return f"pl.Tensor[{self.dims!r}, {self.dtype!r}]"


class Tensor:
    """GM tensor annotation: `x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP16]`."""

    def __class_getitem__(cls, item):
        usage = ("pl.Tensor takes [dims, dtype], [dims, dtype, layout], [dims, dtype, layout, memref] (planned) "
                 "or one of those with a direction marker pl.Input / pl.Output (planned), e.g. "
                 "pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP16]")
        if not isinstance(item, tuple) or not 2 <= len(item) <= 5:
            raise TypeError(usage)
        rest = list(item[2:])
        directions = [e for e in rest if isinstance(e, DirectionMarker)]
        rest = [e for e in rest if not isinstance(e, DirectionMarker)]
        if len(directions) > 1 or len(rest) > 2:
            raise TypeError(usage)
        layout = memref = None
        if len(rest) == 2:
            layout, memref = rest
        elif rest:
            if isinstance(rest[0], MemRef):
                memref = rest[0]
            else:
                layout = rest[0]
        if memref is not None and not isinstance(memref, MemRef):
            raise TypeError(f"the memref of a pl.Tensor annotation must be a pl.MemRef, got {memref!r}")
        return TensorAnnotation(item[0], item[1], layout, memref, directions[0] if directions else None)

    def __init__(self, *args, **kwargs):
        raise TypeError("pl.Tensor is a type annotation for kernel parameters: pl.Tensor[[dims], dtype]")


class Tile:
    """Annotation of a tile: `t: pl.Tile[[64, 128], pl.DT_FP16] = pl.make_tile(tt, addr=0)` in a kernel
    (checked against the tile's shape and dtype) or on a helper's parameter (documentation only). A third
    element pl.MemRef(...) is planned. Tiles themselves come from pl.make_tile / make_tile_group."""

    __slots__ = ("shape", "dtype", "memref")

    def __init__(self, shape, dtype, memref=None):
        if not isinstance(shape, (list, tuple)) or not all(_is_int(d) and d > 0 for d in shape):
            raise TypeError(f"pl.Tile shape must be a list of positive ints, got {shape!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"pl.Tile dtype must be a pl.DT_* value, got {dtype!r}")
        if memref is not None and not isinstance(memref, MemRef):
            raise TypeError(f"the third element of pl.Tile must be a pl.MemRef, got {memref!r}")
        self.shape = tuple(shape)
        self.dtype = dtype
        self.memref = memref

    def __class_getitem__(cls, item):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise TypeError("pl.Tile takes [shape, dtype] or [shape, dtype, memref], e.g. pl.Tile[[64, 128], pl.DT_FP16]")
        return cls(*item)

    def __repr__(self):
        return f"pl.Tile[{list(self.shape)!r}, {self.dtype!r}{'' if self.memref is None else ', ' + repr(self.memref)}]"


class Ptr:
    """Annotation of a raw GM pointer: `workspace: pl.Ptr[pl.DT_FP16]` on a kernel parameter (launched
    with a torch tensor or numpy array whose buffer the kernel uses; pl.make_tensor views it) or on an
    annotated assignment in a kernel. The element type is a pl.DT_* value, or on a parameter the
    variable name of its datatype= entry (a str, checked when the kernel object is built)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        if not isinstance(dtype, (DataType, str)):
            raise TypeError(f"pl.Ptr takes a pl.DT_* element type (or a datatype variable name), got {dtype!r}")
        self.dtype = dtype

    def __class_getitem__(cls, dtype):
        return cls(dtype)

    def __repr__(self):
        return f"pl.Ptr[{self.dtype!r}]"


class Scalar:
    """Annotation of a scalar: `n: pl.Scalar[pl.DT_INT32]`, the same as `n: pl.DT_INT32` (on kernel
    parameters and annotated assignments)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        if not isinstance(dtype, DataType):
            raise TypeError(f"pl.Scalar takes a pl.DT_* dtype, got {dtype!r}")
        self.dtype = dtype

    def __class_getitem__(cls, dtype):
        return cls(dtype)

    def __repr__(self):
        return f"pl.Scalar[{self.dtype!r}]"


class TileType:
    """The spec of a tile: static 1-D/2-D shape, dtype, memory, valid window, layout."""

    __slots__ = ("shape", "dtype", "target_memory", "valid_shape", "layout", "fractal", "pad", "compact")

    def __init__(self, shape, dtype, target_memory=MemorySpace.Vec, valid_shape=None, layout=None, fractal=None,
                 pad=None, compact=None):
        if not isinstance(shape, (list, tuple)) or not 1 <= len(shape) <= 2:
            raise ValueError(f"TileType shape must be a list of 1 or 2 positive ints, got {shape!r}")
        for s in shape:
            if not _is_int(s) or s <= 0:
                raise ValueError(f"TileType shape entries must be positive compile-time ints, got {shape!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"TileType dtype must be a pl.DT_* value, got {dtype!r}")
        if not dtype.supported:
            raise TypeError(f"TileType dtype {dtype!r} is not supported yet")
        if not isinstance(target_memory, MemorySpace):
            raise TypeError(f"TileType target_memory must be a pl.MemorySpace member, got {target_memory!r}")
        if target_memory is MemorySpace.DDR:
            raise ValueError("TileType target_memory cannot be DDR: tiles live in a core's local memory")
        if valid_shape is None:
            valid = [-1] * len(shape)
        else:
            if not isinstance(valid_shape, (list, tuple)) or len(valid_shape) != len(shape):
                raise ValueError(f"TileType valid_shape must have one entry per dim of shape {list(shape)}, "
                                 f"got {valid_shape!r}")
            valid = []
            for v, s in zip(valid_shape, shape):
                if not _is_int(v) or not (v == -1 or 0 <= v <= s):
                    raise ValueError(f"TileType valid_shape entries must be -1 (set at run time) or in [0, dim], "
                                     f"got {valid_shape!r} for shape {list(shape)}")
                valid.append(v)
        if layout is None:
            layout = _DEFAULT_LAYOUT[target_memory]
        if not isinstance(layout, TensorLayout):
            raise TypeError(f"TileType layout must be pl.ND, pl.DN, pl.NZ, pl.ZN (or the planned pl.NN, pl.ZZ), "
                            f"got {layout!r}")
        if pad is not None and not (_is_int(pad) and 0 <= pad <= 3):
            raise ValueError(f"TileType pad must be a pl.TilePad member or an int in 0..3, got {pad!r}")
        if compact is not None and compact not in (0, 1, 2):
            raise ValueError(f"TileType compact must be None, 0, 1 or 2, got {compact!r}")
        if compact == 2:
            raise NotImplementedError("TileType(compact=2) (RowPlusOne: an extra physical row per fractal) is not "
                                      "implemented yet; compact=None, 0 and 1 are (see docs/device.md#cube-layouts)")
        standard = 1024 if target_memory is MemorySpace.Acc and dtype.bits == 32 else 512
        planned = target_memory in PLANNED_MEMORIES or layout in PLANNED_LAYOUTS  # refused where placed
        if fractal is not None and fractal != standard and not planned:
            raise NotImplementedError(f"TileType(fractal={fractal!r}) is not implemented: a {dtype!r} "
                                      f"{target_memory.name} tile has the hardware's standard {standard}-byte "
                                      f"fractal, the one the simulator models (pass fractal={standard} or omit it)")
        self.shape = tuple(shape)
        self.dtype = dtype
        self.target_memory = target_memory
        self.valid_shape = tuple(valid)
        self.layout = layout
        self.fractal = fractal
        self.pad = pad
        self.compact = compact

    def planned(self):
        """(name, what it will do) when the type names a memory or layout tiles cannot use yet, else None.
        Such a type can be built (so modules that declare one import); pl.make_tile and make_tile_group
        refuse it."""
        if self.target_memory in PLANNED_MEMORIES:
            return f"a tile in {self.target_memory!r}", PLANNED_MEMORIES[self.target_memory]
        if self.layout in PLANNED_LAYOUTS:
            return f"a tile of layout {self.layout!r}", PLANNED_LAYOUTS[self.layout]
        return None

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.dtype.bits // 8

    def spec(self) -> tuple:
        """The (dtype, shape, memory, layout, valid_shape, pad, compact) tuple the C++ IR builder takes."""
        return (self.dtype.name, list(self.shape), self.target_memory.value, self.layout.value, list(self.valid_shape),
                int(self.pad or 0), int(self.compact or 0))

    def __eq__(self, other):
        return isinstance(other, TileType) and self.spec() == other.spec()

    def __hash__(self):
        return hash(self.spec()[0:1] + (self.shape, self.target_memory, self.layout, self.valid_shape, self.pad,
                                          self.compact))

    def __repr__(self):
        return (f"pl.TileType(shape={list(self.shape)}, dtype={self.dtype!r}, target_memory={self.target_memory!r}"
                f"{'' if all(v == -1 for v in self.valid_shape) else f', valid_shape={list(self.valid_shape)}'})")


def arch_names() -> Sequence[str]:
    return _C.arch_names()
