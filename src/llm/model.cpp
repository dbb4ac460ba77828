// The Llama family as one forward pass; its differences are configuration (model_config.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include "core/config.h"
#include "core/thread_device.h"
#include "llm/model_file_impl.h"
#include "llm/model_impl.h"
#include "ops/nn.h"
#include "ops/quant_tiles.h"

namespace kiln::llm {

namespace {

constexpr int64_t kMinCapacity = 256;
constexpr int64_t kMaxChunk = 512;

Array on(const Array& a, Device d) { return a.device() == d ? a : to(a, d); }

/* Dense weights in the compute dtype on the model's device; quantized weights expanded to dense
   when `expand` asks. Their scales and biases: float32 for an expansion (float16 would round every
   value) and for the CPU's exact products (which read float32 in place instead of converting on
   every call); else as stored (the GPU's products and the integer ones read 16-bit scales in place,
   a 4-bit decode step with groups of 32 then reads a sixth fewer bytes). */
Weight place(Weight w, Device d, Dtype dtype, bool expand, QmmActivations activations, bool product) {
  if (w.quantized() && (expand || (activations == QmmActivations::exact && d.type == Device::Type::cpu))) {
    w.scales = astype(*w.scales, float32);
    w.biases = astype(*w.biases, float32);
  }
  if (w.quantized() && expand) {
    w.w = dequantize(w.w, *w.scales, *w.biases, w.group_size, w.bits);
    w.scales.reset();
    w.biases.reset();
    w.group_size = w.bits = 0;
  }
  // A GPU's one-row product of 16-bit activations reads 4-bit weights in tile order at twice
  // the bandwidth of row order; the embedding table (rows gathered, not multiplied) stays in rows.
  if (product && w.quantized() && d.type != Device::Type::cpu && activations == QmmActivations::exact &&
      (dtype == bfloat16 || dtype == float16) && quant_tiles::fits(w.w.shape(0), w.w.shape(-1) * 8, w.bits) &&
      config::flag(config::Knob::llm_tile_order)) {
    std::tie(w.w, *w.scales, *w.biases) = quant_tiles::tiled(w.w, *w.scales, *w.biases, w.group_size);
    w.tiled = true;
  }
  if (w.quantized()) {
    w.w = on(w.w, d);
    w.scales = on(*w.scales, d);
    w.biases = on(*w.biases, d);
    if (w.tiled) eval({w.w, *w.scales, *w.biases});  // uploaded now: the host's permuted copy goes
  } else {
    if (w.w.dtype() != dtype) w.w = astype(w.w, dtype);
    w.w = on(w.w, d);
  }
  return w;
}

size_t bytes_of(const Weight& w) {
  size_t n = w.w.nbytes();
  if (w.quantized()) n += w.scales->nbytes() + w.biases->nbytes();
  return n;
}

Array silu(const Array& x) { return x * sigmoid(x); }

/* One layer's attention in a step: q [B, heads, L, head_dim], the new keys and values
   [B, kv_heads, L, head_dim] (q and the keys not yet rotated), and the step's caches (session
   b's keys of the layer at key_slot(b), its values `layers` later), which the attention replaces
   with the updated ones. */
struct LayerAttention {
  const ModelConfig& c;
  const Array &q, &k, &v, &positions;
  const CacheRope& rope;
  std::vector<Array>& caches;
  size_t layers, layer;
  float scale;

  Array rotate(const Array& a, const Array& pos) const {
    return kiln::rope(a, rope.dims, rope.traditional, rope.base, rope.scale, pos, rope.freqs);
  }

  int64_t batch() const { return q.shape(0); }
  int64_t length() const { return q.shape(2); }
  size_t key_slot(int64_t b) const { return static_cast<size_t>(b) * 2 * layers + layer; }

