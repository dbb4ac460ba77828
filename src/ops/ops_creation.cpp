// Front ends of the creation ops.
#include <cmath>

#include "kiln/ops.h"
#include "core/checked.h"
#include "core/node.h"
#include "ops/creation.h"

namespace kiln {

namespace {
void check_valid(const char* op, const Array& a) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
}

// Errors name the op the user called (zeros, ones_like, ...), not the full it builds on.
Array filled(const char* op, const Shape& shape, double value, Dtype dtype) {
  detail::check_shape(op, shape, dtype);
  return full(shape, scalar(value, dtype));
}
}  // namespace

Array full(const Shape& shape, const Array& value) {
  if (!value.valid()) fail("full", "operation on an empty Array handle");
  detail::check_shape("full", shape, value.dtype());
  if (value.size() != 1) fail("full", "fill value must have one element, got shape ", detail::shape_str(value.shape()));
  Array v = value.ndim() == 0 ? value : reshape(value, {});
  return Array::make(shape, v.dtype(), std::make_shared<Full>(shape), {v});
}

Array full(const Shape& shape, double value, Dtype dtype) { return filled("full", shape, value, dtype); }
Array zeros(const Shape& shape, Dtype dtype) { return filled("zeros", shape, 0.0, dtype); }
Array ones(const Shape& shape, Dtype dtype) { return filled("ones", shape, 1.0, dtype); }
Array zeros_like(const Array& a) {
  check_valid("zeros_like", a);
  return filled("zeros_like", a.shape(), 0.0, a.dtype());
}
Array ones_like(const Array& a) {
  check_valid("ones_like", a);
  return filled("ones_like", a.shape(), 1.0, a.dtype());
}
Array full_like(const Array& a, double value) {
  check_valid("full_like", a);
  return filled("full_like", a.shape(), value, a.dtype());
}

Array arange(double start, double stop, double step, Dtype dtype) {
  if (step == 0) fail("arange", "step cannot be zero");
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    fail("arange", "start, stop and step must be finite");
  }
  if (dtype == bool_) fail("arange", "bool is not a valid dtype for arange");
  double count = std::ceil((stop - start) / step);
  // Converting a count past int64's range would be undefined; no such array fits in memory.
  if (count >= 0x1p62) fail("arange", "range from ", start, " to ", stop, " in steps of ", step, " is too long");
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  detail::check_shape("arange", Shape{n}, dtype);
  return Array::make(Shape{n}, dtype, std::make_shared<Arange>(start, step, n), {});
}

Array arange(int64_t stop, Dtype dtype) { return arange(0.0, static_cast<double>(stop), 1.0, dtype); }

Array linspace(double start, double stop, int64_t num, Dtype dtype) {
  if (num < 0) fail("linspace", "number of samples must be non-negative, got ", num);
  if (!is_floating(dtype)) fail("linspace", "needs a floating dtype, got ", dtype_name(dtype));
  detail::check_shape("linspace", Shape{num}, dtype);
  double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
  // start + (num-1) * step can miss stop by a rounding; the last element is stop itself.
  std::optional<double> last = num > 1 ? std::optional<double>(stop) : std::nullopt;
  return Array::make(Shape{num}, dtype, std::make_shared<Arange>(start, step, num, last), {});
}

Array eye(int64_t n, std::optional<int64_t> m, int64_t k, Dtype dtype) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) fail("eye", "dimensions must be non-negative, got ", n, " x ", cols);
  Array rows = reshape(arange(n, int64), {n, 1});
  Array cs = reshape(arange(cols, int64), {1, cols});
  return astype(equal(add(rows, scalar_int(k, int64)), cs), dtype);
}

Array axis_size(const Array& x, const std::vector<int>& axes, int64_t ddof, Dtype dtype) {
  auto prim = std::make_shared<AxisSize>(axes, ddof);
  if (detail::current_trace_id() == 0) return scalar(prim->count(x.shape()), dtype, x.device());
  return Array::make(Shape{}, dtype, std::move(prim), {x});
}

}  // namespace kiln
