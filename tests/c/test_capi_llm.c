/* The language-model C API (kiln/c/kiln_llm.h) on the default model: tokens, a chat prompt,
   greedy generation with a token callback and stop tokens, a batched step against single sessions,
   logits of every position, the model's tensors, sessions on several threads, and errors. Exits 77 (a skip) when the
   model is not there (scripts/setup). First, a tiny safetensors checkpoint without a tokenizer, which needs no
   download. */
#include <math.h>
#include <pthread.h>

#include "harness.h"
#include "kiln/c/kiln_llm.h"

static char model_path[4096];

static int find_model(void) {
  char* path = NULL;
  if (kiln_llm_default_model_path(&path) != 0) return 0;
  snprintf(model_path, sizeof model_path, "%s", path);
  kiln_string_free(path);
  FILE* f = fopen(model_path, "rb");
  if (!f) return 0;
  fclose(f);
  return 1;
}

typedef struct {
  int tokens;
  size_t bytes;
} counts;

static int count_tokens(int32_t token, const char* text, size_t len, void* payload) {
  counts* c = (counts*)payload;
  (void)text;
  if (token >= 0) c->tokens++;
  c->bytes += len;
  return 0;
}

static int stop_after_two(int32_t token, const char* text, size_t len, void* payload) {
  (void)token, (void)text, (void)len;
  return ++*(int*)payload >= 2;
}

static kiln_llm_model model;
static int32_t* prompt;
static size_t prompt_n;
static int32_t greedy[8];

/* Greedy tokens after the prompt, from a fresh session: one per step. */
static void greedy_tokens(int32_t* out, int n) {
  kiln_llm_session s = NULL;
  kiln_array logits = NULL;
  OK(kiln_llm_session_new(&s, model));
  OK(kiln_llm_session_append(&logits, s, prompt, prompt_n));
  for (int i = 0; i < n; ++i) {
    OK(kiln_argmax(&logits, logits, 0, false));
    int32_t next = -1;
    OK(kiln_array_item_int32(&next, logits));
    out[i] = next;
    OK(kiln_llm_session_append(&logits, s, &next, 1));
  }
  kiln_array_free(logits);
  kiln_llm_session_free(s);
}

static void* thread_main(void* arg) {
  int32_t* got = (int32_t*)arg;
  greedy_tokens(got, 8);
  return NULL;
}

#define TINY_DIR KILN_SOURCE_DIR "/tests/llm/golden/tiny/"
enum { kTinyVocab = 128, kTinyTokens = 16 };
static const int32_t tiny_tokens[kTinyTokens] = {16, 32, 97, 56, 52, 14, 82, 77, 33, 100, 27, 111, 4, 43, 100, 16};

/* The tiny checkpoint `name` loaded with o; NULL (and a failed check) when it does not load. */
static kiln_llm_model load_tiny(const char* name, const kiln_llm_load_options* o) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", TINY_DIR, name);
  kiln_llm_model m = NULL;
  OK(kiln_llm_model_load_with(&m, path, o));
  return m;
}

/* Every position's logits of tiny_tokens through a fresh session of m. */
static void tiny_logits(float out[kTinyTokens * kTinyVocab], kiln_llm_model m) {
  kiln_llm_session s = NULL;
  kiln_array logits = NULL;
  OK(kiln_llm_session_new(&s, m));
  OK(kiln_llm_session_append_all(&logits, s, tiny_tokens, kTinyTokens));
  OK(kiln_array_copy_to(out, sizeof(float) * kTinyTokens * kTinyVocab, logits, KILN_FLOAT32));
  kiln_array_free(logits);
  kiln_llm_session_free(s);
}

/* The largest |a - b| over the rows, each relative to its row's largest |b|. */
static double worst_relative(const float* a, const float* b) {
  double worst = 0;
  for (int row = 0; row < kTinyTokens; ++row) {
    double top = 0;
    for (int t = 0; t < kTinyVocab; ++t) top = fmax(top, fabs(b[row * kTinyVocab + t]));
    for (int t = 0; t < kTinyVocab; ++t)
      worst = fmax(worst, fabs((double)a[row * kTinyVocab + t] - b[row * kTinyVocab + t]) / top);
  }
  return worst;
}

