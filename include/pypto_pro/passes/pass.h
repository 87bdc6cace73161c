// Passes: named IR -> IR transforms, one per file, run in a fixed pipeline with the verifier
// after each one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::passes {

// Something a pass found worth telling the user that does not stop the compile.
struct CompileWarning {
  Span span;
  std::string message;
};

// pl.jit(pipeline=pl.pipeline.PipelineConfig(preload=, sync_only=)).
struct PipelineOptions {
  int preload = 2;
  bool sync_only = false;
};

struct PassContext {
  const ArchModel* arch = &DefaultArch();
  bool auto_mutex = true;
  const PipelineOptions* pipeline = nullptr;  // null: no pipeline transform
  // Run row-local vector ops strip by strip (fuse_rows): plain kernels, never instrumented ones.
  bool fuse_rows = false;
  std::vector<CompileWarning>* warnings = nullptr;  // where passes report warnings; may be null
};

struct Pass {
  std::string_view name;
  void (*run)(ir::Function& func, const PassContext& ctx);
};

// Fold constants (specialised STATIC dims included), remove dead branches and unreachable code.
void FoldConstants(ir::Function& func, const PassContext& ctx);
// Tile addresses: aligned for their memory and inside its capacity on the target arch; tiles (and
// slots of a group) that share bytes of one memory without being the same view are a warning.
void CheckMemory(ir::Function& func, const PassContext& ctx);
// Moves between the cube and vector cores' local memories only where the target arch has the path.
void CheckDataPaths(ir::Function& func, const PassContext& ctx);
// pl.jit(pipeline=...): the stage loop's cross-core buffers (make_tile_group(fwd_ids=, bwd_ids=)) get
// their cross-core flags; sync_only keeps the serial order of the stages.
void CvPipeline(ir::Function& func, const PassContext& ctx);
// Whether fuse_direct and fuse_ops may run on `func`: vector kernels only (the cross-core data paths
// of mixed kernels write local memory from the other core), no pl.reinterpret (its views may reach
// past their tile's declaration).
bool FusionEligible(const ir::Function& func);
// Whether `name` is an element-wise op of op_lists.h (binary, scalar forms, unary): what direct runs
// and fused ops compute in registers.
bool ElementwiseOp(std::string_view name);
// Runs of loads -> element-wise ops -> stores on float tiles go from GM through registers to GM, not
// writing the tiles no later statement reads (fuse_direct.cpp); on with fuse_rows.
void FuseDirect(ir::Function& func, const PassContext& ctx);
// Loops whose body is one direct run stepping along its tensors' rows may run as one direct run over
// the iterations' windows side by side (fuse_direct_loops.cpp); on with fuse_rows.
void FuseDirectLoops(ir::Function& func, const PassContext& ctx);
// Runs of row-local vector ops over the same tiles become one loop over row strips (fuse_rows.cpp).
void FuseRows(ir::Function& func, const PassContext& ctx);
// Runs of element-wise and broadcast ops on float tiles of one window become one pass over it
// (fuse_ops.cpp); on with fuse_rows, after it (its strips' ops fuse too).
void FuseOps(ir::Function& func, const PassContext& ctx);
// Whether `op` is row-local (row r of its results depends on row r of its operands and read-only
// broadcast rows only), so fuse_rows may run it strip by strip.
bool RowLocalOp(const ir::OpDef& op);
// A plain move of a Mat tile into a Left/Right tile that only the matmuls right after it read is not
// run: they read the Mat tile, or the GM window of the load before it (forward_moves.cpp); on with
// fuse_rows.
void ForwardMoves(ir::Function& func, const PassContext& ctx);
// Lock/unlock TileGroup mutex ids around every op whose tiles carry them (when ctx.auto_mutex).
void AutoMutex(ir::Function& func, const PassContext& ctx);
// A K loop of in-place matmul then matmul_acc steps may run as one GEMM over k whose sums stay in the
// host's tile unit (fuse_k_loops.cpp); on with fuse_rows.
void FuseKLoops(ir::Function& func, const PassContext& ctx);

// The pipeline in order.
const std::vector<Pass>& Pipeline();

// Runs the pipeline; `after` sees the IR after parsing (name "parse") and after each pass.
void RunPipeline(ir::Function& func, const PassContext& ctx,
                 const std::function<void(std::string_view, const ir::Function&)>& after = nullptr);

}  // namespace pypto_pro::passes
