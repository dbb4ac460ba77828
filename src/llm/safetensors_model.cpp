// Hugging Face and MLX checkpoints in safetensors: shards mapped in place, config.json
// translated to GGUF's metadata keys, tensor names mapped to GGUF's, MLX-quantized
// weights (uint32 + scales + biases) presented as affine Weights.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/tensor.h"
#include "llm/model_file_impl.h"
#include "runtime/json.h"
#include "runtime/safetensors.h"

namespace kiln::llm {

namespace {

using runtime::Json;
constexpr const char* kTag = "safetensors";

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(kTag, "cannot read '", path, "'");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::string folder_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Hugging Face's Llama-family names to GGUF's; others stay as they are.
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kTop[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                             {"model.norm.weight", "output_norm.weight"},
                                                             {"lm_head.weight", "output.weight"}};
  static const std::pair<const char*, const char*> kLayer[] = {
      {"self_attn.q_proj", "attn_q"},          {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},          {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},     {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},           {"input_layernorm", "attn_norm"},
      {"post_attention_layernorm", "ffn_norm"}};
  for (const auto& [from, to] : kTop)
    if (hf == from) return to;
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return hf;
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return hf;
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  if (layer.find_first_not_of("0123456789") != std::string::npos) return hf;
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    const size_t n = std::strlen(from);
    if (rest.compare(0, n, from) == 0 && rest.size() > n && rest[n] == '.')
      return "blk." + layer + "." + to + rest.substr(n);
  }
  return hf;
}

// The GGUF architecture for a Hugging Face one, and whether GGUF stores its Q and K rows
// permuted (llama.cpp's converter interleaves each head's two rotary halves for "llama").
struct Arch {
  std::string name;
  bool permute_qk = false;
};
Arch arch_of(const Json& config) {
  std::string hf;
  if (const Json* a = config.get("architectures");
      a && a->kind == Json::Kind::array && !a->array.empty() && a->array[0].kind == Json::Kind::string)
    hf = a->array[0].str;
  if (hf == "LlamaForCausalLM" || hf == "MistralForCausalLM") return {"llama", true};
  if (hf == "Qwen2ForCausalLM") return {"qwen2", false};
  if (hf == "Qwen3ForCausalLM") return {"qwen3", false};
  // No architectures (transformers needs only model_type): the same by model_type, so a Llama or
  // Mistral checkpoint is reordered as the rotation that read_config picks for "llama" expects.
  const Json* mt = config.get("model_type");
  const std::string type = mt && mt->kind == Json::Kind::string ? mt->str : "";
  if (type == "llama" || type == "mistral") return {"llama", true};
  return {type.empty() ? hf : type, false};
}

MetaValue meta_of(const Json& j) {
  MetaValue v;
  switch (j.kind) {
    case Json::Kind::integer: v.kind = MetaValue::Kind::integer, v.type = "integer", v.integer = j.integer; break;
    case Json::Kind::number: v.kind = MetaValue::Kind::real, v.type = "number", v.real = j.number; break;
    case Json::Kind::boolean: v.kind = MetaValue::Kind::boolean, v.type = "bool", v.boolean = j.boolean; break;
    case Json::Kind::string: v.kind = MetaValue::Kind::string, v.type = "string", v.str = j.str; break;
    default: v.kind = MetaValue::Kind::string, v.type = "JSON value"; break;  // only scalars are translated
  }
  return v;
}

// RoPE's settings: transformers 5 writes them as "rope_parameters" (rope_theta included, and
// rope_type "default" when unscaled); earlier versions, and most hub checkpoints, as a top-level
// "rope_theta" and "rope_scaling" (null when unscaled). Either object, or null.
const Json* rope_block(const Json& config) {
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (const Json* r = config.get(key); r && r->kind == Json::Kind::object) return r;
  return nullptr;
}

