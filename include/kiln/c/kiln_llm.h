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
  int top_k;         /* 0: off */
  float top_p;       /* 1: off */
  float min_p;       /* 0: off */
  float repetition_penalty;
  int repeat_last_n;
  uint64_t seed;
} kiln_llm_sampling;

typedef struct kiln_llm_model_info {
  int vocab_size;
  int n_layers;
  int d_model;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int64_t context_length;
  size_t weight_bytes; /* read by one decode step */
} kiln_llm_model_info;

/* Counts and times of one kiln_llm_generate call. */
typedef struct kiln_llm_generate_stats {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  double prompt_seconds;
  double generate_seconds;
} kiln_llm_generate_stats;

/* Called with each generated token and the whole UTF-8 characters it completes (text may be
   empty; it is not NUL-terminated). Return non-zero to stop generating. */
typedef int (*kiln_llm_token_fn)(int32_t token, const char* text, size_t len, void* payload);

int kiln_llm_sampling_default(kiln_llm_sampling* out);

/* Where scripts/setup puts the default model (SmolLM2-135M-Instruct, Q4_1 GGUF): in
   $KILN_MODELS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models. The file may not exist.
   Release *out with kiln_string_free. */
int kiln_llm_default_model_path(char** out);

/* Loads a GGUF or safetensors model onto `device`, activations and KV cache in `dtype` (float32,
   float16 or bfloat16). */
int kiln_llm_model_load(kiln_llm_model* out, const char* path, kiln_device device, kiln_dtype dtype);
int kiln_llm_model_free(kiln_llm_model m);
int kiln_llm_model_get_info(kiln_llm_model_info* out, const kiln_llm_model m);

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
/* Keeps the first n tokens (0: forget everything). */
int kiln_llm_session_truncate(kiln_llm_session s, int64_t n);
/* Appends n tokens; *logits receives the logits after the last one ([vocab] float32, evaluated). */
int kiln_llm_session_append(kiln_array* logits, kiln_llm_session s, const int32_t* ids, size_t n);

/* One decode step of n sessions together: sessions[i] appends tokens[i]; *logits receives
   [n, vocab] float32. Sessions may join and leave between steps. */
int kiln_llm_step(kiln_array* logits, kiln_llm_session* sessions, const int32_t* tokens, size_t n);

/* Appends the prompt, then samples up to max_tokens, calling fn (may be NULL) for each token, until
   an end-of-generation token or fn returns non-zero. sampling NULL: the defaults. stats may be NULL. */
int kiln_llm_generate(kiln_llm_session s, const int32_t* prompt, size_t n, int max_tokens,
                      const kiln_llm_sampling* sampling, kiln_llm_token_fn fn, void* payload,
                      kiln_llm_generate_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_KILN_LLM_H */
