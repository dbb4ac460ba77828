/* kiln C API for language models (C11), in the conventions of kiln.h: an int status from every
   call, the message in kiln_last_error(), handles released once with their _free function.

   A model is loaded once and shared read-only: any number of sessions on any number of threads
   use it at once. A session (one conversation and its KV cache) is used by one thread at a time. */
#ifndef KILN_C_KILN_LLM_H
#define KILN_C_KILN_LLM_H

#include "kiln/c/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_llm_model_s* kiln_llm_model;
typedef struct kiln_llm_session_s* kiln_llm_session;

/* What kiln::llm::SamplerOptions holds; kiln_llm_sampling_default fills the defaults. */
typedef struct kiln_llm_sampling {
  float temperature; /* 0 or less: greedy */
  int top_k; /* 0: off */
  float top_p; /* 1: off */
  float min_p; /* 0: off */
  float repetition_penalty;
  int repeat_last_n;
  uint64_t seed;
} kiln_llm_sampling;

/* What the quantized products multiply the weights by (kiln::QmmActivations, docs/llm.md). */
typedef enum kiln_llm_activations {
  KILN_LLM_ACTIVATIONS_DEFAULT = 0, /* the KILN_LLM_ACTIVATIONS knob: by default int16 on the CPU, exact elsewhere */
  KILN_LLM_ACTIVATIONS_EXACT = 1, /* the activations as they are, in float32 */
  KILN_LLM_ACTIVATIONS_INT8 = 2, /* rounded to int8 blocks of 32, as llama.cpp does (fastest on the CPU) */
  KILN_LLM_ACTIVATIONS_INT16 = 3 /* rounded to int16 blocks of 32: integer products that answer as exact ones */
} kiln_llm_activations;

/* A compute dtype chosen by the device: float32 on the CPU, bfloat16 on a GPU. */
#define KILN_LLM_DTYPE_AUTO KILN_NUM_DTYPES

/* What kiln::llm::LoadOptions holds; kiln_llm_load_options_default fills the defaults (the CPU,
   KILN_LLM_DTYPE_AUTO, the default activations, one rank). */
typedef struct kiln_llm_load_options {
  kiln_device device;
  kiln_dtype dtype; /* activations and KV cache: float32, float16, bfloat16 or KILN_LLM_DTYPE_AUTO;
                       weights keep their type */
  kiln_llm_activations activations;
  /* Tensor parallelism over this many ranks (docs/distributed.md): on the CPU, threads; on CUDA,
     rank r on cuda:(device.index + r). The model's head count, key/value head count and
     feed-forward size must divide by it; the model's steps then run one at a time. */
  int tensor_parallel;
} kiln_llm_load_options;

/* The model's shape (kiln::llm::ModelConfig) and its special tokens. */
typedef struct kiln_llm_model_info {
  int vocab_size;
  int n_layers;
  int d_model;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int64_t context_length;
  size_t weight_bytes; /* read by one decode step */
  int ffn_dim; /* the feed-forward's hidden size */
  int rope_dims; /* features of each head that RoPE rotates */
  float rope_base;
  float rope_scale; /* position multiplier (linear rope scaling: 1 / factor) */
  bool rope_traditional; /* rotate adjacent pairs (GGUF llama), else halves (NeoX, Qwen) */
  float norm_eps; /* RMSNorm's epsilon */
  bool qkv_bias; /* biases on q, k and v (Qwen2) */
  bool qk_norm; /* RMSNorm over each head of q and k (Qwen3) */
  bool tied_embeddings; /* no output.weight: the token embedding projects to the vocabulary */
  int64_t sliding_window; /* each query attends to the last this many keys (Mistral); 0: all */
  int32_t bos_token; /* -1 when the vocabulary has none (or the file has no tokenizer) */
  int32_t eos_token; /* -1 when none */
  int32_t eot_token; /* end of turn ("<|im_end|>", "<|eot_id|>"); -1 when none */
  int tensor_parallel; /* ranks the model is split over (1: not split) */
  kiln_llm_activations activations; /* what the quantized products multiply, resolved (never DEFAULT) */
} kiln_llm_model_info;

/* Why kiln_llm_generate stopped. */
typedef enum kiln_llm_stop_reason {
  KILN_LLM_STOP_TOKEN = 0, /* an end-of-generation or stop token (not passed to the callback) */
  KILN_LLM_STOP_MAX_TOKENS = 1,
  KILN_LLM_STOP_CONTEXT_FULL = 2,
  KILN_LLM_STOP_CALLBACK = 3 /* the callback returned non-zero */
} kiln_llm_stop_reason;

/* What kiln::llm::GenerateOptions holds; kiln_llm_generate_options_default fills the defaults. */
typedef struct kiln_llm_generate_options {
  int max_tokens;
  kiln_llm_sampling sampling;
  const int32_t* stop_tokens; /* ids that also end generation, besides the model's own; may be NULL */
  size_t n_stop_tokens;
} kiln_llm_generate_options;

/* Counts and times of one kiln_llm_generate call. */
typedef struct kiln_llm_generate_stats {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  double prompt_seconds;
  double generate_seconds;
  kiln_llm_stop_reason stop_reason;
} kiln_llm_generate_stats;

/* Called with each generated token and the whole UTF-8 characters it completes (text may be
   empty; it is not NUL-terminated). Return non-zero to stop generating. */
typedef int (*kiln_llm_token_fn)(int32_t token, const char* text, size_t len, void* payload);