/* tests/llm/golden/tiny/mistral-f16 (make_tiny_models.py): a Mistral with a sliding window of 5
   and no tokenizer. Its config comes through, its last logits after the first teacher-forced
   sequence (16 tokens: the window is in play) match transformers' within 1e-3 of the row's
   largest, and the calls that need a tokenizer fail saying there is none. */
static void test_tiny_model_without_tokenizer(void) {
  const char* dir = TINY_DIR "mistral-f16";
  kiln_device cpu = {KILN_DEVICE_CPU, 0};
  kiln_llm_model tiny = NULL;
  OK(kiln_llm_model_load(&tiny, dir, cpu, KILN_FLOAT32));
  if (!tiny) return;
  kiln_llm_model_info info;
  OK(kiln_llm_model_get_info(&info, tiny));
  CHECK(info.sliding_window == 5);
  CHECK(info.vocab_size == 128 && info.n_layers == 2 && info.d_model == 32 && info.n_heads == 4);
  CHECK(info.n_kv_heads == 2 && info.head_dim == 16 && info.ffn_dim == 64 && !info.tied_embeddings);
  CHECK(info.bos_token == -1 && info.eos_token == -1 && info.eot_token == -1);
  CHECK(info.tensor_parallel == 1);

  enum { kVocab = kTinyVocab, kPositions = kTinyTokens };
  const int32_t* forced = tiny_tokens;
  static float want[kPositions * kVocab];
  char path[4096];
  snprintf(path, sizeof path, "%s/logits.f32", dir);
  FILE* f = fopen(path, "rb");
  CHECK(f && fread(want, sizeof(float), kPositions * kVocab, f) == kPositions * kVocab);
  if (f) fclose(f);
  kiln_llm_session s = NULL;
  kiln_array logits = NULL;
  OK(kiln_llm_session_new(&s, tiny));
  OK(kiln_llm_session_append(&logits, s, forced, kPositions));
  float got[kVocab];
  OK(kiln_array_copy_to(got, sizeof got, logits, KILN_FLOAT32));
  const float* last = want + (kPositions - 1) * kVocab;
  double scale = 0, diff = 0;
  for (int t = 0; t < kVocab; ++t) {
    scale = fmax(scale, fabs(last[t]));
    diff = fmax(diff, fabs(got[t] - last[t]));
  }
  CHECK(scale > 0 && diff <= 1e-3 * scale);

  int32_t* ids = NULL;
  size_t n = 0;
  FAILS_WITH(kiln_llm_tokenize(&ids, &n, tiny, "hi", false, false), "has no tokenizer");
  FAILS_WITH(kiln_llm_generate(s, forced, 2, NULL, NULL, NULL, NULL), "has no tokenizer");
  kiln_array_free(logits);
  kiln_llm_session_free(s);
  kiln_llm_model_free(tiny);
}

/* Loading fails and the last error contains want. */
static void load_fails_with(const char* name, const kiln_llm_load_options* o, const char* want) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", TINY_DIR, name);
  kiln_llm_model m = NULL;
  CHECK(kiln_llm_model_load_with(&m, path, o) != 0 && m == NULL);
  if (!strstr(kiln_last_error(), want)) fprintf(stderr, "expected an error containing \"%s\"\n", want);
  CHECK(strstr(kiln_last_error(), want) != NULL);
}

/* Tensor parallelism on the CPU's threads (docs/distributed.md): tiny checkpoints split over 2
   ranks give every position's logits within 1e-4 of the row's largest of one rank's (the bound of
   tests/llm/test_tensor_parallel.cpp: the row-parallel sums add in another order) and say 2 ranks;
   the activations reach the model; bad options fail saying what is wrong. */
