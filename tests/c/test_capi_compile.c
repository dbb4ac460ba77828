/* C API tests: kiln_compile over closures, its caching, failures, nesting, and
   8 threads compiling and applying at once. Built as C11 with -Wall -Werror. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>

#include "harness.h"

static kiln_array vec_f32(const float* data, int64_t n) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, &n, 1, KILN_FLOAT32));
  return a;
}

static int equals_f32(kiln_array a, const float* want, size_t n) {
  size_t size = 0;
  float got[64];
  if (kiln_array_size(&size, a) != 0 || size != n || n > 64) return 0;
  if (kiln_array_copy_to(got, sizeof got, a, KILN_FLOAT32) != 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (fabsf(got[i] - want[i]) > 1e-5f * (1.0f + fabsf(want[i]))) return 0;
  }
  return 1;
}

/* Applies c to the single input a; returns output 0 (a new handle) or NULL. */
static kiln_array apply1(kiln_closure c, kiln_array a) {
  kiln_vector_array in = NULL, out = NULL;
  kiln_array r = NULL;
  int rc = kiln_vector_array_new_data(&in, &a, 1) || kiln_closure_apply(&out, c, in) ||
           kiln_vector_array_get(&r, out, 0);
  kiln_vector_array_free(in);
  kiln_vector_array_free(out);
  if (rc != 0) {
    kiln_array_free(r);
    return NULL;
  }
  return r;
}

typedef struct {
  atomic_int calls; /* times the callback ran (traces, when compiled) */
  atomic_int dtors;
  atomic_int fail_next; /* > 0: the next calls fail (counting down) */
  float scale;
} payload_t;

static void payload_dtor(void* p) { atomic_fetch_add(&((payload_t*)p)->dtors, 1); }

/* out = [exp(x) * scale + 1] */
static int affine_fn(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  payload_t* p = (payload_t*)payload;
  atomic_fetch_add(&p->calls, 1);
  if (atomic_load(&p->fail_next) > 0) {
    atomic_fetch_sub(&p->fail_next, 1);
    kiln_set_error("affine refused to trace");
    return 1;
  }
  kiln_array x = NULL, s = NULL, one = NULL, y = NULL;
  int rc = kiln_vector_array_get(&x, in, 0) || kiln_array_new_float_like(&s, p->scale, x) ||
           kiln_array_new_float_like(&one, 1.0, x) || kiln_exp(&y, x) || kiln_multiply(&y, y, s) ||
           kiln_add(&y, y, one) || kiln_vector_array_append(*out, y);
  kiln_array_free(x);
  kiln_array_free(s);
  kiln_array_free(one);
  kiln_array_free(y);
  return rc;
}

/* Applies the compiled closure in payload, then squares (a compiled call inside a trace). */
static int square_of_inner(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  kiln_vector_array mid = NULL;
  kiln_array y = NULL;
  int rc = kiln_closure_apply(&mid, (kiln_closure)payload, in) || kiln_vector_array_get(&y, mid, 0) ||
           kiln_square(&y, y) || kiln_vector_array_append(*out, y);
  kiln_vector_array_free(mid);
  kiln_array_free(y);
  return rc;
}

/* [matmul] of its two inputs: fails for mismatched shapes. */
static int matmul_fn(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  (void)payload;
  kiln_array a = NULL, b = NULL, c = NULL;
  int rc = kiln_vector_array_get(&a, in, 0) || kiln_vector_array_get(&b, in, 1) || kiln_matmul(&c, a, b) ||
           kiln_vector_array_append(*out, c);
  kiln_array_free(a);
  kiln_array_free(b);
  kiln_array_free(c);
  return rc;
}

static void affine_expect(const float* x, float* want, int n, float scale) {
  for (int i = 0; i < n; ++i) want[i] = expf(x[i]) * scale + 1;
}

