// Front ends of the random numbers: keys, bits, and the distributions built from bits
// with ordinary ops, so that they fuse where they sit in a compiled function.
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include "core/checked.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "ops/random.h"

namespace kiln {

void check_draw_size(const char* op, const Shape& shape) {
  // Counters are 32 bits wide (threefry.h).
  const int64_t n = detail::checked_size(op, shape);
  if (n > int64_t{std::numeric_limits<uint32_t>::max()}) fail(op, "a draw holds at most 2^32 - 1 words; got ", n);
}

std::vector<Shape> RandomBits::output_shapes(const std::vector<Shape>& in) const {
  Shape shape = lead_;
  if (like_) shape.insert(shape.end(), in[1].begin(), in[1].end());
  check_draw_size(name(), shape);
  return {shape};
}

int normalize_axis(const char* op, int axis, int ndim);  // ops_views.cpp

namespace random {

using detail::shape_str;

namespace {

void check_key(const char* op, const Array& key) {
  if (!key.valid()) fail(op, "operation on an empty Array handle");
  if (key.dtype() != uint32 || key.shape() != Shape{2}) {
    fail(op, "a key is a uint32 array of shape (2); got ", dtype_name(key.dtype()), " ", shape_str(key.shape()));
  }
}

/* Words under `key`, checked for `op`: shape `lead`, then like's shape when given. */
Array draw(const char* op, const Shape& lead, const Array& key, const std::optional<Array>& like = std::nullopt) {
  check_key(op, key);
  for (int64_t d : lead) {
    if (d < 0) fail(op, "negative dimension in shape ", shape_str(lead));
  }
  Shape shape = lead;
  std::vector<Array> in{key};
  if (like) {
    shape.insert(shape.end(), like->shape().begin(), like->shape().end());
    in.push_back(*like);
  }
  check_draw_size(op, shape);
  return Array::make(std::move(shape), uint32, std::make_shared<RandomBits>(lead, like.has_value()), std::move(in));
}

/* Uniform in [0, 1) on the grid of 2^-m, in `c`: the top m bits of each word (float32,
   m <= 23), or 52 bits of two words (float64, m = 52). Exactly what filling a
   mantissa with those bits and subtracting 1 gives (JAX's uniform). The shape is
   draw's. */
Array unit_uniform(const char* op, const Shape& lead, const Array& key, Dtype c, int m,
                   const std::optional<Array>& like = std::nullopt) {
  if (c == float32) return astype(draw(op, lead, key, like) >> (32 - m), float32) * std::ldexp(1.0f, -m);
  // The high words first, then the low ones, as JAX draws 64 bits.
  Shape halves = lead;
  halves.insert(halves.begin(), 2);
  std::vector<Array> w = kiln::split(astype(draw(op, halves, key, like), uint64), 2, 0);
  Array k = (squeeze(w[0], {0}) << 20) | (squeeze(w[1], {0}) >> 12);
  return astype(k, float64) * std::ldexp(1.0, -52);
}

Dtype compute_dtype(Dtype d) { return d == float64 ? float64 : float32; }
int grid_bits(Dtype c) { return c == float64 ? 52 : 23; }

/* The largest value of dtype d below x (x finite). */
template <class H>
double below_half(double x) {
  H h(static_cast<float>(x));
  while (static_cast<float>(h) >= x) {
    const uint16_t b = h.bits;
    h = H::from_bits(static_cast<uint16_t>(b & 0x7fff ? (b & 0x8000 ? b + 1 : b - 1) : 0x8001));
  }
  return static_cast<float>(h);
}
double largest_below(double x, Dtype d) {
  if (d == float16) return below_half<float16_t>(x);
  if (d == bfloat16) return below_half<bfloat16_t>(x);
  if (d == float32) {
    float f = static_cast<float>(x);
    while (f >= x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
    return f;
  }
  return std::nextafter(x, -std::numeric_limits<double>::infinity());
}

int mantissa_bits(Dtype d) {
  switch (d) {
    case float16: return 10;
    case bfloat16: return 7;
    case float32: return 23;
    default: return 52;
  }
}

void check_float_dtype(const char* op, Dtype d) {
  if (!is_floating(d)) fail(op, "dtype must be a floating type; got ", dtype_name(d));
}

}  // namespace

Array key(uint64_t seed) {
  return array(std::vector<uint32_t>{static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)}, Shape{2});
}

Array split(const Array& key, int num) {
  if (num < 1) fail("split", "num must be at least 1; got ", num);
  return draw("split", {num, 2}, key);
}

Array bits(const Shape& shape, const Array& key) { return draw("bits", shape, key); }

Array uniform(const Shape& shape, const Array& key, Dtype dtype, double low, double high) {
  check_float_dtype("uniform", dtype);
  const Dtype c = compute_dtype(dtype);
  const double range = high - low;
  const bool finite = c == float64 ? std::isfinite(range) : std::isfinite(static_cast<float>(range));
  if (!(low < high) || !finite) fail("uniform", "needs low < high with a finite range; got low ", low, ", high ", high);
  Array u = unit_uniform("uniform", shape, key, c, mantissa_bits(dtype));
  Array r = astype(u * scalar(range, c, u.device()) + scalar(low, c, u.device()), dtype);
  // Rounding (in c, then to dtype) may reach high: the largest value below it instead.
  return minimum(r, scalar(largest_below(high, dtype), dtype, r.device()));
}

Array normal(const Shape& shape, const Array& key, Dtype dtype, double loc, double scale) {
  check_float_dtype("normal", dtype);
  const Dtype c = compute_dtype(dtype);
  Shape both = shape;
  both.insert(both.begin(), 2);
  std::vector<Array> u = kiln::split(unit_uniform("normal", both, key, c, grid_bits(c)), 2, 0);
  // Box-Muller: 1 - u lies in (0, 1], so the log is finite.
  Array radius = sqrt(log(1.0 - squeeze(u[0], {0})) * -2.0);
  Array z = radius * cos(squeeze(u[1], {0}) * (2 * std::numbers::pi));
  return astype(z * scalar(scale, c, z.device()) + scalar(loc, c, z.device()), dtype);
}

Array bernoulli(const Array& p, const Array& key) {
  if (!p.valid()) fail("bernoulli", "operation on an empty Array handle");
  const Dtype c = compute_dtype(p.dtype());
  // P(u < p) = ceil(p 2^m) / 2^m: exact for every p of p's dtype on the grid.
  Array u = unit_uniform("bernoulli", {}, key, c, grid_bits(c), p);
  return less(u, astype(p, c));
}

Array categorical(const Array& logits, const Array& key, int axis) {
  if (!logits.valid()) fail("categorical", "operation on an empty Array handle");
  const int ax = normalize_axis("categorical", axis, logits.ndim());
  if (logits.shape(ax) == 0) {
    fail("categorical", "cannot draw from an empty axis (axis ", ax, " of shape ", shape_str(logits.shape()), ")");
  }
  const Dtype c = compute_dtype(logits.dtype());
  const int m = grid_bits(c);
  // The grid's midpoints lie in (0, 1), so the Gumbel noise -log(-log(u)) is finite.
  Array u = unit_uniform("categorical", {}, key, c, m, logits) + std::ldexp(1.0, -m - 1);
  Array gumbel = -log(-log(u));
  return argmax(astype(logits, c) + gumbel, ax);
}

}  // namespace random
}  // namespace kiln