  /* A session at a time (models with a sliding window): each writes its keys at its own position
     and attends over the keys of its cache still in the window. */
  Array each() {
    const int64_t B = batch(), L = length();
    std::vector<Array> attended;
    for (int64_t b = 0; b < B; ++b) {
      auto row = [&](const Array& a) { return B == 1 ? a : slice(a, {{b, b + 1}}); };
      Array pos = slice(positions, {{b, b + 1}});
      Array& kc = caches[key_slot(b)];
      Array& vc = caches[key_slot(b) + layers];
      kc = slice_update(kc, rotate(row(k), pos), pos, {2});
      vc = slice_update(vc, row(v), pos, {2});
      std::optional<Array> window;
      if (c.sliding_window > 0) {  // key j is seen from position p when p - window < j (causal: j <= p)
        const Array query_pos = reshape(pos + on(arange(L, int32), pos.device()), {1, 1, L, 1});
        window = greater(reshape(on(arange(kc.shape(2), int32), pos.device()), {1, 1, 1, kc.shape(2)}),
                         query_pos - static_cast<int32_t>(c.sliding_window));
      }
      attended.push_back(scaled_dot_product_attention(rotate(row(q), pos), kc, vc, scale, window, L > 1,
                                                      pos + static_cast<int32_t>(L)));
    }
    return B == 1 ? attended[0] : concatenate(attended, 0);
  }

  /* Every session at once: one cache_attention (rope, cache writes and attention) for each
     capacity of the sessions' caches (a batched op takes caches of one shape; usually all share one). */
  Array batched() {
    const int64_t L = length();
    std::map<int64_t, std::vector<int32_t>> groups;  // capacity -> its sessions, in order
    for (int64_t b = 0; b < batch(); ++b) groups[caches[key_slot(b)].shape(2)].push_back(static_cast<int32_t>(b));
    std::vector<Array> parts;
    std::vector<int32_t> order;  // the sessions of parts' rows
    for (const auto& [capacity, rows] : groups) {
      const Array index = on(array(rows, {static_cast<int64_t>(rows.size())}), q.device());
      auto pick = [&](const Array& a) { return groups.size() == 1 ? a : take(a, index, 0); };
      std::vector<Array> group_caches;  // keys, then values
      for (size_t kind = 0; kind < 2; ++kind)
        for (int32_t b : rows) group_caches.push_back(caches[key_slot(b) + kind * layers]);
      const std::vector<Array> out =
          cache_attention(pick(q), pick(k), pick(v), pick(positions), group_caches, scale, L > 1, rope);
      for (size_t j = 0; j < rows.size(); ++j) {
        caches[key_slot(rows[j])] = out[1 + j];
        caches[key_slot(rows[j]) + layers] = out[1 + rows.size() + j];
      }
      parts.push_back(out[0]);
      order.insert(order.end(), rows.begin(), rows.end());
    }
    if (parts.size() == 1) return parts[0];
    std::vector<int32_t> where(order.size());  // each session's row of the parts
    for (size_t i = 0; i < order.size(); ++i) where[static_cast<size_t>(order[i])] = static_cast<int32_t>(i);
    return take(concatenate(parts, 0), on(array(where, {batch()}), q.device()), 0);
  }
};

}  // namespace

/* The projections stacked into one where asked and their weights allow (decode then reads x
   once and launches one product instead of several), else kept apart. */
Stacked stack(std::vector<Linear> parts, std::vector<int64_t> widths, bool wanted) {
  const Weight& w0 = parts[0].w;
  bool same = true, any_bias = false;
  for (const Linear& l : parts) {
    same =
        same && l.w.bits == w0.bits && l.w.group_size == w0.group_size && l.w.tiled == w0.tiled &&
        l.w.w.dtype() == w0.w.dtype() && l.activations == parts[0].activations &&
        (!l.w.quantized() || (l.w.scales->dtype() == w0.scales->dtype() && l.w.biases->dtype() == w0.biases->dtype()));
    any_bias = any_bias || l.bias.has_value();
  }
  if (!same || parts.size() == 1 || !wanted) return {std::move(parts), std::move(widths)};
  auto rows = [&](auto field) {
    std::vector<Array> a;
    for (const Linear& l : parts) a.push_back(field(l));
    return concatenate(a, 0);
  };
  Linear l;
  l.w = w0;
  l.activations = parts[0].activations;
  l.w.w = rows([](const Linear& p) { return p.w.w; });
  if (w0.quantized()) {
    l.w.scales = rows([](const Linear& p) { return *p.w.scales; });
    l.w.biases = rows([](const Linear& p) { return *p.w.biases; });
  }
  if (any_bias) {
    std::vector<Array> b;
    for (size_t i = 0; i < parts.size(); ++i)
      b.push_back(parts[i].bias ? *parts[i].bias
                                : zeros({widths[i]}, parts[0].bias ? parts[0].bias->dtype() : w0.w.dtype()));
    l.bias = concatenate(b, 0);
  }
  return {{std::move(l)}, std::move(widths)};
}

std::vector<Array> Stacked::operator()(const Array& x) const {
  if (parts.size() > 1) {
    std::vector<Array> out;
    for (const Linear& l : parts) out.push_back(l(x));
    return out;
  }
  const Array y = parts[0](x);
  std::vector<Array> out;
  int64_t at = 0;
  for (int64_t w : widths) {
    Shape start(static_cast<size_t>(y.ndim()), 0), stop = y.shape();
    start.back() = at;
    stop.back() = at + w;
    out.push_back(slice(y, start, stop));
    at += w;
  }
  return out;
}

Array Linear::operator()(const Array& x) const {
  // On a GPU only decode products (up to kDecodeRows rows) round x to integers: the integer
  // kernel reads the weights once per tile of rows, while a prompt's float product runs on the tensor cores.
  QmmActivations act = activations;
  if (act != QmmActivations::exact && x.device().type != Device::Type::cpu && x.ndim() > 0 &&
      x.size() / std::max<int64_t>(x.shape().back(), 1) > kDecodeRows)
    act = QmmActivations::exact;
  Array y = w.tiled         ? quantized_matmul_tiled(x, w.w, *w.scales, *w.biases, w.group_size, act)
            : w.quantized() ? quantized_matmul(x, w.w, *w.scales, *w.biases, true, w.group_size, w.bits, act)
                            : matmul(x, transpose(w.w));
  return bias ? y + *bias : y;
}

std::shared_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  return load(ModelFile::open(path), options);
}

