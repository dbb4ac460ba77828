// C API: the language-model ops of kiln/nn.h.
#include "capi/capi.h"
#include "kiln/nn.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_quantize(kiln_array* packed, kiln_array* scales, kiln_array* biases, const kiln_array w, int group_size,
                  int bits) {
  return guard([&] {
    const char* fn = "kiln_quantize";
    check_out(fn, packed);
    check_out(fn, scales);
    check_out(fn, biases);
    auto [p, s, b] = quantize(get(fn, w), group_size, bits);
    put(packed, std::move(p));
    put(scales, std::move(s));
    put(biases, std::move(b));
  });
}

int kiln_dequantize(kiln_array* out, const kiln_array w, const kiln_array scales, const kiln_array biases,
                    int group_size, int bits) {
  return guard([&] {
    const char* fn = "kiln_dequantize";
    check_out(fn, out);
    put(out, dequantize(get(fn, w), get(fn, scales), get(fn, biases), group_size, bits));
  });
}

int kiln_quantized_matmul(kiln_array* out, const kiln_array x, const kiln_array w, const kiln_array scales,
                          const kiln_array biases, bool transpose, int group_size, int bits) {
  return guard([&] {
    const char* fn = "kiln_quantized_matmul";
    check_out(fn, out);
    put(out, quantized_matmul(get(fn, x), get(fn, w), get(fn, scales), get(fn, biases), transpose, group_size, bits));
  });
}

int kiln_rms_norm(kiln_array* out, const kiln_array x, const kiln_array weight, float eps) {
  return guard([&] {
    check_out("kiln_rms_norm", out);
    put(out, rms_norm(get("kiln_rms_norm", x), get_optional(weight), eps));
  });
}

int kiln_layer_norm(kiln_array* out, const kiln_array x, const kiln_array weight, const kiln_array bias, float eps) {
  return guard([&] {
    check_out("kiln_layer_norm", out);
    put(out, layer_norm(get("kiln_layer_norm", x), get_optional(weight), get_optional(bias), eps));
  });
}

int kiln_rope(kiln_array* out, const kiln_array x, int dims, bool traditional, float base, float scale,
              const kiln_array offset, const kiln_array freqs) {
  return guard([&] {
    const char* fn = "kiln_rope";
    check_out(fn, out);
    auto f = get_optional(freqs);
    put(out,
        rope(get(fn, x), dims, traditional, f ? std::nullopt : std::optional<float>(base), scale, get(fn, offset), f));
  });
}

int kiln_scaled_dot_product_attention(kiln_array* out, const kiln_array q, const kiln_array k, const kiln_array v,
                                      float scale, const kiln_array mask, bool causal, const kiln_array key_lengths) {
  return guard([&] {
    const char* fn = "kiln_scaled_dot_product_attention";
    check_out(fn, out);
    put(out, scaled_dot_product_attention(get(fn, q), get(fn, k), get(fn, v), scale, get_optional(mask), causal,
                                          get_optional(key_lengths)));
  });
}

int kiln_slice_update_at(kiln_array* out, const kiln_array a, const kiln_array update, const kiln_array start,
                         const int* axes, size_t naxes) {
  return guard([&] {
    const char* fn = "kiln_slice_update_at";
    check_out(fn, out);
    put(out, slice_update(get(fn, a), get(fn, update), get(fn, start), to_axes(fn, axes, naxes)));
  });
}

}  // extern "C"
