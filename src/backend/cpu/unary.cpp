// CPU kernels for the unary primitives.
#include "backend/cpu/elementwise.h"

namespace kiln {

template <class F>
void Unary<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_unary<F>(in[0], out[0]);
}

#define KILN_UNARY(F, n, ...) template class Unary<math::F>;
#include "ops/op_table.def"

}  // namespace kiln