// config.json's Llama-family fields under GGUF's keys.
void translate_config(const Json& config, const Arch& arch, std::map<std::string, MetaValue>& meta) {
  const std::string a = arch.name + ".";
  meta["general.architecture"] = string_meta(arch.name);
  auto copy = [&](const char* from, const std::string& to) {
    const Json* v = config.get(from);
    if (v && v->kind != Json::Kind::null) meta[to] = meta_of(*v);
  };
  // In order: a later source of the same key wins (num_key_value_heads over num_attention_heads).
  static const std::pair<const char*, const char*> kFields[] = {{"num_hidden_layers", "block_count"},
                                                                {"hidden_size", "embedding_length"},
                                                                {"intermediate_size", "feed_forward_length"},
                                                                {"num_attention_heads", "attention.head_count"},
                                                                {"num_attention_heads", "attention.head_count_kv"},
                                                                {"num_key_value_heads", "attention.head_count_kv"},
                                                                {"max_position_embeddings", "context_length"},
                                                                {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
                                                                {"vocab_size", "vocab_size"},
                                                                {"head_dim", "attention.key_length"},
                                                                {"head_dim", "attention.value_length"},
                                                                {"head_dim", "rope.dimension_count"}};
  for (const auto& [from, to] : kFields) copy(from, a + to);
  const Json* hidden = config.get("hidden_size");
  const Json* heads = config.get("num_attention_heads");
  if (!meta.count(a + "rope.dimension_count") && hidden && heads && hidden->kind == Json::Kind::integer &&
      heads->kind == Json::Kind::integer && heads->integer > 0 && hidden->integer > 0) {
    MetaValue dim = meta_of(*hidden);  // GGUF files always say; Hugging Face's default is the head size
    dim.integer = hidden->integer / heads->integer;
    meta[a + "rope.dimension_count"] = dim;
  }
  copy("bos_token_id", "tokenizer.ggml.bos_token_id");
  copy("eos_token_id", "tokenizer.ggml.eos_token_id");
  if (const Json* eos = config.get("eos_token_id"); eos && eos->kind == Json::Kind::array && !eos->array.empty())
    meta["tokenizer.ggml.eos_token_id"] = meta_of(eos->array[0]);  // GGUF holds one end token
  meta[a + "rope.freq_base"] = real_meta(10000.0);  // Hugging Face's default
  const Json* rs = rope_block(config);
  if (const Json* theta = rs ? rs->get("rope_theta") : nullptr; theta && theta->kind != Json::Kind::null)
    meta[a + "rope.freq_base"] = meta_of(*theta);
  copy("rope_theta", a + "rope.freq_base");
  if (rs) {
    const Json* type = rs->get("rope_type") ? rs->get("rope_type") : rs->get("type");
    if (type && type->kind == Json::Kind::string && type->str != "default")
      meta[a + "rope.scaling.type"] = string_meta(type->str);
    if (const Json* f = rs->get("factor")) meta[a + "rope.scaling.factor"] = meta_of(*f);
    if (const Json* o = rs->get("original_max_position_embeddings"))
      meta[a + "rope.scaling.original_context_length"] = meta_of(*o);
  }
}

// Sliding-window attention (each query sees only the last `sliding_window` keys), as transformers
// decides which layers use it: config.json's "layer_types" when present (transformers 5 writes it
// for Qwen2 and Qwen3), else every layer for Mistral, else the layers from "max_window_layers" on
// when "use_sliding_window" is true (Qwen2 and Qwen3). kiln holds one window for all layers.
void translate_window(const std::string& path, const Json& config, const Arch& arch,
                      std::map<std::string, MetaValue>& meta) {
  const Json* window = config.get("sliding_window");
  if (!window || window->kind == Json::Kind::null) return;
  const Json* layers = config.get("num_hidden_layers");
  const int64_t n = layers && layers->kind == Json::Kind::integer ? layers->integer : 0;
  const Json* a = config.get("architectures");
  const Json* mt = config.get("model_type");
  const bool mistral = (a && a->kind == Json::Kind::array && !a->array.empty() &&
                        a->array[0].kind == Json::Kind::string && a->array[0].str == "MistralForCausalLM") ||
                       (mt && mt->kind == Json::Kind::string && mt->str == "mistral");
  int64_t sliding = 0;  // how many layers use the window
  if (const Json* types = config.get("layer_types"); types && types->kind == Json::Kind::array) {
    for (const Json& t : types->array) sliding += t.kind == Json::Kind::string && t.str == "sliding_attention";
  } else if (mistral) {
    sliding = n;
  } else if (const Json* use = config.get("use_sliding_window");
             use && use->kind == Json::Kind::boolean && use->boolean) {
    const Json* from = config.get("max_window_layers");
    sliding = from && from->kind == Json::Kind::integer ? std::max<int64_t>(0, n - from->integer) : n;
  }
  if (sliding == 0) return;
  if (window->kind != Json::Kind::integer || window->integer <= 0)
    fail(kTag, path, ": config.json: 'sliding_window' must be a positive integer");
  if (sliding != n)
    fail(kTag, path, ": config.json: sliding-window attention on ", sliding, " of ", n,
         " layers ('layer_types', 'use_sliding_window', 'max_window_layers'): kiln implements a window on all layers "
         "or none");
  meta[arch.name + ".attention.sliding_window"] = meta_of(*window);
}

double number(const std::string& path, const Json& obj, const char* key) {
  const Json* v = obj.get(key);
  if (!v || (v->kind != Json::Kind::number && v->kind != Json::Kind::integer))
    fail(kTag, path, ": config.json: rope scaling's '", key, "' is missing or not a number");
  return v->kind == Json::Kind::number ? v->number : static_cast<double>(v->integer);
}

// Llama 3's rope scaling as llama.cpp's converter stores it: a "rope_freqs.weight" tensor of
// per-frequency divisors (1 for high frequencies, `factor` for low ones, smooth between).
std::vector<float> llama3_rope_divisors(const std::string& path, const Json& rs, double base, int64_t dim) {
  const double factor = number(path, rs, "factor"), low = number(path, rs, "low_freq_factor"),
               high = number(path, rs, "high_freq_factor"),
               old_ctx = number(path, rs, "original_max_position_embeddings");
  if (!(factor > 0) || !(high > low) || !(old_ctx > 0))
    fail(kTag, path, ": config.json: rope_scaling values out of range");
  std::vector<float> out;
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
    const double wavelen = 2 * M_PI / freq;
    double d = 1;
    if (wavelen > old_ctx / low)
      d = factor;
    else if (wavelen >= old_ctx / high) {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      d = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(d));
  }
  return out;
}

