// Front end of matmul: numpy.matmul's 1-D promotion, batch broadcasting, dtypes.
#include "kiln/ops.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"

namespace kiln {

using detail::shape_str;

std::vector<Shape> Matmul::output_shapes(const std::vector<Shape>& in) const {
  const Shape& a = in[0];
  const Shape& b = in[1];
  if (a.size() < 2 || b.size() < 2) {
    fail("matmul", "operands need at least 2 dimensions here, got ", shape_str(a), " @ ", shape_str(b));
  }
  if (a[a.size() - 1] != b[b.size() - 2])
    fail("matmul", "inner dimensions differ: ", shape_str(a), " @ ", shape_str(b));
  size_t nd = std::max(a.size(), b.size());
  Shape out(nd, 1);
  for (size_t i = 0; i + 2 < nd; ++i) {
    // Batch axes align from the right, like broadcasting.
    int64_t da = i + a.size() >= nd ? a[i + a.size() - nd] : 1;
    int64_t db = i + b.size() >= nd ? b[i + b.size() - nd] : 1;
    if (da != db && da != 1 && db != 1) {
      fail("matmul", "batch dimensions cannot be broadcast: ", shape_str(a), " @ ", shape_str(b));
    }
    out[i] = da == 1 ? db : da;
  }
  out[nd - 2] = a[a.size() - 2];
  out[nd - 1] = b[b.size() - 1];
  return {out};
}

std::vector<Shape> MatmulEpilogue::output_shapes(const std::vector<Shape>& in) const {
  Shape product = Matmul().output_shapes({in[0], in[1]})[0];
  return {broadcast_shapes("matmul_epilogue", {product, in[2]})};
}

void MatmulEpilogue::print(std::ostream& os) const {
  os << name() << "(bias"
     << (act_ == Activation::gelu        ? ",gelu"
         : act_ == Activation::gelu_tanh ? ",gelu_tanh"
                                         : "")
     << ")";
}

Array matmul(const Array& a, const Array& b) {
  if (!a.valid() || !b.valid()) fail("matmul", "operation on an empty Array handle");
  if (a.device() != b.device() && a.device().type != Device::Type::cpu && b.device().type != Device::Type::cpu) {
    fail("matmul", "arrays are on different devices: ", a.device().str(), " and ", b.device().str());
  }
  if (a.ndim() == 0 || b.ndim() == 0) {
    fail("matmul", "0-d operands are not allowed: ", shape_str(a.shape()), " @ ", shape_str(b.shape()));
  }
  // Checked here so the message shows the shapes the caller passed, before promotion.
  int64_t k_a = a.shape(-1), k_b = b.ndim() == 1 ? b.shape(0) : b.shape(-2);
  if (k_a != k_b) fail("matmul", "inner dimensions differ: ", shape_str(a.shape()), " @ ", shape_str(b.shape()));
  Dtype d = promote_types(a.dtype(), b.dtype());
  Array x = a.dtype() == d ? a : astype(a, d);
  Array y = b.dtype() == d ? b : astype(b, d);
  if (a.ndim() == 1) x = reshape(x, {1, k_a});
  if (b.ndim() == 1) y = reshape(y, {k_b, 1});
  auto prim = std::make_shared<Matmul>();
  Shape out;
  try {
    out = prim->output_shapes({x.shape(), y.shape()})[0];
  } catch (const Error&) {
    // Only the batch axes can still disagree; name the caller's shapes.
    fail("matmul", "batch dimensions cannot be broadcast: ", shape_str(a.shape()), " @ ", shape_str(b.shape()));
  }
  Array r = Array::make(out, d, std::move(prim), {x, y});
  // Drop the axes that 1-D promotion added.
  if (a.ndim() == 1 || b.ndim() == 1) {
    Shape s(out.begin(), out.end() - 2);
    if (a.ndim() != 1) s.push_back(out[out.size() - 2]);
    if (b.ndim() != 1) s.push_back(out.back());
    r = reshape(r, s);
  }
  return r;
}

}  // namespace kiln
