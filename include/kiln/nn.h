// Ops for language models: affine quantization, quantized matrix products, norms,
// rotary embeddings, fused attention and in-place cache updates. Each is one
// primitive with its own kernel; like every op they validate, throw kiln::Error
// tagged with the op's name, and build a lazy node.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "kiln/array.h"

namespace kiln {

/* Affine quantization as MLX: per group of group_size (32, 64, 128) along the last axis, w ≈ scale*q + bias,
   bits in {2,3,4,5,6,8}; returns {packed uint32 [.., in*bits/32], scales [.., in/group_size], biases (same)},
   packed from the low bits up in MLX's order; scales/biases in w's dtype. */
std::tuple<Array, Array, Array> quantize(const Array& w, int group_size = 64, int bits = 4);
/* scale*q + bias for every packed value, in the dtype of scales. */
Array dequantize(const Array& w, const Array& scales, const Array& biases, int group_size = 64, int bits = 4);
/* What quantized_matmul multiplies the weights by.
   exact: x as it is, products in float32.
   int8: x rounded first, as llama.cpp rounds activations (its Q8_1 and Q8_0 blocks): each row of x
   per block of 32 along K becomes int8 codes q = round_half_even(x * (127 / a)) with a = max |x| of
   the block, scale d = a / 127 (all float32; a block of zeros has d = 0, a block holding a NaN or an
   infinity has d = NaN, which makes its row's outputs NaN). Then y = sum over blocks of
   scale_w * d * dot(code_w, q) + bias_w * d * sum(q), the dots in exact integers. Faster on the CPU
   (32 multiply-adds an instruction, and the weights are read at their packed size); needs
   transpose (groups along K).
   int16: the same with codes c = round_half_even(x * (16256 / a)), scale d = a / 16256, 2^-14 of the
   block's largest value where int8 has 2^-7: as close to exact as the products' float32 sums, at
   about twice int8's multiply-adds (each code is two int8 digits, c = 128 * high + low). */
enum class QmmActivations { exact, int8, int16 };
inline constexpr const char* kQmmActivationNames[] = {"exact", "int8", "int16"};  // by enum value
/* The mode of that name in kQmmActivationNames, or nothing. */
inline std::optional<QmmActivations> qmm_activations_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kQmmActivationNames); ++i)
    if (name == kQmmActivationNames[i]) return static_cast<QmmActivations>(i);
  return std::nullopt;
}

/* x @ dequantize(w).T when transpose (w is [out, in]), else x @ dequantize(w) (w is [in, out]).
   x float32, float16 or bfloat16, any leading batch axes; scales/biases float32, float16 or bfloat16.
   The result has x's dtype; products accumulate in float32. */
Array quantized_matmul(const Array& x, const Array& w, const Array& scales, const Array& biases, bool transpose = true,
                       int group_size = 64, int bits = 4, QmmActivations activations = QmmActivations::exact);

/* x * rsqrt(mean(x^2) + eps) * weight over the last axis, accumulated in float32, in x's dtype.
   weight (optional) is a vector as long as that axis. */
Array rms_norm(const Array& x, const std::optional<Array>& weight, float eps);
/* (x - mean) * rsqrt(var + eps) * weight + bias over the last axis, accumulated in float32. */
Array layer_norm(const Array& x, const std::optional<Array>& weight, const std::optional<Array>& bias, float eps);

/* RoPE over the last axis's first `dims` features of x [..., L, D]; position of row l is offset + l.
   traditional: rotate adjacent pairs (x[2i], x[2i+1]); else the halves (x[i], x[i+dims/2]).
   Frequencies: base^(-2i/dims), or the given freqs array [dims/2] (Llama 3 scaling) used as
   inv_freq = 1/freqs as MLX does. Positions are multiplied by scale. offset may be an int32 array
   of shape [] or [B] (one per batch row, B the first axis of x). Features past dims pass through. */
Array rope(const Array& x, int dims, bool traditional, std::optional<float> base, float scale, int64_t offset,
           const std::optional<Array>& freqs = std::nullopt);
Array rope(const Array& x, int dims, bool traditional, std::optional<float> base, float scale, const Array& offset,
           const std::optional<Array>& freqs = std::nullopt);

/* softmax(q k^T * scale + mask) v with q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D] (Hq a multiple of Hkv:
   grouped-query). mask: boolean (true = keep) or additive float, broadcastable to [B, Hq, Lq, Lk].
   causal: query i sees keys j <= i + (Lk_valid - Lq). key_lengths: optional int32 [B]: only the first
   key_lengths[b] keys of batch row b exist (the rest of a preallocated KV cache is never read);
   Lk_valid is key_lengths[b] when given, else Lk. One pass with online softmax, no materialized score
   matrix. A query that sees no key gives zeros. */
Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, float scale,
                                   const std::optional<Array>& mask = std::nullopt, bool causal = false,
                                   const std::optional<Array>& key_lengths = std::nullopt);

/* slice_update with a start given by an int32 array (one entry per axis in `axes`), so a compiled decode step
   writes position t of a KV cache without recompiling per step (as MLX's slice_update(a, u, start, axes)).
   The region has update's shape (update has a's rank, its dtype is cast to a's); a start that puts the
   region past the end of its axis is an error when the op runs. When nothing else holds a's buffer
   (eagerly, or inside a compiled function where a is dead after the op), only the region is written. */
Array slice_update(const Array& a, const Array& update, const Array& start, const std::vector<int>& axes);

}  // namespace kiln