struct Quantization {
  int group_size = 0, bits = 0;  // 0: not quantized
};

// MLX's quantization block: {"group_size", "bits", and per-module overrides: an object, or false}.
Quantization quantization_for(const std::string& path, const Json* q, const std::string& module) {
  if (!q) return {};
  const Json* spec = q;
  if (const Json* o = q->get(module)) {
    if (o->kind == Json::Kind::boolean && !o->boolean) return {};
    if (o->kind == Json::Kind::object) spec = o;
  }
  const Json* gs = spec->get("group_size");
  const Json* bits = spec->get("bits");
  if (!gs || !bits || gs->kind != Json::Kind::integer || bits->kind != Json::Kind::integer)
    fail(kTag, path, ": config.json: quantization for '", module, "' needs integer 'group_size' and 'bits'");
  if (gs->integer <= 0 || gs->integer > 4096 || bits->integer < 1 || bits->integer > 8)
    fail(kTag, path, ": config.json: quantization for '", module, "': group_size ", gs->integer, ", bits ",
         bits->integer, " are out of range");
  return {static_cast<int>(gs->integer), static_cast<int>(bits->integer)};
}

struct Source {
  std::shared_ptr<const detail::MappedFile> file;
  runtime::SafetensorsTensor t;
};

// Rows of `a` (its first axis after any leading ones) reordered so each head's two rotary
// halves interleave: new row 2i = old row i, new row 2i+1 = old row half+i, per head.
Array permute_heads(const std::string& path, const std::string& name, const Array& a, int64_t heads) {
  const int64_t rows = a.ndim() == 0 ? 0 : a.shape(0);
  if (heads <= 0 || heads > rows || rows % (2 * heads) != 0)
    fail(kTag, path, ": tensor '", name, "': ", rows, " rows cannot split into ", heads, " heads of two rotary halves");
  const size_t row_bytes = rows == 0 ? 0 : a.nbytes() / static_cast<size_t>(rows);
  const int64_t head = rows / heads, half = head / 2;
  detail::Tensor out(a.shape(), a.dtype());
  out.allocate();
  std::vector<uint8_t> src(a.nbytes());
  a.copy_to(src.data(), a.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t k = 0; k < 2; ++k)
        std::memcpy(dst + static_cast<size_t>(h * head + 2 * i + k) * row_bytes,
                    src.data() + static_cast<size_t>(h * head + k * half + i) * row_bytes, row_bytes);
  return Array::from_tensor(std::move(out), Device::cpu());
}

