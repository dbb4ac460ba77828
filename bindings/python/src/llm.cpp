// kiln.llm: language models (include/kiln/llm*.h). Loading, steps and generation release the
// GIL; a streaming callback takes it back for each piece of text.
#include <nanobind/stl/shared_ptr.h>

#include "common.h"

namespace kpy {

namespace {

using namespace kiln::llm;

nb::str utf8(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

std::vector<ChatMessage> messages_arg(nb::handle messages) {
  std::vector<ChatMessage> out;
  for (nb::handle m : messages) {
    if (PyDict_Check(m.ptr()))
      out.push_back({nb::cast<std::string>(m["role"]), nb::cast<std::string>(m["content"])});
    else
      out.push_back({nb::cast<std::string>(m[0]), nb::cast<std::string>(m[1])});
  }
  return out;
}

TokenCallback callback_arg(const nb::object& cb) {
  if (cb.is_none()) return {};
  return [cb](TokenId id, const std::string& text) {
    nb::gil_scoped_acquire gil;
    nb::object r = cb(id, utf8(text));
    return r.is_none() || nb::cast<bool>(r);
  };
}

/* Model.load's activations: a name of kiln::kQmmActivationNames. */
kiln::QmmActivations activations_arg(const std::string& name) {
  if (auto a = kiln::qmm_activations_named(name)) return *a;
  kiln::fail("llm", "unknown activations '", name, "' (exact, int8 or int16)");
}

/* generate's keyword arguments. */
GenerateOptions options_arg(int max_tokens, float temperature, int top_k, float top_p, float min_p,
                            float repetition_penalty, int repeat_last_n, uint64_t seed, std::vector<TokenId> stop) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling = {temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n, seed};
  o.stop_tokens = std::move(stop);
  return o;
}

/* A conversation: the messages so far through the model's chat template, one session that
   keeps the KV cache across turns (only the new part of each prompt is prefilled), as `kiln chat`. */
class Chat {
 public:
  Chat(std::shared_ptr<Model> model, std::optional<std::string> system)
      : model_(std::move(model)),
        tok_(model_->file()),
        session_(model_),
        template_(ChatTemplate::recognize(tok_.chat_template())) {
    if (system) messages_.push_back({"system", *system});
  }

  GenerateResult send(const std::string& text, const GenerateOptions& o, const nb::object& cb) {
    messages_.push_back({"user", text});
    std::vector<TokenId> ids = tok_.encode(template_.render(messages_), true, true);
    GenerateResult r;
    {
      nb::gil_scoped_release nogil;
      size_t same = 0;
      const auto& held = session_.tokens();
      while (same < held.size() && same < ids.size() && held[same] == ids[same]) ++same;
      if (same == ids.size()) --same;  // at least one token, for fresh logits
      session_.truncate(static_cast<int64_t>(same));
      r = generate(session_, tok_, {ids.begin() + static_cast<std::ptrdiff_t>(same), ids.end()}, o, callback_arg(cb));
    }
    messages_.push_back({"assistant", r.text});
    return r;
  }

  nb::list messages() const {
    nb::list l;
    for (const auto& m : messages_) {
      nb::dict d;
      d["role"] = m.role;
      d["content"] = utf8(m.content);
      l.append(d);
    }
    return l;
  }
  Session& session() { return session_; }
  const Tokenizer& tokenizer() const { return tok_; }

