// Primitives for language models (include/kiln/nn.h): quantization, quantized
// products, norms, rotary embeddings, attention, the dynamic cache update and the batched
// step's attention over each session's caches.
// Shape rules live in ops/nn.cpp, CPU kernels in backend/cpu/{quantized,norms,
// rope,attention}.cpp.
#pragma once

#include <memory>
#include <optional>

#include "kiln/nn.h"
#include "ops/primitive.h"

namespace kiln {

/* Affine quantization parameters shared by the quantized primitives. */
struct QuantParams {
  int group_size = 64;
  int bits = 4;
  bool tiled = false;  // transposed 4-bit weights in tile order (ops/quant_tiles.h)
  bool operator==(const QuantParams&) const = default;
};
/* Throws [op] errors for a group size other than 32/64/128 or bits outside {2,3,4,5,6,8}. */
void check_quant_params(const char* op, const QuantParams& q);

/* The quantized primitives' parameters, identity and printing. */
class QuantizedPrimitive : public Primitive {
 public:
  QuantizedPrimitive(OpKind kind, QuantParams q) : Primitive(kind), q_(q) {}
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  const QuantParams& params() const { return q_; }

 protected:
  QuantParams q_;
};

/* w [.., K] -> (packed uint32 [.., K*bits/32], scales [.., K/group], biases [.., K/group]). */
class Quantize : public QuantizedPrimitive {
 public:
  explicit Quantize(QuantParams q) : QuantizedPrimitive(OpKind::Quantize, q) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
};

/* Inputs (packed, scales, biases) -> values [.., K] in the dtype of scales. */
class Dequantize : public QuantizedPrimitive {
 public:
  explicit Dequantize(QuantParams q) : QuantizedPrimitive(OpKind::Dequantize, q) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
};

/* quantized_matmul (transposed) of 4-bit weights in tile order (ops/quant_tiles.h), which the
   GPU's one-row decode product reads as contiguous runs; models on a GPU hold them so. */
Array quantized_matmul_tiled(const Array& x, const Array& w, const Array& scales, const Array& biases, int group_size,
                             QmmActivations activations = QmmActivations::exact);

/* Rows of x that a quantized product takes as decode (both backends); more are a prefill. */
constexpr int64_t kDecodeRows = 8;

/* Inputs (x [.., M, K], packed, scales, biases): x @ dequantize(w)^T (transpose, w [N, K])
   or x @ dequantize(w) (w [K, N]); the weights are 2-D, the result has x's dtype. With int8
   activations x is rounded to int8 blocks first (kiln/nn.h); that needs transpose. */
class QuantizedMatmul : public QuantizedPrimitive {
 public:
  QuantizedMatmul(QuantParams q, bool transpose, QmmActivations activations = QmmActivations::exact)
      : QuantizedPrimitive(OpKind::QuantizedMatmul, q), transpose_(transpose), activations_(activations) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool transpose() const { return transpose_; }
  QmmActivations activations() const { return activations_; }

 private:
  bool transpose_;
  QmmActivations activations_;
};

/* Inputs (x, [norm weight], packed, scales, biases, [addend]): quantized_matmul of
   rms_norm(x, weight, norm_eps) (or of x), plus the addend (of the product's shape and dtype)
   when there is one, as one node (the fuse_quantized_matmul pass): a GPU decode product
   normalizes its activation rows as it reads them and adds the residual as it writes; elsewhere
   the ops run one after the other. With `glu` (no addend) the product's columns are two halves,
   gate and up, and the node gives silu(gate) * up, rounded as those ops round. */
class FusedQuantizedMatmul : public QuantizedPrimitive {
 public:
  FusedQuantizedMatmul(QuantParams q, bool transpose, std::optional<float> norm_eps, bool addend, bool glu = false,
                       QmmActivations activations = QmmActivations::exact)
      : QuantizedPrimitive(OpKind::FusedQuantizedMatmul, q),
        transpose_(transpose),
        norm_eps_(norm_eps),
        addend_(addend),
        glu_(glu),
        activations_(activations) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool transpose() const { return transpose_; }
  std::optional<float> norm_eps() const { return norm_eps_; }
  bool addend() const { return addend_; }
  bool glu() const { return glu_; }
  QmmActivations activations() const { return activations_; }
  /* Where the packed weights are among the inputs (after x and the norm weight). */
  size_t packed_at() const { return norm_eps_ ? 2 : 1; }

 private:
  bool transpose_;
  std::optional<float> norm_eps_;
  bool addend_, glu_;
  QmmActivations activations_;
};

/* Inputs (x, [weight]): RMS normalization over the last axis. */
class RmsNorm : public Primitive {
 public:
  RmsNorm(float eps, bool has_weight) : Primitive(OpKind::RmsNorm), eps_(eps), has_weight_(has_weight) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  float eps() const { return eps_; }
  bool has_weight() const { return has_weight_; }

 private:
  float eps_;
  bool has_weight_;
};

/* Inputs (x, [weight], [bias]): layer normalization over the last axis. */
class LayerNorm : public Primitive {
 public:
  LayerNorm(float eps, bool has_weight, bool has_bias)
      : Primitive(OpKind::LayerNorm), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  float eps() const { return eps_; }
  bool has_weight() const { return has_weight_; }
  bool has_bias() const { return has_bias_; }

