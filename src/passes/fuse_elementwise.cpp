#include "passes/pass.h"
namespace kiln::compiler {
namespace {
class FuseElementwise : public Pass {
 public:
  const char* name() const override { return "fuse_elementwise"; }
  bool run(Graph&) override { return false; }
};
class FuseReductions : public Pass {
 public:
  const char* name() const override { return "fuse_reductions"; }
  bool run(Graph&) override { return false; }
};
}  // namespace
std::unique_ptr<Pass> make_fuse_elementwise() { return std::make_unique<FuseElementwise>(); }
std::unique_ptr<Pass> make_fuse_reductions() { return std::make_unique<FuseReductions>(); }
}  // namespace kiln::compiler
