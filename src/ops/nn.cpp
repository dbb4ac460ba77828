// Shape rules, identity and printing of the language-model primitives. Front ends
// (ops_nn.cpp) validate through output_shapes, so each message is written once and
// also guards shapeless replays.
#include "ops/nn.h"

#include <bit>

#include "ops/elementwise.h"
#include "ops/quant_tiles.h"

namespace kiln {

using detail::shape_str;

void check_quant_params(const char* op, const QuantParams& q) {
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128) {
    fail(op, "group_size must be 32, 64 or 128, got ", q.group_size);
  }
  if (q.bits < 2 || q.bits > 8 || q.bits == 7) fail(op, "bits must be 2, 3, 4, 5, 6 or 8, got ", q.bits);
}

namespace {

bool same_float(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

/* The unpacked length K of packed rows of P uint32 words, checked against the scales' G groups. */
int64_t checked_unpacked_length(const char* op, const QuantParams& q, const Shape& packed, const Shape& scales,
                                const Shape& biases) {
  if (packed.empty()) fail(op, "packed weights must have at least 1 dimension");
  if (scales != biases) fail(op, "scales ", shape_str(scales), " and biases ", shape_str(biases), " differ in shape");
  int64_t k = packed.back() * 32 / q.bits;
  bool ok = scales.size() == packed.size() && k == scales.back() * q.group_size;
  for (size_t i = 0; ok && i + 1 < packed.size(); ++i) ok = packed[i] == scales[i];
  if (!ok) {
    fail(op, "packed weights ", shape_str(packed), " hold ", k, " values per row at ", q.bits,
         " bits, which does not match scales ", shape_str(scales), " with groups of ", q.group_size);
  }
  return k;
}

}  // namespace

// ---- quantize / dequantize ---------------------------------------------------------
bool QuantizedPrimitive::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const QuantizedPrimitive&>(o).q_ == q_;
}
void QuantizedPrimitive::print(std::ostream& os) const {
  os << name() << "(group_size=" << q_.group_size << ",bits=" << q_.bits << (q_.tiled ? ",tiled" : "") << ")";
}

std::vector<Shape> Quantize::output_shapes(const std::vector<Shape>& in) const {
  const Shape& w = in[0];
  if (w.empty()) fail("quantize", "the array to quantize must have at least 1 dimension");
  if (w.back() % q_.group_size != 0) {
    fail("quantize", "the last axis (", w.back(), " in ", shape_str(w), ") must be a multiple of group_size ",
         q_.group_size);
  }
  Shape groups = with_last(w, w.back() / q_.group_size);
  return {with_last(w, w.back() * q_.bits / 32), groups, groups};
}

std::vector<Shape> Dequantize::output_shapes(const std::vector<Shape>& in) const {
  int64_t k = checked_unpacked_length("dequantize", q_, in[0], in[1], in[2]);
  return {with_last(in[0], k)};
}

// ---- quantized_matmul ----------------------------------------------------------------
std::vector<Shape> QuantizedMatmul::output_shapes(const std::vector<Shape>& in) const {
  const Shape& x = in[0];
  const Shape& w = in[1];
  if (x.empty()) fail("quantized_matmul", "x must have at least 1 dimension");
  if (w.size() != 2) fail("quantized_matmul", "the packed weights must be 2-D, got ", shape_str(w));
  if (activations_ != QmmActivations::exact && !transpose_)
    fail("quantized_matmul", kQmmActivationNames[static_cast<int>(activations_)],
         " activations need transpose (weights [N, K], groups along K)");
  int64_t k_packed = checked_unpacked_length("quantized_matmul", q_, w, in[2], in[3]);
  if (q_.tiled && (!transpose_ || !quant_tiles::fits(w[0], k_packed, q_.bits)))
    fail("quantized_matmul", "tile order needs transposed 4-bit weights of whole tiles (rows a multiple of ",
         quant_tiles::kRows, ", values of ", quant_tiles::kChunk, "), got ", shape_str(w), " at ", q_.bits, " bits");
  // transpose: w is [N, K] packed along K; else [K, N] packed along N.
  int64_t k = transpose_ ? k_packed : w[0];
  int64_t n = transpose_ ? w[0] : k_packed;
  if (x.back() != k) {
    fail("quantized_matmul", "inner dimensions differ: x ", shape_str(x), " against ", k, " (weights ", shape_str(w),
         transpose_ ? " transposed" : "", " at ", q_.bits, " bits)");
  }
  return {with_last(x, n)};
}

