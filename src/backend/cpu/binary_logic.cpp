// CPU kernels for the comparison, logical and bitwise binary primitives.
#include "backend/cpu/elementwise.h"

namespace kiln {

template <class F>
void Binary<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_binary<F>(in[0], in[1], out[0]);
}

template class Binary<math::Equal>;
template class Binary<math::NotEqual>;
template class Binary<math::Less>;
template class Binary<math::LessEqual>;
template class Binary<math::Greater>;
template class Binary<math::GreaterEqual>;
template class Binary<math::LogicalAnd>;
template class Binary<math::LogicalOr>;
template class Binary<math::BitwiseAnd>;
template class Binary<math::BitwiseOr>;
template class Binary<math::BitwiseXor>;
template class Binary<math::LeftShift>;
template class Binary<math::RightShift>;

}  // namespace kiln
