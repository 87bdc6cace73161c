/* The hardware vocabulary, declared once: pipes, memories, layouts, element dtypes, cast round modes
 * and cross-core sync modes, numbered as the hardware and the public language number them.
 *
 * Every other place derives from these lists: the device headers kernels compile against (pto::kPipe*,
 * pto::kVec, pto::RoundMode, PTO_SYNC_*), the IR's enums and names (ir::Pipe, ir::DataType, ...), the
 * runtime's messages, and the Python enums (pl.PipeType, pl.MemorySpace, pl.DT_*, ...), which are built
 * from the export _C.hw_tables(). Dependency-free, and its first half is plain C for abi.h. */
#ifndef PYPTO_PRO_HW_TABLES_H
#define PYPTO_PRO_HW_TABLES_H

/* X(name) for each pipe, in hardware order. */
#define PTO_HW_PIPES(X) X(MTE1) X(MTE2) X(MTE3) X(M) X(V) X(S) X(FIX) X(ALL)

/* X(name) for each memory space; DDR is global memory, the rest a core's local memories. */
#define PTO_HW_MEMORIES(X) X(DDR) X(Vec) X(Mat) X(Left) X(Right) X(Acc) X(Bias) X(Scaling)

/* X(name) for each tile / tensor layout. */
#define PTO_HW_LAYOUTS(X) X(ND) X(DN) X(NZ) X(ZN)

/* Memories and layouts the public language names that this version does not model yet (the scale
 * buffers of the MX matmul and the fractal layouts of their tiles). They are members of pl.MemorySpace
 * and pl.TensorLayout so kernels that mention them import; a tile type using one is refused where a
 * kernel places the tile. They are not IR values: the IR, the device and the ABI never see them. */
#define PTO_HW_PLANNED_MEMORIES(X) X(ScaleLeft) X(ScaleRight)
#define PTO_HW_PLANNED_LAYOUTS(X) X(NN) X(ZZ)

/* X(enum, name, pl_name, device C++ type, bits, is_float, is_signed, supported, numpy, torch): the
 * element dtypes. numpy is the array's dtype kind and item size ("f2"), torch the torch.<name> of the
 * same type; "" where that library has none. Unsupported ones are named so kernels that mention them
 * get a clear error. */
#define PTO_HW_DTYPES(X)                                                          \
  X(Bool, "bool", "DT_BOOL", "bool", 8, 0, 0, 1, "b1", "bool")                    \
  X(Int8, "int8", "DT_INT8", "int8_t", 8, 0, 1, 1, "i1", "int8")                  \
  X(Int16, "int16", "DT_INT16", "int16_t", 16, 0, 1, 1, "i2", "int16")            \
  X(Int32, "int32", "DT_INT32", "int32_t", 32, 0, 1, 1, "i4", "int32")            \
  X(Int64, "int64", "DT_INT64", "int64_t", 64, 0, 1, 1, "i8", "int64")            \
  X(UInt8, "uint8", "DT_UINT8", "uint8_t", 8, 0, 0, 1, "u1", "uint8")             \
  X(UInt16, "uint16", "DT_UINT16", "uint16_t", 16, 0, 0, 1, "u2", "")             \
  X(UInt32, "uint32", "DT_UINT32", "uint32_t", 32, 0, 0, 1, "u4", "")             \
  X(UInt64, "uint64", "DT_UINT64", "uint64_t", 64, 0, 0, 1, "u8", "")             \
  X(FP16, "fp16", "DT_FP16", "pto::half", 16, 1, 1, 1, "f2", "float16")           \
  X(BF16, "bf16", "DT_BF16", "pto::bfloat16", 16, 1, 1, 1, "", "bfloat16")        \
  X(FP32, "fp32", "DT_FP32", "float", 32, 1, 1, 1, "f4", "float32")               \
  X(Int4, "int4", "DT_INT4", "", 4, 0, 1, 0, "", "")                              \
  X(UInt4, "uint4", "DT_UINT4", "", 4, 0, 0, 0, "", "")                           \
  X(FP8E4M3FN, "fp8e4m3fn", "DT_FP8E4M3FN", "", 8, 1, 1, 0, "", "")               \
  X(FP8E5M2, "fp8e5m2", "DT_FP8E5M2", "", 8, 1, 1, 0, "", "")                     \
  X(FP8E8M0, "fp8e8m0", "DT_FP8E8M0", "", 8, 1, 0, 0, "", "")                     \
  X(FP4E2M1, "fp4e2m1", "DT_FP4E2M1", "", 4, 1, 1, 0, "", "")                     \
  X(FP4E1M2, "fp4e1m2", "DT_FP4E1M2", "", 4, 1, 1, 0, "", "")                     \
  X(HF8, "hf8", "DT_HF8", "", 8, 1, 1, 0, "", "")                                 \
  X(HF4, "hf4", "DT_HF4", "", 4, 1, 1, 0, "", "")                                 \
  X(FP4, "fp4", "DT_FP4", "", 4, 1, 1, 0, "", "")