static void test_load_options(void) {
  kiln_llm_load_options o;
  OK(kiln_llm_load_options_default(&o));
  CHECK(o.device.type == KILN_DEVICE_CPU && o.dtype == KILN_LLM_DTYPE_AUTO && o.tensor_parallel == 1);
  CHECK(o.activations == KILN_LLM_ACTIVATIONS_DEFAULT);
  static float one[kTinyTokens * kTinyVocab], two[kTinyTokens * kTinyVocab];
  static const char* const names[] = {"llama-bf16", "qwen2-bf16", "qwen3-bf16", "mistral-f16"};
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i) {
    o.tensor_parallel = 1;
    kiln_llm_model a = load_tiny(names[i], &o);
    o.tensor_parallel = 2;
    kiln_llm_model b = load_tiny(names[i], &o);
    if (!a || !b) return;
    kiln_llm_model_info ia, ib;
    OK(kiln_llm_model_get_info(&ia, a));
    OK(kiln_llm_model_get_info(&ib, b));
    CHECK(ia.tensor_parallel == 1 && ib.tensor_parallel == 2);
    CHECK(ib.n_heads == ia.n_heads && ib.vocab_size == kTinyVocab); /* the whole model's shape */
    tiny_logits(one, a);
    tiny_logits(two, b);
    const double worst = worst_relative(two, one);
    printf("%s on 2 ranks: largest difference %.2e of the row's largest logit\n", names[i], worst);
    CHECK(worst <= 1e-4);
    kiln_llm_model_free(a);
    kiln_llm_model_free(b);
  }

  /* A quantized checkpoint: what its products multiply is the one asked for, and int8 codes
     move the logits off exact ones. */
  o.tensor_parallel = 1;
  o.activations = KILN_LLM_ACTIVATIONS_EXACT;
  kiln_llm_model exact = load_tiny("llama-mlx-4bit", &o);
  o.activations = KILN_LLM_ACTIVATIONS_INT8;
  kiln_llm_model int8 = load_tiny("llama-mlx-4bit", &o);
  o.activations = KILN_LLM_ACTIVATIONS_DEFAULT;
  kiln_llm_model chosen = load_tiny("llama-mlx-4bit", &o);
  if (!exact || !int8 || !chosen) return;
  kiln_llm_model_info info;
  OK(kiln_llm_model_get_info(&info, exact));
  CHECK(info.activations == KILN_LLM_ACTIVATIONS_EXACT);
  OK(kiln_llm_model_get_info(&info, int8));
  CHECK(info.activations == KILN_LLM_ACTIVATIONS_INT8);
  OK(kiln_llm_model_get_info(&info, chosen));
  CHECK(info.activations != KILN_LLM_ACTIVATIONS_DEFAULT); /* resolved */
  tiny_logits(one, exact);
  tiny_logits(two, int8);
  const double moved = worst_relative(two, one);
  CHECK(moved > 0 && moved < 0.1);
  kiln_llm_model_free(exact);
  kiln_llm_model_free(int8);
  kiln_llm_model_free(chosen);

  o.activations = 7;
  FAILS_WITH(kiln_llm_model_load_with(&exact, TINY_DIR "llama-bf16", &o),
             "[kiln_llm_model_load_with] invalid activations 7");
  o.activations = KILN_LLM_ACTIVATIONS_DEFAULT;
  o.dtype = (kiln_dtype)(KILN_LLM_DTYPE_AUTO + 1);
  FAILS_WITH(kiln_llm_model_load_with(&exact, TINY_DIR "llama-bf16", &o),
             "[kiln_llm_model_load_with] invalid dtype 14");
  o.dtype = KILN_LLM_DTYPE_AUTO;
  o.tensor_parallel = 0;
  load_fails_with("llama-bf16", &o, "[llm] tensor parallelism needs 1 rank or more, not 0");
  o.tensor_parallel = 3;
  load_fails_with("llama-bf16", &o,
                  "llama-bf16: tensor parallelism over 3 ranks: n_heads (llama.attention.head_count) = 4 does not "
                  "divide over 3 ranks");
  o.tensor_parallel = 2;
  load_fails_with("llama-mlx-4bit", &o, "quantization groups of 64 input features do not divide over 2 ranks");
  int gpus = 0;
  OK(kiln_device_count(&gpus, KILN_DEVICE_CUDA));
  char want[256];
  o.device = (kiln_device){KILN_DEVICE_CUDA, 0};
  o.tensor_parallel = gpus + 1 > 2 ? gpus + 1 : 2;
  snprintf(want, sizeof want,
           "[llm] tensor parallelism over %d ranks from cuda:0 needs CUDA devices cuda:0 to cuda:%d; %d are present",
           o.tensor_parallel, o.tensor_parallel - 1, gpus);
  load_fails_with("llama-bf16", &o, want);
}

