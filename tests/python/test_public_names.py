"""Every public name of the pypto_pro language exists in `pl`, and what is not built yet says so.

The name list is the public package's `__all__` (repository hicann/pypto, file
python/pypto_pro/language/__init__.py; the union of its two published forms, since names moved in and
out between them), the enum members are those of its enum declarations and API pages, the pl.Vf and
pl.simt names those of its _vf_api.py and _simt_api.py. For each name: it is in `pl` and importable
with `from pypto_pro.language import <name>`; enums have every member; a name that is not built raises
UnsupportedFeatureError at the kernel line that uses it (these kernels fail while parsing, so nothing
compiles); a built name is not reported as planned. Last, a module written the way the public
language's examples are (vector-function helpers, VF enums at module level, SIMT functions, pl.Ptr
parameters, planned layouts in module-level tile types) imports. (pl.make_tensor, pl.make_ptr and
pl.addptr were planned registry ops when this test was written; they are built now as parser-handled
names, and pl.Ptr parameters with them: tests/python/test_gm_views.py.)
"""

import importlib.util
import sys
import textwrap

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import _C, errors
from pypto_pro.language.builtins import Builtin
from pypto_pro.language.planned import planned_info

# ---- the public name list -------------------------------------------------------------------------

PUBLIC_NAMES = [
    # decorators, text IR, the parser package
    "function", "inline", "program", "vector_function", "parse", "parser", "loads", "parse_program",
    "loads_program",
    # annotations, namespaces, resources
    "Tensor", "Tile", "Ptr", "Scalar", "DYNAMIC", "STATIC", "Input", "Output", "system", "simt", "mutex",
    "TileType", "make_tile", "make_tensor", "make_ptr", "addptr", "struct", "make_tuple", "struct_array",
    "FunctionType", "MemRef", "MemorySpace", "TilePad", "PipeType", "TensorLayout",
    "ND", "DN", "NZ", "ZN", "NN", "ZZ",
    # option enums
    "ReluPreMode", "AtomicType", "STPhase", "AccPhase", "AccToVecMode", "RoundMode", "QuantMode",
    "CrossCoreSyncMode", "SyncCoreType", "SyncAllMode", "CacheLine", "DcciDst",
    # dtypes
    "DT_FP4", "DT_FP8E4M3FN", "DT_FP8E5M2", "DT_FP8E8M0", "DT_FP4E2M1", "DT_FP4E1M2", "DT_FP16", "DT_FP32",
    "DT_BF16", "DT_HF4", "DT_HF8", "DT_INT4", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT4",
    "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64", "DT_BOOL",
    # data movement
    "load", "load_tile", "store", "store_tile", "init_output", "move", "insert", "ssbuf_store", "ssbuf_load",
    # element-wise
    "add", "sub", "mul", "div", "maximum", "minimum", "and_", "shl", "shr", "xor", "expands",
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "relu", "fillpad", "FillPadMode",
    "fillpad_expand", "fillpad_inplace",
    "cast", "add_relu_cast", "sub_relu_cast", "mul_cast",
    "eq", "ne", "lt", "le", "gt", "ge", "select",
    "add_relu", "sub_relu", "addc", "mul_add_dst", "fused_mul_add", "fused_mul_add_relu", "axpy",
    "partadd", "partmax", "partmin", "partmul",
    # matrix, reductions
    "matmul", "matmul_acc", "matmul_mx", "matmul_mx_acc", "transpose",
    "sum", "argmax", "argmin", "expand_max", "expand_min", "expand_mul", "expand_sub", "expand_div",
    # gather / scatter / sort
    "gather", "gatherb", "gathermask", "scatter", "mrgsort", "mrgsort2", "sort32", "histogram",
    # quantisation, element access, masks, special registers
    "quant", "dequant", "getval", "setval", "reinterpret", "set_validshape", "set_stride",
    "set_mask_count", "set_mask_norm", "set_vec_mask", "set_ctrl_spr", "set_saturation_flag", "get_ctrl_spr",
    "get_spr", "get_saturation_flag", "reset_ctrl_spr", "reset_mask", "fill_index",
    "Vf",
    # debug, scalars, control flow, utility
    "pto_assert", "printf", "dump_data", "trap", "min", "max", "const", "astype",
    "range", "section_vector", "section_cube",
    "get_block_idx", "get_subblock_idx", "get_block_num", "get_subblock_num", "make_tile_group",
    # front end
    "kernel", "KernelDef", "jit", "pipeline",
    # enums of the vector functions (and of the saturation flag)
    "MaskPattern", "MergeMode", "ReduceMode", "CompareMode", "DuplicatePos", "CastLayout", "VFRoundMode",
    "SaturateMode", "SaturationFlagMode", "BinType", "HistType", "SqueezeMode", "PackPart", "MaskWidth",
    "LoadDist", "StoreDist", "DataCopyMode", "MemBarMode", "IndexOrder",
]

