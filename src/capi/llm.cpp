// C API: language models, sessions, tokens and generation (include/kiln/c/kiln_llm.h).
#include <algorithm>
#include <cstring>

#include "capi/capi.h"
#include "kiln/c/kiln_llm.h"
#include "kiln/llm.h"

using namespace kiln;
using namespace kiln::capi;
using namespace kiln::llm;

struct kiln_llm_model_s {
  std::shared_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;  // none when the file has no tokenizer (a safetensors checkpoint)
};
struct kiln_llm_session_s {
  std::shared_ptr<const kiln_llm_model_s> owner;  // keeps the tokenizer alive with the model
  Session session;
};

namespace {

const kiln_llm_model_s& get_model(const char* fn, const kiln_llm_model m) {
  if (!m || !m->model) fail(fn, "null model handle");
  return *m;
}
// The model's tokenizer; a model file without one (token ids only) fails here, naming the call.
const Tokenizer& get_tokenizer(const char* fn, const kiln_llm_model_s& m) {
  if (!m.tokenizer)
    fail(fn, m.model->file().path(), " has no tokenizer (no tokenizer.ggml.tokens): only token ids work");
  return *m.tokenizer;
}
kiln_llm_session_s& get_session(const char* fn, kiln_llm_session s) {
  if (!s) fail(fn, "null session handle");
  return *s;
}
std::vector<int32_t> to_ids(const char* fn, const int32_t* ids, size_t n) {
  if (n && !ids) fail(fn, "null token pointer with ", n, " tokens");
  return std::vector<int32_t>(ids, ids + n);
}
SamplerOptions to_sampler(const kiln_llm_sampling& s) {
  return {s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, s.repeat_last_n, s.seed};
}
kiln_llm_sampling from_sampler(const SamplerOptions& d) {
  return {d.temperature, d.top_k, d.top_p, d.min_p, d.repetition_penalty, d.repeat_last_n, d.seed};
}
int32_t id_or_none(std::optional<TokenId> id) { return id ? *id : -1; }
kiln_llm_stop_reason stop_reason(const std::string& r) {
  if (r == "stop token") return KILN_LLM_STOP_TOKEN;
  if (r == "max tokens") return KILN_LLM_STOP_MAX_TOKENS;
  if (r == "context full") return KILN_LLM_STOP_CONTEXT_FULL;
  if (r == "callback") return KILN_LLM_STOP_CALLBACK;
  fail("kiln_llm_generate", "unknown stop reason '", r, "'");
}

// kiln_llm_activations is QmmActivations shifted by one, 0 leaving the choice to the knob.
static_assert(KILN_LLM_ACTIVATIONS_EXACT - 1 == static_cast<int>(QmmActivations::exact) &&
                  KILN_LLM_ACTIVATIONS_INT8 - 1 == static_cast<int>(QmmActivations::int8) &&
                  KILN_LLM_ACTIVATIONS_INT16 - 1 == static_cast<int>(QmmActivations::int16),
              "kiln_llm_activations and kiln::QmmActivations disagree");

int load(kiln_llm_model* out, const char* path, const kiln_llm_load_options& options, const char* fn) {
  return guard([&] {
    check_out(fn, out);
    if (!path) fail(fn, "null path");
    LoadOptions o;
    o.device = to_device(fn, options.device);
    if (options.dtype != KILN_LLM_DTYPE_AUTO) o.dtype = to_dtype(fn, options.dtype);
    const int act = enum_value(options.activations);
    if (act < KILN_LLM_ACTIVATIONS_DEFAULT || act > KILN_LLM_ACTIVATIONS_INT16)
      fail(fn, "invalid activations ", act, " (0 default, 1 exact, 2 int8, 3 int16)");
    if (act != KILN_LLM_ACTIVATIONS_DEFAULT) o.activations = static_cast<QmmActivations>(act - 1);
    o.tensor_parallel = options.tensor_parallel;
    auto model = Model::load(path, o);
    std::optional<Tokenizer> tok;
    const std::vector<std::string> keys = model->file().metadata_keys();  // sorted
    if (std::binary_search(keys.begin(), keys.end(), "tokenizer.ggml.tokens")) tok.emplace(model->file());
    *out = new kiln_llm_model_s{std::move(model), std::move(tok)};
  });
}

}  // namespace