static void test_tokens_and_prompt(void) {
  kiln_llm_model_info info;
  OK(kiln_llm_model_get_info(&info, model));
  /* SmolLM2-135M's config.json: 30 layers of 576, 9 heads of 64, 3 kv heads, 1536 hidden,
     rope_theta 100000, rms_norm_eps 1e-5, tied embeddings; <|endoftext|> is 0, <|im_end|> 2. */
  CHECK(info.vocab_size == 49152 && info.n_layers == 30 && info.n_kv_heads == 3);
  CHECK(info.d_model == 576 && info.n_heads == 9 && info.head_dim == 64 && info.ffn_dim == 1536);
  CHECK(info.rope_dims == 64 && info.rope_base == 100000.0f && info.rope_scale == 1.0f && info.rope_traditional);
  CHECK(info.norm_eps == 1e-5f && !info.qkv_bias && !info.qk_norm && info.tied_embeddings);
  CHECK(info.eos_token == 2 && info.bos_token == 1 && info.eot_token == 2);
  CHECK(info.sliding_window == 0);
  const char* roles[] = {"user"};
  const char* contents[] = {"What is a kiln?"};
  char* text = NULL;
  OK(kiln_llm_chat_prompt(&text, model, roles, contents, 1));
  CHECK(text && strstr(text, "<|im_start|>user\nWhat is a kiln?<|im_end|>"));
  OK(kiln_llm_tokenize(&prompt, &prompt_n, model, text, true, true));
  CHECK(prompt_n > 10);
  char* back = NULL;
  OK(kiln_llm_detokenize(&back, model, prompt, prompt_n));
  CHECK(back && strstr(back, "What is a kiln?"));
  bool end = false;
  int32_t* im_end = NULL;
  size_t n = 0;
  OK(kiln_llm_tokenize(&im_end, &n, model, "<|im_end|>", false, true));
  CHECK(n == 1);
  if (n == 1) OK(kiln_llm_is_end_of_generation(&end, model, im_end[0]));
  CHECK(end);
  kiln_llm_tokens_free(im_end);
  kiln_string_free(back);
  kiln_string_free(text);
}

static int record_tokens(int32_t token, const char* text, size_t len, void* payload) {
  int32_t* out = (int32_t*)payload;
  (void)text, (void)len;
  if (token >= 0 && out[0] < 8) out[1 + out[0]++] = token;
  return 0;
}

static void test_generate(void) {
  kiln_llm_session s = NULL;
  OK(kiln_llm_session_new(&s, model));
  kiln_llm_generate_options o;
  OK(kiln_llm_generate_options_default(&o));
  CHECK(o.max_tokens == 256 && o.sampling.temperature > 0 && o.stop_tokens == NULL && o.n_stop_tokens == 0);
  o.max_tokens = 8;
  o.sampling.temperature = 0;
  counts c = {0, 0};
  kiln_llm_generate_stats st;
  OK(kiln_llm_generate(s, prompt, prompt_n, &o, count_tokens, &c, &st));
  CHECK(st.prompt_tokens == (int64_t)prompt_n);
  CHECK(st.generated_tokens == c.tokens && c.tokens > 0 && c.bytes > 0);
  int64_t pos = 0;
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos >= (int64_t)prompt_n);
  int seen = 0;
  OK(kiln_llm_session_truncate(s, 0));
  OK(kiln_llm_generate(s, prompt, prompt_n, NULL, stop_after_two, &seen, &st));
  CHECK(seen == 2 && st.stop_reason == KILN_LLM_STOP_CALLBACK);
  kiln_llm_session_free(s);
}