 private:
  std::shared_ptr<Model> model_;
  Tokenizer tok_;
  Session session_;
  ChatTemplate template_;
  std::vector<ChatMessage> messages_;
};

#define KPY_GENERATE_ARGS                                                                                        \
  "max_tokens"_a = 256, "temperature"_a = 0.8f, "top_k"_a = 40, "top_p"_a = 0.95f, "min_p"_a = 0.05f,            \
  "repetition_penalty"_a = 1.0f, "repeat_last_n"_a = 64, "seed"_a = 0, "stop_tokens"_a = std::vector<TokenId>{}, \
  "callback"_a = nb::none()

}  // namespace

void init_llm(nb::module_& top) {
  nb::module_ m = top.def_submodule("llm", "Language models: the Llama family from GGUF and safetensors files.");
  m.def("default_model_path", &default_model_path,
        "The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) in models_dir(); it may not exist.");
  m.def("models_dir", &models_dir, "$KILN_MODELS_DIR, else ${XDG_CACHE_HOME:-~/.cache}/kiln-models.");

  nb::class_<ModelConfig>(m, "ModelConfig", "The shape and conventions of a model, from its file.")
      .def_ro("arch", &ModelConfig::arch)
      .def_ro("n_layers", &ModelConfig::n_layers)
      .def_ro("d_model", &ModelConfig::d_model)
      .def_ro("n_heads", &ModelConfig::n_heads)
      .def_ro("n_kv_heads", &ModelConfig::n_kv_heads)
      .def_ro("head_dim", &ModelConfig::head_dim)
      .def_ro("ffn_dim", &ModelConfig::ffn_dim)
      .def_ro("vocab_size", &ModelConfig::vocab_size)
      .def_ro("rope_dims", &ModelConfig::rope_dims)
      .def_ro("rope_base", &ModelConfig::rope_base)
      .def_ro("rope_scale", &ModelConfig::rope_scale)
      .def_ro("rope_traditional", &ModelConfig::rope_traditional)
      .def_ro("norm_eps", &ModelConfig::norm_eps)
      .def_ro("context_length", &ModelConfig::context_length)
      .def_ro("qkv_bias", &ModelConfig::qkv_bias)
      .def_ro("qk_norm", &ModelConfig::qk_norm)
      .def_ro("tied_embeddings", &ModelConfig::tied_embeddings)
      .def_ro("sliding_window", &ModelConfig::sliding_window,
              "Each query attends to the last this many keys (Mistral); 0: all.");

  nb::class_<Model>(m, "Model", "A loaded model, shared read-only by every session on every thread.")
      .def_static(
          "load",
          [](std::optional<std::string> path, kiln::Device device, std::optional<kiln::Dtype> dtype, bool dequantize,
             std::optional<std::string> activations, int tensor_parallel) {
            LoadOptions o{
                .device = device, .dtype = dtype, .dequantize = dequantize, .tensor_parallel = tensor_parallel};
            if (activations) o.activations = activations_arg(*activations);
            nb::gil_scoped_release nogil;
            return Model::load(path.value_or(default_model_path()), o);
          },
          "path"_a = nb::none(), "device"_a = kiln::Device::cpu(), "dtype"_a = nb::none(), "dequantize"_a = false,
          "activations"_a = nb::none(), "tensor_parallel"_a = 1,
          "Maps a .gguf or .safetensors file (the default model when path is None). dtype is that of\n"
          "activations and the KV cache (None: float32 on the CPU, bfloat16 on a GPU); dequantize\n"
          "expands quantized weights to it. activations:\n"
          "what quantized products multiply (\"exact\", \"int8\", \"int16\"; None: KILN_LLM_ACTIVATIONS,\n"
          "by default int16 on the CPU and exact elsewhere). tensor_parallel: ranks to split the model\n"
          "over (docs/distributed.md): threads on the CPU, GPUs from device on CUDA.")
      .def_prop_ro("config", &Model::config, nb::rv_policy::reference_internal)
      .def_prop_ro("device", &Model::device)
      .def_prop_ro("dtype", &Model::dtype)
      .def_prop_ro("weight_bytes", &Model::weight_bytes)
      .def_prop_ro("tensor_parallel", &Model::tensor_parallel, "Ranks the model is split over (1: not split).")
      .def_prop_ro(
          "activations",
          [](const Model& mdl) { return kiln::kQmmActivationNames[static_cast<int>(mdl.activations())]; },
          "What the quantized products multiply: \"exact\", \"int8\" or \"int16\".")
      .def_prop_ro("path", [](const Model& mdl) { return mdl.file().path(); })
      .def(
          "step",
          [](const Model& mdl, const std::vector<Session*>& sessions, const std::vector<std::vector<int32_t>>& tokens,
             bool all_positions) {
            nb::gil_scoped_release nogil;
            return mdl.step(sessions, tokens, all_positions);
          },
          "sessions"_a, "tokens"_a, "all_positions"_a = false,
          "Appends tokens[i] to sessions[i] (all of one length) in one batched step and returns the\n"
          "logits after each one's last token, [sessions, vocab] float32 (every position with one\n"
          "session and all_positions).");

  nb::class_<Tokenizer>(m, "Tokenizer", "Text to token ids and back, from the model file's metadata.")
      .def(
          "__init__", [](Tokenizer* t, const Model& mdl) { new (t) Tokenizer(mdl.file()); }, "model"_a)
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_special, bool parse_special) {
            return t.encode(text, add_special, parse_special);
          },
          "text"_a, "add_special"_a = true, "parse_special"_a = false,
          "Ids of text; add_special adds BOS/EOS as the model asks; parse_special reads control\n"
          "tokens written in the text (\"<|im_start|>\").")
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<TokenId>& ids, bool render_special) {
            return utf8(t.decode(ids, render_special));
          },
          "ids"_a, "render_special"_a = false)
      .def(
          "piece",
          [](const Tokenizer& t, TokenId id, bool special) {
            return nb::bytes(t.piece(id, special).data(), t.piece(id, special).size());
          },
          "id"_a, "render_special"_a = false, "The bytes one token stands for.")
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def_prop_ro("bos", &Tokenizer::bos)
      .def_prop_ro("eos", &Tokenizer::eos)
      .def_prop_ro("eot", &Tokenizer::eot)
      .def_prop_ro("chat_template", &Tokenizer::chat_template)
      .def("is_end_of_generation", &Tokenizer::is_end_of_generation, "id"_a)
      .def(
          "find_token", [](const Tokenizer& t, const std::string& s) { return t.find_token(s); }, "text"_a);

  nb::class_<ChatTemplate>(m, "ChatTemplate", "A chat template recognized from its Jinja source (ChatML or Llama 3).")
      .def_static(
          "recognize", [](const std::string& src) { return ChatTemplate::recognize(src); }, "source"_a)
      .def(
          "render",
          [](const ChatTemplate& t, nb::handle messages, bool add_generation_prompt) {
            return t.render(messages_arg(messages), add_generation_prompt);
          },
          "messages"_a, "add_generation_prompt"_a = true,
          "The prompt text for messages ({\"role\": ..., \"content\": ...} dicts or (role, content) pairs).");

  nb::class_<Session>(m, "Session", "One conversation: its tokens and KV cache. One thread at a time.")
      .def(nb::init<std::shared_ptr<const Model>>(), "model"_a)
      .def_prop_ro("position", &Session::position)
      .def_prop_ro("tokens", &Session::tokens)
      .def("reset", &Session::reset, "Forgets every token (the cache is kept for reuse).")
      .def("truncate", &Session::truncate, "n"_a, "Keeps the first n tokens.")
      .def("clear", &Session::clear, "Forgets every token and frees the cache.")
      .def(
          "append",
          [](Session& s, const std::vector<int32_t>& tokens) {
            nb::gil_scoped_release nogil;
            return s.append(tokens);
          },
          "tokens"_a, "Appends tokens and returns the logits after the last one: [vocab] float32.");

  nb::class_<GenerateResult>(m, "GenerateResult")
      .def_ro("tokens", &GenerateResult::tokens)
      .def_prop_ro("text", [](const GenerateResult& r) { return utf8(r.text); })
      .def_ro("prompt_tokens", &GenerateResult::prompt_tokens)
      .def_ro("prompt_seconds", &GenerateResult::prompt_seconds)
      .def_ro("generate_seconds", &GenerateResult::generate_seconds)
      .def_ro("stop_reason", &GenerateResult::stop_reason)
      .def_prop_ro("prompt_tokens_per_second", &GenerateResult::prompt_tokens_per_second)
      .def_prop_ro("generate_tokens_per_second", &GenerateResult::generate_tokens_per_second);

  m.def(
      "generate",
      [](Session& s, const Tokenizer& t, const std::vector<TokenId>& prompt, int max_tokens, float temperature,
         int top_k, float top_p, float min_p, float repetition_penalty, int repeat_last_n, uint64_t seed,
         std::vector<TokenId> stop_tokens, const nb::object& callback) {
        GenerateOptions o = options_arg(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n,
                                        seed, std::move(stop_tokens));
        TokenCallback cb = callback_arg(callback);
        nb::gil_scoped_release nogil;
        return generate(s, t, prompt, o, cb);
      },
      "session"_a, "tokenizer"_a, "prompt"_a, KPY_GENERATE_ARGS,
      "Appends the prompt's ids to the session, then samples until a stop token, max_tokens or the\n"
      "context length. callback(token, text) gets each token and the whole characters it completes;\n"
      "returning False stops. temperature <= 0 is greedy. Releases the GIL.");

  nb::class_<Chat>(m, "Chat", "A conversation through the model's chat template, its KV cache kept across turns.")
      .def(nb::init<std::shared_ptr<Model>, std::optional<std::string>>(), "model"_a, "system"_a = nb::none())
      .def(
          "send",
          [](Chat& c, const std::string& text, int max_tokens, float temperature, int top_k, float top_p, float min_p,
             float repetition_penalty, int repeat_last_n, uint64_t seed, std::vector<TokenId> stop_tokens,
             const nb::object& callback) {
            return c.send(text,
                          options_arg(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n,
                                      seed, std::move(stop_tokens)),
                          callback);
          },
          "text"_a, KPY_GENERATE_ARGS,
          "Adds a user message, streams the reply to callback(token, text), and returns it (the reply\n"
          "joins the conversation). Only the part of the prompt the session lacks is prefilled.")
      .def_prop_ro("messages", &Chat::messages)
      .def_prop_ro("session", &Chat::session, nb::rv_policy::reference_internal)
      .def_prop_ro("tokenizer", &Chat::tokenizer, nb::rv_policy::reference_internal);
}

}  // namespace kpy
