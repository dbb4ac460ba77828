// A graph pass: a named rewrite that reports whether it changed anything.
#pragma once

#include <memory>
#include <vector>

#include "compile/graph.h"
#include "kiln/compile.h"

namespace kiln::compiler {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;
  /* Rewrites g in place; returns true when it changed it. */
  virtual bool run(Graph& g) = 0;
};

// The most ops one fused kernel takes: the system compiler's time grows faster than
// quadratically with a kernel's length (a chain of 400 ops took over two minutes).
inline constexpr size_t kMaxFusedOps = 64;

struct PassOptions {
  bool shapeless = false;  // shape-dependent simplifications are skipped
};

std::unique_ptr<Pass> make_remove_noops(PassOptions options);
std::unique_ptr<Pass> make_fold_shapes();
std::unique_ptr<Pass> make_merge_constants();
std::unique_ptr<Pass> make_cse();
std::unique_ptr<Pass> make_dce();
std::unique_ptr<Pass> make_fuse_elementwise(PassOptions options);
std::unique_ptr<Pass> make_fuse_reductions();
std::unique_ptr<Pass> make_fuse_matmul_epilogue();
std::unique_ptr<Pass> make_fuse_quantized_matmul();

/* The flat list of steps for a compile mode (empty for disabled and no_simplify). */
std::vector<std::unique_ptr<Pass>> make_pipeline(CompileMode mode, PassOptions options);
/* Runs the pipeline; in debug builds the graph is verified after every step. */
void run_pipeline(Graph& g, CompileMode mode, PassOptions options);

}  // namespace kiln::compiler