bool QuantizedMatmul::is_equivalent(const Primitive& o) const {
  if (!QuantizedPrimitive::is_equivalent(o)) return false;
  const auto& other = static_cast<const QuantizedMatmul&>(o);
  return other.transpose_ == transpose_ && other.activations_ == activations_;
}
void QuantizedMatmul::print(std::ostream& os) const {
  os << name() << "(group_size=" << q_.group_size << ",bits=" << q_.bits << (q_.tiled ? ",tiled" : "")
     << ",transpose=" << (transpose_ ? "true" : "false");
  if (activations_ != QmmActivations::exact)
    os << ",activations=" << kQmmActivationNames[static_cast<int>(activations_)];
  os << ")";
}

std::vector<Shape> FusedQuantizedMatmul::output_shapes(const std::vector<Shape>& in) const {
  const size_t w = packed_at();
  std::vector<Shape> out = QuantizedMatmul(q_, transpose_).output_shapes({in[0], in[w], in[w + 1], in[w + 2]});
  if (glu_) {
    if (out[0].back() % 2 != 0) fail(name(), "a gated product needs an even number of columns, not ", out[0].back());
    out[0].back() /= 2;
  }
  return out;
}
bool FusedQuantizedMatmul::is_equivalent(const Primitive& o) const {
  if (!QuantizedPrimitive::is_equivalent(o)) return false;
  auto& f = static_cast<const FusedQuantizedMatmul&>(o);
  return f.transpose_ == transpose_ && f.norm_eps_ == norm_eps_ && f.addend_ == addend_ && f.glu_ == glu_ &&
         f.activations_ == activations_;
}
void FusedQuantizedMatmul::print(std::ostream& os) const {
  os << name() << "(group_size=" << q_.group_size << ",bits=" << q_.bits << (q_.tiled ? ",tiled" : "")
     << ",transpose=" << (transpose_ ? "true" : "false");
  if (norm_eps_) os << ",norm_eps=" << *norm_eps_;
  os << ",addend=" << (addend_ ? "true" : "false");
  if (glu_) os << ",glu=true";
  if (activations_ != QmmActivations::exact)
    os << ",activations=" << kQmmActivationNames[static_cast<int>(activations_)];
  os << ")";
}

// ---- norms ------------------------------------------------------------------------------
namespace {
void check_norm_vector(const char* op, const char* what, const Shape& x, const Shape& v) {
  if (v.size() != 1 || v[0] != x.back()) {
    fail(op, what, " must be a vector as long as the last axis of x ", shape_str(x), ", got ", shape_str(v));
  }
}
}  // namespace

std::vector<Shape> RmsNorm::output_shapes(const std::vector<Shape>& in) const {
  if (in[0].empty()) fail("rms_norm", "x must have at least 1 dimension");
  if (has_weight_) check_norm_vector("rms_norm", "weight", in[0], in[1]);
  return {in[0]};
}

bool RmsNorm::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const RmsNorm&>(o);
  return same_float(b.eps_, eps_) && b.has_weight_ == has_weight_;
}
void RmsNorm::print(std::ostream& os) const {
  os << name() << "(eps=" << eps_ << (has_weight_ ? ",weight" : "") << ")";
}

std::vector<Shape> LayerNorm::output_shapes(const std::vector<Shape>& in) const {
  if (in[0].empty()) fail("layer_norm", "x must have at least 1 dimension");
  size_t next = 1;
  if (has_weight_) check_norm_vector("layer_norm", "weight", in[0], in[next++]);
  if (has_bias_) check_norm_vector("layer_norm", "bias", in[0], in[next]);
  return {in[0]};
}

bool LayerNorm::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const LayerNorm&>(o);
  return same_float(b.eps_, eps_) && b.has_weight_ == has_weight_ && b.has_bias_ == has_bias_;
}
void LayerNorm::print(std::ostream& os) const {
  os << name() << "(eps=" << eps_ << (has_weight_ ? ",weight" : "") << (has_bias_ ? ",bias" : "") << ")";
}

