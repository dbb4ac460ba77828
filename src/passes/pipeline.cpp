#include "passes/pass.h"

namespace kiln::compiler {

std::vector<std::unique_ptr<Pass>> make_pipeline(CompileMode mode, PassOptions options) {
  std::vector<std::unique_ptr<Pass>> p;
  if (mode == CompileMode::disabled || mode == CompileMode::no_simplify) return p;
  p.push_back(make_remove_noops(options));
  if (!options.shapeless) p.push_back(make_fold_shapes());
  p.push_back(make_merge_constants());
  p.push_back(make_cse());
  p.push_back(make_dce());
  if (mode == CompileMode::enabled) {
    p.push_back(make_fuse_matmul_epilogue());  // before the fusions, which would take the add in
    p.push_back(make_fuse_quantized_matmul());
    p.push_back(make_fuse_reductions());
    p.push_back(make_fuse_elementwise(options));
    p.push_back(make_dce());
  }
  return p;
}

void run_pipeline(Graph& g, CompileMode mode, PassOptions options) {
  for (auto& pass : make_pipeline(mode, options)) {
    pass->run(g);
#ifndef NDEBUG
    verify(g, pass->name());
#endif
  }
}

}  // namespace kiln::compiler
