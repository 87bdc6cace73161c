"""pl.Vf, pl.vector_function and the enums of vector functions: planned.

Vector functions (VF) program the vector unit register by register: a @pl.vector_function helper
loads UB data into registers, computes under predicate masks and stores back. This version does not
model registers or masks, so every pl.Vf.* name is planned; the namespace and the enums exist so that
modules written for the public language import (docs/language.md#planned).
"""

from __future__ import annotations

from pypto_pro.language.planned import Namespace, PlannedFunction, mark, planned_enum

_VF_USE = "an option of the vector-function ops pl.Vf.*"


def _vf_enum(name, members, doc):
    return planned_enum(name, members, doc, use=_VF_USE)


MaskPattern = _vf_enum("MaskPattern", ["ALL", "ALLF", "VL1", "VL2", "VL3", "VL4", "VL8", "VL16", "VL32", "VL64",
                                       "VL128", "M3", "M4", "H", "Q"],
                       "Initial pattern of a predicate mask register (pl.Vf.create_mask(pattern=)).")
MergeMode = _vf_enum("MergeMode", ["ZEROING", "MERGING"],
                     "What inactive lanes of a destination register get: zero, or their old value.")
ReduceMode = _vf_enum("ReduceMode", ["SUM", "MAX", "MIN"], "In-register reduction kinds.")
CompareMode = _vf_enum("CompareMode", ["EQ", "NE", "LT", "LE", "GT", "GE"], "Register comparisons.")
DuplicatePos = _vf_enum("DuplicatePos", ["LOWEST", "HIGHEST"],
                        "Which lane pl.Vf.full broadcasts from a source register.")
CastLayout = _vf_enum("CastLayout", ["ZERO", "ONE", "TWO", "THREE"],
                      "Which part of a wider register a narrowing conversion writes.")
VFRoundMode = _vf_enum("VFRoundMode", ["CAST_ROUND", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC",
                                       "CAST_ODD", "CAST_HYBRID"],
                       "Rounding of register conversions (pl.Vf.astype(round_mode=)).")
SaturateMode = _vf_enum("SaturateMode", ["OFF", "ON"], "Whether register conversions saturate.")
BinType = _vf_enum("BinType", ["BIN0", "BIN1"], "Bin mapping of pl.Vf.histograms.")
HistType = _vf_enum("HistType", ["ACCUMULATE", "FREQUENCY"], "Cumulative or frequency histogram.")
SqueezeMode = _vf_enum("SqueezeMode", ["STORE_REG", "NO_STORE_REG"],
                       "Whether pl.Vf.squeeze records its byte count in the AR register.")
PackPart = _vf_enum("PackPart", ["LOWER", "UPPER"], "Which half pl.Vf.pack / unpack takes.")
MaskWidth = _vf_enum("MaskWidth", ["B32", "B16"], "Lane width of pl.Vf.get_mask_spr.")
LoadDist = _vf_enum("LoadDist", ["NORM", "BRC", "BRC_B8", "BRC_B16", "BRC_B32", "US", "US_B8", "US_B16", "DS",
                                 "DS_B8", "DS_B16", "UNPK", "UNPK_B8", "UNPK_B16", "UNPK_B32", "UNPK4", "BLK", "E2B",
                                 "E2B_B16", "E2B_B32", "DINTLV_B8", "DINTLV_B16", "DINTLV_B32"],
                    "Distribution of a register load (broadcast, up/down-sample, unpack, ...).")
StoreDist = _vf_enum("StoreDist", ["NORM", "NORM_B16", "FIRST_ELEMENT", "PACK", "PACK4", "INTLV", "INTLV_B32",
                                   "NORM_B8", "NORM_B32", "FIRST_ELEMENT_B8", "FIRST_ELEMENT_B16",
                                   "FIRST_ELEMENT_B32", "PACK_B16", "PACK_B32", "PACK_B64", "PACK4_B32", "INTLV_B8",
                                   "INTLV_B16"],
                     "Distribution of a register store.")
