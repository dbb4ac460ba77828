// Registry ops for language models: affine quantization, quantized products, norms, RoPE and
// attention (include/kiln/nn.h).
#include "ops_registry.h"

namespace kpy {

namespace {

std::optional<kiln::Array> optional_array(const std::optional<ArrayLike>& a) {
  if (!a) return std::nullopt;
  return a->get();
}

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def(
      "quantize",
      [](const ArrayLike& w, int group_size, int bits) { return kiln::quantize(w.get(), group_size, bits); }, "w"_a,
      "group_size"_a = 64, "bits"_a = 4,
      "Affine quantization as MLX's: (packed uint32, scales, biases), w ~= scale*q + bias per group\n"
      "of group_size along the last axis.");
}

void bind_dequantize(nb::module_& m) {
  m.def(
      "dequantize",
      [](const ArrayLike& w, const ArrayLike& scales, const ArrayLike& biases, int group_size, int bits) {
        return kiln::dequantize(w.get(), scales.get(), biases.get(), group_size, bits);
      },
      "w"_a, "scales"_a, "biases"_a, "group_size"_a = 64, "bits"_a = 4, op_doc("dequantize"));
}

void bind_quantized_matmul(nb::module_& m) {
  m.def(
      "quantized_matmul",
      [](const ArrayLike& x, const ArrayLike& w, const ArrayLike& scales, const ArrayLike& biases, bool transpose,
         int group_size, int bits) {
        return kiln::quantized_matmul(x.get(), w.get(), scales.get(), biases.get(), transpose, group_size, bits);
      },
      "x"_a, "w"_a, "scales"_a, "biases"_a, "transpose"_a = true, "group_size"_a = 64, "bits"_a = 4,
      op_doc("quantized_matmul"));
}

void bind_rms_norm(nb::module_& m) {
  m.def(
      "rms_norm",
      [](const ArrayLike& x, const std::optional<ArrayLike>& weight, float eps) {
        return kiln::rms_norm(x.get(), optional_array(weight), eps);
      },
      "x"_a, "weight"_a = nb::none(), "eps"_a = 1e-5f, op_doc("rms_norm"));
}

void bind_layer_norm(nb::module_& m) {
  m.def(
      "layer_norm",
      [](const ArrayLike& x, const std::optional<ArrayLike>& weight, const std::optional<ArrayLike>& bias, float eps) {
        return kiln::layer_norm(x.get(), optional_array(weight), optional_array(bias), eps);
      },
      "x"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5f, op_doc("layer_norm"));
}

void bind_rope(nb::module_& m) {
  m.def(
      "rope",
      [](const ArrayLike& x, int dims, bool traditional, std::optional<float> base, float scale, nb::handle offset,
         const std::optional<ArrayLike>& freqs) {
        if (nb::isinstance<kiln::Array>(offset))
          return kiln::rope(x.get(), dims, traditional, base, scale, nb::cast<const kiln::Array&>(offset),
                            optional_array(freqs));
        return kiln::rope(x.get(), dims, traditional, base, scale, nb::cast<int64_t>(offset), optional_array(freqs));
      },
      "x"_a, "dims"_a, "traditional"_a = false, "base"_a = 10000.0f, "scale"_a = 1.0f, "offset"_a = 0,
      "freqs"_a = nb::none(),
      "Rotary position embedding over the first `dims` features of x [..., L, D]; row l is at\n"
      "position offset + l (offset: an int, or an int32 array of shape () or (B,)). traditional\n"
      "rotates adjacent pairs, else the two halves; base=None with freqs gives the frequencies.");
}

void bind_scaled_dot_product_attention(nb::module_& m) {
  m.def(
      "scaled_dot_product_attention",
      [](const ArrayLike& q, const ArrayLike& k, const ArrayLike& v, float scale, nb::handle mask, bool causal,
         const std::optional<ArrayLike>& key_lengths) {
        std::optional<kiln::Array> mk;
        if (PyUnicode_Check(mask.ptr())) {
          if (nb::cast<std::string>(mask) != "causal")
            kiln::fail("scaled_dot_product_attention", "mask is an array or \"causal\"");
          causal = true;
        } else if (!mask.is_none()) {
          mk = to_array_like(mask).get();
        }
        return kiln::scaled_dot_product_attention(q.get(), k.get(), v.get(), scale, mk, causal,
                                                  optional_array(key_lengths));
      },
      "q"_a, "k"_a, "v"_a, "scale"_a, "mask"_a.none() = nb::none(), "causal"_a = false, "key_lengths"_a = nb::none(),
      "softmax(q k^T * scale + mask) v with q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D] (grouped-query\n"
      "when Hq is a multiple of Hkv). mask: a boolean (true keeps) or additive array, or \"causal\".\n"
      "key_lengths: int32 [B], the keys that exist per batch row.");
}

}  // namespace kpy
