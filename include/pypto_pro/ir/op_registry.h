// The one op registry: every tile op is declared once (src/ir/ops_*.cpp, one file per family).
// The parser (through the bindings), the verifier, the passes and the code generator all read
// these entries; adding an op means one entry here and one function in device_include/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/ir/expr.h"
#include "pypto_pro/ir/type.h"

namespace pypto_pro::ir {

enum class OperandKind : uint8_t {
  kTile,     // a tile value
  kTensor,   // a GM tensor
  kOffsets,  // a tuple with one integer scalar per tensor axis
  kScalar,   // a scalar expression
  kTiles,    // a tuple of tiles (auto_mutex locks the ids all of them carry)
  kScalars,  // a tuple of scalars of any type (pl.printf arguments)
  kContainer,  // a tile (of `memories`) or a GM tensor (pl.setval)
  kIndex,      // an element offset: a list with one integer per tensor axis, or one linear integer
  kWorkspaces, // a list of GM tensors, tiles and scalars the op's check sorts out (sync_all's SOFT mode)
};
enum class Access : uint8_t { kRead, kWrite, kReadWrite };

// Bit sets over MemorySpace / DataType.
constexpr uint32_t Bit(MemorySpace m) { return 1u << uint32_t(m); }
constexpr uint32_t Bit(DataType d) { return 1u << uint32_t(d); }
constexpr uint32_t kVecOnly = Bit(MemorySpace::kVec);
constexpr uint32_t kAnyTileMemory = (1u << uint32_t(MemorySpace::kCount)) - 2;  // all but DDR
constexpr uint32_t SupportedDTypeMask() {
  uint32_t mask = 0;
  for (uint32_t d = 0; d < uint32_t(DataType::kCount); ++d) mask |= hw::kDataTypes[d].supported ? 1u << d : 0;
  return mask;
}
constexpr uint32_t kAllSupportedDTypes = SupportedDTypeMask();  // the dtypes hw_tables.h marks supported
constexpr uint32_t kNumericDTypes = kAllSupportedDTypes & ~Bit(DataType::kBool);
constexpr uint32_t kFloatDTypes = Bit(DataType::kFP16) | Bit(DataType::kBF16) | Bit(DataType::kFP32);

// How a tile operand's shape relates to the op's reference shape: that of its first kSame tile.
// The verifier checks these for compute ops (window rule kDestination or kSource).
enum class ShapeRole : uint8_t {
  kSame,    // exactly the reference shape
  kColumn,  // [R, 1]: one value per row of the reference (row reductions and broadcasts)
  kRow,     // [1, C]: one value per column of the reference (column reductions and broadcasts)
  kAny,     // unconstrained: scratch tiles the implementation never reads
};

// What the entries of a kOffsets operand count: elements of the tensor, or whole tiles (the
// element offset is entry x the tile's extent on that axis: load_tile / store_tile).
enum class OffsetUnit : uint8_t { kElements, kTiles };

struct OperandSpec {
  std::string_view name;  // the keyword name in the public API ("out", "lhs", "src_tensor", ...)
  OperandKind kind;
  Access access;
  uint32_t memories = 0;  // kTile: allowed memory spaces
  uint32_t dtypes = 0;    // kTile/kTensor: element dtypes accepted; 0 = the op's `dtypes`
  ShapeRole shape = ShapeRole::kSame;
  OffsetUnit unit = OffsetUnit::kElements;  // kOffsets
};

// What an op without tile data (WindowRule::kNone) means to the order of pipes and cores: the
// event the sanitizer records for it, and which options name its pipes and ids. Sanitizer
// instrumentation, the mixed-kernel check and the docs are derived from it.
enum class SyncEvent : uint8_t {
  kNone,
  kFlagSet,     // `pipe_attr` raises flag `id_attr` for `peer_pipe_attr` (sync_src)
  kFlagWait,    // `pipe_attr` waits for flag `id_attr` raised by `peer_pipe_attr` (sync_dst)
  kLock,        // `pipe_attr` takes buffer mutex `id_attr`
  kUnlock,      // `pipe_attr` releases it
  kAutoLock,    // `pipe_attr` takes every mutex id its tile operands carry (auto_mutex)
  kAutoUnlock,  // and releases them
  kBarrier,     // `barrier_pipe` drains (pipe_barrier)
  kCrossSet,    // the other side of a mixed block is signalled flag `id_attr` after `pipe_attr`
  kCrossWait,   // `pipe_attr` waits for flag `id_attr` from the other side
  kValidShape,  // the tile operand's valid window changes (set_validshape)
};

struct SyncSpec {
  SyncEvent event = SyncEvent::kNone;
  std::string_view pipe_attr = {};       // the option naming the pipe that acts
  std::string_view peer_pipe_attr = {};  // flags: the option naming the other pipe
  std::string_view id_attr = {};         // the option holding the flag or mutex id
  Pipe barrier_pipe = Pipe::kALL;        // kBarrier
  std::string_view pairs_with = {};      // the op that completes this one (sync_src -> sync_dst)

