// Reads a Llama-family ModelConfig from a model file's metadata and tensor list.
#include "llm/model_impl.h"

#include <set>

namespace kiln::llm {

namespace {

// Architectures that are the Llama forward pass with other settings.
const std::set<std::string> kLlamaFamily = {"llama", "mistral", "qwen2", "qwen3", "smollm", "granite"};

[[noreturn]] void bad(const ModelFile& f, const std::string& key, const std::string& why) {
  throw Error(f.path() + ": " + key + ": " + why);
}

int positive_int(const ModelFile& f, const std::string& key, int64_t v) {
  if (v <= 0 || v > (int64_t{1} << 24)) bad(f, key, "must be in [1, 2^24], got " + std::to_string(v));
  return static_cast<int>(v);
}

}  // namespace

ModelConfig read_config(const ModelFile& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  if (!kLlamaFamily.count(c.arch))
    bad(f, "general.architecture", "'" + c.arch + "' is not supported (llama, mistral, qwen2, qwen3, smollm, granite)");
  auto key = [&](const char* k) { return c.arch + "." + k; };
  auto need = [&](const char* k) { return positive_int(f, key(k), f.get_int(key(k))); };
  auto maybe = [&](const char* k, int64_t fallback) {
    auto v = f.find_int(key(k));
    return positive_int(f, key(k), v ? *v : fallback);
  };

  c.n_layers = need("block_count");
  c.d_model = need("embedding_length");
  c.ffn_dim = need("feed_forward_length");
  c.n_heads = need("attention.head_count");
  c.n_kv_heads = maybe("attention.head_count_kv", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    bad(f, key("attention.head_count_kv"),
        std::to_string(c.n_kv_heads) + " does not divide the head count " + std::to_string(c.n_heads));
  c.head_dim = maybe("attention.key_length", c.d_model / c.n_heads);
  c.rope_dims = maybe("rope.dimension_count", c.head_dim);
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    bad(f, key("rope.dimension_count"), "must be even and at most the head size " + std::to_string(c.head_dim));
  c.context_length = maybe("context_length", 4096);
  if (auto w = f.find_int(key("attention.sliding_window")))
    c.sliding_window = positive_int(f, key("attention.sliding_window"), *w);
  if (auto v = f.find_float(key("rope.freq_base"))) c.rope_base = static_cast<float>(*v);
  if (auto v = f.find_float(key("attention.layer_norm_rms_epsilon"))) c.norm_eps = static_cast<float>(*v);
  if (auto type = f.find_string(key("rope.scaling.type")); type && *type == "llama3") {
    // Its per-frequency divisors are a tensor: GGUF files carry it, the safetensors reader makes it.
    if (!f.has_tensor("rope_freqs.weight"))
      bad(f, key("rope.scaling.type"), "'llama3' needs the tensor 'rope_freqs.weight', which the file lacks");
  } else if (type && *type != "none") {
    if (*type != "linear") bad(f, key("rope.scaling.type"), "'" + *type + "' is not supported (linear, llama3)");
    double factor = f.get_float(key("rope.scaling.factor"));
    if (!(factor > 0)) bad(f, key("rope.scaling.factor"), "must be positive");
    c.rope_scale = static_cast<float>(1.0 / factor);
  }

  // GGUF's llama conversion permutes q and k so that RoPE rotates adjacent pairs (the reader
  // puts a Hugging Face llama checkpoint's rows in the same order); Qwen rotates halves.
  c.rope_traditional = c.arch == "llama" || c.arch == "mistral" || c.arch == "smollm" || c.arch == "granite";
  c.qkv_bias = f.has_tensor("blk.0.attn_q.bias");
  c.qk_norm = f.has_tensor("blk.0.attn_q_norm.weight");
  c.tied_embeddings = !f.has_tensor("output.weight");

  if (!f.has_tensor("token_embd.weight")) bad(f, "tensor 'token_embd.weight'", "missing");
  // Its logical shape: the table itself is made (or converted) only when the model loads it.
  const Shape& embd = f.tensor_info("token_embd.weight").shape;
  c.vocab_size = positive_int(f, "tensor 'token_embd.weight' rows", embd.empty() ? 0 : embd[0]);
  return c;
}

}  // namespace kiln::llm
