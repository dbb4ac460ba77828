// The Llama-family forward pass: weights of each layer and the step function that compile traces.
#pragma once

#include <optional>
#include <vector>

#include "kiln/distributed.h"
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

struct TensorParallel;  // tensor_parallel.cpp

struct Model::Impl {
  std::shared_ptr<ModelFile> file;
  ModelConfig config;
  ModelConfig local;  // this rank's part: config with heads, kv heads and ffn_dim divided by the ranks
  distributed::Group group;  // the ranks (one without tensor parallelism)
  bool vocab_parallel = false;  // the output layer holds this rank's vocabulary rows
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
  /* This rank's part of a step (its compiled call on its device, over its caches: the sessions'
     cache slots [rank * layers, (rank + 1) * layers)), evaluated; writes the updated caches back
     and returns the logits. */
  Array run_step(const std::vector<Session*>& sessions, const std::vector<int32_t>& tokens,
                 const std::vector<int32_t>& positions, bool all_positions) const;
  /* One rank's Impl from the file: the whole model for a group of one, else this rank's shards. */
  static std::unique_ptr<Impl> load(std::shared_ptr<ModelFile> file, const LoadOptions& options,
                                    const distributed::Group& group);
  /* Every rank's Impl, this one (rank 0) first. */
  std::vector<const Impl*> ranks() const;

  std::shared_ptr<TensorParallel>
      tp;  // rank 0 of a tensor-parallel model: the other ranks and their threads (last: stops them first)
};

/* The model over options.tensor_parallel ranks: rank 0's Impl, holding the others (tensor_parallel.cpp). */
std::unique_ptr<Model::Impl> load_tensor_parallel(std::shared_ptr<ModelFile> file, const LoadOptions& options);
/* The rank's part of a weight along `axis` (0: output rows, 1: input columns, whole quantization
   groups), made contiguous; throws naming the tensor when it does not divide. */
Weight shard_weight(Weight w, const distributed::Group& group, int axis, const std::string& name);
/* Appends ranks 1.. of a tensor-parallel model to `all`. */
void tensor_parallel_ranks(const TensorParallel& tp, std::vector<const Model::Impl*>& all);
/* A tensor-parallel step: every rank's run_step on its own thread, one step at a time. */
Array tensor_parallel_step(const Model::Impl& rank0, const std::vector<Session*>& sessions,
                           const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                           bool all_positions);

}  // namespace kiln::llm