  bool CrossCore() const { return event == SyncEvent::kCrossSet || event == SyncEvent::kCrossWait; }
};

// How the front end binds a call's arguments to the operands.
enum class CallForm : uint8_t {
  kOperands,  // positional operands, then keyword options (every op but the debug ones)
  kFormat,    // a compile-time format string, then run-time scalars for it (pl.printf)
  kAssert,    // a condition, an optional format (its source text when omitted), then its scalars;
              // a condition known at compile time is decided there (pl.pto_assert)
};

// How the op's pipe is chosen.
enum class PipeRule : uint8_t {
  kFixed,         // OpDef::pipe
  kBySourceTile,  // store: Vec source -> MTE3, Acc source -> FIX
  kByMove,        // move: Mat->Left/Right MTE1, Acc->Vec FIX, Mat->Vec V, Vec->Mat MTE3
};

// Which elements an op touches: the valid window of which tile.
enum class WindowRule : uint8_t {
  kNone,          // no tile data (sync ops)
  kDestination,   // compute ops: the destination's valid window
  kTransferTile,  // load/store: the tile operand's valid window
  kSource,        // reductions and moves: the source's valid window
  kElement,       // one element at a linear offset (setval), whatever the window
  kMatmul,        // matmul: lhs valid rows x rhs valid cols of the destination, over lhs valid cols of k
  kMove,          // tile -> tile moves: by the move's MoveForm (ir/analysis.h)
  kFill,          // fillpad: the destination's whole tile, the source's valid window
  kFirstRow,      // fill_index: the valid columns of the destination's first row
  kDump,          // dump_data: the window at `offsets` of `shapes` (entries < 0: to the valid end), read
  kPart,          // partadd & co.: the destination's window; each source its own window inside it
  kTranspose,     // transpose: the source's window, the destination's at the transposed extent
  kSsbuf,         // ssbuf_store / ssbuf_load: bytes of the block's SSBUF (no tiles)
  kGmRun,         // init_output: `size` elements of the GM tensor from linear element `offset`
};

// Keyword options of an op: compile-time values stored as op attributes, passed to the device
// function after the source line, in declaration order.
enum class AttrKind : uint8_t {
  kInt,       // a compile-time int
  kBool,      // True/False (stored as 1/0)
  kEnum,      // a member of a pl enum, stored as its index in `choices`
  kString,    // a compile-time string (printf formats, assert messages)
  kDispatch,  // selects another op by value: `choices[value]` is the op used (sum(..., dim=1))
  kOperand,   // an optional operand (by keyword or positionally after the operands): when given,
              // `choices[0]` is the op used, with it appended
  kAxes,      // two tensor axes [rows, cols] (load order=): stored as rows << 8 | cols, -1 = the last two
  kFloat,     // a compile-time number, stored as its float32 bit pattern (0..2^32-1); -1 = not given
};

struct KwargSpec {
  std::string_view name;
  AttrKind kind = AttrKind::kInt;
  int64_t default_value = 0;               // kDispatch/kOperand: -1 = absent, the op itself is used
  std::vector<std::string_view> choices;   // kEnum names; kDispatch/kOperand target ops
  std::string_view cpp_prefix = {};        // kEnum: kernel.cpp names value X as <prefix>X ("pto::kPipe")
  int64_t min_value = INT64_MIN;           // kInt: the accepted range (event ids 0..15, mutex ids 0..31)
  int64_t max_value = INT64_MAX;
  bool required = false;                   // keyword-only without a default (event_id=, pipe=)
  // kInt ids (event_id=, mutex_id=) may be run-time scalars: the call becomes a dispatch over the legal
  // ids (each branch a call with that id as a constant), and any other value a fault at run time.
  bool runtime_dispatch = false;
};

struct StmtNode;

// Static checks of one op that the operand table cannot express (matmul shapes, the dtype
// conversions of a data path). Throws CompileDiagnostic at the offending operand or statement.
using OpCheck = void (*)(const StmtNode& call);

struct OpDef {
  std::string_view name;         // unique id; ops users call are named as in the public API
  Pipe pipe;
  PipeRule pipe_rule;
  WindowRule window;
  std::vector<OperandSpec> operands;
  bool same_dtype;               // all tile/tensor operands without their own dtypes share one dtype
  uint32_t dtypes;               // element dtypes accepted (Bit(DataType) set)
  std::string_view scalar_form;  // op used when the last operand is a scalar ("add" -> "adds")
  std::string_view device_fn;    // function in device_include called by kernel.cpp
  std::vector<KwargSpec> kwargs;
  std::string_view doc;
  bool internal = false;         // inserted by passes only; not callable from kernels
  std::string_view public_name = {};  // the pl name when it differs from `name` (dispatch targets)
  // Rules the operand table cannot express (matmul shapes, cast's rounding modes, a printf format
  // and its arguments, two pipes that must differ); the verifier runs it after the generic checks.
  OpCheck check = nullptr;
  SyncSpec sync = {};
  CallForm call_form = CallForm::kOperands;
  // A tile operand may be a whole TileGroup: the op is applied to every slot (descriptor ops).
  bool per_slot = false;

