// The one op registry: every tile op is declared once here. The parser (through the bindings),
// the verifier, the passes and the code generator all read these entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/ir/type.h"

namespace pypto_pro::ir {

enum class OperandKind : uint8_t {
  kTile,          // a tile value
  kTensor,        // a GM tensor
  kOffsets,       // a tuple with one scalar per tensor axis
  kScalar,        // a scalar expression
  kTiles,         // a tuple of tiles (the auto_mutex ops lock the ids all of them carry)
};
enum class Access : uint8_t { kRead, kWrite, kReadWrite };

// Bit sets over MemorySpace / DataType.
constexpr uint32_t Bit(MemorySpace m) { return 1u << uint32_t(m); }
constexpr uint32_t Bit(DataType d) { return 1u << uint32_t(d); }
constexpr uint32_t kVecOnly = Bit(MemorySpace::kVec);
constexpr uint32_t kAllSupportedDTypes = (1u << uint32_t(DataType::kFP32)) * 2 - 1;
constexpr uint32_t kNumericDTypes = kAllSupportedDTypes & ~Bit(DataType::kBool);

struct OperandSpec {
  std::string_view name;  // the keyword name in the public API ("out", "lhs", "src_tensor", ...)
  OperandKind kind;
  Access access;
  uint32_t memories = 0;  // kTile: allowed memory spaces
};

// How the op's pipe is chosen.
enum class PipeRule : uint8_t {
  kFixed,          // OpDef::pipe
  kBySourceTile,   // store: Vec source -> MTE3, Acc source -> FIX
};

// Which elements an op touches: the valid window of which tile.
enum class WindowRule : uint8_t {
  kNone,         // no tile data (sync ops)
  kDestination,  // compute ops: the destination's valid window
  kTransferTile, // load/store: the tile operand's valid window
};

// Keyword options of an op. Values are compile-time constants stored as op attributes.
struct KwargSpec {
  std::string_view name;
  bool implemented;            // false: only its default is accepted, anything else is refused
  std::string_view issue_area; // where the unimplemented option is planned
};

struct OpDef {
  std::string_view name;        // public name: "add", "load_tile"; system ops "system.mutex_lock"
  Pipe pipe;
  PipeRule pipe_rule;
  WindowRule window;
  std::vector<OperandSpec> operands;
  bool same_dtype;              // all tile/tensor operands share the element dtype
  uint32_t dtypes;              // element dtypes accepted (Bit(DataType) set)
  std::string_view scalar_form; // op used when the last operand is a scalar ("add" -> "adds")
  std::string_view device_fn;   // function in device_include called by kernel.cpp
  std::vector<KwargSpec> kwargs;
  std::string_view doc;
  bool internal = false;        // inserted by passes only; not callable from kernels

  // The pipe this op runs on, given its tile operands' memories.
  Pipe PipeFor(const std::vector<MemorySpace>& tile_memories) const;
};

const std::vector<OpDef>& AllOps();  // every op, internal ones included
const OpDef* FindOp(std::string_view name);  // nullptr if unknown

// Names the public language defines but this version does not implement yet, with the issue area
// that will bring them. The parser turns a use into UnsupportedFeatureError.
struct PlannedOp {
  std::string_view name;
  std::string_view issue_area;
};
const std::vector<PlannedOp>& PlannedOps();

}  // namespace pypto_pro::ir