int kiln_llm_sampling_default(kiln_llm_sampling* out);
/* 256 tokens at most, the default sampling, no stop tokens. */
int kiln_llm_generate_options_default(kiln_llm_generate_options* out);

/* Where scripts/setup puts the default model (SmolLM2-135M-Instruct, Q4_1 GGUF): in
   $KILN_MODELS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models. The file may not exist.
   Release *out with kiln_string_free. */
int kiln_llm_default_model_path(char** out);

/* Loads a GGUF or safetensors model onto `device`, activations and KV cache in `dtype` (float32,
   float16, bfloat16 or KILN_LLM_DTYPE_AUTO). A file without a tokenizer (a safetensors checkpoint) loads too: steps
   take token ids, and the calls that need the tokenizer (tokenize, detokenize, chat_prompt,
   is_end_of_generation, generate) fail saying so. */
int kiln_llm_model_load(kiln_llm_model* out, const char* path, kiln_device device, kiln_dtype dtype);
int kiln_llm_load_options_default(kiln_llm_load_options* out);
/* kiln_llm_model_load with every load option; options NULL: the defaults. */
int kiln_llm_model_load_with(kiln_llm_model* out, const char* path, const kiln_llm_load_options* options);
int kiln_llm_model_free(kiln_llm_model m);
int kiln_llm_model_get_info(kiln_llm_model_info* out, const kiln_llm_model m);

/* Whether the model file holds a tensor of this name (GGUF naming: "blk.0.attn_q.weight",
   "token_embd.weight", "output_norm.weight"; safetensors names are mapped to these). */
int kiln_llm_model_has_tensor(bool* out, const kiln_llm_model m, const char* name);
/* One tensor of the model file as the file holds it, on the CPU (viewing the mapped file where
   the layout allows). Dense: *w holds the values (float32, float16 or bfloat16), *group_size and
   *bits are 0, and *scales and *biases are left as they are. Quantized, in kiln's affine format
   (see kiln_quantize): *w is the packed uint32 codes, *scales and *biases are [rows, in/group_size]
   (float16 or float32), so that kiln_quantized_matmul(x, w, scales, biases, true, group_size,
   bits) is x times the tensor transposed. An error names the file and tensor when there is none. */
int kiln_llm_model_tensor(kiln_array* w, kiln_array* scales, kiln_array* biases, int* group_size, int* bits,
                          const kiln_llm_model m, const char* name);

/* Text to token ids; *ids is allocated (release with kiln_llm_tokens_free). add_special: BOS/EOS
   as the model asks; parse_special: control-token text such as "<|im_start|>" becomes its id. */
int kiln_llm_tokenize(int32_t** ids, size_t* n, const kiln_llm_model m, const char* text, bool add_special,
                      bool parse_special);
int kiln_llm_tokens_free(int32_t* ids);
/* Token ids to text; release *out with kiln_string_free. */
int kiln_llm_detokenize(char** out, const kiln_llm_model m, const int32_t* ids, size_t n);
/* A chat prompt through the model's chat template (ChatML or Llama 3); n messages of roles[i]
   and contents[i]; the assistant's turn opened. Release *out with kiln_string_free. */
int kiln_llm_chat_prompt(char** out, const kiln_llm_model m, const char* const* roles, const char* const* contents,
                         size_t n);
/* Whether generation ends at this token (end of sequence or of turn). */
int kiln_llm_is_end_of_generation(bool* out, const kiln_llm_model m, int32_t token);

int kiln_llm_session_new(kiln_llm_session* out, const kiln_llm_model m);
int kiln_llm_session_free(kiln_llm_session s);
/* Tokens held in the session's KV cache. */
int kiln_llm_session_position(int64_t* out, const kiln_llm_session s);
/* Keeps the first n tokens (0: forget everything; the cache is kept for reuse). */
int kiln_llm_session_truncate(kiln_llm_session s, int64_t n);
/* Forgets every token and frees the KV cache. */
int kiln_llm_session_clear(kiln_llm_session s);
/* Appends n tokens; *logits receives the logits after the last one ([vocab] float32, evaluated). */
int kiln_llm_session_append(kiln_array* logits, kiln_llm_session s, const int32_t* ids, size_t n);
/* Appends n tokens in one step; *logits receives the logits after each of them ([n, vocab]
   float32, evaluated): the model's output for every position of a sequence. */
int kiln_llm_session_append_all(kiln_array* logits, kiln_llm_session s, const int32_t* ids, size_t n);

/* One decode step of n sessions together: sessions[i] appends tokens[i]; *logits receives
   [n, vocab] float32. Sessions may join and leave between steps. */
int kiln_llm_step(kiln_array* logits, kiln_llm_session* sessions, const int32_t* tokens, size_t n);

/* Appends the prompt, then samples up to options->max_tokens, calling fn (may be NULL) for each
   token, until an end-of-generation or stop token, the context length, or fn returns non-zero. A
   character left unfinished at the end comes in one more call with token -1. options NULL: the
   defaults. stats may be NULL. The session then holds the prompt and the generated tokens whose
   logits were computed: all of them after a stop token (which is not kept), else all but the last. */
int kiln_llm_generate(kiln_llm_session s, const int32_t* prompt, size_t n, const kiln_llm_generate_options* options,
                      kiln_llm_token_fn fn, void* payload, kiln_llm_generate_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_KILN_LLM_H */