 private:
  float eps_;
  bool has_weight_, has_bias_;
};

/* Inputs (x [.., L, D], offset int32 [] or [B], [freqs [dims/2]]): rotary embedding. */
class Rope : public Primitive {
 public:
  Rope(int dims, bool traditional, std::optional<float> base, float scale, bool has_freqs)
      : Primitive(OpKind::Rope),
        dims_(dims),
        traditional_(traditional),
        base_(base),
        scale_(scale),
        has_freqs_(has_freqs) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  int dims() const { return dims_; }
  bool traditional() const { return traditional_; }
  std::optional<float> base() const { return base_; }
  float scale() const { return scale_; }
  bool has_freqs() const { return has_freqs_; }
  /* The op's inputs (shapes or tensors): x and its offset, then the frequencies where it takes them. */
  template <class T>
  std::vector<T> inputs(const T& x, const T& offset, const T& freqs) const {
    std::vector<T> in{x, offset};
    if (has_freqs_) in.push_back(freqs);
    return in;
  }

 private:
  int dims_;
  bool traditional_;
  std::optional<float> base_;
  float scale_;
  bool has_freqs_;
};

/* Inputs (q, k, v, [mask], [key_lengths]): fused attention (kiln/nn.h). */
class ScaledDotProductAttention : public Primitive {
 public:
  enum class Mask { none, keep, additive };  // keep: a boolean mask, true where a key is seen
  ScaledDotProductAttention(float scale, Mask mask, bool causal, bool has_key_lengths)
      : Primitive(OpKind::ScaledDotProductAttention),
        scale_(scale),
        mask_(mask),
        causal_(causal),
        has_key_lengths_(has_key_lengths) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  float scale() const { return scale_; }
  Mask mask() const { return mask_; }
  bool causal() const { return causal_; }
  bool has_key_lengths() const { return has_key_lengths_; }

 private:
  float scale_;
  Mask mask_;
  bool causal_, has_key_lengths_;
};

/* Inputs (a, update, start int32 [axes.size()]): a copy of a (or a itself, when donated)
   with update written at start along axes_ (0 on the other axes). */
class DynamicSliceUpdate : public Primitive {
 public:
  explicit DynamicSliceUpdate(std::vector<int> axes) : Primitive(OpKind::DynamicSliceUpdate), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool may_write_into(size_t input) const override { return input == 0; }
  const std::vector<int>& axes() const { return axes_; }
  /* Throws when start puts an update of shape u outside a (the CUDA kernel clamps instead). */
  void check_start(const Shape& a, const Shape& u, const detail::Tensor& start) const;

 private:
  std::vector<int> axes_;  // non-negative, distinct
};

// ---- The batched step's attention: B sessions, each with a key and a value cache of its own ----

/* Inputs (q [B, Hq, L, D], keys [B, Hkv, L, D], values [B, Hkv, L, Dv], positions int32 [B],
   [rope frequencies], caches: B key caches, then B value caches, each [1, Hkv, capacity, dims],
   each kind of one shape). One layer's attention of a step: with a rope, q and the keys are
   rotated at each batch row's positions (positions[b] + l, as rope's offset); each row's keys
   and values are written at its position along axis 2 of its own caches; then each row of q
   attends over the first positions[b] + L keys of its updated caches (clamped into them),
   causal or not. Outputs: [B, Hq, L, Dv], then the 2B caches in input order, each its input
   itself where that input arrives donated, else a copy. */
class CacheAttention : public Primitive {
 public:
  CacheAttention(float scale, bool causal, std::shared_ptr<Rope> rope)
      : Primitive(OpKind::CacheAttention), scale_(scale), causal_(causal), rope_(std::move(rope)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool may_write_into(size_t input) const override { return input >= first_cache(); }
  float scale() const { return scale_; }
  bool causal() const { return causal_; }
  const Rope* rope() const { return rope_.get(); }  // null: q and the keys as given
  /* Where the caches start among the inputs (after the frequencies where the rope takes them). */
  size_t first_cache() const { return rope_ && rope_->has_freqs() ? 5 : 4; }
  /* Throws when a position puts L = keys[2] rows outside caches of `capacity` (the CUDA kernels
     clamp instead). */
  static void check_positions(const Shape& keys, int64_t capacity, const detail::Tensor& positions);

 private:
  float scale_;
  bool causal_;
  std::shared_ptr<Rope> rope_;
};

/* rope's parameters (kiln/nn.h) for cache_attention: one of base and freqs. */
struct CacheRope {
  int dims = 0;
  bool traditional = false;
  std::optional<float> base;
  float scale = 1.0f;
  std::optional<Array> freqs;
};

/* CacheAttention (keys and values cast to the caches' dtype, which q must have): the attention
   [B, Hq, L, Dv], then the updated caches (B of keys, then B of values), each written in place
   where nothing else holds its input. */
std::vector<Array> cache_attention(const Array& q, const Array& keys, const Array& values, const Array& positions,
                                   const std::vector<Array>& caches, float scale, bool causal,
                                   const std::optional<CacheRope>& rope = std::nullopt);

}  // namespace kiln