DataCopyMode = _vf_enum("DataCopyMode", ["NORM", "DATA_BLOCK_LOAD", "DATA_BLOCK_COPY"],
                        "Contiguous or 32-byte-block register loads and stores.")
MemBarMode = _vf_enum("MemBarMode", ["VST_VLD", "VLD_VST", "VST_VST", "VST_LD", "VST_ST", "VLD_ST", "ST_VLD",
                                     "ST_VST", "LD_VST", "VV_ALL", "VS_ALL", "SV_ALL"],
                      "Which memory accesses pl.Vf.mem_bar orders before which.")
IndexOrder = _vf_enum("IndexOrder", ["INCREASE_ORDER", "DECREASE_ORDER"], "Direction of pl.Vf.arange.")

ENUMS = {cls.__name__: cls for cls in (MaskPattern, MergeMode, ReduceMode, CompareMode, DuplicatePos, CastLayout,
                                       VFRoundMode, SaturateMode, BinType, HistType, SqueezeMode, PackPart,
                                       MaskWidth, LoadDist, StoreDist, DataCopyMode, MemBarMode, IndexOrder)}

# pl.Vf.<name>: what each will do. "reg" is a vector register, "mask" a predicate mask register.
FUNCTIONS = {
    # masks and special registers
    "create_mask": "a mask register initialised from a pattern (pl.MaskPattern) for a dtype's lanes",
    "update_mask": "a mask register whose bits come from a scalar",
    "get_mask_spr": "the vector-mask special register as a mask register",
    "mask_gen_with_reg_tensor": "a mask from one bit of each lane of a register",
    "clear_spr": "clear the AR special register",
    "unsqueeze": "a register holding 1 in the active lanes of a mask and 0 elsewhere",
    # loads, stores, addressing
    "load": "load a register from UB (optionally post-updating the address)",
    "store": "store a register's first elements to UB",
    "load_align": "load a register from an aligned UB offset (with a distribution pl.LoadDist)",
    "store_align": "store a register to an aligned UB offset under a mask (pl.StoreDist)",
    "load_unalign_init": "an alignment register for unaligned loads",
    "load_unalign_pre": "prepare an unaligned load sequence",
    "load_unalign": "load a register from an unaligned UB address",
    "store_unalign": "store a register to an unaligned UB address",
    "store_unalign_post": "complete an unaligned store sequence",
    "squeeze_store_unalign": "unaligned store of a squeezed register (its length from the AR register)",
    "squeeze_store_unalign_post": "complete a squeezed unaligned store sequence",
    "unalign_reg_for_store": "an alignment register for unaligned stores",
    "create_addr_reg": "an address register sum(index_i * stride_i) for aligned loads and stores",
    "gather": "reg[i] = src[index[i]] from a UB tile or a register",
    "scatter": "UB[index[i]] = reg[i]",
    "mem_bar": "order vector and scalar memory accesses (pl.MemBarMode)",
    # broadcast, moves, conversions
    "full": "a register with every lane set to a scalar or to one lane of a register",
    "move": "copy a register or mask under a mask",
    "astype": "convert a register to another dtype (rounding, saturation, layout)",
    "bit_cast": "the same register bits read as another dtype",
    "muls_cast": "reg * scalar converted to another dtype",
    "truncate": "round each lane toward zero",
    "pack": "narrow each lane to its lower or upper half",
    "unpack": "widen the lower or upper half of a register",
    "interleave": "two registers interleaved lane by lane",
    "de_interleave": "the even and the odd lanes of two registers",
    "arange": "start + i (or start - i) in lane i",
    "squeeze": "the active lanes of a register packed to its start",
    # arithmetic
    "add": "lane-wise src0 + src1 under a mask",
    "sub": "lane-wise src0 - src1 under a mask",
    "mul": "lane-wise src0 * src1 under a mask",
    "div": "lane-wise src0 / src1 under a mask",
    "max": "lane-wise maximum of two registers",
    "min": "lane-wise minimum of two registers",
    "adds": "reg + scalar",
    "subs": "reg - scalar",
    "muls": "reg * scalar",
    "maxs": "max(reg, scalar)",
    "mins": "min(reg, scalar)",
    "abs": "lane-wise absolute value",
    "abs_sub": "lane-wise |src0 - src1|",
    "neg": "lane-wise negation",
    "relu": "lane-wise max(reg, 0)",
    "leaky_relu": "lane-wise reg, or alpha * reg where it is negative",
    "prelu": "lane-wise reg, or slope * reg where it is negative (per-lane slope)",
    "exp": "lane-wise e^reg",
    "exp_sub": "lane-wise e^(src - max), the softmax step",
    "ln": "lane-wise natural logarithm",
    "log": "lane-wise natural logarithm (as pl.Vf.ln)",
    "log2": "lane-wise base-2 logarithm",
    "log10": "lane-wise base-10 logarithm",
    "sqrt": "lane-wise square root",
    "axpy": "dst = reg * scalar + dst",
    "mul_add_dst": "dst = src0 * src1 + dst",
    "mul_dst_add": "dst = dst * src0 + src1",
    "mull": "32 x 32 -> 64-bit products as low and high registers",
    "addc": "src0 + src1 + carry, with the carry out",
    "subc": "src0 - src1 - borrow, with the borrow out",
    # bitwise
    "and_": "lane-wise bitwise and",
    "or_": "lane-wise bitwise or",
    "xor": "lane-wise bitwise xor",
    "not_": "lane-wise bitwise not",
    "shift_left": "lane-wise left shift by a scalar or per-lane amount",
    "shift_right": "lane-wise right shift by a scalar or per-lane amount",
    # compare and select
    "eq": "a mask of src0 == src1",
    "ne": "a mask of src0 != src1",
    "lt": "a mask of src0 < src1",
    "le": "a mask of src0 <= src1",
    "gt": "a mask of src0 > src1",
    "ge": "a mask of src0 >= src1",
    "select": "src0 where the mask is set, src1 elsewhere",
    # reductions
    "reduce_sum": "the sum of the active lanes in lane 0",
    "reduce_max": "the maximum of the active lanes in lane 0",
    "reduce_min": "the minimum of the active lanes in lane 0",
    "pair_reduce_sum": "sums of adjacent lane pairs",
    "histograms": "accumulate a histogram of uint8 lanes",
}

