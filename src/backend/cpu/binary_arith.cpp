// CPU kernels for the arithmetic binary primitives.
#include "backend/cpu/elementwise.h"

namespace kiln {

template <class F>
void Binary<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_binary<F>(in[0], in[1], out[0]);
}

// The rows of the op registry whose dtypes column is same or floating (the other file takes boolean and integer).
#define KILN_INSTANTIATE_same(F) template class Binary<math::F>;
#define KILN_INSTANTIATE_floating(F) template class Binary<math::F>;
#define KILN_INSTANTIATE_boolean(F)
#define KILN_INSTANTIATE_integer(F)
#define KILN_BINARY(F, n, dtypes, ...) KILN_INSTANTIATE_##dtypes(F)
#include "ops/op_table.def"

}  // namespace kiln