/* Greedy generation gives the tokens of step-by-step decoding and stops at a stop token, which
   it does not pass on; the session keeps what it computed. */
static void test_generate_stops(void) {
  greedy_tokens(greedy, 8);
  kiln_llm_session s = NULL;
  OK(kiln_llm_session_new(&s, model));
  kiln_llm_generate_options o;
  OK(kiln_llm_generate_options_default(&o));
  o.max_tokens = 8;
  o.sampling.temperature = 0;
  int32_t got[9] = {0};
  kiln_llm_generate_stats st;
  OK(kiln_llm_generate(s, prompt, prompt_n, &o, record_tokens, got, &st));
  CHECK(got[0] == 8 && memcmp(got + 1, greedy, sizeof greedy) == 0);
  CHECK(st.stop_reason == KILN_LLM_STOP_MAX_TOKENS);
  int64_t pos = 0;
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos == (int64_t)prompt_n + 7);

  int32_t stop = greedy[3];
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  memset(got, 0, sizeof got);
  OK(kiln_llm_session_clear(s));
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos == 0);
  OK(kiln_llm_generate(s, prompt, prompt_n, &o, record_tokens, got, &st));
  int first = 0; /* the stop token may come earlier in the greedy sequence */
  while (greedy[first] != stop) ++first;
  CHECK(got[0] == first && st.generated_tokens == first && memcmp(got + 1, greedy, sizeof(int32_t) * first) == 0);
  CHECK(st.stop_reason == KILN_LLM_STOP_TOKEN);
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos == (int64_t)prompt_n + first);
  o.n_stop_tokens = 2; /* with a NULL list */
  o.stop_tokens = NULL;
  FAILS_WITH(kiln_llm_generate(s, prompt, prompt_n, &o, NULL, NULL, NULL), "null token pointer with 2 tokens");
  kiln_llm_session_free(s);
}

/* Every position's logits from one step: the last row is what appending gives, and each row's
   top token is the next token of the sequence where the sequence is greedy. */
static void test_append_all(void) {
  kiln_llm_session s = NULL, one = NULL;
  kiln_array all = NULL, last = NULL, row = NULL, picks = NULL;
  OK(kiln_llm_session_new(&s, model));
  OK(kiln_llm_session_new(&one, model));
  int32_t seq[64];
  size_t n = prompt_n + 8;
  CHECK(n <= 64);
  memcpy(seq, prompt, sizeof(int32_t) * prompt_n);
  memcpy(seq + prompt_n, greedy, sizeof greedy);
  OK(kiln_llm_session_append_all(&all, s, seq, n));
  int ndim = 0;
  const int64_t* shape = NULL;
  OK(kiln_array_ndim(&ndim, all));
  OK(kiln_array_shape(&shape, all));
  CHECK(ndim == 2 && shape[0] == (int64_t)n && shape[1] == 49152);
  int64_t pos = 0;
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos == (int64_t)n);
  OK(kiln_argmax(&picks, all, 1, false));
  int32_t top[64];
  OK(kiln_array_copy_to(top, sizeof(int32_t) * n, picks, KILN_INT32));
  CHECK(memcmp(top + prompt_n - 1, greedy, sizeof greedy) == 0);
  OK(kiln_llm_session_append(&last, one, seq, n));
  int64_t start[2] = {(int64_t)n - 1, 0}, stop[2] = {(int64_t)n, 49152};
  OK(kiln_slice(&row, all, start, stop, NULL, 2));
  float a[49152], b[49152];
  OK(kiln_array_copy_to(a, sizeof a, row, KILN_FLOAT32));
  OK(kiln_array_copy_to(b, sizeof b, last, KILN_FLOAT32));
  float worst = 0, largest = 0;
  for (int i = 0; i < 49152; ++i) {
    float d = fabsf(a[i] - b[i]);
    if (d > worst) worst = d;
    if (fabsf(b[i]) > largest) largest = fabsf(b[i]);
  }
  // int16 activations (the CPU's default) round x anew on each path: codes one step apart part
  // the two by about 2e-4 of the largest logit (exact activations: 1e-6).
  CHECK(worst <= 1e-3f * largest);
  FAILS_WITH(kiln_llm_session_append_all(&all, s, seq, 0), "at least one token");
  kiln_array_free(all);
  kiln_array_free(last);
  kiln_array_free(row);
  kiln_array_free(picks);
  kiln_llm_session_free(s);
  kiln_llm_session_free(one);
}