  // The pipe this op runs on, given its tile operands' memories.
  Pipe PipeFor(const std::vector<MemorySpace>& tile_memories) const;
  std::string_view PublicName() const { return public_name.empty() ? name : public_name; }
  std::string Signature() const;  // "pl.add(out, lhs, rhs)"
  const KwargSpec* FindKwarg(std::string_view kwarg) const;
};

const std::vector<OpDef>& AllOps();  // every op, internal ones included
const OpDef* FindOp(std::string_view name);  // nullptr if unknown

// Names the public language defines that this version does not implement yet, with what they will
// do. Calling one is an UnsupportedFeatureError; docs/language.md lists them.
struct PlannedOp {
  std::string_view name;
  std::string_view doc;
};
const std::vector<PlannedOp>& PlannedOps();

// A keyword value from the front end.
struct KwargValue {
  enum class Kind : uint8_t { kNone, kInt, kString, kExpr } kind = Kind::kNone;
  int64_t i = 0;
  std::string s;
  Expr e;
};

// Builds the statement for `pl.<name>(args..., **kwargs)`: picks the scalar form when a scalar is given
// where the scalar form takes one, follows dispatch/operand keywords to the op they select (an optional
// operand may also be the next positional argument), fills every attribute (defaults included) in
// declaration order, and checks values. Throws CompileDiagnostic at `span`.
// The block's SuperScalar buffer: its size, and where a struct's fields lie in it (the C struct of
// the ssbuf op's field operands: each field at its own alignment, the size rounded up to the
// largest alignment and at least 4, as the SSBUF is copied in 32-bit words).
inline constexpr int64_t kSsbufBytes = PTO_SSBUF_BYTES;
struct SsbufLayout {
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
};
SsbufLayout SsbufLayoutOf(const StmtNode& call);

// The internal run-time check `lo <= index <= hi` (else a fault naming `what`), for the front end's
// run-time indices into lists and pl.struct_array.
std::shared_ptr<const StmtNode> CheckIndexCall(Expr index, int64_t lo, int64_t hi, const std::string& what, Span span);

std::shared_ptr<const StmtNode> BuildOpCall(const std::string& name, std::vector<Expr> args,
                                            const std::map<std::string, KwargValue>& kwargs, Span span);

}  // namespace pypto_pro::ir
