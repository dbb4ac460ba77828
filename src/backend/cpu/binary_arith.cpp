// CPU kernels for the arithmetic binary primitives.
#include "backend/cpu/elementwise.h"

namespace kiln {

template <class F>
void Binary<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_binary<F>(in[0], in[1], out[0]);
}

template class Binary<math::Add>;
template class Binary<math::Subtract>;
template class Binary<math::Multiply>;
template class Binary<math::Divide>;
template class Binary<math::FloorDivide>;
template class Binary<math::Remainder>;
template class Binary<math::Power>;
template class Binary<math::Maximum>;
template class Binary<math::Minimum>;
template class Binary<math::Arctan2>;

}  // namespace kiln
