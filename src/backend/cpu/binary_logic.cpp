// CPU kernels for the comparison, logical and bitwise binary primitives.
#include "backend/cpu/elementwise.h"

namespace kiln {

template <class F>
void Binary<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_binary<F>(in[0], in[1], out[0]);
}

// The rows of the op registry whose dtypes column is boolean or integer (the other file takes same and floating).
#define KILN_INSTANTIATE_boolean(F) template class Binary<math::F>;
#define KILN_INSTANTIATE_integer(F) template class Binary<math::F>;
#define KILN_INSTANTIATE_same(F)
#define KILN_INSTANTIATE_floating(F)
#define KILN_BINARY(F, n, dtypes, ...) KILN_INSTANTIATE_##dtypes(F)
#include "ops/op_table.def"

}  // namespace kiln