// ---- rope -------------------------------------------------------------------------------
std::vector<Shape> Rope::output_shapes(const std::vector<Shape>& in) const {
  const Shape& x = in[0];
  if (x.size() < 2) fail("rope", "x must have at least 2 dimensions [..., L, D], got ", shape_str(x));
  if (dims_ <= 0 || dims_ % 2 != 0 || dims_ > x.back()) {
    fail("rope", "dims must be even, positive and at most the last axis of x ", shape_str(x), ", got ", dims_);
  }
  const Shape& off = in[1];
  if (off.size() > 1 || (off.size() == 1 && (x.size() < 3 || off[0] != x[0]))) {
    fail("rope", "offset must be a scalar or hold one position per batch row (x ", shape_str(x), "), got shape ",
         shape_str(off));
  }
  if (has_freqs_ && (in[2].size() != 1 || in[2][0] != dims_ / 2)) {
    fail("rope", "freqs must be a vector of dims/2 = ", dims_ / 2, " values, got shape ", shape_str(in[2]));
  }
  return {x};
}

bool Rope::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const Rope&>(o);
  bool same_base = b.base_.has_value() == base_.has_value() && (!base_ || same_float(*b.base_, *base_));
  return b.dims_ == dims_ && b.traditional_ == traditional_ && same_base && same_float(b.scale_, scale_) &&
         b.has_freqs_ == has_freqs_;
}
void Rope::print(std::ostream& os) const {
  os << name() << "(dims=" << dims_ << (traditional_ ? ",traditional" : "");
  if (base_) os << ",base=" << *base_;
  os << ",scale=" << scale_ << (has_freqs_ ? ",freqs" : "") << ")";
}

// ---- scaled_dot_product_attention ---------------------------------------------------------
std::vector<Shape> ScaledDotProductAttention::output_shapes(const std::vector<Shape>& in) const {
  const char* op = "scaled_dot_product_attention";
  const Shape &q = in[0], &k = in[1], &v = in[2];
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) {
    fail(op, "q, k and v must be 4-D [B, H, L, D], got ", shape_str(q), ", ", shape_str(k), ", ", shape_str(v));
  }
  if (k[0] != q[0] || v[0] != q[0] || k[3] != q[3] || v[1] != k[1] || v[2] != k[2]) {
    fail(op, "shapes do not agree: q ", shape_str(q), ", k ", shape_str(k), ", v ", shape_str(v),
         " (batch and head size of q and k, heads and length of k and v must match)");
  }
  if (k[1] == 0 || q[1] % k[1] != 0) {
    fail(op, "the query heads (", q[1], ") must be a multiple of the key/value heads (", k[1], ")");
  }
  size_t next = 3;
  if (mask_ != Mask::none) {
    const Shape& m = in[next++];
    Shape scores{q[0], q[1], q[2], k[2]};
    bool ok = m.size() <= 4;
    for (size_t i = 0; ok && i < m.size(); ++i) ok = m[i] == 1 || m[i] == scores[4 - m.size() + i];
    if (!ok) fail(op, "mask of shape ", shape_str(m), " does not broadcast to the scores' shape ", shape_str(scores));
  }
  if (has_key_lengths_ && (in[next].size() != 1 || in[next][0] != q[0])) {
    fail(op, "key_lengths must hold one length per batch row (", q[0], "), got shape ", shape_str(in[next]));
  }
  return {Shape{q[0], q[1], q[2], v[3]}};
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const ScaledDotProductAttention&>(o);
  return same_float(b.scale_, scale_) && b.mask_ == mask_ && b.causal_ == causal_ &&
         b.has_key_lengths_ == has_key_lengths_;
}
void ScaledDotProductAttention::print(std::ostream& os) const {
  os << name() << "(scale=" << scale_
     << (mask_ == Mask::keep       ? ",mask=keep"
         : mask_ == Mask::additive ? ",mask=add"
                                   : "")
     << (causal_ ? ",causal" : "") << (has_key_lengths_ ? ",key_lengths" : "") << ")";
}

// ---- dynamic slice_update -------------------------------------------------------------------
std::vector<Shape> DynamicSliceUpdate::output_shapes(const std::vector<Shape>& in) const {
  const Shape &a = in[0], &u = in[1], &start = in[2];
  if (u.size() != a.size()) {
    fail("slice_update", "the update of shape ", shape_str(u), " must have the rank of the array ", shape_str(a));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (u[i] > a[i]) fail("slice_update", "the update of shape ", shape_str(u), " does not fit in ", shape_str(a));
  }
  for (int ax : axes_) {
    if (ax < 0 || static_cast<size_t>(ax) >= a.size()) {
      fail("slice_update", "axis ", ax, " is out of range for an array of rank ", a.size());
    }
  }
  if (start.size() != 1 || start[0] != static_cast<int64_t>(axes_.size())) {
    fail("slice_update", "start must be a vector of one index per axis (", axes_.size(), "), got shape ",
         shape_str(start));
  }
  return {a};
}