static void test_compile_basic(void) {
  const float x3[3] = {0, 0.5f, 1}, x4[4] = {1, 2, 3, 4};
  float w3[3], w4[4];
  affine_expect(x3, w3, 3, 2);
  affine_expect(x4, w4, 4, 2);
  kiln_array a3 = vec_f32(x3, 3), a4 = vec_f32(x4, 4), r = NULL;

  payload_t p = {0, 0, 0, 2.0f};
  kiln_closure fn = NULL, compiled = NULL;
  OK(kiln_closure_new_func_payload(&fn, affine_fn, &p, payload_dtor));
  OK(kiln_compile(&compiled, fn, false));

  /* Traced once per shape; later calls replay. */
  for (int i = 0; i < 3; ++i) {
    r = apply1(compiled, a3);
    CHECK(r && equals_f32(r, w3, 3));
    kiln_array_free(r);
  }
  CHECK(atomic_load(&p.calls) == 1);
  r = apply1(compiled, a4);
  CHECK(r && equals_f32(r, w4, 4));
  kiln_array_free(r);
  CHECK(atomic_load(&p.calls) == 2);

  /* Shapeless: one trace for every shape of the same rank and dtype. */
  payload_t q = {0, 0, 0, 2.0f};
  kiln_closure fq = NULL, shapeless = NULL;
  OK(kiln_closure_new_func_payload(&fq, affine_fn, &q, payload_dtor));
  OK(kiln_compile_named(&shapeless, fq, "affine", true));
  r = apply1(shapeless, a3);
  CHECK(r && equals_f32(r, w3, 3));
  kiln_array_free(r);
  r = apply1(shapeless, a4);
  CHECK(r && equals_f32(r, w4, 4));
  kiln_array_free(r);
  CHECK(atomic_load(&q.calls) == 1);

  /* A compiled closure is a closure: compile it again, set, free. */
  kiln_closure twice = NULL, alias = NULL;
  OK(kiln_compile(&twice, compiled, false));
  OK(kiln_closure_set(&alias, twice));
  r = apply1(alias, a3);
  CHECK(r && equals_f32(r, w3, 3));
  kiln_array_free(r);

  /* Payloads are released once, when the last reference (the compiled ones) goes. */
  OK(kiln_closure_free(fn));
  OK(kiln_closure_free(fq));
  CHECK(atomic_load(&p.dtors) == 0 && atomic_load(&q.dtors) == 0);
  OK(kiln_closure_free(compiled));
  OK(kiln_closure_free(twice));
  CHECK(atomic_load(&p.dtors) == 0); /* alias still holds it */
  OK(kiln_closure_free(alias));
  OK(kiln_closure_free(shapeless));
  CHECK(atomic_load(&p.dtors) == 1);
  CHECK(atomic_load(&q.dtors) == 1);

  /* The lazy graph of an output, as DOT. */
  kiln_array e = NULL;
  kiln_vector_array outs = NULL;
  char* dot = NULL;
  OK(kiln_exp(&e, a3));
  OK(kiln_add(&e, e, a3));
  OK(kiln_vector_array_new_data(&outs, &e, 1));
  OK(kiln_export_to_dot(&dot, outs));
  CHECK(dot && strstr(dot, "digraph") && strstr(dot, "exp") && strstr(dot, "add"));
  kiln_string_free(dot);
  FAILS_WITH(kiln_export_to_dot(&dot, NULL), "null vector handle");
  kiln_array_free(e);
  kiln_vector_array_free(outs);

  FAILS_WITH(kiln_compile(&compiled, NULL, false), "null closure handle");
  FAILS_WITH(kiln_compile(NULL, fn, false), "null output pointer");
  kiln_array_free(a3);
  kiln_array_free(a4);
}

static void test_compile_failures(void) {
  const float x[3] = {0, 1, 2};
  float w[3];
  affine_expect(x, w, 3, 3);
  kiln_array a = vec_f32(x, 3), r = NULL;
  payload_t p = {0, 0, 2, 3.0f};
  kiln_closure fn = NULL, c = NULL;
  OK(kiln_closure_new_func_payload(&fn, affine_fn, &p, payload_dtor));
  OK(kiln_compile(&c, fn, false));

  kiln_vector_array in = NULL, out = NULL;
  OK(kiln_vector_array_new_data(&in, &a, 1));
  /* Failing traces fail the apply with the callback's message and cache nothing. */
  FAILS_WITH(kiln_closure_apply(&out, c, in), "affine refused to trace");
  FAILS_WITH(kiln_closure_apply(&out, c, in), "affine refused to trace");
  CHECK(out == NULL);
  CHECK(atomic_load(&p.calls) == 2);
  r = apply1(c, a);
  CHECK(r && equals_f32(r, w, 3));
  CHECK(atomic_load(&p.calls) == 3);
  kiln_array_free(r);
  r = apply1(c, a);
  CHECK(atomic_load(&p.calls) == 3); /* now cached */
  kiln_array_free(r);

  /* An op error inside a trace, e.g. mismatched matmul shapes. */
  kiln_closure mm = NULL, cmm = NULL;
  OK(kiln_closure_new_func(&mm, matmul_fn));
  OK(kiln_compile(&cmm, mm, false));
  const int64_t s23[2] = {2, 3};
  const float d6[6] = {1, 2, 3, 4, 5, 6};
  kiln_array m = NULL;
  OK(kiln_array_new_data(&m, d6, s23, 2, KILN_FLOAT32));
  kiln_vector_array pair = NULL;
  OK(kiln_vector_array_new(&pair));
  OK(kiln_vector_array_append(pair, m));
  OK(kiln_vector_array_append(pair, m));
  FAILS_WITH(kiln_closure_apply(&out, cmm, pair), "[matmul] inner dimensions differ");
  FAILS_WITH(kiln_closure_apply(&out, cmm, pair), "[matmul] inner dimensions differ");

  kiln_closure_free(fn);
  kiln_closure_free(c);
  kiln_closure_free(mm);
  kiln_closure_free(cmm);
  CHECK(atomic_load(&p.dtors) == 1);
  kiln_vector_array_free(in);
  kiln_vector_array_free(out);
  kiln_vector_array_free(pair);
  kiln_array_free(a);
  kiln_array_free(m);
}