std::shared_ptr<Model> Model::load(std::shared_ptr<ModelFile> file, const LoadOptions& options) {
  if (options.dtype && *options.dtype != float32 && *options.dtype != float16 && *options.dtype != bfloat16)
    fail("llm", "the compute dtype must be float32, float16 or bfloat16, not ", dtype_name(*options.dtype));
  std::unique_ptr<Impl> impl = options.tensor_parallel == 1 ? Impl::load(std::move(file), options, {})
                                                            : load_tensor_parallel(std::move(file), options);
  return std::shared_ptr<Model>(new Model(std::move(impl)));
}

std::unique_ptr<Model::Impl> Model::Impl::load(std::shared_ptr<ModelFile> file, const LoadOptions& options,
                                               const distributed::Group& group) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.file = file;
  m.config = read_config(*file);
  m.group = group;
  m.local = m.config;  // this rank's heads and feed-forward columns (load_tensor_parallel checked that they divide)
  m.local.n_heads /= group.size();
  m.local.n_kv_heads /= group.size();
  m.local.ffn_dim /= group.size();
  m.device = options.device;
  m.dtype = options.dtype.value_or(m.device.type == Device::Type::cpu ? float32 : bfloat16);
  if (options.activations) {
    m.activations = *options.activations;
  } else {
    // auto: int16 on the CPU (integer products, answers as exact's; int8 parts from them at near
    // ties, as llama.cpp does), exact elsewhere (the GPU's kernels multiply x as it is).
    const bool cpu = m.device.type == Device::Type::cpu;
    m.activations = qmm_activations_named(config::choice(config::Knob::llm_activations))
                        .value_or(cpu ? QmmActivations::int16 : QmmActivations::exact);  // "auto": no such mode
  }
  const ModelConfig& c = m.config;

  std::vector<Array> to_eval;
  // split: this rank's output rows (0) or input columns (1) of the whole tensor, or all of it (-1).
  // product: a product's weights (not the embedding table, unless it is the output layer too).
  auto weight = [&](const std::string& name, int64_t rows, int64_t cols, int split = -1, bool product = true) {
    Weight w = file->weight(name);
    int64_t stored_cols = w.quantized() ? w.scales->shape(-1) * w.group_size : w.w.shape(-1);
    if (w.w.ndim() != 2 || w.w.shape(0) != rows || stored_cols != cols)
      throw Error(file->path() + ": tensor '" + name + "': expected shape (" + std::to_string(rows) + ", " +
                  std::to_string(cols) + ")");
    if (split >= 0) w = shard_weight(std::move(w), group, split, name);
    w = place(std::move(w), m.device, m.dtype, options.dequantize, m.activations, product);
    to_eval.push_back(w.w);
    if (w.quantized()) to_eval.insert(to_eval.end(), {*w.scales, *w.biases});
    m.weight_bytes += bytes_of(w);
    return w;
  };
  auto vec = [&](const std::string& name, int64_t n, bool split = false) {
    Weight w = file->weight(name);
    if (w.quantized() || w.w.ndim() != 1 || w.w.shape(0) != n)
      throw Error(file->path() + ": tensor '" + name + "': expected a vector of " + std::to_string(n));
    Array a = on(astype(split ? copy(distributed::shard(w.w, group, 0)) : w.w, m.dtype), m.device);
    to_eval.push_back(a);
    m.weight_bytes += a.nbytes();
    return a;
  };
  // A row-parallel layer's bias is on rank 0 alone: the all_sum after it adds it once.
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols, int split = -1) {
    Linear l{weight(name + ".weight", rows, cols, split), std::nullopt, m.activations};
    if (file->has_tensor(name + ".bias") && (split != 1 || group.rank() == 0))
      l.bias = vec(name + ".bias", rows, split == 0);
    return l;
  };

  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t ranks = group.size(), ffn_part = c.ffn_dim / ranks;  // this rank's columns of each
  const bool stacked = options.stack_projections.value_or(true);
  // The file keeps what it converted for later weight() calls; a stacked product is a copy, so
  // the file drops the parts (another model loading them converts them again).
  auto forget_parts = [&](const Stacked& st, const std::vector<std::string>& names) {
    if (st.parts.size() != 1) return;
    std::lock_guard<std::mutex> lock(file->impl_->mu);
    for (const auto& name : names) file->impl_->converted.erase(name + ".weight");
  };
  m.embedding = weight("token_embd.weight", c.vocab_size, c.d_model, -1, false);
  m.weight_bytes -= bytes_of(m.embedding);  // a step reads one row per token, not the table
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer l;
    l.attn_norm = vec(p + "attn_norm.weight", c.d_model);
    l.ffn_norm = vec(p + "ffn_norm.weight", c.d_model);
    if (c.qk_norm) {
      l.q_norm = vec(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = vec(p + "attn_k_norm.weight", c.head_dim);
    }
    l.qkv = stack({linear(p + "attn_q", q_dim, c.d_model, 0), linear(p + "attn_k", kv_dim, c.d_model, 0),
                   linear(p + "attn_v", kv_dim, c.d_model, 0)},
                  {q_dim / ranks, kv_dim / ranks, kv_dim / ranks}, stacked);
    forget_parts(l.qkv, {p + "attn_q", p + "attn_k", p + "attn_v"});
    l.o = linear(p + "attn_output", c.d_model, q_dim, 1);
    l.gate_up = stack({linear(p + "ffn_gate", c.ffn_dim, c.d_model, 0), linear(p + "ffn_up", c.ffn_dim, c.d_model, 0)},
                      {ffn_part, ffn_part}, stacked);
    forget_parts(l.gate_up, {p + "ffn_gate", p + "ffn_up"});
    l.down = linear(p + "ffn_down", c.d_model, c.ffn_dim, 1);
    for (Stacked* st : {&l.qkv, &l.gate_up}) {  // the stacked copies, not the parts, are what a step reads
      for (const Linear& part : st->parts) {
        to_eval.push_back(part.w.w);
        if (part.w.quantized()) to_eval.insert(to_eval.end(), {*part.w.scales, *part.w.biases});
        if (part.bias) to_eval.push_back(*part.bias);
      }
    }
    m.layers.push_back(std::move(l));
  }
  m.output_norm = vec("output_norm.weight", c.d_model);
  if (file->has_tensor("rope_freqs.weight")) {
    Array factors = astype(vec("rope_freqs.weight", c.rope_dims / 2), float32);
    Array exponents = arange(0.0, static_cast<double>(c.rope_dims), 2.0) / static_cast<float>(c.rope_dims);
    // On the rank's device: the default device may be another GPU.
    m.rope_freqs = on(power(array(c.rope_base), exponents), factors.device()) * factors;
    to_eval.push_back(*m.rope_freqs);
  }
  m.vocab_parallel = ranks > 1 && c.vocab_size % ranks == 0;  // else each rank holds the whole output layer
  if (c.tied_embeddings && m.vocab_parallel) {
    m.output = Linear{weight("token_embd.weight", c.vocab_size, c.d_model, 0), std::nullopt, m.activations};
  } else if (c.tied_embeddings) {
    m.output = Linear{m.embedding, std::nullopt, m.activations};
    m.weight_bytes += bytes_of(m.embedding);
  } else {
    m.output = linear("output", c.vocab_size, c.d_model, m.vocab_parallel ? 0 : -1);
  }
  eval(to_eval);

  const Impl* self = impl.get();
  m.last_logits = compile([self](const std::vector<Array>& in) { return self->forward(in, false); },
                          {.shapeless = false, .name = "llm_step"});
  m.all_logits = compile([self](const std::vector<Array>& in) { return self->forward(in, true); },
                         {.shapeless = false, .name = "llm_step_all"});
  return impl;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelConfig& Model::config() const { return impl_->config; }
