// The Llama-family forward pass: weights of each layer and the step function that compile traces.
#pragma once

#include <optional>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"

namespace kiln::llm {

ModelConfig read_config(const ModelFile& file);

/* A projection y = x W^T (+ b), W dense or in kiln's affine quantized format. */
struct Linear {
  Weight w;
  std::optional<Array> bias;
  QmmActivations activations = QmmActivations::exact;  // of a quantized w
  Array operator()(const Array& x) const;
};

/* Projections that read one input as one product: their weights stacked by rows (same
   quantization, or all dense), the result split by columns. One part when they cannot stack. */
struct Stacked {
  std::vector<Linear> parts;  // one stacked Linear, or the separate ones
  std::vector<int64_t> widths;  // output columns of each projection
  /* Each projection's result, in order. */
  std::vector<Array> operator()(const Array& x) const;
};

struct Layer {
  Array attn_norm, ffn_norm;
  std::optional<Array> q_norm, k_norm;  // Qwen3
  Stacked qkv, gate_up;
  Linear o, down;
};

struct Model::Impl {
  std::shared_ptr<ModelFile> file;
  ModelConfig config;
  Device device = Device::cpu();
  Dtype dtype = float32;
  QmmActivations activations = QmmActivations::exact;
  Weight embedding;  // [vocab, d_model]
  std::vector<Layer> layers;
  Array output_norm;
  std::optional<Array> rope_freqs;  // Llama 3: base^(2i/dims) times the file's rope_freqs factors
  Linear output;
  size_t weight_bytes = 0;
  // The step with logits of the last position of each session, and of every position.
  CompiledFunction last_logits, all_logits;

  /* Inputs: tokens [B, L] int32, positions [B] int32, then each session's keys and values per
     layer ([1, kv_heads, capacity, head_dim]: keys of every layer, then values). Outputs: logits,
     then the caches in the same order. */
  std::vector<Array> forward(const std::vector<Array>& inputs, bool all_positions) const;
};

}  // namespace kiln::llm