static void test_compile_nesting_and_mode(void) {
  const float x[3] = {0, 1, 2};
  float w[3];
  affine_expect(x, w, 3, 1);
  for (int i = 0; i < 3; ++i) w[i] *= w[i];
  kiln_array a = vec_f32(x, 3), r = NULL;
  payload_t p = {0, 0, 0, 1.0f};
  kiln_closure fn = NULL, inner = NULL, outer_fn = NULL, outer = NULL;
  OK(kiln_closure_new_func_payload(&fn, affine_fn, &p, payload_dtor));
  OK(kiln_compile(&inner, fn, false));
  OK(kiln_closure_new_func_payload(&outer_fn, square_of_inner, inner, NULL));
  OK(kiln_compile(&outer, outer_fn, false));
  for (int i = 0; i < 2; ++i) {
    r = apply1(outer, a);
    CHECK(r && equals_f32(r, w, 3));
    kiln_array_free(r);
  }

  /* Compile modes: each runs the same function; disabled calls it every time. */
  kiln_compile_mode saved = KILN_COMPILE_ENABLED, m = KILN_COMPILE_ENABLED;
  OK(kiln_get_compile_mode(&saved));
  const kiln_compile_mode modes[4] = {KILN_COMPILE_DISABLED, KILN_COMPILE_NO_SIMPLIFY, KILN_COMPILE_NO_FUSE,
                                      KILN_COMPILE_ENABLED};
  for (int k = 0; k < 4; ++k) {
    OK(kiln_set_compile_mode(modes[k]));
    OK(kiln_get_compile_mode(&m));
    CHECK(m == modes[k]);
    payload_t q = {0, 0, 0, 1.0f};
    kiln_closure f = NULL, c = NULL;
    OK(kiln_closure_new_func_payload(&f, affine_fn, &q, payload_dtor));
    OK(kiln_compile(&c, f, false));
    for (int i = 0; i < 3; ++i) {
      r = apply1(c, a);
      float w1[3];
      affine_expect(x, w1, 3, 1);
      CHECK(r && equals_f32(r, w1, 3));
      kiln_array_free(r);
    }
    CHECK(atomic_load(&q.calls) == (modes[k] == KILN_COMPILE_DISABLED ? 3 : 1));
    kiln_closure_free(f);
    kiln_closure_free(c);
    CHECK(atomic_load(&q.dtors) == 1);
  }
  FAILS_WITH(kiln_set_compile_mode((kiln_compile_mode)17), "invalid mode 17");
  OK(kiln_set_compile_mode(saved));

  kiln_closure_free(fn);
  kiln_closure_free(inner);
  kiln_closure_free(outer_fn);
  kiln_closure_free(outer);
  CHECK(atomic_load(&p.dtors) == 1);
  kiln_array_free(a);
}

/* The fused-kernel policy: off runs the fused region (exp, multiply, add) through the
   interpreter on every call, wait runs its generated kernel from the first call. */