class Builder {
 public:
  explicit Builder(ModelFile::Impl& impl) : impl_(impl) {}

  // Adds the tensor `hf` (with its .scales and .biases when quantized) under its GGUF name.
  void add(const std::string& hf, const std::map<std::string, Source>& all, const Json* quant, const Arch& arch) {
    const std::string& path = impl_.path;
    const std::string name = gguf_name(hf);
    const Source& src = all.at(hf);
    TensorEntry e;
    e.info = TensorInfo{name, src.t.code, src.t.shape};
    const std::string base = hf.substr(0, hf.size() - std::strlen(".weight"));
    const bool is_weight = hf.size() > 7 && hf.compare(hf.size() - 7, 7, ".weight") == 0;
    auto scales = is_weight ? all.find(base + ".scales") : all.end();
    auto biases = is_weight ? all.find(base + ".biases") : all.end();
    if ((scales == all.end()) != (biases == all.end()))
      fail(kTag, path, ": tensor '", hf, "': quantized weights need both '.scales' and '.biases'");
    std::function<Weight()> load;
    if (scales != all.end()) {
      Quantization q = quantization_for(path, quant, base);
      if (!quant || q.bits == 0)
        fail(kTag, path, ": tensor '", hf, "' has scales and biases but config.json does not quantize it");
      const Shape in_shape = check_quantized(hf, src.t, scales->second.t, biases->second.t, q);
      e.info.shape = in_shape;
      e.info.type = detail::concat("affine", q.bits, "/g", q.group_size);
      Source w = src, s = scales->second, b = biases->second;
      load = [w, s, b, q] {
        return Weight{runtime::safetensors_array(w.file, w.t), runtime::safetensors_array(s.file, s.t),
                      runtime::safetensors_array(b.file, b.t), q.group_size, q.bits};
      };
    } else {
      Source w = src;
      load = [w] { return Weight{runtime::safetensors_array(w.file, w.t), {}, {}, 0, 0}; };
    }
    const int64_t heads = qk_heads(name, arch);
    if (heads > 0) {
      e.converts = true;
      e.load = [load, heads, path, name] {
        Weight w = load();
        w.w = permute_heads(path, name, w.w, heads);
        if (w.scales) w.scales = permute_heads(path, name, *w.scales, heads);
        if (w.biases) w.biases = permute_heads(path, name, *w.biases, heads);
        return w;
      };
    } else {
      e.load = std::move(load);
    }
    if (impl_.tensors.count(name)) fail(kTag, path, ": tensor '", hf, "': two tensors map to '", name, "'");
    impl_.tensors.emplace(name, std::move(e));
  }