/* X(name) for each rounding mode of pl.cast (pl.RoundMode). */
#define PTO_HW_ROUND_MODES(X) X(CAST_RINT) X(CAST_ROUND) X(CAST_FLOOR) X(CAST_CEIL) X(CAST_TRUNC) X(CAST_ODD) X(CAST_NONE)

/* X(name) for each cross-core sync mode (pl.CrossCoreSyncMode), modes 0..3 of the hardware. */
#define PTO_HW_CROSS_CORE_SYNC_MODES(X) X(INTER_BLOCK) X(INTER_SUBBLOCK) X(INTRA_BLOCK) X(UNICAST_BLOCK)

/* The SuperScalar buffer (SSBUF) of a block, in bytes: pl.ssbuf_store / ssbuf_load pass small
 * structs between the cores of a block through it (the public struct page: usually 256 bytes). */
#define PTO_SSBUF_BYTES 256

/* The CTRL special register (pl.set_ctrl_spr & co.): its value when a core starts, X(first, last)
 * for each field kernels may write (any bit range inside one of them), and X(first, last, value)
 * for each encoding the hardware leaves undefined (writing it faults the device: an atomic operand
 * dtype of 7, an atomic op type of 3). */
#define PTO_HW_CTRL_DEFAULT 0x1000000000000008ull
#define PTO_HW_CTRL_WRITABLE(X) X(6, 10) X(45, 45) X(48, 48) X(50, 50) X(53, 53) X(59, 59) X(60, 60)
#define PTO_HW_CTRL_UNDEFINED(X) X(6, 8, 7) X(9, 10, 3)

/* X(name, CTRL bit, inverted) for each pl.SaturationFlagMode, numbered in this order as the public
 * language numbers them; an inverted bit is 0 while saturation is on. */
#define PTO_HW_SATURATION_FLAGS(X) X(FLOAT, 48, 1) X(FLOAT8, 50, 1) X(INT, 53, 0) X(CAST, 59, 1)

#ifdef __cplusplus

#include <cstddef>
#include <cstdint>