ENUM_MEMBERS = {
    "MemorySpace": ["DDR", "Vec", "Mat", "Left", "Right", "Acc", "Bias", "Scaling", "ScaleLeft", "ScaleRight"],
    "TilePad": ["null", "zero", "max", "min"],
    "PipeType": ["MTE1", "MTE2", "MTE3", "M", "V", "S", "FIX", "ALL"],
    "TensorLayout": ["ND", "DN", "NZ", "ZN", "NN", "ZZ"],
    "FunctionType": ["Opaque", "Orchestration", "InCore"],
    "ReluPreMode": ["NormalRelu"],
    "AtomicType": ["AtomicNone", "AtomicAdd"],
    "STPhase": ["Unspecified", "Partial", "Final"],
    "AccPhase": ["Unspecified", "Partial", "Final"],
    "AccToVecMode": ["SingleModeVec0", "SingleModeVec1", "DualModeSplitM", "DualModeSplitN"],
    "RoundMode": ["CAST_NONE", "CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_ODD"],
    "QuantMode": ["SYM", "ASYM"],
    "CrossCoreSyncMode": ["INTER_BLOCK", "INTER_SUBBLOCK", "INTRA_BLOCK", "UNICAST_BLOCK"],
    "SyncCoreType": ["AIV_ONLY", "AIC_ONLY", "MIX"],
    "SyncAllMode": ["HARD", "SOFT"],
    "CacheLine": ["SINGLE_CACHE_LINE", "ENTIRE_DATA_CACHE"],
    "DcciDst": ["AUTO", "CACHELINE_OUT", "CACHELINE_UB", "CACHELINE_ALL", "CACHELINE_ATOMIC"],
    "FillPadMode": ["NORMAL", "EXPAND", "INPLACE"],
    "MaskPattern": ["ALL", "ALLF", "VL1", "VL2", "VL3", "VL4", "VL8", "VL16", "VL32", "VL64", "VL128", "M3", "M4",
                    "H", "Q"],
    "MergeMode": ["ZEROING", "MERGING"],
    "ReduceMode": ["SUM", "MAX", "MIN"],
    "CompareMode": ["EQ", "NE", "LT", "LE", "GT", "GE"],
    "DuplicatePos": ["LOWEST", "HIGHEST"],
    "CastLayout": ["ZERO", "ONE", "TWO", "THREE"],
    "VFRoundMode": ["CAST_ROUND", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_ODD", "CAST_HYBRID"],
    "SaturateMode": ["OFF", "ON"],
    "SaturationFlagMode": ["FLOAT", "FLOAT8", "INT", "CAST"],
    "BinType": ["BIN0", "BIN1"],
    "HistType": ["ACCUMULATE", "FREQUENCY"],
    "SqueezeMode": ["STORE_REG", "NO_STORE_REG"],
    "PackPart": ["LOWER", "UPPER"],
    "MaskWidth": ["B32", "B16"],
    "LoadDist": ["NORM", "BRC", "BRC_B8", "BRC_B16", "BRC_B32", "US", "US_B8", "US_B16", "DS", "DS_B8", "DS_B16",
                 "UNPK", "UNPK_B8", "UNPK_B16", "UNPK_B32", "UNPK4", "BLK", "E2B", "E2B_B16", "E2B_B32", "DINTLV_B8",
                 "DINTLV_B16", "DINTLV_B32"],
    "StoreDist": ["NORM", "NORM_B16", "FIRST_ELEMENT", "PACK", "PACK4", "INTLV", "INTLV_B32", "NORM_B8", "NORM_B32",
                  "FIRST_ELEMENT_B8", "FIRST_ELEMENT_B16", "FIRST_ELEMENT_B32", "PACK_B16", "PACK_B32", "PACK_B64",
                  "PACK4_B32", "INTLV_B8", "INTLV_B16"],
    "DataCopyMode": ["NORM", "DATA_BLOCK_LOAD", "DATA_BLOCK_COPY"],
    "MemBarMode": ["VST_VLD", "VLD_VST", "VST_VST", "VST_LD", "VST_ST", "VLD_ST", "ST_VLD", "ST_VST", "LD_VST",
                   "VV_ALL", "VS_ALL", "SV_ALL"],
    "IndexOrder": ["INCREASE_ORDER", "DECREASE_ORDER"],
}

# Enums the public language numbers in declaration order (C++ enum classes), new with this change.
NUMBERED_ENUMS = ["FunctionType", "QuantMode", "SaturationFlagMode", "MaskPattern", "MergeMode", "ReduceMode",
                  "CompareMode", "DuplicatePos", "CastLayout", "VFRoundMode", "SaturateMode", "BinType", "HistType",
                  "SqueezeMode", "PackPart", "MaskWidth", "LoadDist", "StoreDist", "DataCopyMode", "MemBarMode",
                  "IndexOrder"]

VF_FUNCTIONS = [
    "create_mask", "update_mask", "full", "load_align", "store_align", "store_unalign", "store_unalign_post",
    "squeeze_store_unalign", "squeeze_store_unalign_post", "unalign_reg_for_store", "mem_bar", "max", "add", "sub",
    "mul", "div", "muls", "mul_add_dst", "and_", "or_", "xor", "reduce_sum", "reduce_max", "reduce_min", "ln",
    "exp_sub", "astype", "de_interleave", "select", "shift_left", "shift_right", "histograms", "eq", "ne", "lt",
    "gt", "le", "ge", "squeeze", "arange", "gather", "clear_spr", "log", "min", "exp", "abs", "not_", "sqrt",
    "relu", "neg", "adds", "subs", "mins", "maxs", "leaky_relu", "interleave", "pair_reduce_sum", "abs_sub", "axpy",
    "bit_cast", "mul_dst_add", "pack", "unpack", "prelu", "mull", "addc", "subc", "load_unalign_init",
    "load_unalign_pre", "load_unalign", "scatter", "unsqueeze", "get_mask_spr", "log2", "log10", "muls_cast",
    "load", "store", "truncate", "mask_gen_with_reg_tensor", "create_addr_reg", "move",
]

SIMT_FUNCTIONS = [
    "function", "thread_idx", "block_dim", "block_idx", "grid_dim", "linear_thread_idx", "warp_size",
    "syncthreads", "threadfence_block", "threadfence", "cast", "bitcast", "abs", "min", "max", "sqrt", "rsqrt",
    "exp", "exp2", "log", "log2", "log1p", "sin", "cos", "tanh", "rint", "round", "floor", "ceil", "trunc",
    "isnan", "isinf", "isfinite", "popcount", "mul_hi", "fmod", "fma", "atomic_add", "atomic_sub", "atomic_exch",
    "atomic_max", "atomic_min", "atomic_inc", "atomic_dec", "atomic_cas", "atomic_and", "atomic_or", "atomic_xor",
    "launch",
]

UNSUPPORTED_DTYPES = ["DT_FP4", "DT_FP8E4M3FN", "DT_FP8E5M2", "DT_FP8E8M0", "DT_FP4E2M1", "DT_FP4E1M2", "DT_HF4",
                      "DT_HF8", "DT_INT4", "DT_UINT4"]

# ---- what an unbuilt name looks like in a kernel ---------------------------------------------------
# name -> (the statement using it, a fragment the error names it by). Registry ops (pl.<op>) are added
# below from the registry's planned list; names here are not registry ops.
PLANNED_USES = {
    "function": ("f = pl.function", "pl.function"),
    "program": ("p = pl.program", "pl.program"),
    "vector_function": ("vf_helper(t)", "@pl.vector_function 'vf_helper'"),
    "parse": ('pl.parse("fn")', "pl.parse"),
    "loads": ('pl.loads("fn")', "pl.loads"),
    "parse_program": ('pl.parse_program("prog")', "pl.parse_program"),
    "loads_program": ('pl.loads_program("prog")', "pl.loads_program"),
    "Input": ("d = pl.Input", "pl.Input"),
    "Output": ("d = pl.Output", "pl.Output"),
    "simt": ("i = pl.simt.thread_idx()", "pl.simt.thread_idx"),
    "FunctionType": ("f = pl.FunctionType.InCore", "pl.FunctionType"),
    "MemRef": ("m = pl.MemRef(pl.MemorySpace.Vec, 0, 1024)", "pl.MemRef"),
    "NN": ("u = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, layout=pl.NN), addr=0x1000)", "pl.NN"),
    "ZZ": ("u = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, layout=pl.ZZ), addr=0x1000)", "pl.ZZ"),
    "QuantMode": ("q = pl.QuantMode.SYM", "pl.QuantMode"),
    "Vf": ("m = pl.Vf.create_mask()", "pl.Vf.create_mask"),
    **{name: (f"e = pl.{name}.{ENUM_MEMBERS[name][0]}", f"pl.{name}")
       for name in ["MaskPattern", "MergeMode", "ReduceMode", "CompareMode", "DuplicatePos", "CastLayout",
                    "VFRoundMode", "SaturateMode", "BinType", "HistType", "SqueezeMode",
                    "PackPart", "MaskWidth", "LoadDist", "StoreDist", "DataCopyMode", "MemBarMode",
                    "IndexOrder"]},
}

# More uses of unbuilt parts, not names of their own: (id, statement, fragment).
EXTRA_USES = [
    ("ScaleLeft", "u = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, "
                  "target_memory=pl.MemorySpace.ScaleLeft), addr=0)", "pl.MemorySpace.ScaleLeft"),
    ("ScaleRight", "u = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, "
                   "target_memory=pl.MemorySpace.ScaleRight), addrs=0, depth=2)", "pl.MemorySpace.ScaleRight"),
    ("Vf.add", "r = pl.Vf.add(t, t, t)", "pl.Vf.add"),
    ("Vf enum in Vf", "e = pl.Vf.MergeMode.ZEROING", "pl.MergeMode"),
    ("simt.launch", "pl.simt.launch(simt_helper, threads=32, args=(t,))", "pl.simt.launch"),
    ("simt.function", "d = pl.simt.function", "pl.simt.function"),
    ("simt helper", "simt_helper(t)", "@pl.simt.function 'simt_helper'"),
    ("pl.function result", "ir_function(t)", "@pl.function 'ir_function'"),
    ("pl.vector_function itself", "d = pl.vector_function", "pl.vector_function"),
    ("enum member from module level", "e = VF_MODE", "pl.MergeMode.MERGING"),
    ("Vf function through a list", "VF_OPS[0](t)", "pl.Vf.exp"),
    ("Tile with MemRef", "u: pl.Tile[[16, 16], pl.DT_FP32, pl.MemRef(pl.MemorySpace.Vec, 0, 1024)] = t",
     "pl.MemRef"),
]

# Kernel parameters with unbuilt annotations: (id, annotation, fragment).
PARAM_USES = [
    ("Input", "pl.Tensor[[16, 16], pl.DT_FP32, pl.Input]", "pl.Input"),
    ("Output", "pl.Tensor[[16, 16], pl.DT_FP32, pl.ND, pl.Output]", "pl.Output"),
    ("MemRef", "pl.Tensor[[16, 16], pl.DT_FP32, pl.MemRef(pl.MemorySpace.DDR, 0, 1024)]", "pl.MemRef"),
    ("Tile", "pl.Tile[[16, 16], pl.DT_FP32]", "pl.Tile"),
]

NOT_IMPLEMENTED = "is part of the public language but is not implemented yet"


def registry_planned():
    return {name for name, _ in _C.ir.planned_ops()}


def registry_ops():
    return set(_C.ir.op_names())


def is_registry_name(name):
    value = getattr(pl, name, None)
    return isinstance(value, Builtin) and value.kind in ("op", "planned")


# ---- the generated kernels -----------------------------------------------------------------------

HEADER = '''\
import pypto_pro.language as pl

VF_MODE = pl.MergeMode.MERGING
VF_OPS = [pl.Vf.exp]


@pl.vector_function
def vf_helper(tile):
    mask = pl.Vf.create_mask(pattern=pl.MaskPattern.ALL, dtype=pl.DT_FP32)
    reg = pl.Vf.load_align(tile, 0)
    pl.Vf.store_align(tile, reg, mask)


@pl.simt.function(max_threads=32)
def simt_helper(tile):
    i = pl.simt.thread_idx()


@pl.function
def ir_function(x):
    return x

'''


class GeneratedKernels:
    """One module file with a kernel per case; `line[case]` is the line of the statement to report."""

    def __init__(self, path, cases, params):
        src = [HEADER]
        self.line = {}
        self.fn_name = {}
        n = HEADER.count("\n")
        for i, (case, stmt) in enumerate(cases):
            name = f"k{i}"
            body = (f"def {name}(x: pl.Tensor[[16, 16], pl.DT_FP32]):\n"
                    f"    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)\n"
                    f"    with pl.section_vector():\n"
                    f"        {stmt}\n\n\n")
            self.line[case] = n + 4
            self.fn_name[case] = name
            src.append(body)
            n += body.count("\n")
        for i, (case, ann) in enumerate(params):
            name = f"p{i}"
            body = (f"def {name}(x: pl.Tensor[[16, 16], pl.DT_FP32],\n"
                    f"       w: {ann}):\n"
                    f"    pass\n\n\n")
            self.line[("param", case)] = n + 2
            self.fn_name[("param", case)] = name
            src.append(body)
            n += body.count("\n")
        path.write_text("".join(src))
        spec = importlib.util.spec_from_file_location("public_names_kernels", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.path = str(path)

    def fn(self, case):
        return getattr(self.module, self.fn_name[case])


def planned_op_names():
    """The public names that are registry ops, planned when this test was written (some may be built
    since: their case then checks they are built)."""
    return [n for n in PUBLIC_NAMES if n not in PLANNED_USES and is_registry_name(n)
            and (n in registry_planned() or n in PLANNED_OPS_AT_WRITING)]


# Registry ops of the public list that were planned when this test was written.
PLANNED_OPS_AT_WRITING = {
    "set_stride", "init_output", "ssbuf_load", "ssbuf_store", "gather",
    "gatherb", "gathermask", "scatter", "mrgsort", "mrgsort2", "sort32", "histogram", "quant", "dequant",
    "matmul_mx", "matmul_mx_acc", "reinterpret", "astype", "set_mask_count", "set_mask_norm", "set_vec_mask",
    "reset_mask", "get_spr", "set_ctrl_spr", "get_ctrl_spr", "reset_ctrl_spr", "set_saturation_flag",
    "get_saturation_flag",
}

KERNEL_CASES = ([(name, stmt) for name, (stmt, _) in PLANNED_USES.items()]
                + [(f"op:{name}", f"pl.{name}()") for name in sorted(PLANNED_OPS_AT_WRITING)]
                + [(case, stmt) for case, stmt, _ in EXTRA_USES]
                + [(f"dtype:{name}", f"u = pl.TileType(shape=[16], dtype=pl.{name})") for name in UNSUPPORTED_DTYPES])


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return GeneratedKernels(tmp_path_factory.mktemp("public_names") / "public_names_kernels.py", KERNEL_CASES,
                            [(case, ann) for case, ann, _ in PARAM_USES])


def launch_error(fn, *, expect):
    kernel = pl.jit(fn)
    with pytest.raises(expect) as info:
        kernel[None, 1](torch.zeros(16, 16))
    return info.value


def check_located(err, kernels, case, fragment):
    assert err.filename == kernels.path, err
    assert err.lineno == kernels.line[case], err
    assert fragment in err.message, err


# ---- every name exists ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_name_exists(name):
    assert hasattr(pl, name), f"pl.{name} is missing"
    namespace = {}
    exec(f"from pypto_pro.language import {name}", namespace)
    assert namespace[name] is getattr(pl, name)
    assert name in pl.__all__


def test_public_names_are_unique():
    assert len(PUBLIC_NAMES) == len(set(PUBLIC_NAMES))


@pytest.mark.parametrize("name", sorted(ENUM_MEMBERS))
def test_enum_has_every_public_member(name):
    cls = getattr(pl, name)
    members = [m.name for m in cls]
    for member in ENUM_MEMBERS[name]:
        assert member in members, f"pl.{name}.{member} is missing"
    if name in NUMBERED_ENUMS:  # numbered in declaration order, as the public language numbers them
        assert [(m.name, int(m.value)) for m in cls] == [(m, i) for i, m in enumerate(ENUM_MEMBERS[name])]


def test_layout_and_memory_shortcuts():
    assert pl.NN is pl.TensorLayout.NN and pl.ZZ is pl.TensorLayout.ZZ
    assert pl.ND is pl.TensorLayout.ND and pl.ZN is pl.TensorLayout.ZN
    assert pl.DT_FP4.bits == 4 and not pl.DT_FP4.supported and pl.DTYPES["fp4"] is pl.DT_FP4


@pytest.mark.parametrize("name", VF_FUNCTIONS)
def test_vf_function_exists_and_is_planned(name):
    fn = getattr(pl.Vf, name)
    assert planned_info(fn) is not None
    with pytest.raises(NotImplementedError, match=rf"pl\.Vf\.{name} {NOT_IMPLEMENTED}"):
        fn()


def test_vf_namespace_has_the_vf_enums():
    for name in ["MaskPattern", "MergeMode", "LoadDist", "StoreDist", "IndexOrder"]:
        assert getattr(pl.Vf, name) is getattr(pl, name)


@pytest.mark.parametrize("name", SIMT_FUNCTIONS)
def test_simt_function_exists(name):
    assert callable(getattr(pl.simt, name))


def test_decorators_work_at_import_time():
    @pl.vector_function
    def body(tile):
        return tile

    assert body(3) == 3 and body.__pypto_vector_function__

    @pl.vector_function(mode="simd")
    def body2(tile):
        return tile

    assert body2.__pypto_vector_function__ == "simd"

    @pl.simt.function
    def helper(x):
        return x

    @pl.simt.function(max_threads=256)
    def launchable(x):
        return x

    assert helper(1) == 1 and launchable.__pypto_simt_max_threads__ == 256
    with pytest.raises(TypeError, match="max_threads"):
        pl.simt.function()

    @pl.inline
    def inlined(x):
        return x + 1

    assert inlined(1) == 2

    @pl.function(type=pl.FunctionType.InCore)
    def ir_fn(x):
        return x

    with pytest.raises(NotImplementedError, match=f"@pl.function 'ir_fn' {NOT_IMPLEMENTED}"):
        ir_fn(1)

    @pl.program
    class Program:
        @pl.function
        def method(self, x):
            return x

    with pytest.raises(NotImplementedError, match=f"@pl.program 'Program' {NOT_IMPLEMENTED}"):
        Program()
    with pytest.raises(NotImplementedError, match=f"pl.parse {NOT_IMPLEMENTED}"):
        pl.parse("def f(): pass")


def test_annotations_are_constructible_and_carry_their_parameters():
    tile = pl.Tile[[16, 32], pl.DT_FP16]
    assert isinstance(tile, pl.Tile) and tile.shape == (16, 32) and tile.dtype is pl.DT_FP16 and tile.memref is None
    ref = pl.MemRef(pl.MemorySpace.Vec, 0x100, 1024)
    assert pl.Tile[[16, 32], pl.DT_FP16, ref].memref is ref
    assert pl.Ptr[pl.DT_INT8].dtype is pl.DT_INT8
    assert pl.Scalar[pl.DT_INT32].dtype is pl.DT_INT32
    ann = pl.Tensor[[16, pl.DYNAMIC], pl.DT_FP32, pl.NZ, pl.Output]
    assert ann.layout is pl.NZ and ann.direction is pl.Output and ann.memref is None
    assert pl.Tensor[[16], pl.DT_FP32, ref].memref is ref
    assert pl.struct("S", a=1).a == 1 and len(pl.struct_array(3, b=2)) == 3 and pl.make_tuple(c=3).c == 3
    with pytest.raises(TypeError):
        pl.Tile[[16, 32], "fp16"]
    assert pl.Ptr["T"].dtype == "T"  # a datatype variable, checked where the kernel is built
    with pytest.raises(TypeError):
        pl.Ptr[16]


def test_kernel_is_the_jit_kernel_object():
    def body(x: pl.Tensor[[16], pl.DT_FP32]):
        pass

    k = pl.kernel(body)
    assert isinstance(k, pl.KernelDef) and isinstance(k, pl.JitFunction)
    assert pl.kernel(name="named", auto_mutex=False)(body).kernel_name == "named"
    for bad in (dict(strict_ssa=True), dict(func_type=pl.FunctionType.InCore), dict(meta_data=object())):
        with pytest.raises(NotImplementedError):
            pl.kernel(body, **bad)


# ---- unbuilt names raise at their line -----------------------------------------------------------

@pytest.mark.parametrize("name", list(PLANNED_USES))
def test_unbuilt_name_is_refused_at_its_line(kernels, name):
    err = launch_error(kernels.fn(name), expect=errors.UnsupportedFeatureError)
    check_located(err, kernels, name, PLANNED_USES[name][1])
    assert NOT_IMPLEMENTED in err.message


@pytest.mark.parametrize("name", sorted(PLANNED_OPS_AT_WRITING))
def test_planned_op_is_refused_at_its_line(kernels, name):
    assert hasattr(pl, name)
    if name in registry_ops() or getattr(pl, name).kind == "special":  # built since this test was written
        # (register reads such as pl.get_spr are scalars of kernel expressions, not registry ops)
        assert name not in registry_planned()
        pytest.skip(f"pl.{name} is built now")
    assert is_registry_name(name)
    assert name in registry_planned(), f"pl.{name} is neither an op nor a planned op of the registry"
    assert getattr(pl, name).kind == "planned"
    err = launch_error(kernels.fn(f"op:{name}"), expect=errors.UnsupportedFeatureError)
    check_located(err, kernels, f"op:{name}", f"pl.{name} {NOT_IMPLEMENTED}")


@pytest.mark.parametrize("case", [case for case, _, _ in EXTRA_USES])
def test_unbuilt_part_is_refused_at_its_line(kernels, case):
    fragment = next(f for c, _, f in EXTRA_USES if c == case)
    err = launch_error(kernels.fn(case), expect=errors.UnsupportedFeatureError)
    check_located(err, kernels, case, fragment)
    assert NOT_IMPLEMENTED in err.message


@pytest.mark.parametrize("case", [case for case, _, _ in PARAM_USES])
def test_unbuilt_parameter_annotation_is_refused_at_launch(kernels, case):
    """The kernel object builds (its module imports); every launch raises at the annotation."""
    fragment = next(f for c, _, f in PARAM_USES if c == case)
    kernel = pl.jit(kernels.fn(("param", case)))
    for launch in (lambda: kernel[None, 1](torch.zeros(16, 16), 0), lambda: kernel(torch.zeros(16, 16), 0)):
        with pytest.raises(errors.UnsupportedFeatureError) as info:
            launch()
        check_located(info.value, kernels, ("param", case), fragment)
        assert info.value.message.startswith("parameter 'w': ") and NOT_IMPLEMENTED in info.value.message


@pytest.mark.parametrize("name", UNSUPPORTED_DTYPES)
def test_unsupported_dtype_stays_refused(kernels, name):
    err = launch_error(kernels.fn(f"dtype:{name}"), expect=errors.ParserTypeError)
    check_located(err, kernels, f"dtype:{name}", "not supported yet")
    with pytest.raises(TypeError, match="not supported yet"):
        pl.TileType(shape=[16], dtype=getattr(pl, name))


# ---- built names are not planned -----------------------------------------------------------------

BUILT_ELSEWHERE = {"DT_" + n for n in ["FP16", "FP32", "BF16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
                                       "UINT32", "UINT64", "BOOL"]}


def unbuilt_names():
    return set(PLANNED_USES) | set(PLANNED_OPS_AT_WRITING) | set(UNSUPPORTED_DTYPES)


@pytest.mark.parametrize("name", [n for n in PUBLIC_NAMES if n not in unbuilt_names()])
def test_built_name_is_not_planned(name):
    value = getattr(pl, name)
    assert planned_info(value) is None, f"pl.{name} is built but marked planned"
    if isinstance(value, Builtin):
        assert value.kind != "planned" and name not in registry_planned(), f"pl.{name} is listed as planned"
    if name.startswith("DT_"):
        assert value.supported


def test_no_public_registry_name_is_both_built_and_planned():
    assert not (registry_ops() & registry_planned())


# ---- built parts of the public forms -------------------------------------------------------------

def test_built_public_forms_run():
    """pl.Tile / pl.Scalar / pl.Tensor annotations, pl.Scalar parameters, pl.kernel and pl.fillpad_expand
    as public kernels write them."""
    @pl.kernel
    def public_forms(x: pl.Tensor[[16, 16], pl.DT_FP32], y: pl.Tensor[[16, 16], pl.DT_FP32],
                     n: pl.Scalar[pl.DT_INT32]):
        tt = pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, valid_shape=[8, 16], pad=pl.TilePad.zero)
        t: pl.Tile[[16, 16], pl.DT_FP32] = pl.make_tile(tt, addr=0)
        u: pl.Tile[[16, 16], pl.DT_FP32] = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32,
                                                                    pad=pl.TilePad.zero), addr=0x400)
        k: pl.Scalar[pl.DT_INT32] = n + 1
        out: pl.Tensor[[16, 16], pl.DT_FP32] = y
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.fillpad_expand(u, t)
            pl.adds(u, u, k)
            pl.store(out, u, [0, 0])

    x = torch.rand(16, 16)
    y = torch.full((16, 16), -1.0)
    public_forms[None, 1](x, y, 2)
    pypto_pro.runtime.synchronize()
    ref = torch.zeros(16, 16)
    ref[:8] = x[:8]
    assert torch.equal(y, ref + 3)


