// Merges scalar constants with equal dtype, shape and bits, so that CSE can then
// merge the ops that read them.
#include <cstring>
#include <map>
#include <string>

#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class MergeConstants : public Pass {
 public:
  const char* name() const override { return "merge_constants"; }
  bool run(Graph& g) override {
    std::map<std::string, int> first;
    bool changed = false;
    for (size_t v = 0; v < g.values.size(); ++v) {
      const Value& val = g.values[v];
      if (!val.is_constant() || val.constant->size() != 1) continue;
      std::string key(reinterpret_cast<const char*>(val.constant->raw()), val.constant->itemsize());
      key += dtype_name(val.dtype);
      key += detail::shape_str(val.shape);
      auto [it, inserted] = first.emplace(key, static_cast<int>(v));
      if (!inserted) {
        g.replace_uses(static_cast<int>(v), it->second);
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_merge_constants() { return std::make_unique<MergeConstants>(); }

}  // namespace kiln::compiler