const ModelFile& Model::file() const { return *impl_->file; }
Device Model::device() const { return impl_->device; }
Dtype Model::dtype() const { return impl_->dtype; }
size_t Model::weight_bytes() const { return impl_->weight_bytes; }
QmmActivations Model::activations() const { return impl_->activations; }
int Model::tensor_parallel() const { return impl_->group.size(); }

std::vector<Array> Model::Impl::forward(const std::vector<Array>& in, bool all_positions) const {
  const ModelConfig& c = local;
  // A row-parallel product holds this rank's part of the sum: the ranks add theirs. The residual
  // joins rank 0's part before the sum (in the product's epilogue), so no kernel adds it after.
  auto add_reduced = [&](const Array& residual, const Array& part) {
    if (group.size() == 1) return residual + part;
    return all_sum(group.rank() == 0 ? residual + part : part, group);
  };
  const Array& tokens = in[0];  // [B, L]
  const Array& positions = in[1];  // [B]
  const int64_t B = tokens.shape(0), L = tokens.shape(1);
  const size_t n = layers.size();
  std::vector<Array> caches(in.begin() + 2, in.end());  // per session: n keys, then n values

  Array ids = reshape(tokens, {B * L});
  // A quantized table is gathered quantized; only those rows expand, in float32 (float16 would round them).
  auto rows_f32 = [&](const Array& a) { return astype(take(a, ids, 0), float32); };
  Array x = embedding.quantized() ? dequantize(take(embedding.w, ids, 0), rows_f32(*embedding.scales),
                                               rows_f32(*embedding.biases), embedding.group_size, embedding.bits)
                                  : take(embedding.w, ids, 0);
  x = reshape(astype(x, dtype), {B, L, c.d_model});

  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const CacheRope rope{c.rope_dims, c.rope_traditional, rope_freqs ? std::nullopt : std::optional<float>(c.rope_base),
                       c.rope_scale, rope_freqs};
  auto heads = [&](const Array& y, int h) { return transpose(reshape(y, {B, L, h, c.head_dim}), {0, 2, 1, 3}); };
  for (size_t i = 0; i < n; ++i) {
    const Layer& l = layers[i];
    Array h = rms_norm(x, l.attn_norm, c.norm_eps);
    Array q, k, v;
    const int64_t qk_heads = int64_t{c.n_heads} + c.n_kv_heads, all_heads = qk_heads + c.n_kv_heads;
    if (l.qkv.parts.size() == 1) {  // q, k and v side by side in the stacked result
      const Array all = heads(l.qkv.parts[0](h), static_cast<int>(all_heads));
      q = slice(all, {{}, {0, c.n_heads}});
      k = slice(all, {{}, {c.n_heads, qk_heads}});
      v = slice(all, {{}, {qk_heads, all_heads}});
    } else {
      const std::vector<Array> qkv = l.qkv(h);
      q = heads(qkv[0], c.n_heads), k = heads(qkv[1], c.n_kv_heads), v = heads(qkv[2], c.n_kv_heads);
    }
    if (l.q_norm) {
      q = rms_norm(q, l.q_norm, c.norm_eps);
      k = rms_norm(k, l.k_norm, c.norm_eps);
    }

    // Without a sliding window the batched op takes every session: one launch a layer, not 3B.
    LayerAttention attention{c, q, k, v, positions, rope, caches, n, i, scale};
    Array o = c.sliding_window == 0 ? attention.batched() : attention.each();
    o = reshape(transpose(o, {0, 2, 1, 3}), {B, L, int64_t{c.n_heads} * c.head_dim});
    x = add_reduced(x, l.o(o));
    h = rms_norm(x, l.ffn_norm, c.norm_eps);
    const std::vector<Array> gate_up = l.gate_up(h);
    x = add_reduced(x, l.down(silu(gate_up[0]) * gate_up[1]));
  }
  if (!all_positions) x = slice(x, {{}, {L - 1, L}});
  x = rms_norm(x, output_norm, c.norm_eps);
  Array logits = output(x);
  if (vocab_parallel) logits = all_gather(logits, group, -1);  // each rank computed its vocabulary rows
  std::vector<Array> out{astype(reshape(logits, {-1, c.vocab_size}), float32)};
  out.insert(out.end(), caches.begin(), caches.end());
  return out;
}