bool DynamicSliceUpdate::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const DynamicSliceUpdate&>(o).axes_ == axes_;
}
void DynamicSliceUpdate::print(std::ostream& os) const {
  os << name() << "(";
  for (size_t i = 0; i < axes_.size(); ++i) os << (i ? "," : "") << axes_[i];
  os << ")";
}

// ---- the batched decode step ----------------------------------------------------------------
namespace {

/* Checks the caches at in[first..]: 2 * batch of them, B of keys, then B of values, each
   [1, heads, capacity, dims] with one shape per kind, keys and values of the same heads and
   capacity. Returns a key cache's shape and a value cache's. */
std::pair<Shape, Shape> check_caches(const char* op, const std::vector<Shape>& in, size_t first, int64_t batch) {
  if (batch < 1) fail(op, "needs at least one batch row");
  const size_t given = in.size() - first, want = 2 * static_cast<size_t>(batch);
  if (given != want) {
    fail(op, "needs ", want, " caches (a key cache and a value cache for each of ", batch, " batch rows), got ", given);
  }
  const Shape &k = in[first], &v = in[first + want / 2];
  if (k.size() != 4 || k[0] != 1 || v.size() != 4 || v[0] != 1 || v[1] != k[1] || v[2] != k[2]) {
    fail(op, "caches must be [1, heads, capacity, dims] with the keys' heads and capacity, got keys ", shape_str(k),
         " and values ", shape_str(v));
  }
  for (size_t i = 0; i < want; ++i) {
    const Shape& first_of_kind = i < want / 2 ? k : v;
    if (in[first + i] != first_of_kind) {
      fail(op, "cache ", i, " has shape ", shape_str(in[first + i]), ", not ", shape_str(first_of_kind),
           " as the first of its kind (caches of other sizes go to separate calls)");
    }
  }
  return {k, v};
}

void check_lengths(const char* op, const char* what, const Shape& s, int64_t batch) {
  if (s.size() != 1 || s[0] != batch) {
    fail(op, what, " must hold one entry per batch row (", batch, "), got shape ", shape_str(s));
  }
}

}  // namespace

std::vector<Shape> CacheAttention::output_shapes(const std::vector<Shape>& in) const {
  const char* op = "cache_attention";
  const Shape &q = in[0], &keys = in[1], &values = in[2];
  if (q.size() != 4 || keys.size() != 4 || values.size() != 4) {
    fail(op, "q, keys and values must be 4-D [B, heads, L, dims], got ", shape_str(q), ", ", shape_str(keys), " and ",
         shape_str(values));
  }
  const auto [k, v] = check_caches(op, in, first_cache(), q[0]);
  if (keys[0] != q[0] || values[0] != q[0] || keys[2] != q[2] || values[2] != q[2] || keys[1] != k[1] ||
      values[1] != k[1] || keys[3] != k[3] || values[3] != v[3] || keys[2] > k[2]) {
    fail(op, "keys ", shape_str(keys), " and values ", shape_str(values), " do not fit q ", shape_str(q),
         " and caches ", shape_str(k), " and ", shape_str(v));
  }
  if (q[3] != k[3]) fail(op, "q ", shape_str(q), " and key caches ", shape_str(k), " differ in head size");
  if (q[1] % k[1] != 0) {
    fail(op, "the query heads (", q[1], ") must be a multiple of the caches' heads (", k[1], ")");
  }
  check_lengths(op, "positions", in[3], q[0]);
  if (rope_) rope_->output_shapes(rope_->inputs(q, in[3], in[first_cache() - 1]));  // freqs before the caches
  std::vector<Shape> out{Shape{q[0], q[1], q[2], v[3]}};
  out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(first_cache()), in.end());
  return out;
}

bool CacheAttention::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const CacheAttention&>(o);
  const bool same_rope = b.rope_ ? rope_ && rope_->is_equivalent(*b.rope_) : !rope_;
  return same_float(b.scale_, scale_) && b.causal_ == causal_ && same_rope;
}
void CacheAttention::print(std::ostream& os) const {
  os << name() << "(scale=" << scale_ << (causal_ ? ",causal" : "");
  if (rope_) {
    os << ",";
    rope_->print(os);
  }
  os << ")";
}

}  // namespace kiln
