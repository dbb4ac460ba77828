#include "llm/synthetic_model.h"

#include <cmath>

#include "backend/common/dispatch.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "llm/model_file_impl.h"

namespace kiln::llm {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: neighbouring counters give unrelated words
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t name_key(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ULL ^ mix(seed);  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return mix(h);
}

// Uniform in [-1, 1) for element i of the tensor keyed `key`.
float uniform(uint64_t key, int64_t i) {
  return static_cast<float>(mix(key + static_cast<uint64_t>(i)) >> 40) * 0x1p-23f - 1.0f;
}

// A host array of `shape` whose element i is f(i), filled in parallel.
template <class T, class F>
Array filled(const Shape& shape, F f) {
  detail::Tensor t(shape, dtype_of<T>::value);
  t.allocate();
  T* data = t.template data<T>();
  detail::parallel_for(t.size(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = f(i);
  });
  return Array::from_tensor(std::move(t), Device::cpu());
}

Weight dense(const Shape& shape, Dtype dtype, float spread, float center, uint64_t key) {
  Weight w;
  detail::dispatch_dtype(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      w.w = filled<T>(shape, [&](int64_t i) { return T(center + spread * uniform(key, i)); });
    }
  });
  return w;
}

// Codes anywhere in 0..15, scales near spread / 7.5 and biases -7.5 scales: values in about [-spread, spread].
Weight four_bit(const Shape& shape, int group_size, float spread, uint64_t key) {
  const int64_t rows = shape[0], cols = shape[1], groups = cols / group_size;
  Weight w;
  w.bits = 4;
  w.group_size = group_size;
  w.w = filled<uint32_t>({rows, cols / 8},
                         [&](int64_t i) { return static_cast<uint32_t>(mix(key + static_cast<uint64_t>(i))); });
  const uint64_t scale_key = mix(key ^ 0x5ca1e);
  auto scale = [&](int64_t i) { return spread / 7.5f * (1.0f + 0.25f * uniform(scale_key, i)); };
  w.scales = filled<float16_t>({rows, groups}, [&](int64_t i) { return float16_t(scale(i)); });
  w.biases =
      filled<float16_t>({rows, groups}, [&](int64_t i) { return float16_t(-7.5f * float(float16_t(scale(i)))); });
  return w;
}

}  // namespace

std::shared_ptr<ModelFile> synthetic_model(const SyntheticModel& s) {
  const std::string& type = s.type;
  if (type != "F32" && type != "F16" && type != "BF16" && type != "Q4")
    fail("llm", "synthetic model: type '", type, "' is not one of F32, F16, BF16, Q4");
  if (s.group_size != 32 && s.group_size != 64)
    fail("llm", "synthetic model: group size ", s.group_size, " is not 32 or 64");
  auto impl = std::make_unique<ModelFile::Impl>();
  impl->format = "synthetic";
  impl->path = "synthetic-" + type + "-" + std::to_string(s.n_layers) + "x" + std::to_string(s.d_model);
  impl->meta["general.architecture"] = string_meta("llama");
  impl->meta["llama.block_count"] = int_meta(s.n_layers);
  impl->meta["llama.embedding_length"] = int_meta(s.d_model);
  impl->meta["llama.feed_forward_length"] = int_meta(s.ffn_dim);
  impl->meta["llama.attention.head_count"] = int_meta(s.n_heads);
  impl->meta["llama.attention.head_count_kv"] = int_meta(s.n_kv_heads);
  impl->meta["llama.context_length"] = int_meta(s.context_length);
  if (s.head_dim > 0) impl->meta["llama.attention.key_length"] = int_meta(s.head_dim);

  const Dtype dtype = type == "F16" ? float16 : type == "BF16" ? bfloat16 : float32;
  const uint64_t seed = s.seed;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float spread) {
    const int group = s.group_size;
    const bool q4 = type == "Q4" && cols % group == 0;
    TensorEntry e;
    e.info = {name, q4 ? "affine4/g" + std::to_string(group) : type, {rows, cols}};
    e.load = [=] {
      return q4 ? four_bit({rows, cols}, group, spread, name_key(seed, name))
                : dense({rows, cols}, dtype, spread, 0, name_key(seed, name));
    };
    impl->tensors[name] = std::move(e);
  };
  auto norm = [&](const std::string& name) {
    TensorEntry e;
    e.info = {name, "F32", {s.d_model}};
    const int64_t n = s.d_model;
    e.load = [=] { return dense({n}, float32, 0.1f, 1.0f, name_key(seed, name)); };
    impl->tensors[name] = std::move(e);
  };
  // Spreads that keep each product's outputs near the size of its inputs: uniform in ±sqrt(3 / in).
  auto spread = [](int64_t in) { return std::sqrt(3.0f / static_cast<float>(in)); };
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.d_model / s.n_heads, q = int64_t{s.n_heads} * head_dim,
                kv = int64_t{s.n_kv_heads} * head_dim;
  matrix("token_embd.weight", s.vocab_size, s.d_model, 1.0f);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight");
    norm(p + "ffn_norm.weight");
    matrix(p + "attn_q.weight", q, s.d_model, spread(s.d_model));
    matrix(p + "attn_k.weight", kv, s.d_model, spread(s.d_model));
    matrix(p + "attn_v.weight", kv, s.d_model, spread(s.d_model));
    matrix(p + "attn_output.weight", s.d_model, q, spread(q));
    matrix(p + "ffn_gate.weight", s.ffn_dim, s.d_model, spread(s.d_model));
    matrix(p + "ffn_up.weight", s.ffn_dim, s.d_model, spread(s.d_model));
    matrix(p + "ffn_down.weight", s.d_model, s.ffn_dim, spread(s.ffn_dim));
  }
  norm("output_norm.weight");
  if (!s.tied_embeddings) matrix("output.weight", s.vocab_size, s.d_model, spread(s.d_model));
  return std::make_shared<ModelFile>(std::move(impl));
}

}  // namespace kiln::llm