def test_tile_annotation_is_checked():
    def body(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t: pl.Tile[[16, 8], pl.DT_FP32] = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)

    err = launch_error(body, expect=errors.ParserTypeError)
    assert "does not match the tile's shape [16, 16]" in err.message


# ---- a module written for the public language imports --------------------------------------------

PUBLIC_STYLE_MODULE = '''\
import pypto_pro.language as pl
from pypto_pro.language import Vf, MaskPattern, MergeMode, LoadDist, StoreDist

TILE = 64
LANES = pl.MaskPattern.VL64
MODES = {"zero": pl.MergeMode.ZEROING, "merge": MergeMode.MERGING}
SCALE_TT = pl.TileType(shape=[TILE, TILE // 32], dtype=pl.DT_INT8, target_memory=pl.MemorySpace.ScaleLeft,
                       layout=pl.ZZ)
NN_TT = pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat, layout=pl.NN)


@pl.vector_function
def scale_rows(src, dst, alpha):
    mask = Vf.create_mask(pattern=MaskPattern.ALL, dtype=pl.DT_FP32)
    reg = Vf.load_align(src, [0, 0], dist=LoadDist.NORM)
    reg = Vf.muls(reg, alpha, mask, mode=MODES["zero"])
    Vf.store_align(dst, reg, mask, dist=StoreDist.NORM)


@pl.vector_function(mode="simd")
def copy_rows(src, dst):
    mask = Vf.create_mask()
    Vf.store_align(dst, Vf.load_align(src, 0), mask)


@pl.simt.function(max_threads=128)
def simt_scale(tile, alpha):
    i = pl.simt.linear_thread_idx()
    tile[0, i] = tile[0, i] * alpha


@pl.simt.function
def simt_callee(x):
    return pl.simt.abs(x)


@pl.function(type=pl.FunctionType.InCore, strict_ssa=False)
def standalone(x: pl.Tensor[[64], pl.DT_FP32]) -> pl.Tensor[[64], pl.DT_FP32]:
    return x


@pl.program
class Program:
    @pl.function
    def main(self, x: pl.Tensor[[64], pl.DT_FP32]) -> pl.Tensor[[64], pl.DT_FP32]:
        return x


@pl.inline
def inlined_add(t, alpha):
    pl.adds(t, t, alpha)


@pl.jit(auto_mutex=True)
def vf_kernel(x: pl.Tensor[[TILE, TILE], pl.DT_FP32, pl.Input],
              workspace: pl.Ptr[pl.DT_FP32],
              out: pl.Tensor[[TILE, TILE], pl.DT_FP32, pl.Output]):
    ws = pl.make_tensor(pl.addptr(workspace, 0), [TILE, TILE], [TILE, 1])
    t: pl.Tile[[TILE, TILE], pl.DT_FP32] = pl.make_tile(pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32),
                                                         addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        scale_rows(t, t, 2.0)
        pl.store(out, t, [0, 0])


@pl.jit
def calls_vector_function(x: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        scale_rows(t, t, 2.0)
        pl.store(x, t, [0, 0])


@pl.kernel
def sorts(x: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.sort32(t, t, t)
        pl.histogram(t, t, t, is_msb=True)
        pl.set_vec_mask(0, 0)
'''