Array Model::step(const std::vector<Session*>& sessions, const std::vector<std::vector<int32_t>>& tokens,
                  bool all_positions) const {
  const Impl& m = *impl_;
  if (sessions.empty()) fail("llm", "a step needs at least one session");
  if (tokens.size() != sessions.size())
    fail("llm", "a step got ", tokens.size(), " token lists for ", sessions.size(), " sessions");
  if (all_positions && sessions.size() != 1) fail("llm", "logits of every position are for one session");
  const size_t L = tokens[0].size();
  if (L == 0) fail("llm", "a step needs at least one token per session");
  std::vector<int32_t> flat, positions;
  for (size_t b = 0; b < sessions.size(); ++b) {
    if (&sessions[b]->model() != this) fail("llm", "session ", b, " belongs to another model");
    if (tokens[b].size() != L)
      fail("llm", "every session of a step appends the same number of tokens (", L, " and ", tokens[b].size(), ")");
    for (int32_t t : tokens[b])
      if (t < 0 || t >= m.config.vocab_size)
        fail("llm", "token id ", t, " is outside the vocabulary (", m.config.vocab_size, " tokens)");
    for (size_t a = 0; a < b; ++a)
      if (sessions[a] == sessions[b]) fail("llm", "session ", b, " appears twice in one step");
    sessions[b]->reserve(sessions[b]->position() + static_cast<int64_t>(L));
    flat.insert(flat.end(), tokens[b].begin(), tokens[b].end());
    positions.push_back(static_cast<int32_t>(sessions[b]->position()));
  }
  Array logits;
  try {
    logits = m.tp ? tensor_parallel_step(m, sessions, flat, positions, all_positions)
                  : m.run_step(sessions, flat, positions, all_positions);
  } catch (...) {
    // The caches were handed to the step and may be half written: the sessions start over.
    for (Session* s : sessions) s->clear();
    throw;
  }
  for (size_t b = 0; b < sessions.size(); ++b) sessions[b]->advance(tokens[b]);
  return logits;
}