namespace pypto_pro::hw {

#define PTO_HW_ENUM_(name) k##name,
#define PTO_HW_NAME_(name) #name,
#define PTO_HW_DTYPE_ENUM_(e, ...) k##e,

enum class Pipe : uint8_t { PTO_HW_PIPES(PTO_HW_ENUM_) kCount };
enum class MemorySpace : uint8_t { PTO_HW_MEMORIES(PTO_HW_ENUM_) kCount };
enum class Layout : uint8_t { PTO_HW_LAYOUTS(PTO_HW_ENUM_) kCount };
enum class DataType : uint8_t { PTO_HW_DTYPES(PTO_HW_DTYPE_ENUM_) kCount };
enum class CrossCoreSyncMode : uint8_t { PTO_HW_CROSS_CORE_SYNC_MODES(PTO_HW_ENUM_) kCount };

inline constexpr const char* kPipeNames[] = {PTO_HW_PIPES(PTO_HW_NAME_)};
inline constexpr const char* kMemoryNames[] = {PTO_HW_MEMORIES(PTO_HW_NAME_)};
inline constexpr const char* kLayoutNames[] = {PTO_HW_LAYOUTS(PTO_HW_NAME_)};
inline constexpr const char* kPlannedMemoryNames[] = {PTO_HW_PLANNED_MEMORIES(PTO_HW_NAME_)};
inline constexpr const char* kPlannedLayoutNames[] = {PTO_HW_PLANNED_LAYOUTS(PTO_HW_NAME_)};
inline constexpr const char* kRoundModeNames[] = {PTO_HW_ROUND_MODES(PTO_HW_NAME_)};
inline constexpr const char* kCrossCoreSyncModeNames[] = {PTO_HW_CROSS_CORE_SYNC_MODES(PTO_HW_NAME_)};

struct CtrlField {
  int first, last;
  int64_t value;  // kCtrlUndefined: the encoding of bits first..last the hardware leaves undefined
};
#define PTO_HW_CTRL_FIELD_(first, last) {first, last, 0},
#define PTO_HW_CTRL_UNDEFINED_(first, last, value) {first, last, value},
inline constexpr CtrlField kCtrlWritable[] = {PTO_HW_CTRL_WRITABLE(PTO_HW_CTRL_FIELD_)};
inline constexpr CtrlField kCtrlUndefined[] = {PTO_HW_CTRL_UNDEFINED(PTO_HW_CTRL_UNDEFINED_)};
#undef PTO_HW_CTRL_FIELD_
#undef PTO_HW_CTRL_UNDEFINED_

struct SaturationFlagRow {
  const char* name;  // the pl.SaturationFlagMode member
  int bit;           // its CTRL bit
  bool inverted;     // the bit is 0 while saturation is on
};
#define PTO_HW_SATURATION_ROW_(name, bit, inverted) {#name, bit, inverted != 0},
inline constexpr SaturationFlagRow kSaturationFlags[] = {PTO_HW_SATURATION_FLAGS(PTO_HW_SATURATION_ROW_)};
#undef PTO_HW_SATURATION_ROW_

struct DataTypeRow {
  const char* name;     // "fp16": IR text, messages, artefact names
  const char* pl_name;  // "DT_FP16": the name in the pl namespace
  const char* ctype;    // the device C++ storage type; "" when not supported yet
  int bits;
  bool is_float;
  bool is_signed;
  bool supported;
  const char* numpy;    // numpy dtype kind + item size ("f2"); "" when numpy has none
  const char* torch;    // torch.<name>; "" when torch has none
};
#define PTO_HW_DTYPE_ROW_(e, name, pl, ctype, bits, f, s, ok, np, th) \
  {name, pl, ctype, bits, f != 0, s != 0, ok != 0, np, th},
inline constexpr DataTypeRow kDataTypes[] = {PTO_HW_DTYPES(PTO_HW_DTYPE_ROW_)};

#undef PTO_HW_ENUM_
#undef PTO_HW_NAME_
#undef PTO_HW_DTYPE_ENUM_
#undef PTO_HW_DTYPE_ROW_

template <typename T, size_t N>
constexpr size_t CountOf(const T (&)[N]) {
  return N;
}
static_assert(CountOf(kPipeNames) == size_t(Pipe::kCount));
static_assert(CountOf(kMemoryNames) == size_t(MemorySpace::kCount));
static_assert(CountOf(kLayoutNames) == size_t(Layout::kCount));
static_assert(CountOf(kDataTypes) == size_t(DataType::kCount));

// A pipe number from the device (an int of pto::Pipe) as its name; "?" when out of range.
inline const char* PipeName(int pipe) {
  return pipe >= 0 && pipe < int(Pipe::kCount) ? kPipeNames[pipe] : "?";
}
inline const char* MemoryName(int memory) {
  return memory >= 0 && memory < int(MemorySpace::kCount) ? kMemoryNames[memory] : "?";
}

}  // namespace pypto_pro::hw

#endif /* __cplusplus */
#endif /* PYPTO_PRO_HW_TABLES_H */
