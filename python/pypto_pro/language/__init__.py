"""The pypto_pro tile kernel language: `import pypto_pro.language as pl`.

Names, argument order and keywords follow the public pypto_pro language so kernels written for it
run here unchanged. Everything callable here is meaningful only inside a @pl.jit kernel body.
"""

from __future__ import annotations

import enum as _enum
import types as _types

from pypto_pro.language import pipeline, system
from pypto_pro.language.builtins import top_level as _top_level
from pypto_pro.language.jit import JitFunction, TilingKeyField, jit
from pypto_pro.language.types import (DN, DTYPES, DYNAMIC, ND, NZ, STATIC, ZN, AccPhase, AccToVecMode, AtomicType,
                                      DataType, MemorySpace, PipeType, ReluPreMode, STPhase, Tensor, TensorLayout,
                                      TileType)

globals().update(_top_level())
for _dtype in DTYPES.values():
    globals()[_dtype.pl_name] = _dtype



class TilePad(_enum.IntEnum):
    null = 0
    zero = 1
    max = 2
    min = 3


class RoundMode(_enum.Enum):
    CAST_RINT = "CAST_RINT"
    CAST_ROUND = "CAST_ROUND"
    CAST_FLOOR = "CAST_FLOOR"
    CAST_CEIL = "CAST_CEIL"
    CAST_TRUNC = "CAST_TRUNC"
    CAST_ODD = "CAST_ODD"
    CAST_NONE = "CAST_NONE"


class CrossCoreSyncMode(_enum.Enum):
    """Who a cross-core flag pairs (modes 0..3 of the hardware; INTRA_BLOCK is the default)."""
    INTER_BLOCK = "INTER_BLOCK"
    INTER_SUBBLOCK = "INTER_SUBBLOCK"
    INTRA_BLOCK = "INTRA_BLOCK"
    UNICAST_BLOCK = "UNICAST_BLOCK"


# pl.mutex.mutex_lock / pl.mutex.mutex_unlock are pl.system.mutex_lock / mutex_unlock.
mutex = _types.SimpleNamespace(mutex_lock=system.mutex_lock, mutex_unlock=system.mutex_unlock)


__all__ = [name for name in globals() if not name.startswith("_")]