static void test_fused_kernels_policy(void) {
  const float x[3] = {0, 1, 2};
  float w[3];
  affine_expect(x, w, 3, 3);
  kiln_array a = vec_f32(x, 3), r = NULL;
  kiln_fused_kernels saved = KILN_FUSED_KERNELS_BACKGROUND, got = KILN_FUSED_KERNELS_BACKGROUND;
  OK(kiln_get_fused_kernels(&saved));
  const kiln_fused_kernels policies[2] = {KILN_FUSED_KERNELS_OFF, KILN_FUSED_KERNELS_WAIT};
  for (int k = 0; k < 2; ++k) {
    OK(kiln_set_fused_kernels(policies[k]));
    OK(kiln_get_fused_kernels(&got));
    CHECK(got == policies[k]);
    payload_t q = {0, 0, 0, 3.0f};
    kiln_closure f = NULL, c = NULL;
    OK(kiln_closure_new_func_payload(&f, affine_fn, &q, payload_dtor));
    OK(kiln_compile(&c, f, false));
    OK(kiln_reset_stats());
    for (int i = 0; i < 3; ++i) {
      r = apply1(c, a);
      CHECK(r && equals_f32(r, w, 3));
      kiln_array_free(r);
    }
    kiln_stats s;
    OK(kiln_get_stats(&s));
    const int off = policies[k] == KILN_FUSED_KERNELS_OFF;
    CHECK(s.interim_calls == (off ? 3u : 0u));
    CHECK(s.fused_calls == (off ? 0u : 3u));
    kiln_closure_free(f);
    kiln_closure_free(c);
  }
  FAILS_WITH(kiln_set_fused_kernels((kiln_fused_kernels)3), "[kiln_set_fused_kernels] invalid policy 3");
  FAILS_WITH(kiln_get_fused_kernels(NULL), "kiln_get_fused_kernels");
  OK(kiln_set_fused_kernels(saved));
  OK(kiln_get_fused_kernels(&got));
  CHECK(got == saved);
  kiln_array_free(a);
}

/* ---- 8 threads compiling and applying at once ------------------------------------- */

enum { kThreads = 8, kIters = 100 };

typedef struct {
  kiln_closure shared; /* this thread's reference to a compiled closure all threads call */
  int index;
} thread_arg;

static pthread_barrier_t g_start;

static void* thread_body(void* arg) {
  thread_arg* t = (thread_arg*)arg;
  const int n = 2 + t->index % 3; /* a few different shapes across threads */
  float x[8], want_shared[8], want_own[8];
  for (int i = 0; i < n; ++i) x[i] = 0.1f * (float)(i + t->index);
  affine_expect(x, want_shared, n, 10);
  affine_expect(x, want_own, n, (float)t->index);
  kiln_array a = vec_f32(x, n);

  pthread_barrier_wait(&g_start);
  /* Each thread compiles a function of its own, at the same time as the others. */
  payload_t own = {0, 0, 1, (float)t->index}; /* its first trace fails */
  kiln_closure f = NULL, c = NULL;
  OK(kiln_closure_new_func_payload(&f, affine_fn, &own, payload_dtor));
  OK(kiln_compile(&c, f, t->index % 2 == 0));
  OK(kiln_closure_free(f)); /* the compiled closure keeps it alive */
  kiln_array r = apply1(c, a);
  CHECK(r == NULL && strstr(kiln_last_error(), "affine refused to trace"));

  int bad = 0;
  for (int i = 0; i < kIters; ++i) {
    r = apply1(t->shared, a);
    bad += !(r && equals_f32(r, want_shared, (size_t)n));
    kiln_array_free(r);
    r = apply1(c, a);
    bad += !(r && equals_f32(r, want_own, (size_t)n));
    kiln_array_free(r);
  }
  CHECK(bad == 0);
  CHECK(atomic_load(&own.calls) == 2); /* the failed trace, then one that stuck */
  kiln_closure_free(c);
  CHECK(atomic_load(&own.dtors) == 1);
  kiln_closure_free(t->shared);
  kiln_array_free(a);
  return NULL;
}

static void test_threads(void) {
  payload_t shared = {0, 0, 0, 10.0f};
  kiln_closure f = NULL, c = NULL;
  OK(kiln_closure_new_func_payload(&f, affine_fn, &shared, payload_dtor));
  OK(kiln_compile(&c, f, false));
  kiln_closure_free(f);
  pthread_t th[kThreads];
  thread_arg args[kThreads];
  CHECK(pthread_barrier_init(&g_start, NULL, kThreads) == 0);
  for (int i = 0; i < kThreads; ++i) {
    args[i].shared = NULL;
    args[i].index = i;
    OK(kiln_closure_set(&args[i].shared, c));
  }
  kiln_closure_free(c);
  for (int i = 0; i < kThreads; ++i) CHECK(pthread_create(&th[i], NULL, thread_body, &args[i]) == 0);
  for (int i = 0; i < kThreads; ++i) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&g_start);
  /* One trace per distinct shape (2, 3 and 4 elements), however many threads raced. */
  CHECK(atomic_load(&shared.calls) == 3);
  CHECK(atomic_load(&shared.dtors) == 1);
}

int main(void) {
  RUN(test_compile_basic);
  RUN(test_compile_failures);
  RUN(test_compile_nesting_and_mode);
  RUN(test_fused_kernels_policy);
  RUN(test_threads);
  return harness_finish();
}