Array Model::Impl::run_step(const std::vector<Session*>& sessions, const std::vector<int32_t>& flat,
                            const std::vector<int32_t>& positions, bool all_positions) const {
  const int64_t B = static_cast<int64_t>(sessions.size()), L = static_cast<int64_t>(flat.size()) / B;
  const size_t n = layers.size(), first = static_cast<size_t>(group.rank()) * n;  // this rank's cache slots
  // On the model's device before the call: a step with no uploads inside replays as one CUDA graph.
  std::vector<Array> in{on(array(flat, {B, L}), device), on(array(positions, {B}), device)};
  for (Session* s : sessions) {
    // Moved, not copied: the step's cache is then the only holder and is updated in place.
    for (size_t i = 0; i < n; ++i) in.push_back(std::move(s->cache_keys()[first + i]));
    for (size_t i = 0; i < n; ++i) in.push_back(std::move(s->cache_values()[first + i]));
  }
  std::vector<Array> out = (all_positions ? all_logits : last_logits)(in);
  in.clear();
  eval(out);
  for (size_t b = 0; b < sessions.size(); ++b) {
    for (size_t i = 0; i < n; ++i) {
      sessions[b]->cache_keys()[first + i] = out[1 + b * 2 * n + i];
      sessions[b]->cache_values()[first + i] = out[1 + b * 2 * n + n + i];
    }
  }
  return out[0];
}