 private:
  // The [.., out, in] shape of an MLX-quantized weight, after checking the three tensors agree.
  Shape check_quantized(const std::string& hf, const runtime::SafetensorsTensor& w, const runtime::SafetensorsTensor& s,
                        const runtime::SafetensorsTensor& b, Quantization q) {
    auto bad = [&](const auto&... msg) { fail(kTag, impl_.path, ": tensor '", hf, "': ", msg...); };
    if (w.dtype != uint32) bad("quantized weight is ", w.code, ", not U32");
    if (s.dtype != float16 && s.dtype != bfloat16 && s.dtype != float32)
      bad("scales are ", s.code, ", not a float type");
    if (b.dtype != s.dtype || b.shape != s.shape) bad("biases do not match the scales in dtype and shape");
    if (w.shape.empty() || w.shape.size() != s.shape.size()) bad("scales must have the weight's rank");
    for (size_t i = 0; i + 1 < w.shape.size(); ++i)
      if (w.shape[i] != s.shape[i])
        bad("scales ", detail::shape_str(s.shape), " do not match the weight ", detail::shape_str(w.shape));
    // Dimensions are at most 2^48 (parse_safetensors), so none of these products overflows.
    const int64_t in = s.shape.back() * q.group_size;
    if (static_cast<uint64_t>(w.shape.back()) * 32 != static_cast<uint64_t>(in) * static_cast<uint64_t>(q.bits))
      bad("packed width ", w.shape.back(), " is not ", s.shape.back(), " groups of ", q.group_size, " at ", q.bits,
          " bits");
    Shape logical = w.shape;
    logical.back() = in;
    return logical;
  }

  // GGUF's llama stores attn_q and attn_k rows with each head's rotary halves interleaved.
  int64_t qk_heads(const std::string& name, const Arch& arch) const {
    if (!arch.permute_qk) return 0;
    auto ends = [&](const char* tail) {
      const size_t n = std::strlen(tail);
      return name.size() > n && name.compare(name.size() - n, n, tail) == 0 && name.compare(0, 4, "blk.") == 0;
    };
    const std::string a = arch.name + ".attention.";
    auto heads = [&](const std::string& key) -> int64_t {
      auto it = impl_.meta.find(key);
      if (it == impl_.meta.end() || it->second.kind != MetaValue::Kind::integer)
        fail(kTag, impl_.path, ": config.json: '", key,
             "' (from num_attention_heads / num_key_value_heads) is needed to "
             "reorder '",
             name, "'");
      return it->second.integer;
    };
    if (ends(".attn_q.weight") || ends(".attn_q.bias")) return heads(a + "head_count");
    if (ends(".attn_k.weight") || ends(".attn_k.bias")) return heads(a + "head_count_kv");
    return 0;
  }

  ModelFile::Impl& impl_;
};

}  // namespace