_VECTOR_FUNCTION_DOC = ("a helper whose body runs on the vector unit register by register (pl.Vf.* ops), "
                        "called from a kernel's vector section")


def vector_function(fn=None, *, mode=None):
    """@pl.vector_function (or @pl.vector_function(mode="simd")): marks a helper as a vector-function
    body and returns it. Defining one works; a kernel that calls it raises UnsupportedFeatureError at the
    call (planned: vector functions)."""
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"pl.vector_function(mode=...) must be a str, got {mode!r}")

    def decorate(f):
        if not callable(f):
            raise TypeError(f"pl.vector_function decorates a Python function, got {f!r}")
        f.__pypto_vector_function__ = mode or True
        return mark(f, f"@pl.vector_function '{getattr(f, '__name__', f)}'", _VECTOR_FUNCTION_DOC)

    return decorate if fn is None else decorate(fn)


mark(vector_function, "pl.vector_function", _VECTOR_FUNCTION_DOC)


def is_vector_function(fn) -> bool:
    return bool(getattr(fn, "__pypto_vector_function__", False))


Vf = Namespace("pl.Vf", "Vector-function (register-level) ops, used in @pl.vector_function helpers: planned.",
               {**{name: PlannedFunction(f"pl.Vf.{name}", doc) for name, doc in FUNCTIONS.items()}, **ENUMS})