extern "C" {

int kiln_llm_sampling_default(kiln_llm_sampling* out) {
  return guard([&] {
    check_out("kiln_llm_sampling_default", out);
    *out = from_sampler(SamplerOptions{});
  });
}

int kiln_llm_generate_options_default(kiln_llm_generate_options* out) {
  return guard([&] {
    check_out("kiln_llm_generate_options_default", out);
    GenerateOptions d;
    *out = {d.max_tokens, from_sampler(d.sampling), nullptr, 0};
  });
}

int kiln_llm_default_model_path(char** out) {
  return guard([&] {
    check_out("kiln_llm_default_model_path", out);
    *out = c_string(default_model_path());
  });
}

int kiln_llm_load_options_default(kiln_llm_load_options* out) {
  return guard([&] {
    check_out("kiln_llm_load_options_default", out);
    *out = {{KILN_DEVICE_CPU, 0}, static_cast<kiln_dtype>(KILN_LLM_DTYPE_AUTO), KILN_LLM_ACTIVATIONS_DEFAULT, 1};
  });
}

int kiln_llm_model_load(kiln_llm_model* out, const char* path, kiln_device device, kiln_dtype dtype) {
  kiln_llm_load_options o;
  kiln_llm_load_options_default(&o);
  o.device = device;
  o.dtype = dtype;
  return load(out, path, o, "kiln_llm_model_load");
}

int kiln_llm_model_load_with(kiln_llm_model* out, const char* path, const kiln_llm_load_options* options) {
  kiln_llm_load_options o;
  if (options)
    o = *options;
  else
    kiln_llm_load_options_default(&o);
  return load(out, path, o, "kiln_llm_model_load_with");
}

int kiln_llm_model_free(kiln_llm_model m) {
  return guard([&] { delete m; });
}

int kiln_llm_model_get_info(kiln_llm_model_info* out, const kiln_llm_model m) {
  return guard([&] {
    check_out("kiln_llm_model_get_info", out);
    const kiln_llm_model_s& handle = get_model("kiln_llm_model_get_info", m);
    const ModelConfig& c = handle.model->config();
    const Tokenizer* t = handle.tokenizer ? &*handle.tokenizer : nullptr;
    *out = {.vocab_size = c.vocab_size,
            .n_layers = c.n_layers,
            .d_model = c.d_model,
            .n_heads = c.n_heads,
            .n_kv_heads = c.n_kv_heads,
            .head_dim = c.head_dim,
            .context_length = c.context_length,
            .weight_bytes = handle.model->weight_bytes(),
            .ffn_dim = c.ffn_dim,
            .rope_dims = c.rope_dims,
            .rope_base = c.rope_base,
            .rope_scale = c.rope_scale,
            .rope_traditional = c.rope_traditional,
            .norm_eps = c.norm_eps,
            .qkv_bias = c.qkv_bias,
            .qk_norm = c.qk_norm,
            .tied_embeddings = c.tied_embeddings,
            .sliding_window = c.sliding_window,
            .bos_token = t ? id_or_none(t->bos()) : -1,
            .eos_token = t ? id_or_none(t->eos()) : -1,
            .eot_token = t ? id_or_none(t->eot()) : -1,
            .tensor_parallel = handle.model->tensor_parallel(),
            .activations = static_cast<kiln_llm_activations>(static_cast<int>(handle.model->activations()) + 1)};
  });
}

int kiln_llm_model_has_tensor(bool* out, const kiln_llm_model m, const char* name) {
  return guard([&] {
    const char* fn = "kiln_llm_model_has_tensor";
    check_out(fn, out);
    if (!name) fail(fn, "null tensor name");
    *out = get_model(fn, m).model->file().has_tensor(name);
  });
}

int kiln_llm_model_tensor(kiln_array* w, kiln_array* scales, kiln_array* biases, int* group_size, int* bits,
                          const kiln_llm_model m, const char* name) {
  return guard([&] {
    const char* fn = "kiln_llm_model_tensor";
    check_out(fn, w);
    check_out(fn, scales);
    check_out(fn, biases);
    check_out(fn, group_size);
    check_out(fn, bits);
    if (!name) fail(fn, "null tensor name");
    Weight t = get_model(fn, m).model->file().weight(name);
    put(w, t.w);
    if (t.quantized()) {
      put(scales, *t.scales);
      put(biases, *t.biases);
    }
    *group_size = t.group_size;
    *bits = t.bits;
  });
}

int kiln_llm_tokenize(int32_t** ids, size_t* n, const kiln_llm_model m, const char* text, bool add_special,
                      bool parse_special) {
  return guard([&] {
    const char* fn = "kiln_llm_tokenize";
    check_out(fn, ids);
    check_out(fn, n);
    if (!text) fail(fn, "null text");
    std::vector<TokenId> v = get_tokenizer(fn, get_model(fn, m)).encode(text, add_special, parse_special);
    int32_t* buf = new int32_t[v.size() + 1];  // never a zero-length allocation
    std::copy(v.begin(), v.end(), buf);
    *ids = buf;
    *n = v.size();
  });
}

int kiln_llm_tokens_free(int32_t* ids) {
  return guard([&] { delete[] ids; });
}

int kiln_llm_detokenize(char** out, const kiln_llm_model m, const int32_t* ids, size_t n) {
  return guard([&] {
    const char* fn = "kiln_llm_detokenize";
    check_out(fn, out);
    std::vector<int32_t> v = to_ids(fn, ids, n);
    *out = c_string(get_tokenizer(fn, get_model(fn, m)).decode(v));
  });
}

int kiln_llm_chat_prompt(char** out, const kiln_llm_model m, const char* const* roles, const char* const* contents,
                         size_t n) {
  return guard([&] {
    const char* fn = "kiln_llm_chat_prompt";
    check_out(fn, out);
    if (n && (!roles || !contents)) fail(fn, "null roles or contents with ", n, " messages");
    std::vector<ChatMessage> messages;
    for (size_t i = 0; i < n; ++i) {
      if (!roles[i] || !contents[i]) fail(fn, "message ", i, " has a null role or content");
      messages.push_back({roles[i], contents[i]});
    }
    ChatTemplate t = ChatTemplate::recognize(get_tokenizer(fn, get_model(fn, m)).chat_template());
    *out = c_string(t.render(messages));
  });
}

int kiln_llm_is_end_of_generation(bool* out, const kiln_llm_model m, int32_t token) {
  return guard([&] {
    const char* fn = "kiln_llm_is_end_of_generation";
    check_out(fn, out);
    *out = get_tokenizer(fn, get_model(fn, m)).is_end_of_generation(token);
  });
}

int kiln_llm_session_new(kiln_llm_session* out, const kiln_llm_model m) {
  return guard([&] {
    check_out("kiln_llm_session_new", out);
    const kiln_llm_model_s& model = get_model("kiln_llm_session_new", m);
    // The session shares the model; the handle's owner keeps the tokenizer for generate.
    auto owner = std::make_shared<const kiln_llm_model_s>(model);
    *out = new kiln_llm_session_s{owner, Session(model.model)};
  });
}

int kiln_llm_session_free(kiln_llm_session s) {
  return guard([&] { delete s; });
}

int kiln_llm_session_position(int64_t* out, const kiln_llm_session s) {
  return guard([&] {
    check_out("kiln_llm_session_position", out);
    *out = get_session("kiln_llm_session_position", s).session.position();
  });
}

int kiln_llm_session_truncate(kiln_llm_session s, int64_t n) {
  return guard([&] { get_session("kiln_llm_session_truncate", s).session.truncate(n); });
}

int kiln_llm_session_clear(kiln_llm_session s) {
  return guard([&] { get_session("kiln_llm_session_clear", s).session.clear(); });
}

int kiln_llm_session_append(kiln_array* logits, kiln_llm_session s, const int32_t* ids, size_t n) {
  return guard([&] {
    const char* fn = "kiln_llm_session_append";
    check_out(fn, logits);
    Array l = get_session(fn, s).session.append(to_ids(fn, ids, n));
    put(logits, std::move(l));
  });
}

int kiln_llm_session_append_all(kiln_array* logits, kiln_llm_session s, const int32_t* ids, size_t n) {
  return guard([&] {
    const char* fn = "kiln_llm_session_append_all";
    check_out(fn, logits);
    Session& session = get_session(fn, s).session;
    put(logits, session.model().step({&session}, {to_ids(fn, ids, n)}, true));
  });
}

int kiln_llm_step(kiln_array* logits, kiln_llm_session* sessions, const int32_t* tokens, size_t n) {
  return guard([&] {
    const char* fn = "kiln_llm_step";
    check_out(fn, logits);
    if (n == 0) fail(fn, "a step needs at least one session");
    if (!sessions || !tokens) fail(fn, "null sessions or tokens");
    std::vector<Session*> ss;
    std::vector<std::vector<int32_t>> ts;
    for (size_t i = 0; i < n; ++i) {
      ss.push_back(&get_session(fn, sessions[i]).session);
      ts.push_back({tokens[i]});
    }
    put(logits, ss[0]->model().step(ss, ts));
  });
}

int kiln_llm_generate(kiln_llm_session s, const int32_t* prompt, size_t n, const kiln_llm_generate_options* options,
                      kiln_llm_token_fn fn, void* payload, kiln_llm_generate_stats* stats) {
  return guard([&] {
    const char* name = "kiln_llm_generate";
    kiln_llm_session_s& session = get_session(name, s);
    GenerateOptions o;
    if (options) {
      o.max_tokens = options->max_tokens;
      o.sampling = to_sampler(options->sampling);
      o.stop_tokens = to_ids(name, options->stop_tokens, options->n_stop_tokens);
    }
    TokenCallback cb;
    if (fn)
      cb = [fn, payload](TokenId t, const std::string& text) { return fn(t, text.data(), text.size(), payload) == 0; };
    GenerateResult r = generate(session.session, get_tokenizer(name, *session.owner), to_ids(name, prompt, n), o, cb);
    if (stats)
      *stats = {r.prompt_tokens, static_cast<int64_t>(r.tokens.size()), r.prompt_seconds, r.generate_seconds,
                stop_reason(r.stop_reason)};
  });
}

}  // extern "C"
