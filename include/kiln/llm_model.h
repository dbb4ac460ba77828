// kiln::llm::Model and Session: the Llama family over kiln's ops, one compiled call per step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/compile.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/nn.h"

namespace kiln::llm {

class ModelFile;

/* The shape and conventions of one Llama-family model (Llama 2/3, SmolLM2, Qwen2/3, Mistral),
   read from the model file's metadata. */
struct ModelConfig {
  std::string arch;  // general.architecture: "llama", "qwen2", "qwen3", ...
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn_dim = 0;
  int vocab_size = 0;
  int rope_dims = 0;
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;  // position multiplier (linear rope scaling: 1 / factor)
  bool rope_traditional = true;  // rotate adjacent pairs (GGUF "llama"), else halves (NeoX, Qwen, HF files)
  float norm_eps = 1e-5f;
  int64_t context_length = 4096;
  bool qkv_bias = false;  // Qwen2: biases on q, k and v
  bool qk_norm = false;  // Qwen3: RMSNorm over each head of q and k before RoPE
  bool tied_embeddings = false;  // the output projection is the token embedding
  int64_t sliding_window = 0;  // Mistral: each query attends to the last this many keys (0: all)
};

struct LoadOptions {
  Device device = Device::cpu();
  /* Activations and KV cache; weights keep their stored type. Unset: float32 on the CPU,
     bfloat16 on a GPU (whose one-row 4-bit products and fused attention take 16-bit x). */
  std::optional<Dtype> dtype{};
  /* Expand quantized weights to `dtype` at load (for checks against float references). */
  bool dequantize = false;
  /* Stack q/k/v and gate/up weights into one product each (fewer, larger launches). Unset: on.
     The file then drops its own conversions of the parts, so memory does not grow. */
  std::optional<bool> stack_projections{};  // {}: designated initializers may leave it out
  /* What quantized products multiply the weights by (kiln/nn.h). Unset: KILN_LLM_ACTIVATIONS,
     by default int16 on the CPU (integer products that answer as exact ones) and exact elsewhere;
     int8 (llama.cpp's rounding, fastest on the CPU) on request. */
  std::optional<QmmActivations> activations{};
  /* Tensor parallelism over this many ranks, a thread each (docs/distributed.md): q/k/v and
     gate/up split by heads and columns, o and down by rows with an all_sum after, the output layer
     by vocabulary rows (when they divide) with an all_gather after. On CUDA, rank r is on
     cuda:(device.index + r), over NCCL; on the CPU the ranks are threads. The model's head count,
     key/value head count and feed-forward size must divide; steps then run one at a time. */
  int tensor_parallel = 1;
};

/* Raw logits of one step: [rows, vocab] float32, one row per session in the step (the last
   position of each), or every position of one session when all_positions is asked for. */
struct StepResult {
  Array logits;
};

class Session;

/* A loaded model: weights mapped from the file and shared read-only by every session on every
   thread. Thread-safe: sessions on many threads run steps at once without a lock (a
   tensor-parallel model runs one step at a time, its ranks' threads at once). */
class Model : public std::enable_shared_from_this<Model> {
 public:
  static std::shared_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  static std::shared_ptr<Model> load(std::shared_ptr<ModelFile> file, const LoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const;
  const ModelFile& file() const;
  Device device() const;
  Dtype dtype() const;
  /* Bytes of weights one decode step reads (for roofline figures). */
  size_t weight_bytes() const;
  /* What the quantized products multiply (LoadOptions::activations, resolved). */
  QmmActivations activations() const;
  /* Ranks the model is split over (LoadOptions::tensor_parallel). */
  int tensor_parallel() const;

  /* Appends `tokens` to each session (tokens[i] to sessions[i], all of one length) and returns
     the logits after the last token of each: [sessions, vocab] float32, evaluated. With one session
     and all_positions, the logits of every appended token: [tokens, vocab]. Bad arguments throw
     before anything changes; a failure while the step runs clears its sessions. */
  Array step(const std::vector<Session*>& sessions, const std::vector<std::vector<int32_t>>& tokens,
             bool all_positions = false) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/* One conversation: its position and its KV cache (preallocated, grown in steps, written in
   place). A session is used by one thread at a time; different sessions may run on different
   threads at once. */
class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const Model& model() const { return *model_; }
  /* Tokens in the KV cache. */
  int64_t position() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  /* Forgets every token (the cache is kept for reuse). */
  void reset() { tokens_.clear(); }
  /* Keeps the first n tokens (a conversation that goes on from a shared prefix). */
  void truncate(int64_t n);
  /* Forgets every token and frees the cache (a step that fails leaves its sessions so). */
  void clear();
  /* Appends tokens (prefill in chunks) and returns the logits after the last one: [vocab] float32. */
  Array append(const std::vector<int32_t>& tokens);

  // Internal: the cache of each layer, [1, kv_heads, capacity, head_dim] each, used by Model::step
  // (of a tensor-parallel model: rank 0's layers, then rank 1's, ..., each its kv_heads / ranks).
  std::vector<Array>& cache_keys() { return keys_; }
  std::vector<Array>& cache_values() { return values_; }
  int64_t capacity() const { return capacity_; }
  void reserve(int64_t tokens);
  void advance(const std::vector<int32_t>& tokens) { tokens_.insert(tokens_.end(), tokens.begin(), tokens.end()); }

 private:
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  int64_t capacity_ = 0;
  std::vector<Array> keys_, values_;
};

}  // namespace kiln::llm
