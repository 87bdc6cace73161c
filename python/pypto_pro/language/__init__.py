"""The pypto_pro tile kernel language: `import pypto_pro.language as pl`.

Names, argument order and keywords follow the public pypto_pro language so kernels written for it
run here unchanged. Everything callable here is meaningful only inside a @pl.jit kernel body.
"""

from __future__ import annotations

import enum as _enum
import types as _types

from pypto_pro.language import pipeline, system
from pypto_pro.language.autotune import autotune
from pypto_pro.language.builtins import top_level as _top_level
from pypto_pro.language.jit import JitFunction, KernelDef, TilingKeyField, jit, kernel
from pypto_pro.language.planned import function, inline, loads, loads_program, parse, parse_program, program
from pypto_pro.language.structs import make_tuple, struct, struct_array
from pypto_pro.language.simt_api import simt
from pypto_pro.language.types import (DN, DTYPES, DYNAMIC, ND, NN, NZ, STATIC, ZN, ZZ, AccPhase, AccToVecMode,
                                      AtomicType, CacheLine, CrossCoreSyncMode, DataType, DcciDst, FillPadMode,
                                      FunctionType, Input, MemorySpace, MemRef, Output, PipeType, Ptr, QuantMode,
                                      ReluPreMode, RoundMode, SaturationFlagMode, Scalar, STPhase, SyncAllMode,
                                      SyncCoreType, Tensor, TensorLayout, Tile, TileType)
from pypto_pro.language.vf_api import (BinType, CastLayout, CompareMode, DataCopyMode, DuplicatePos, HistType,
                                       IndexOrder, LoadDist, MaskPattern, MaskWidth, MemBarMode, MergeMode, PackPart,
                                       ReduceMode, SaturateMode, SqueezeMode, StoreDist, Vf, VFRoundMode,
                                       vector_function)

globals().update(_top_level())
for _dtype in DTYPES.values():
    globals()[_dtype.pl_name] = _dtype



class TilePad(_enum.IntEnum):
    null = 0
    zero = 1
    max = 2
    min = 3


# pl.mutex.mutex_lock / pl.mutex.mutex_unlock are pl.system.mutex_lock / mutex_unlock.
mutex = _types.SimpleNamespace(mutex_lock=system.mutex_lock, mutex_unlock=system.mutex_unlock)


from pypto_pro.language import parser  # noqa: E402 (the public language exports its parser package)

# The language's names, not the modules that implement them (system, pipeline and mutex are namespaces;
# parser is the front end, exported as the public language exports its own).
__all__ = [name for name, value in globals().items()
           if not name.startswith("_") and name != "annotations"
           and (not isinstance(value, _types.ModuleType) or name in ("system", "pipeline", "parser"))]