def test_public_style_module_imports(tmp_path):
    path = tmp_path / "public_style_module.py"
    path.write_text(PUBLIC_STYLE_MODULE)
    spec = importlib.util.spec_from_file_location("public_style_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["public_style_module"] = module
    try:
        spec.loader.exec_module(module)
        assert module.scale_rows.__pypto_vector_function__ and module.copy_rows.__pypto_vector_function__ == "simd"
        assert module.simt_scale.__pypto_simt_max_threads__ == 128
        assert module.NN_TT.layout is pl.NN and module.SCALE_TT.target_memory is pl.MemorySpace.ScaleLeft
        assert isinstance(module.vf_kernel, pl.JitFunction) and isinstance(module.sorts, pl.KernelDef)

        # the kernels refuse where they use what is not built: the pl.Input marker, the vector function
        x = torch.zeros(64, 64)
        lines = PUBLIC_STYLE_MODULE.splitlines()
        with pytest.raises(errors.UnsupportedFeatureError) as info:
            module.vf_kernel[None, 1](x, 0, x)
        assert info.value.lineno == 1 + lines.index("def vf_kernel(x: pl.Tensor[[TILE, TILE], pl.DT_FP32, pl.Input],")
        assert "pl.Input" in info.value.message
        with pytest.raises(errors.UnsupportedFeatureError) as info:
            module.calls_vector_function[None, 1](x)
        assert info.value.lineno == 1 + max(i for i, line in enumerate(lines) if "scale_rows(t, t, 2.0)" in line)
        assert "@pl.vector_function 'scale_rows'" in info.value.message
        with pytest.raises(errors.UnsupportedFeatureError) as info:
            module.sorts[None, 1](x)
        assert info.value.lineno == 1 + lines.index("        pl.sort32(t, t, t)")
    finally:
        sys.modules.pop("public_style_module", None)


def test_docs_list_every_public_name():
    """docs/language.md names every public name (in a table row or the lists of its last sections)."""
    import pathlib
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text()
    missing = [n for n in PUBLIC_NAMES if f"`pl.{n}" not in text and f"`{n}`" not in text and f"pl.{n}`" not in text
               and not (n.startswith("DT_") and n[3:] in text)]
    assert not missing, f"not in docs/language.md: {missing}"


def test_every_enum_option_names_its_pl_enum():
    """pipeline_generated.py spells an op's enum options as pl members (pl.PipeType.MTE1): each one the
    registry can hold, but the default the file leaves unsaid, is a member of the enum it names."""
    from pypto_pro import _C

    checked = 0
    for op in _C.ir.op_names():
        for kw in _C.ir.op_info(op)["kwargs"]:
            if kw["kind"] != "enum":
                continue
            path = kw["python_enum"]
            assert path.startswith("pl"), (op, kw["name"])
            owner = pl
            for part in path.split(".")[1:]:
                owner = getattr(owner, part)
            for i, choice in enumerate(kw["choices"]):
                if i != kw["default"]:
                    assert hasattr(owner, choice), f"{path}.{choice} ({op} {kw['name']}=)"
                    checked += 1
    assert checked > 50