std::vector<const Model::Impl*> Model::Impl::ranks() const {
  std::vector<const Impl*> all{this};
  if (tp) tensor_parallel_ranks(*tp, all);
  return all;
}

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) fail("llm", "a session needs a model");
}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

void Session::clear() {
  tokens_.clear();
  keys_.clear();
  values_.clear();
  capacity_ = 0;
}

void Session::truncate(int64_t n) {
  if (n < 0 || n > position()) fail("llm", "cannot truncate a session of ", position(), " tokens to ", n);
  tokens_.resize(static_cast<size_t>(n));
}

void Session::reserve(int64_t tokens) {
  const ModelConfig& c = model_->config();
  if (tokens > c.context_length)
    fail("llm", "the session would hold ", tokens, " tokens, past the model's context length ", c.context_length);
  if (tokens <= capacity_) return;
  int64_t cap = std::max(kMinCapacity, capacity_);
  while (cap < tokens) cap *= 2;
  cap = std::min(cap, c.context_length);
  const size_t n = static_cast<size_t>(c.n_layers);
  const std::vector<const Model::Impl*> ranks = model_->impl().ranks();  // each its heads, on its device
  keys_.resize(n * ranks.size());
  values_.resize(n * ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int heads = ranks[r]->local.n_kv_heads;
    const Shape shape{1, heads, cap, c.head_dim};
    const detail::ThreadDefaultDevice here(ranks[r]->device);  // the zeros are made on the rank's device
    auto grow = [&](Array& a) {
      Array fresh = copy(zeros(shape, model_->dtype()));
      if (a.valid()) fresh = slice_update(fresh, a, {0, 0, 0, 0}, {1, heads, capacity_, c.head_dim});
      a = to(fresh, ranks[r]->device);
    };
    for (size_t i = r * n; i < (r + 1) * n; ++i) {
      grow(keys_[i]);
      grow(values_[i]);
    }
  }
  std::vector<Array> all(keys_);
  all.insert(all.end(), values_.begin(), values_.end());
  eval(all);
  capacity_ = cap;
}

Array Session::append(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) fail("llm", "append needs at least one token");
  Array logits;
  size_t done = 0;
  while (done < tokens.size()) {
    // Chunks of powers of two, so a prompt of any length traces at most log2(512)+1 step shapes.
    size_t chunk = static_cast<size_t>(kMaxChunk);
    while (chunk > tokens.size() - done) chunk /= 2;
    std::vector<int32_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(done),
                              tokens.begin() + static_cast<std::ptrdiff_t>(done + chunk));
    logits = model_->step({this}, {part});
    done += chunk;
  }
  return reshape(logits, {model_->config().vocab_size});
}

}  // namespace kiln::llm
