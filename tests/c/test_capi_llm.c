/* The language-model C API (kiln/c/kiln_llm.h) on the default model: tokens, a chat prompt,
   greedy generation with a token callback, a batched step against single sessions, sessions on
   several threads, and errors. Exits 77 (a skip) when the model is not there (scripts/setup). */
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

static void test_tokens_and_prompt(void) {
  kiln_llm_model_info info;
  OK(kiln_llm_model_get_info(&info, model));
  CHECK(info.vocab_size == 49152 && info.n_layers == 30 && info.n_kv_heads == 3);
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

static void test_generate(void) {
  kiln_llm_session s = NULL;
  OK(kiln_llm_session_new(&s, model));
  kiln_llm_sampling greedy_sampling;
  OK(kiln_llm_sampling_default(&greedy_sampling));
  greedy_sampling.temperature = 0;
  counts c = {0, 0};
  kiln_llm_generate_stats st;
  OK(kiln_llm_generate(s, prompt, prompt_n, 8, &greedy_sampling, count_tokens, &c, &st));
  CHECK(st.prompt_tokens == (int64_t)prompt_n);
  CHECK(st.generated_tokens == c.tokens && c.tokens > 0 && c.bytes > 0);
  int64_t pos = 0;
  OK(kiln_llm_session_position(&pos, s));
  CHECK(pos >= (int64_t)prompt_n);
  int seen = 0;
  OK(kiln_llm_session_truncate(s, 0));
  OK(kiln_llm_generate(s, prompt, prompt_n, 8, NULL, stop_after_two, &seen, NULL));
  CHECK(seen == 2);
  kiln_llm_session_free(s);
}

static void test_batched_step_and_threads(void) {
  greedy_tokens(greedy, 8);
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
  if (!find_model()) {
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
  RUN(test_batched_step_and_threads);
  RUN(test_errors);
  kiln_llm_tokens_free(prompt);
  kiln_llm_model_free(model);
  return harness_finish();
}
