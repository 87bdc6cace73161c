// The data paths between the cube core's and the vector cores' local memories (Acc -> Vec from the
// fixpipe, Vec -> Mat from MTE3) exist on some arch models only (docs/device.md#arch-models): a
// move that needs one the target lacks is an error at its line, not a copy the hardware cannot do.
// So is the SSBUF (pl.ssbuf_store / ssbuf_load) on an arch without one.
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

void CheckDataPaths(ir::Function& func, const PassContext& ctx) {
  ir::ForEachStmt(func.body, [&](const ir::StmtNode& s) {
    if (s.kind == ir::StmtKind::kOp && s.op->window == ir::WindowRule::kSsbuf && ctx.arch->ssbuf_bytes == 0) {
      Fail(ErrorKind::kType, s.span,
           "pl." + std::string(s.op->PublicName()) + ": " + std::string(ctx.arch->name) +
               " has no SSBUF (it exists on a5)",
           "pass small values between the cores through GM, or compile for a5");
    }
  });
  if (ctx.arch->cube_vector_local_paths) return;
  ir::ForEachStmt(func.body, [&](const ir::StmtNode& s) {
    const ir::CrossCoreWrite path = ir::CrossCoreWriteOf(s);
    if (path == ir::CrossCoreWrite::kNone) return;
    const bool fixpipe = path == ir::CrossCoreWrite::kToVectorCores;
    Fail(ErrorKind::kType, s.span,
         "pl." + std::string(s.op->PublicName()) + ": " + std::string(ctx.arch->name) + " has no data path from " +
             (fixpipe ? "Acc to Vec (the cube core's fixpipe into the vector cores' UB)"
                      : "Vec to Mat (the vector cores into the cube core's L1)"),
         fixpipe ? "store the accumulator to GM (pl.store) and load it on the vector side, or compile for a5"
                 : "store the tile to GM (pl.store) and load it into L1 on the cube side, or compile for a5");
  });
}

}  // namespace pypto_pro::passes
