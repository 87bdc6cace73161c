#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

const std::vector<Pass>& Pipeline() {
  static const std::vector<Pass> pipeline = {
      {"fold_constants", &FoldConstants},
      {"check_memory", &CheckMemory},
      {"check_data_paths", &CheckDataPaths},
      {"cv_pipeline", &CvPipeline},
      {"fuse_direct", &FuseDirect},
      {"fuse_direct_loops", &FuseDirectLoops},
      {"fuse_rows", &FuseRows},
      {"fuse_ops", &FuseOps},
      {"forward_moves", &ForwardMoves},
      {"auto_mutex", &AutoMutex},
      {"fuse_k_loops", &FuseKLoops},
  };
  return pipeline;
}

void RunPipeline(ir::Function& func, const PassContext& ctx,
                 const std::function<void(std::string_view, const ir::Function&)>& after) {
  ir::Verify(func);
  if (after) after("parse", func);
  for (const Pass& pass : Pipeline()) {
    pass.run(func, ctx);
    ir::Verify(func);
    if (after) after(pass.name, func);
  }
}

}  // namespace pypto_pro::passes