std::unique_ptr<ModelFile::Impl> read_safetensors(const std::string& path,
                                                  const std::vector<std::shared_ptr<const detail::MappedFile>>& shards,
                                                  const std::string& config_json,
                                                  const std::map<std::string, std::string>* weight_map) {
  auto impl = std::make_unique<ModelFile::Impl>();
  impl->path = path;
  impl->format = "safetensors";
  impl->files = shards;
  Json config;
  config.kind = Json::Kind::object;
  if (!config_json.empty()) config = runtime::parse_json(config_json, path + "/config.json");
  if (config.kind != Json::Kind::object) fail(kTag, path, ": config.json is not a JSON object");
  const Arch arch = arch_of(config);
  if (!config_json.empty()) {
    translate_config(config, arch, impl->meta);
    translate_window(path, config, arch, impl->meta);
  }

  std::map<std::string, Source> all;
  for (const auto& shard : shards) {
    runtime::SafetensorsHeader h = runtime::parse_safetensors(*shard, kTag);
    for (auto& [k, v] : h.metadata) impl->meta.emplace("safetensors." + k, string_meta(v));
    for (auto& t : h.tensors) {
      if (all.count(t.name)) fail(kTag, shard->path(), ": tensor '", t.name, "' is also in another shard");
      if (weight_map) {
        auto it = weight_map->find(t.name);
        if (it == weight_map->end() || folder_of(shard->path()) + "/" + it->second != shard->path())
          fail(kTag, shard->path(), ": tensor '", t.name, "' is not where model.safetensors.index.json puts it");
      }
      std::string name = t.name;
      all.emplace(std::move(name), Source{shard, std::move(t)});
    }
  }
  if (weight_map)
    for (const auto& [name, file] : *weight_map)
      if (!all.count(name))
        fail(kTag, path, "/model.safetensors.index.json: tensor '", name, "' is not in its shard '", file, "'");
  const Json* quant = config.get("quantization") ? config.get("quantization") : config.get("quantization_config");
  if (quant && quant->kind != Json::Kind::object) fail(kTag, path, ": config.json: 'quantization' is not an object");
  Builder builder(*impl);
  for (const auto& [hf, src] : all) {
    const bool group_param =
        hf.size() > 7 && (hf.compare(hf.size() - 7, 7, ".scales") == 0 || hf.compare(hf.size() - 7, 7, ".biases") == 0);
    const std::string base = hf.substr(0, hf.size() - 7);
    if (group_param && all.count(base + ".weight")) continue;  // part of that weight
    builder.add(hf, all, quant, arch);
  }

  const Json* rs = rope_block(config);
  const Json* type = rs ? (rs->get("rope_type") ? rs->get("rope_type") : rs->get("type")) : nullptr;
  if (type && type->kind == Json::Kind::string && type->str == "llama3" && !impl->tensors.count("rope_freqs.weight")) {
    const std::string a = arch.name + ".";
    auto num = [&](const std::string& key) -> double {
      auto it = impl->meta.find(key);
      if (it == impl->meta.end() ||
          (it->second.kind != MetaValue::Kind::real && it->second.kind != MetaValue::Kind::integer))
        fail(kTag, path, ": config.json: '", key, "' (a number) is needed for llama3 rope scaling");
      return it->second.kind == MetaValue::Kind::real ? it->second.real : static_cast<double>(it->second.integer);
    };
    const double d = num(a + "rope.dimension_count");
    if (!(d >= 2 && d <= (1 << 20))) fail(kTag, path, ": config.json: rotary dimension ", d, " is out of range");
    const auto dim = static_cast<int64_t>(d);
    std::vector<float> divisors = llama3_rope_divisors(path, *rs, num(a + "rope.freq_base"), dim);
    TensorEntry e;
    e.info = TensorInfo{"rope_freqs.weight", "F32", Shape{dim / 2}};
    e.load = [divisors, dim] { return Weight{array(divisors, Shape{dim / 2}), {}, {}, 0, 0}; };
    impl->tensors.emplace("rope_freqs.weight", std::move(e));
  }
  return impl;
}

std::unique_ptr<ModelFile::Impl> open_safetensors(const std::string& path) {
  struct stat st {};
  const bool dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string folder = dir ? path : folder_of(path);
  const std::string config_path = folder + "/config.json";
  std::string config = exists(config_path) ? read_text(config_path) : "";
  if (dir && config.empty()) fail(kTag, path, ": no config.json in the folder");
  std::vector<std::shared_ptr<const detail::MappedFile>> shards;
  if (!dir) {
    shards.push_back(detail::MappedFile::open(path, kTag));
  } else if (exists(path + "/model.safetensors.index.json")) {
    const std::string index_path = path + "/model.safetensors.index.json";
    Json index = runtime::parse_json(read_text(index_path), index_path);
    const Json* map = index.kind == Json::Kind::object ? index.get("weight_map") : nullptr;
    if (!map || map->kind != Json::Kind::object) fail(kTag, index_path, ": no 'weight_map' object");
    std::map<std::string, std::string> weight_map;
    std::set<std::string> files;
    for (const auto& [tensor, file] : map->object) {
      if (file.kind != Json::Kind::string || file.str.empty() || file.str.find('/') != std::string::npos ||
          file.str == "." || file.str == "..")
        fail(kTag, index_path, ": tensor '", tensor, "': shard must be a file name in the folder");
      weight_map[tensor] = file.str;
      files.insert(file.str);
    }
    for (const auto& f : files) shards.push_back(detail::MappedFile::open(path + "/" + f, kTag));
    return read_safetensors(path, shards, config, &weight_map);
  } else if (exists(path + "/model.safetensors")) {
    shards.push_back(detail::MappedFile::open(path + "/model.safetensors", kTag));
  } else {
    fail(kTag, path, ": no model.safetensors or model.safetensors.index.json in the folder");
  }
  return read_safetensors(path, shards, config);
}

}  // namespace kiln::llm