/* The model's tensors as the file holds them: a Q4_1 matrix whose product matches its expansion,
   a Q8_0 embedding, a float32 norm. */
static void test_tensors(void) {
  kiln_array w = NULL, scales = NULL, biases = NULL, x = NULL, y = NULL, ref = NULL, deq = NULL;
  int group = -1, bits = -1;
  bool has = false;
  OK(kiln_llm_model_has_tensor(&has, model, "blk.0.attn_q.weight"));
  CHECK(has);
  OK(kiln_llm_model_has_tensor(&has, model, "output.weight"));
  CHECK(!has); /* tied to the embedding */
  OK(kiln_llm_model_tensor(&w, &scales, &biases, &group, &bits, model, "blk.0.attn_q.weight"));
  CHECK(group == 32 && bits == 4);
  int ndim = 0;
  const int64_t* shape = NULL;
  kiln_dtype dt;
  OK(kiln_array_shape(&shape, w));
  OK(kiln_array_ndim(&ndim, w));
  OK(kiln_array_dtype(&dt, w));
  CHECK(ndim == 2 && shape[0] == 576 && shape[1] == 576 * 4 / 32 && dt == KILN_UINT32);
  OK(kiln_array_shape(&shape, scales));
  OK(kiln_array_dtype(&dt, scales));
  CHECK(shape[0] == 576 && shape[1] == 576 / 32 && dt == KILN_FLOAT16);
  int64_t xs[2] = {1, 576};
  kiln_array key = NULL;
  OK(kiln_random_key(&key, 3));
  OK(kiln_random_normal(&x, xs, 2, key, KILN_FLOAT32, 0, 1));
  OK(kiln_quantized_matmul(&y, x, w, scales, biases, true, group, bits));
  /* The expansion with float32 scales and biases (exact: they are float16 values), else it
     would be rounded to float16. */
  kiln_array s32 = NULL, b32 = NULL;
  OK(kiln_astype(&s32, scales, KILN_FLOAT32));
  OK(kiln_astype(&b32, biases, KILN_FLOAT32));
  OK(kiln_dequantize(&deq, w, s32, b32, group, bits));
  OK(kiln_transpose(&deq, deq, NULL, 0));
  OK(kiln_matmul(&ref, x, deq));
  float a[576], b[576];
  OK(kiln_array_copy_to(a, sizeof a, y, KILN_FLOAT32));
  OK(kiln_array_copy_to(b, sizeof b, ref, KILN_FLOAT32));
  float worst = 0;
  for (int i = 0; i < 576; ++i) worst = fmaxf(worst, fabsf(a[i] - b[i]) / (1 + fabsf(b[i])));
  CHECK(worst < 1e-4f);

  OK(kiln_llm_model_tensor(&w, &scales, &biases, &group, &bits, model, "token_embd.weight"));
  CHECK(group == 32 && bits == 8);
  kiln_array keep = scales; /* a dense tensor leaves scales and biases as they are */
  OK(kiln_llm_model_tensor(&w, &scales, &biases, &group, &bits, model, "output_norm.weight"));
  CHECK(group == 0 && bits == 0 && scales == keep);
  OK(kiln_array_ndim(&ndim, w));
  OK(kiln_array_shape(&shape, w));
  OK(kiln_array_dtype(&dt, w));
  CHECK(ndim == 1 && shape[0] == 576 && dt == KILN_FLOAT32);
  FAILS_WITH(kiln_llm_model_tensor(&w, &scales, &biases, &group, &bits, model, "blk.99.attn_q.weight"),
             "blk.99.attn_q.weight");
  FAILS_WITH(kiln_llm_model_tensor(&w, NULL, &biases, &group, &bits, model, "output_norm.weight"),
             "null output pointer");
  FAILS_WITH(kiln_llm_model_has_tensor(&has, model, NULL), "null tensor name");
  kiln_array arrays[] = {w, scales, biases, x, y, ref, deq, key, s32, b32};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) kiln_array_free(arrays[i]);
}

