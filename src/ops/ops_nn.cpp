// Front ends of the language-model ops (include/kiln/nn.h): argument and dtype
// checks, then one node each.
#include <climits>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/nn.h"

namespace kiln {

namespace {

void check_given(const char* op, std::initializer_list<const Array*> arrays) {
  for (const Array* a : arrays) {
    if (!a->valid()) fail(op, "operation on an empty Array handle");
  }
}

std::vector<Shape> shapes_of(const std::vector<Array>& in) {
  std::vector<Shape> shapes;
  for (auto& a : in) shapes.push_back(a.shape());
  return shapes;
}

bool is_activation_dtype(Dtype d) { return d == float32 || d == float16 || d == bfloat16; }

void check_activation(const char* op, const char* what, const Array& a) {
  if (!is_activation_dtype(a.dtype())) {
    fail(op, what, " must be float32, float16 or bfloat16, got ", dtype_name(a.dtype()));
  }
}

void check_packed(const char* op, const Array& w, const Array& scales, const Array& biases) {
  check_given(op, {&w, &scales, &biases});
  if (w.dtype() != uint32) fail(op, "packed weights must be uint32, got ", dtype_name(w.dtype()));
  check_activation(op, "scales", scales);
  check_activation(op, "biases", biases);
}

Array cast_to(const Array& a, Dtype d) { return a.dtype() == d ? a : astype(a, d); }

void check_float(const char* op, const Array& x) {
  if (!is_floating(x.dtype())) fail(op, "x must be a floating-point array, got ", dtype_name(x.dtype()));
}

void check_int_positions(const char* op, const char* what, const Array& a) {
  if (a.dtype() != int32) fail(op, what, " must be int32, got ", dtype_name(a.dtype()));
}

}  // namespace

std::tuple<Array, Array, Array> quantize(const Array& w, int group_size, int bits) {
  check_given("quantize", {&w});
  check_activation("quantize", "w", w);
  QuantParams q{group_size, bits};
  check_quant_params("quantize", q);
  auto prim = std::make_shared<Quantize>(q);
  auto shapes = prim->output_shapes({w.shape()});
  auto outs = Array::make(std::move(shapes), {uint32, w.dtype(), w.dtype()}, std::move(prim), {w});
  return {outs[0], outs[1], outs[2]};
}

Array dequantize(const Array& w, const Array& scales, const Array& biases, int group_size, int bits) {
  check_packed("dequantize", w, scales, biases);
  QuantParams q{group_size, bits};
  check_quant_params("dequantize", q);
  auto prim = std::make_shared<Dequantize>(q);
  Shape out = prim->output_shapes({w.shape(), scales.shape(), biases.shape()})[0];
  return Array::make(std::move(out), scales.dtype(), std::move(prim), {w, scales, cast_to(biases, scales.dtype())});
}

namespace {
Array quantized_product(const Array& x, const Array& w, const Array& scales, const Array& biases, bool transpose,
                        QuantParams q, QmmActivations activations) {
  const char* op = "quantized_matmul";
  check_given(op, {&x});
  check_activation(op, "x", x);
  check_packed(op, w, scales, biases);
  check_quant_params(op, q);
  auto prim = std::make_shared<QuantizedMatmul>(q, transpose, activations);
  Shape out = prim->output_shapes({x.shape(), w.shape(), scales.shape(), biases.shape()})[0];
  return Array::make(std::move(out), x.dtype(), std::move(prim), {x, w, scales, cast_to(biases, scales.dtype())});
}
}  // namespace

Array quantized_matmul(const Array& x, const Array& w, const Array& scales, const Array& biases, bool transpose,
                       int group_size, int bits, QmmActivations activations) {
  return quantized_product(x, w, scales, biases, transpose, {group_size, bits}, activations);
}

Array quantized_matmul_tiled(const Array& x, const Array& w, const Array& scales, const Array& biases, int group_size,
                             QmmActivations activations) {
  return quantized_product(x, w, scales, biases, true, {group_size, 4, true}, activations);
}

Array rms_norm(const Array& x, const std::optional<Array>& weight, float eps) {
  check_given("rms_norm", {&x});
  check_float("rms_norm", x);
  std::vector<Array> in{x};
  if (weight) {
    check_given("rms_norm", {&*weight});
    in.push_back(cast_to(*weight, x.dtype()));
  }
  auto prim = std::make_shared<RmsNorm>(eps, weight.has_value());
  prim->output_shapes(shapes_of(in));  // validates
  return Array::make(x.shape(), x.dtype(), std::move(prim), std::move(in));
}

Array layer_norm(const Array& x, const std::optional<Array>& weight, const std::optional<Array>& bias, float eps) {
  check_given("layer_norm", {&x});
  check_float("layer_norm", x);
  std::vector<Array> in{x};
  for (const auto* p : {&weight, &bias}) {
    if (!*p) continue;
    check_given("layer_norm", {&**p});
    in.push_back(cast_to(**p, x.dtype()));
  }
  auto prim = std::make_shared<LayerNorm>(eps, weight.has_value(), bias.has_value());
  prim->output_shapes(shapes_of(in));
  return Array::make(x.shape(), x.dtype(), std::move(prim), std::move(in));
}

Array rope(const Array& x, int dims, bool traditional, std::optional<float> base, float scale, int64_t offset,
           const std::optional<Array>& freqs) {
  if (offset < INT32_MIN || offset > INT32_MAX) fail("rope", "offset ", offset, " does not fit in int32");
  return rope(x, dims, traditional, base, scale, array(static_cast<int32_t>(offset)), freqs);
}

namespace {

/* rope's primitive for `op` (rope, or cache_attention's rope, named in its errors by `what`),
   the frequencies appended to `in` as float32 where given. */
std::shared_ptr<Rope> rope_primitive(const char* op, const char* what, int dims, bool traditional,
                                     std::optional<float> base, float scale, const std::optional<Array>& freqs,
                                     std::vector<Array>& in) {
  if (base.has_value() == freqs.has_value()) fail(op, "give ", what, "exactly one of base and freqs");
  if (freqs) {
    check_given(op, {&*freqs});
    in.push_back(cast_to(*freqs, float32));
  }
  return std::make_shared<Rope>(dims, traditional, base, scale, freqs.has_value());
}

}  // namespace

Array rope(const Array& x, int dims, bool traditional, std::optional<float> base, float scale, const Array& offset,
           const std::optional<Array>& freqs) {
  check_given("rope", {&x, &offset});
  check_float("rope", x);
  check_int_positions("rope", "offset", offset);
  std::vector<Array> in{x, offset};
  auto prim = rope_primitive("rope", "", dims, traditional, base, scale, freqs, in);
  prim->output_shapes(shapes_of(in));
  return Array::make(x.shape(), x.dtype(), std::move(prim), std::move(in));
}

Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, float scale,
                                   const std::optional<Array>& mask, bool causal,
                                   const std::optional<Array>& key_lengths) {
  const char* op = "scaled_dot_product_attention";
  check_given(op, {&q, &k, &v});
  check_activation(op, "q", q);
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    fail(op, "q, k and v must share a dtype, got ", dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ",
         dtype_name(v.dtype()));
  }
  using Mask = ScaledDotProductAttention::Mask;
  Mask kind = Mask::none;
  std::vector<Array> in{q, k, v};
  if (mask) {
    check_given(op, {&*mask});
    kind = mask->dtype() == bool_ ? Mask::keep : Mask::additive;
    if (kind == Mask::additive && !is_floating(mask->dtype())) {
      fail(op, "mask must be boolean or floating-point, got ", dtype_name(mask->dtype()));
    }
    in.push_back(kind == Mask::keep ? *mask : cast_to(*mask, q.dtype()));
  }
  if (key_lengths) {
    check_given(op, {&*key_lengths});
    check_int_positions(op, "key_lengths", *key_lengths);
    in.push_back(*key_lengths);
  }
  auto prim = std::make_shared<ScaledDotProductAttention>(scale, kind, causal, key_lengths.has_value());
  Shape out = prim->output_shapes(shapes_of(in))[0];
  return Array::make(std::move(out), q.dtype(), std::move(prim), std::move(in));
}

