// Statements of the IR and the kernel function that holds them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pypto_pro/ir/expr.h"
#include "pypto_pro/ir/op_registry.h"

namespace pypto_pro::ir {

enum class StmtKind : uint8_t {
  kSeq,
  kAssign,      // var = value (scalars and tile handles; Python function scope)
  kFor,         // for var in pl.range(start, stop, step): body
  kWhile,       // while cond: body
  kIf,          // if cond: body else: orelse
  kBreak,
  kContinue,
  kReturn,
  kOp,          // a registry op: op(args...) with compile-time attrs
  kDeclTiles,   // var = make_tile_group(...) / make_tile(...): the slots of var->group
  kSelectTile,  // var = group.next() / .current() / .previous() / group[index]
  kSection,     // with pl.section_vector() / pl.section_cube(): body
  kSubview,     // var = value[args[0]:args[1], args[2]:args[3]]: a view of a tile's bytes (tile[r0:r1, c0:c1])
  kReinterpret, // var = pl.reinterpret(value, ...): value's bytes as var's tile type (its whole shape valid)
  kStage,       // body: an inlined @pl.pipeline.stage helper (attrs[0].text its name); plain code unless
                // pl.jit(pipeline=...) schedules the stages
  kDirectRun,   // body: loads -> element-wise ops -> stores the fuse_direct pass runs from GM through
                // registers to GM (docs/device.md#direct-runs); attrs name the tiles it need not write
  kDirectLoop,  // body: a kFor whose iterations' direct runs may run as one (fuse_direct_loops;
                // docs/device.md#direct-loops), else the loop as written
  kFusedOps,    // body: element-wise and broadcast ops over one window of local memory the fuse_ops pass
                // runs in one pass over it (docs/device.md#fused-ops), else as written
  kForwardedMove,   // body: a move Mat -> Left/Right the forward_moves pass found only its matmuls read
                    // (docs/device.md#forwarded-moves): the generated code does not run it
  kForwardedReads,  // body: a matmul reading, for each pair (args[2k], args[2k+1]), the Mat tile
                    // args[2k+1] a forwarded move copied into its operand args[2k]; attrs[k] "in_place":
                    // the number of the in-place load whose window that Mat tile stands for (-1: none)
  kInPlaceLoad,     // body: a load into a Mat tile that only forwarded matmuls read; attrs[0] "in_place":
                    // its number. The generated code checks its window and leaves it in GM for them
  kKLoop,           // body: a kFor whose matmul, then matmul_acc, steps may run as one GEMM over k
                    // (fuse_k_loops; docs/device.md#k-loops), else the loop as written; args: KLoop's
};

enum class SelectMode : uint8_t { kNext, kCurrent, kPrevious, kIndex };
enum class SectionKind : uint8_t { kVector, kCube };

const char* Name(SelectMode mode);
const char* Name(SectionKind section);

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

// A compile-time op option: an integer (ints, bools, enum indices, pipes) or a string.
struct Attr {
  std::string name;
  int64_t value = 0;
  std::string text;
  bool is_string = false;
};

struct StmtNode {
  StmtKind kind = StmtKind::kSeq;
  Span span;
  std::vector<Stmt> stmts;        // kSeq
  Var var;                        // kAssign/kFor/kDeclTiles/kSelectTile/kSubview target
  Expr value;                     // kAssign value; kSelectTile index (kIndex); kSubview the viewed tile
  Expr start, stop, step;         // kFor
  Expr cond;                      // kIf, kWhile
  Stmt body;                      // kFor, kWhile, kIf (then), kSection
  Stmt orelse;                    // kIf (may be null)
  const OpDef* op = nullptr;      // kOp
  std::vector<Expr> args;         // kOp operands, in OpDef::operands order; kSubview row0, row1, col0, col1
  std::vector<Attr> attrs;        // kOp
  Var group;                      // kSelectTile
  SelectMode mode = SelectMode::kCurrent;
  SectionKind section = SectionKind::kVector;
};

Stmt Seq(std::vector<Stmt> stmts, Span span = {});
Stmt Assign(const Var& var, Expr value, Span span = {});
Stmt For(const Var& var, Expr start, Expr stop, Expr step, Stmt body, Span span = {});
Stmt While(Expr cond, Stmt body, Span span = {});
Stmt If(Expr cond, Stmt then_body, Stmt else_body, Span span = {});
Stmt Break(Span span = {});
Stmt Continue(Span span = {});
Stmt Return(Span span = {});
Stmt OpCall(const OpDef* op, std::vector<Expr> args, std::vector<Attr> attrs, Span span = {});
Stmt DeclTiles(const Var& group, Span span = {});
Stmt SelectTile(const Var& tile, const Var& group, SelectMode mode, Expr index, Span span = {});
Stmt Section(SectionKind section, Stmt body, Span span = {});
// view = tile[row0:row1, col0:col1] (half-open, in the tile's shape): `view` has `tile`'s type with a
// run-time valid window (the slice clamped to `tile`'s window) and no pad.
Stmt Subview(const Var& view, Expr tile, std::vector<Expr> bounds, Span span = {});
Stmt Reinterpret(const Var& view, Expr tile, Span span = {});
Stmt Stage(const std::string& name, Stmt body, Span span = {});
// A direct run over `body` (a Seq of its statements, also what runs when its GM windows overlap):
// `unwritten` are the tiles whose values no later statement reads (attrs "unwritten", id and name).
Stmt DirectRun(Stmt body, const std::vector<Var>& unwritten, Span span = {});
// A loop (kFor) the generated code may run as one direct run over its iterations' windows.
Stmt DirectLoop(Stmt loop, Span span = {});
// A K loop (kFor) the generated code may run as one GEMM over its steps (fuse_k_loops); args: the
// accumulator, A's Mat tile, A, its row tile index, B's Mat tile, B, its column tile index. With the
// store of the accumulator that follows the loop, the body is Seq{loop, the store's statements} and
// args go on with the store's tensor and its two indices.
Stmt KLoop(Stmt loop, std::vector<Expr> operands, Span span = {});
// Fused ops over `body` (a Seq of the op statements, also what runs when their windows differ or overlap).
Stmt FusedOps(Stmt body, Span span = {});

// forward_moves: a move the generated code skips; a matmul reading each forwarded operand's source (the
// Mat tile moved into the L0 tile, or the GM window of in-place load `in_place`); such a load.
struct ForwardedRead {
  Var l0, mat;
  int in_place = -1;
};
Stmt ForwardedMove(Stmt move, Span span = {});
Stmt ForwardedReads(Stmt matmul, const std::vector<ForwardedRead>& reads, Span span = {});
Stmt InPlaceLoad(Stmt load, int number, Span span = {});

// Rebuilds `stmt` with new children; passes use it to keep unchanged subtrees shared.
std::shared_ptr<StmtNode> CopyNode(const Stmt& stmt);

// Which AI cores run the kernel (docs/device.md#execution).
enum class KernelKind : uint8_t { kVector, kCube, kMixed };
const char* Name(KernelKind kind);

// A kernel: parameters (GM tensors and scalars) and a body.
struct Function {
  std::string name;         // kernel name used in messages and artefacts
  std::string source_file;  // the user's file, for diagnostics and fault reports
  // Files of helpers inlined from other modules. A span's line is `file << kLineFileShift | line`
  // (support/source_line.h): file 0 is source_file, file i the (i-1)th of these.
  std::vector<std::string> other_files;
  std::vector<Var> params;  // in signature order
  Stmt body;
  int next_var_id = 0;

  // A fresh variable; `name` is made unique within the function.
  Var NewVar(const std::string& name, Type type, Span span = {},
             std::shared_ptr<const TileGroupInfo> group = nullptr);
  // Number of int32 launcher arguments for DYNAMIC dims (one per DYNAMIC dim, in parameter order).
  int NumDynamicDims() const;

 private:
  std::vector<std::string> used_names_;
};

}  // namespace pypto_pro::ir