static void test_batched_step_and_threads(void) {
  /* Two sessions one step apart, decoded together, give their single-session logits. */
  kiln_llm_session a = NULL, b = NULL;
  kiln_array la = NULL, lb = NULL, both = NULL, tmp = NULL;
  OK(kiln_llm_session_new(&a, model));
  OK(kiln_llm_session_new(&b, model));
  OK(kiln_llm_session_append(&la, a, prompt, prompt_n));
  OK(kiln_llm_session_append(&lb, b, prompt, prompt_n));
  OK(kiln_llm_session_append(&lb, b, greedy, 1));
  kiln_llm_session pair[2] = {a, b};
  int32_t next[2] = {greedy[0], greedy[1]};
  OK(kiln_llm_step(&both, pair, next, 2));
  int ndim = 0;
  const int64_t* shape = NULL;
  OK(kiln_array_ndim(&ndim, both));
  OK(kiln_array_shape(&shape, both));
  CHECK(ndim == 2 && shape[0] == 2 && shape[1] == 49152);
  OK(kiln_argmax(&tmp, both, 1, false));
  int32_t picks[2] = {-1, -1};
  OK(kiln_array_copy_to(picks, sizeof picks, tmp, KILN_INT32));
  CHECK(picks[0] == greedy[1] && picks[1] == greedy[2]);

  pthread_t t[3];
  int32_t got[3][8];
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, thread_main, got[i]);
  for (int i = 0; i < 3; ++i) {
    pthread_join(t[i], NULL);
    CHECK(memcmp(got[i], greedy, sizeof greedy) == 0);
  }
  kiln_array_free(la);
  kiln_array_free(lb);
  kiln_array_free(both);
  kiln_array_free(tmp);
  kiln_llm_session_free(a);
  kiln_llm_session_free(b);
}

static void test_errors(void) {
  kiln_llm_model m = NULL;
  kiln_device cpu = {KILN_DEVICE_CPU, 0};
  FAILS_WITH(kiln_llm_model_load(&m, "/nonexistent/model.gguf", cpu, KILN_FLOAT32), "model.gguf");
  CHECK(m == NULL);
  kiln_llm_session s = NULL;
  kiln_array logits = NULL;
  OK(kiln_llm_session_new(&s, model));
  int32_t bad = 49152;
  FAILS_WITH(kiln_llm_session_append(&logits, s, &bad, 1), "outside the vocabulary");
  FAILS_WITH(kiln_llm_session_truncate(s, 5), "cannot truncate");
  FAILS_WITH(kiln_llm_session_append(&logits, NULL, &bad, 1), "null session");
  FAILS_WITH(kiln_llm_step(&logits, &s, &bad, 0), "at least one session");
  kiln_llm_session_free(s);
}

int main(void) {
  RUN(test_tiny_model_without_tokenizer);
  RUN(test_load_options);
  if (!find_model()) {
    if (harness_finish() != 0) return 1; /* the tiny model's checks failed: not a skip */
    printf("SKIP: the default model is not there (scripts/setup fetches it)\n");
    return 77;
  }
  kiln_device cpu = {KILN_DEVICE_CPU, 0};
  if (kiln_llm_model_load(&model, model_path, cpu, KILN_FLOAT32) != 0) {
    fprintf(stderr, "cannot load %s: %s\n", model_path, kiln_last_error());
    return 1;
  }
  RUN(test_tokens_and_prompt);
  RUN(test_generate);
  RUN(test_generate_stops);
  RUN(test_append_all);
  RUN(test_tensors);
  RUN(test_batched_step_and_threads);
  RUN(test_errors);
  kiln_llm_tokens_free(prompt);
  kiln_llm_model_free(model);
  return harness_finish();
}