Array slice_update(const Array& a, const Array& update, const Array& start, const std::vector<int>& axes) {
  check_given("slice_update", {&a, &update, &start});
  check_int_positions("slice_update", "start", start);
  std::vector<int> norm;
  for (int ax : axes) {
    int n = ax < 0 ? ax + a.ndim() : ax;
    if (n < 0 || n >= a.ndim()) fail("slice_update", "axis ", ax, " is out of range for an array of rank ", a.ndim());
    for (int seen : norm) {
      if (seen == n) fail("slice_update", "axis ", ax, " is repeated");
    }
    norm.push_back(n);
  }
  auto prim = std::make_shared<DynamicSliceUpdate>(std::move(norm));
  prim->output_shapes({a.shape(), update.shape(), start.shape()});
  return Array::make(a.shape(), a.dtype(), std::move(prim), {a, cast_to(update, a.dtype()), start});
}

namespace {

/* At least one cache, every one in the first one's dtype. */
void check_caches(const char* op, const std::vector<Array>& caches) {
  if (caches.empty()) fail(op, "needs the caches of at least one batch row");
  for (size_t i = 0; i < caches.size(); ++i) {
    check_given(op, {&caches[i]});
    if (caches[i].dtype() != caches[0].dtype())
      fail(op, "cache ", i, " is ", dtype_name(caches[i].dtype()), ", not ", dtype_name(caches[0].dtype()),
           " as cache 0");
  }
}

}  // namespace

std::vector<Array> cache_attention(const Array& q, const Array& keys, const Array& values, const Array& positions,
                                   const std::vector<Array>& caches, float scale, bool causal,
                                   const std::optional<CacheRope>& rope) {
  const char* op = "cache_attention";
  check_given(op, {&q, &keys, &values, &positions});
  check_activation(op, "q", q);
  check_int_positions(op, "positions", positions);
  check_caches(op, caches);
  const Dtype d = caches[0].dtype();
  if (d != q.dtype())
    fail(op, "q and the caches must share a dtype, got ", dtype_name(q.dtype()), " and ", dtype_name(d));
  std::vector<Array> in{q, cast_to(keys, d), cast_to(values, d), positions};
  std::shared_ptr<Rope> rotation;
  if (rope)
    rotation = rope_primitive(op, "the rope ", rope->dims, rope->traditional, rope->base, rope->scale, rope->freqs, in);
  in.insert(in.end(), caches.begin(), caches.end());
  auto prim = std::make_shared<CacheAttention>(scale, causal, std::move(rotation));
  std::vector<Shape> out = prim->output_shapes(shapes_of(in));
  std::vector<Dtype> dtypes(out.size(), d);
  return Array::make(std::move(out), std::move(dtypes), std::move(prim), std::move(in));
}

}  // namespace kiln
