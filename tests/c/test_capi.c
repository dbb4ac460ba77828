/* C API tests: errors, dtypes, arrays, vectors, elementwise and view ops,
   evaluation, devices, closures, and threads. Built as C11 with -Wall -Werror. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"

/* ---- helpers ------------------------------------------------------------------- */

static kiln_array new_f32(const float* data, const int64_t* shape, int ndim) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, shape, ndim, KILN_FLOAT32));
  return a;
}

static kiln_array vec_f32(const float* data, int64_t n) { return new_f32(data, &n, 1); }

static kiln_array vec_i32(const int32_t* data, int64_t n) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, &n, 1, KILN_INT32));
  return a;
}

/* True when a holds exactly the n float values (compared as float32, with tolerance). */
static int equals_f32(kiln_array a, const float* want, size_t n) {
  size_t size = 0;
  if (kiln_array_size(&size, a) != 0 || size != n) return 0;
  float got[64];
  if (n > 64 || kiln_array_copy_to(got, sizeof got, a, KILN_FLOAT32) != 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (isnan(want[i]) ? !isnan(got[i]) : fabsf(got[i] - want[i]) > 1e-5f * (1.0f + fabsf(want[i]))) return 0;
  }
  return 1;
}

static int has_shape(kiln_array a, const int64_t* want, int ndim) {
  int nd = -1;
  const int64_t* shape = NULL;
  if (kiln_array_ndim(&nd, a) != 0 || nd != ndim) return 0;
  if (kiln_array_shape(&shape, a) != 0) return 0;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] != want[i]) return 0;
  }
  return 1;
}

static kiln_dtype dtype_of(kiln_array a) {
  kiln_dtype d = KILN_NUM_DTYPES;
  kiln_array_dtype(&d, a);
  return d;
}

/* ---- errors -------------------------------------------------------------------- */

static atomic_int handler_calls;
static atomic_int handler_dtors;
static void count_handler(const char* msg, void* data) {
  CHECK(msg != NULL && msg[0] != '\0');
  CHECK(data == (void*)&handler_calls);
  atomic_fetch_add(&handler_calls, 1);
}
static void count_handler_dtor(void* data) {
  CHECK(data == (void*)&handler_calls);
  atomic_fetch_add(&handler_dtors, 1);
}

static void* set_error_on_thread(void* arg) {
  (void)arg;
  kiln_set_error("from another thread");
  return NULL;
}

static void test_errors(void) {
  OK(kiln_clear_error());
  CHECK(kiln_last_error() != NULL);
  CHECK(strcmp(kiln_last_error(), "") == 0);
  OK(kiln_set_error("custom"));
  CHECK(strcmp(kiln_last_error(), "custom") == 0);

  /* A failing call sets the message and returns non-zero; nothing aborts. */
  kiln_array a = NULL;
  int64_t shape[2] = {2, -1};
  float data[2] = {1, 2};
  FAILS_WITH(kiln_array_new_data(&a, data, shape, 2, KILN_FLOAT32), "[kiln_array_new_data] negative dimension");
  CHECK(a == NULL);
  /* 2^61 float64 elements are 2^64 bytes: this returned 0 with a wrapped buffer, and exp
     of it crashed (issue 24). */
  int64_t huge[1] = {(int64_t)1 << 61};
  FAILS_WITH(kiln_array_new_data(&a, data, huge, 1, KILN_FLOAT64),
             "[kiln_array_new_data] shape (2305843009213693952) of float64 is too large");
  CHECK(a == NULL);
  kiln_array e = NULL;
  FAILS_WITH(kiln_exp(&e, a), "null array handle");
  FAILS_WITH(kiln_zeros(&a, huge, 1, KILN_FLOAT64), "[zeros] shape (2305843009213693952) of float64 is too large");
  int64_t square[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
  FAILS_WITH(kiln_zeros(&a, square, 2, KILN_FLOAT32), "[zeros]");
  CHECK(a == NULL);
  FAILS_WITH(kiln_array_ndim(NULL, a), "null output pointer");
  int nd = 0;
  FAILS_WITH(kiln_array_ndim(&nd, NULL), "[kiln_array_ndim] null array handle");

  /* The message is per thread. */
  OK(kiln_set_error("mine"));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, set_error_on_thread, NULL) == 0);
  pthread_join(t, NULL);
  CHECK(strcmp(kiln_last_error(), "mine") == 0);

  /* The handler sees every failure; its dtor runs once when it is replaced. */
  atomic_store(&handler_calls, 0);
  atomic_store(&handler_dtors, 0);
  OK(kiln_set_error_handler(count_handler, &handler_calls, count_handler_dtor));
  FAILS_WITH(kiln_array_ndim(&nd, NULL), "null array handle");
  FAILS_WITH(kiln_dtype_from_name(NULL, "float32"), "null output pointer");
  CHECK(atomic_load(&handler_calls) == 2);
  CHECK(atomic_load(&handler_dtors) == 0);
  OK(kiln_set_error_handler(NULL, NULL, NULL));
  CHECK(atomic_load(&handler_dtors) == 1);
  FAILS_WITH(kiln_array_ndim(&nd, NULL), "null array handle");
  CHECK(atomic_load(&handler_calls) == 2);
  /* Removing with a dtor releases that data at once. */
  OK(kiln_set_error_handler(NULL, &handler_calls, count_handler_dtor));
  CHECK(atomic_load(&handler_dtors) == 2);
}

/* ---- dtypes and arrays ---------------------------------------------------------- */

static void test_dtypes(void) {
  static const struct {
    kiln_dtype d;
    const char* name;
    size_t size;
  } table[] = {{KILN_BOOL, "bool", 1},      {KILN_UINT8, "uint8", 1},       {KILN_UINT16, "uint16", 2},
               {KILN_UINT32, "uint32", 4},  {KILN_UINT64, "uint64", 8},     {KILN_INT8, "int8", 1},
               {KILN_INT16, "int16", 2},    {KILN_INT32, "int32", 4},       {KILN_INT64, "int64", 8},
               {KILN_FLOAT16, "float16", 2}, {KILN_BFLOAT16, "bfloat16", 2}, {KILN_FLOAT32, "float32", 4},
               {KILN_FLOAT64, "float64", 8}};
  CHECK(sizeof table / sizeof table[0] == KILN_NUM_DTYPES);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    size_t size = 0;
    const char* name = NULL;
    kiln_dtype back = KILN_NUM_DTYPES;
    OK(kiln_dtype_size(&size, table[i].d));
    CHECK(size == table[i].size);
    OK(kiln_dtype_name(&name, table[i].d));
    CHECK(name && strcmp(name, table[i].name) == 0);
    OK(kiln_dtype_from_name(&back, table[i].name));
    CHECK(back == table[i].d);
  }
  size_t size = 0;
  FAILS_WITH(kiln_dtype_size(&size, (kiln_dtype)99), "invalid dtype 99");
  kiln_dtype d;
  FAILS_WITH(kiln_dtype_from_name(&d, "float8"), "float8");
  FAILS_WITH(kiln_dtype_from_name(&d, NULL), "null name");
}

/* Every dtype from host data and back, and item() of every dtype. */
static void test_array_every_dtype(void) {
  const int64_t shape[2] = {2, 3};
  const int values[6] = {0, 1, 2, 3, 4, 5};
#define KILN_C_DTYPE(E, n, t)                                                        \
  if (E != KILN_FLOAT16 && E != KILN_BFLOAT16) {                                     \
    t host[6];                                                                       \
    for (int i = 0; i < 6; ++i) host[i] = (t)values[i];                              \
    kiln_array a = NULL;                                                             \
    OK(kiln_array_new_data(&a, host, shape, 2, E));                                  \
    CHECK(dtype_of(a) == E);                                                         \
    CHECK(has_shape(a, shape, 2));                                                   \
    t back[6];                                                                       \
    memset(back, 0, sizeof back);                                                    \
    OK(kiln_array_copy_to(back, sizeof back, a, E));                                 \
    CHECK(memcmp(back, host, sizeof back) == 0);                                     \
    double wide[6];                                                                  \
    OK(kiln_array_copy_to(wide, sizeof wide, a, KILN_FLOAT64));                      \
    for (int i = 0; i < 6; ++i) CHECK(wide[i] == (double)(t)values[i]);              \
    kiln_array s = NULL;                                                             \
    OK(kiln_array_new_int(&s, 1, E));                                                \
    t item = 0;                                                                      \
    OK(kiln_array_item_##n(&item, s));                                               \
    CHECK(item == (t)1);                                                             \
    FAILS_WITH(kiln_array_item_##n(&item, a), "[item]");                             \
    OK(kiln_array_free(s));                                                          \
    OK(kiln_array_free(a));                                                          \
  }
#include "kiln/c/kiln_dtypes.def"
#undef KILN_C_DTYPE

  /* float16 and bfloat16 travel as 16-bit patterns. */
  const float f[6] = {0.5f, 1, 2, -3, 4.25f, 65504};
  kiln_dtype halves[2] = {KILN_FLOAT16, KILN_BFLOAT16};
  for (int h = 0; h < 2; ++h) {
    kiln_array a = new_f32(f, shape, 2), b = NULL, c = NULL;
    OK(kiln_astype(&b, a, halves[h]));
    uint16_t bits[6];
    OK(kiln_array_copy_to(bits, sizeof bits, b, halves[h]));
    OK(kiln_array_new_data(&c, bits, shape, 2, halves[h]));
    CHECK(dtype_of(c) == halves[h]);
    float back[6];
    OK(kiln_array_copy_to(back, sizeof back, c, KILN_FLOAT32));
    for (int i = 0; i < 5; ++i) CHECK(back[i] == f[i]);
    kiln_array s = NULL;
    OK(kiln_array_new_float(&s, 1.5, halves[h]));
    uint16_t one_bits = 0;
    float one = 0;
    if (h == 0) OK(kiln_array_item_float16(&one_bits, s));
    else OK(kiln_array_item_bfloat16(&one_bits, s));
    CHECK(one_bits == (h == 0 ? 0x3e00 : 0x3fc0));
    OK(kiln_array_item_float32(&one, s));
    CHECK(one == 1.5f);
    kiln_array_free(a);
    kiln_array_free(b);
    kiln_array_free(c);
    kiln_array_free(s);
  }

  /* Scalars. */
  kiln_array s = NULL;
  bool bv = false;
  OK(kiln_array_new_bool(&s, true));
  CHECK(dtype_of(s) == KILN_BOOL);
  OK(kiln_array_item_bool(&bv, s));
  CHECK(bv);
  double dv = 0;
  OK(kiln_array_new_float(&s, 2.5, KILN_FLOAT64));
  OK(kiln_array_item_float64(&dv, s));
  CHECK(dv == 2.5);
  int ndim = -1;
  OK(kiln_array_ndim(&ndim, s));
  CHECK(ndim == 0);
  const int64_t* sp = (const int64_t*)1;
  OK(kiln_array_shape(&sp, s));
  CHECK(sp == NULL);
  kiln_array_free(s);
}

static void test_array_queries(void) {
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  kiln_array a = new_f32(data, shape, 2);
  int64_t dim = 0;
  size_t n = 0;
  OK(kiln_array_dim(&dim, a, -1));
  CHECK(dim == 3);
  OK(kiln_array_dim(&dim, a, 0));
  CHECK(dim == 2);
  FAILS_WITH(kiln_array_dim(&dim, a, 5), "[shape] axis 5 is out of range for an array of rank 2");
  OK(kiln_array_size(&n, a));
  CHECK(n == 6);
  OK(kiln_array_itemsize(&n, a));
  CHECK(n == 4);
  OK(kiln_array_nbytes(&n, a));
  CHECK(n == 24);
  kiln_device dev = {KILN_DEVICE_CUDA, 7};
  OK(kiln_array_device(&dev, a));
  CHECK(dev.type == KILN_DEVICE_CPU && dev.index == 0);
  bool valid = false;
  OK(kiln_array_valid(&valid, a));
  CHECK(valid);
  OK(kiln_array_valid(&valid, NULL));
  CHECK(!valid);

  /* set shares the array; ids match. */
  kiln_array b = NULL;
  const void *ida = NULL, *idb = NULL;
  OK(kiln_array_set(&b, a));
  OK(kiln_array_id(&ida, a));
  OK(kiln_array_id(&idb, b));
  CHECK(ida != NULL && ida == idb);

  /* Copy-out checks the destination size. */
  float small[5];
  FAILS_WITH(kiln_array_copy_to(small, sizeof small, a, KILN_FLOAT32), "destination holds 20 bytes, the array needs 24");
  FAILS_WITH(kiln_array_copy_to(NULL, 0, a, KILN_FLOAT32), "destination holds 0 bytes");
  int32_t ints[6];
  OK(kiln_array_copy_to(ints, sizeof ints, a, KILN_INT32));
  CHECK(ints[0] == 1 && ints[5] == 6);

  /* Bad constructions. */
  kiln_array c = NULL;
  FAILS_WITH(kiln_array_new_data(&c, data, NULL, 2, KILN_FLOAT32), "null shape");
  FAILS_WITH(kiln_array_new_data(&c, NULL, shape, 2, KILN_FLOAT32), "null data for 6 elements");
  FAILS_WITH(kiln_array_new_data(&c, data, shape, -1, KILN_FLOAT32), "negative ndim");
  FAILS_WITH(kiln_array_new_data(&c, data, shape, 2, (kiln_dtype)-1), "invalid dtype -1");
  CHECK(c == NULL);
  int64_t zero = 0;
  OK(kiln_array_new_data(&c, NULL, &zero, 1, KILN_FLOAT32));
  OK(kiln_array_size(&n, c));
  CHECK(n == 0);
  OK(kiln_array_copy_to(NULL, 0, c, KILN_FLOAT32));

  /* An empty handle holds no array: queries fail, it can be reassigned. */
  kiln_array e = NULL;
  OK(kiln_array_new(&e));
  CHECK(e != NULL);
  OK(kiln_array_valid(&valid, e));
  CHECK(!valid);
  int nd;
  FAILS_WITH(kiln_array_ndim(&nd, e), "empty Array handle");
  kiln_array before = e;
  OK(kiln_exp(&e, a));
  CHECK(e == before); /* reassigned in place */
  OK(kiln_array_valid(&valid, e));
  CHECK(valid);

  /* A failing op leaves *out unchanged. */
  const void* id_before = NULL;
  const void* id_after = NULL;
  OK(kiln_array_id(&id_before, e));
  kiln_array bad = vec_f32(data, 4);
  FAILS_WITH(kiln_add(&e, a, bad), "cannot be broadcast together");
  OK(kiln_array_id(&id_after, e));
  CHECK(id_before == id_after);

  /* In-place reassignment with the output as an input. */
  kiln_array acc = NULL;
  OK(kiln_array_set(&acc, a));
  for (int i = 0; i < 3; ++i) OK(kiln_add(&acc, acc, a));
  const float want[6] = {4, 8, 12, 16, 20, 24};
  CHECK(equals_f32(acc, want, 6));

  /* tostring */
  char* str = NULL;
  const int32_t iv[4] = {1, 2, 3, 4};
  const int64_t s22[2] = {2, 2};
  kiln_array m = NULL;
  OK(kiln_array_new_data(&m, iv, s22, 2, KILN_INT32));
  OK(kiln_array_tostring(&str, m));
  CHECK(str && strcmp(str, "array([[1, 2], [3, 4]], shape=(2,2), dtype=int32)") == 0);
  kiln_string_free(str);
  OK(kiln_array_new_bool(&m, false));
  OK(kiln_array_tostring(&str, m));
  CHECK(str && strcmp(str, "array(false, shape=(), dtype=bool)") == 0);
  kiln_string_free(str);
  OK(kiln_array_tostring(&str, c));
  CHECK(str && strcmp(str, "array([], shape=(0), dtype=float32)") == 0);
  kiln_string_free(str);

  OK(kiln_array_free(NULL));
  kiln_array_free(a);
  kiln_array_free(b);
  kiln_array_free(c);
  kiln_array_free(e);
  kiln_array_free(bad);
  kiln_array_free(acc);
  kiln_array_free(m);
}

/* ---- vectors -------------------------------------------------------------------- */

static void test_vectors(void) {
  const float d[3] = {1, 2, 3};
  kiln_array a = vec_f32(d, 3), b = vec_f32(d, 2), got = NULL;
  kiln_vector_array v = NULL, w = NULL;
  size_t n = 99;
  OK(kiln_vector_array_new(&v));
  OK(kiln_vector_array_size(&n, v));
  CHECK(n == 0);
  OK(kiln_vector_array_append(v, a));
  OK(kiln_vector_array_append(v, b));
  OK(kiln_vector_array_size(&n, v));
  CHECK(n == 2);
  OK(kiln_vector_array_get(&got, v, 1));
  const void *x = NULL, *y = NULL;
  kiln_array_id(&x, got);
  kiln_array_id(&y, b);
  CHECK(x == y);
  FAILS_WITH(kiln_vector_array_get(&got, v, 2), "index 2 is out of range for a vector of 2 arrays");
  FAILS_WITH(kiln_vector_array_append(v, NULL), "null array handle");
  FAILS_WITH(kiln_vector_array_append(NULL, a), "null vector handle");

  OK(kiln_vector_array_set(&w, v));
  OK(kiln_vector_array_append_vector(w, w)); /* appending to itself doubles it */
  OK(kiln_vector_array_size(&n, w));
  CHECK(n == 4);
  OK(kiln_vector_array_size(&n, v));
  CHECK(n == 2);
  OK(kiln_vector_array_clear(w));
  OK(kiln_vector_array_size(&n, w));
  CHECK(n == 0);

  kiln_array arr[2] = {b, a};
  OK(kiln_vector_array_new_data(&w, arr, 2)); /* reassigns w in place */
  OK(kiln_vector_array_get(&got, w, 1));
  kiln_array_id(&x, got);
  kiln_array_id(&y, a);
  CHECK(x == y);
  kiln_array arr_bad[2] = {a, NULL};
  FAILS_WITH(kiln_vector_array_new_data(&w, arr_bad, 2), "null array handle");
  OK(kiln_vector_array_size(&n, w));
  CHECK(n == 2);

  OK(kiln_vector_array_free(NULL));
  kiln_vector_array_free(v);
  kiln_vector_array_free(w);
  kiln_array_free(a);
  kiln_array_free(b);
  kiln_array_free(got);
}

/* ---- ops -------------------------------------------------------------------------- */

static void test_creation(void) {
  const int64_t shape[2] = {2, 2};
  kiln_array a = NULL, v = NULL;
  const float z[4] = {0, 0, 0, 0}, o[4] = {1, 1, 1, 1}, f[4] = {2.5f, 2.5f, 2.5f, 2.5f};
  OK(kiln_zeros(&a, shape, 2, KILN_FLOAT32));
  CHECK(equals_f32(a, z, 4) && has_shape(a, shape, 2));
  OK(kiln_ones(&a, shape, 2, KILN_INT64));
  CHECK(equals_f32(a, o, 4) && dtype_of(a) == KILN_INT64);
  OK(kiln_full(&a, shape, 2, 2.5, KILN_FLOAT64));
  CHECK(equals_f32(a, f, 4) && dtype_of(a) == KILN_FLOAT64);
  OK(kiln_array_new_float(&v, 2.5, KILN_FLOAT16));
  OK(kiln_full_array(&a, shape, 2, v));
  CHECK(equals_f32(a, f, 4) && dtype_of(a) == KILN_FLOAT16);
  OK(kiln_zeros_like(&a, a));
  CHECK(equals_f32(a, z, 4) && dtype_of(a) == KILN_FLOAT16);
  OK(kiln_ones_like(&a, a));
  CHECK(equals_f32(a, o, 4));
  OK(kiln_full_like(&a, a, 2.5));
  CHECK(equals_f32(a, f, 4));
  const float r[4] = {1, 3, 5, 7};
  OK(kiln_arange(&a, 1, 8, 2, KILN_INT32));
  CHECK(equals_f32(a, r, 4) && dtype_of(a) == KILN_INT32);
  FAILS_WITH(kiln_arange(&a, 0, 1, 0, KILN_FLOAT32), "[arange] step cannot be zero");
  const float l[3] = {0, 0.5f, 1};
  OK(kiln_linspace(&a, 0, 1, 3, KILN_FLOAT32));
  CHECK(equals_f32(a, l, 3));
  const float e[6] = {1, 0, 0, 0, 1, 0};
  const int64_t s23[2] = {2, 3};
  OK(kiln_eye(&a, 2, 3, 0, KILN_FLOAT32));
  CHECK(equals_f32(a, e, 6) && has_shape(a, s23, 2));
  OK(kiln_eye(&a, 2, -1, 0, KILN_FLOAT32));
  const float i2[4] = {1, 0, 0, 1};
  CHECK(equals_f32(a, i2, 4) && has_shape(a, shape, 2));
  const int64_t neg[2] = {-2, 2};
  FAILS_WITH(kiln_zeros(&a, neg, 2, KILN_FLOAT32), "negative dimension");

  /* Scalars typed like an array. */
  const int32_t iv[2] = {1, 2};
  kiln_array ia = vec_i32(iv, 2), s = NULL;
  OK(kiln_array_new_float_like(&s, 2.5, ia));
  CHECK(dtype_of(s) == KILN_FLOAT32);
  OK(kiln_array_new_int_like(&s, 3, ia));
  CHECK(dtype_of(s) == KILN_INT32);
  OK(kiln_astype(&a, ia, KILN_FLOAT16));
  OK(kiln_array_new_float_like(&s, 2.5, a));
  CHECK(dtype_of(s) == KILN_FLOAT16);
  kiln_array_free(a);
  kiln_array_free(v);
  kiln_array_free(ia);
  kiln_array_free(s);
}

static void test_elementwise(void) {
  const int32_t iv[3] = {1, 2, 3}, jv[3] = {3, 2, 1};
  const float fv[3] = {0.25f, 1, 4};
  kiln_array i = vec_i32(iv, 3), j = vec_i32(jv, 3), f = vec_f32(fv, 3), out = NULL;
  const int64_t three = 3;

  /* Every unary and binary op runs (on int32, which each of them accepts). */
#define KILN_C_UNARY(name)                 \
  OK(kiln_##name(&out, i));                \
  CHECK(has_shape(out, &three, 1));        \
  OK(kiln_array_eval(out));
#include "kiln/c/kiln_unary_ops.def"
#undef KILN_C_UNARY
#define KILN_C_BINARY(name)                \
  OK(kiln_##name(&out, i, j));             \
  CHECK(has_shape(out, &three, 1));        \
  OK(kiln_array_eval(out));
#include "kiln/c/kiln_binary_ops.def"
#undef KILN_C_BINARY

  /* Values of a few. */
  const float e_sqrt[3] = {0.5f, 1, 2}, e_neg[3] = {-0.25f, -1, -4}, e_exp[3] = {expf(0.25f), expf(1), expf(4)};
  OK(kiln_sqrt(&out, f));
  CHECK(equals_f32(out, e_sqrt, 3));
  OK(kiln_negative(&out, f));
  CHECK(equals_f32(out, e_neg, 3));
  OK(kiln_exp(&out, f));
  CHECK(equals_f32(out, e_exp, 3));
  OK(kiln_sqrt(&out, i));
  CHECK(dtype_of(out) == KILN_FLOAT32);
  OK(kiln_isnan(&out, f));
  CHECK(dtype_of(out) == KILN_BOOL);
  FAILS_WITH(kiln_bitwise_not(&out, f), "[bitwise_not] requires an integer or bool array, got float32");

  const float e_add[3] = {4, 4, 4}, e_less[3] = {1, 0, 0}, e_fdiv[3] = {3, 1, 0}, e_rem[3] = {1, 0, 0},
              e_div[3] = {1.0f / 3, 1, 3}, e_pow[3] = {1, 4, 3};
  OK(kiln_add(&out, i, j));
  CHECK(equals_f32(out, e_add, 3) && dtype_of(out) == KILN_INT32);
  OK(kiln_less(&out, i, j));
  CHECK(equals_f32(out, e_less, 3) && dtype_of(out) == KILN_BOOL);
  OK(kiln_floor_divide(&out, j, i));
  CHECK(equals_f32(out, e_fdiv, 3));
  OK(kiln_remainder(&out, i, j));
  CHECK(equals_f32(out, e_rem, 3));
  OK(kiln_divide(&out, i, j));
  CHECK(equals_f32(out, e_div, 3) && dtype_of(out) == KILN_FLOAT32);
  OK(kiln_power(&out, i, j));
  CHECK(equals_f32(out, e_pow, 3));
  OK(kiln_add(&out, i, f));
  CHECK(dtype_of(out) == KILN_FLOAT32);

  /* Broadcasting, and its error. */
  const int64_t s21[2] = {2, 1}, s23[2] = {2, 3};
  const float col[2] = {10, 20};
  kiln_array c = new_f32(col, s21, 2);
  const float e_bc[6] = {10.25f, 11, 14, 20.25f, 21, 24};
  OK(kiln_add(&out, c, f));
  CHECK(equals_f32(out, e_bc, 6) && has_shape(out, s23, 2));
  kiln_array two = vec_f32(col, 2);
  FAILS_WITH(kiln_multiply(&out, f, two), "[multiply] shapes (3) and (2) cannot be broadcast together");
  FAILS_WITH(kiln_add(&out, f, NULL), "[kiln_add] null array handle");
  FAILS_WITH(kiln_add(NULL, f, f), "[kiln_add] null output pointer");

  /* astype, where, clip. */
  const float fr[3] = {0.25f, -1.75f, 2.5f};
  kiln_array g = vec_f32(fr, 3);
  const float e_trunc[3] = {0, -1, 2};
  OK(kiln_astype(&out, g, KILN_INT8));
  CHECK(equals_f32(out, e_trunc, 3) && dtype_of(out) == KILN_INT8);
  FAILS_WITH(kiln_astype(&out, g, (kiln_dtype)42), "invalid dtype 42");
  kiln_array cond = NULL;
  OK(kiln_greater(&cond, g, f));
  const float e_where[3] = {0.25f, 1, 4};
  OK(kiln_where(&out, cond, g, f));
  CHECK(equals_f32(out, e_where, 3));
  kiln_array lo = NULL, hi = NULL;
  OK(kiln_array_new_float(&lo, 0, KILN_FLOAT32));
  OK(kiln_array_new_float(&hi, 1, KILN_FLOAT32));
  const float e_clip[3] = {0.25f, 0, 1}, e_lo[3] = {0.25f, 0, 2.5f};
  OK(kiln_clip(&out, g, lo, hi));
  CHECK(equals_f32(out, e_clip, 3));
  OK(kiln_clip(&out, g, lo, NULL));
  CHECK(equals_f32(out, e_lo, 3));
  FAILS_WITH(kiln_clip(&out, g, NULL, NULL), "[clip] at least one of the bounds must be given");

  kiln_array list[] = {i, j, f, out, c, two, g, cond, lo, hi};
  for (size_t k = 0; k < sizeof list / sizeof list[0]; ++k) kiln_array_free(list[k]);
}

static void test_views(void) {
  const float d[6] = {0, 1, 2, 3, 4, 5};
  const int64_t s6 = 6, s23[2] = {2, 3}, s32[2] = {3, 2}, s_1[2] = {3, -1}, s123[3] = {1, 2, 3}, s223[3] = {2, 2, 3};
  kiln_array a = vec_f32(d, 6), m = NULL, out = NULL;
  OK(kiln_reshape(&m, a, s23, 2));
  CHECK(has_shape(m, s23, 2) && equals_f32(m, d, 6));
  OK(kiln_reshape(&out, a, s_1, 2));
  CHECK(has_shape(out, s32, 2));
  const int64_t s4[1] = {4};
  FAILS_WITH(kiln_reshape(&out, a, s4, 1), "[reshape] cannot reshape array of size 6 into shape (4)");

  const float t[6] = {0, 3, 1, 4, 2, 5};
  const int perm[2] = {1, 0};
  OK(kiln_transpose(&out, m, perm, 2));
  CHECK(has_shape(out, s32, 2) && equals_f32(out, t, 6));
  OK(kiln_transpose(&out, m, NULL, 0));
  CHECK(equals_f32(out, t, 6));
  OK(kiln_swapaxes(&out, m, 0, 1));
  CHECK(equals_f32(out, t, 6));

  OK(kiln_expand_dims(&out, m, 0));
  CHECK(has_shape(out, s123, 3));
  const int ax0 = 0;
  OK(kiln_squeeze(&out, out, &ax0, 1));
  CHECK(has_shape(out, s23, 2));
  OK(kiln_expand_dims(&out, m, 0));
  OK(kiln_squeeze(&out, out, NULL, 0));
  CHECK(has_shape(out, s23, 2));
  OK(kiln_broadcast_to(&out, m, s223, 3));
  CHECK(has_shape(out, s223, 3));
  OK(kiln_flatten(&out, m));
  CHECK(has_shape(out, &s6, 1) && equals_f32(out, d, 6));

  /* Python-style slicing: m[::-1, 1:] */
  const int64_t start[2] = {-1, 1}, stop[2] = {-3, 3}, step[2] = {-1, 1};
  const float e_sl[4] = {4, 5, 1, 2};
  OK(kiln_slice(&out, m, start, stop, step, 2));
  CHECK(equals_f32(out, e_sl, 4));
  const int64_t st0[1] = {2}, sp0[1] = {5};
  const float e_sl2[3] = {2, 3, 4};
  OK(kiln_slice(&out, a, st0, sp0, NULL, 1));
  CHECK(equals_f32(out, e_sl2, 3));

  kiln_array_free(a);
  kiln_array_free(m);
  kiln_array_free(out);
}

/* ---- evaluation, devices, streams, stats ----------------------------------------- */

static void test_eval_and_devices(void) {
  const float d[3] = {1, 2, 3};
  kiln_array a = vec_f32(d, 3), b = NULL, c = NULL;
  kiln_vector_array v = NULL;
  bool done = true;

  OK(kiln_reset_stats());
  OK(kiln_exp(&b, a));
  OK(kiln_add(&c, b, a));
  OK(kiln_array_is_evaluated(&done, c));
  CHECK(!done);
  kiln_stats st;
  OK(kiln_get_stats(&st));
  CHECK(st.kernels_launched == 0);
  OK(kiln_vector_array_new_data(&v, &c, 1));
  OK(kiln_eval(v));
  OK(kiln_array_is_evaluated(&done, c));
  CHECK(done);
  OK(kiln_get_stats(&st));
  CHECK(st.kernels_launched == 2);
  OK(kiln_reset_stats());
  OK(kiln_get_stats(&st));
  CHECK(st.kernels_launched == 0);

  /* async_eval returns at once; synchronize waits for it. */
  kiln_device cpu = {KILN_DEVICE_CPU, 0};
  kiln_stream s;
  OK(kiln_default_stream(&s, cpu));
  CHECK(s.device.type == KILN_DEVICE_CPU);
  OK(kiln_multiply(&b, a, a));
  OK(kiln_sqrt(&c, b));
  OK(kiln_vector_array_new_data(&v, &c, 1));
  OK(kiln_async_eval(v));
  OK(kiln_synchronize(s));
  OK(kiln_array_is_evaluated(&done, c));
  CHECK(done);
  CHECK(equals_f32(c, d, 3));
  /* An async result can be read directly too. */
  OK(kiln_negative(&b, a));
  OK(kiln_vector_array_new_data(&v, &b, 1));
  OK(kiln_async_eval(v));
  const float neg[3] = {-1, -2, -3};
  CHECK(equals_f32(b, neg, 3));
  OK(kiln_synchronize(s));
  kiln_stream bad = {{(kiln_device_type)9, 0}, 0};
  FAILS_WITH(kiln_synchronize(bad), "invalid device type 9");

  /* Eager mode evaluates each op as it is built. */
  OK(kiln_set_eager(true));
  bool eager = false;
  OK(kiln_get_eager(&eager));
  CHECK(eager);
  OK(kiln_exp(&b, a));
  OK(kiln_array_is_evaluated(&done, b));
  CHECK(done);
  OK(kiln_set_eager(false));
  OK(kiln_get_eager(&eager));
  CHECK(!eager);

  /* Devices. */
  kiln_device dev = {KILN_DEVICE_CUDA, 3};
  int count = -1;
  OK(kiln_default_device(&dev));
  CHECK(dev.type == KILN_DEVICE_CPU && dev.index == 0);
  OK(kiln_device_count(&count, KILN_DEVICE_CPU));
  CHECK(count == 1);
  OK(kiln_device_count(&count, KILN_DEVICE_CUDA));
  CHECK(count >= 0);
  if (count == 0) {
    kiln_device cuda = {KILN_DEVICE_CUDA, 0};
    FAILS_WITH(kiln_set_default_device(cuda), "[set_default_device]");
  }
  /* A CUDA device that is not there (any, in a CPU-only build): synchronize returned 0. */
  kiln_device missing = {KILN_DEVICE_CUDA, count};
  kiln_stream on_missing = {missing, 0};
  FAILS_WITH(kiln_synchronize(on_missing), "[kiln_synchronize] no CUDA device");
  FAILS_WITH(kiln_default_stream(&s, missing), "[kiln_default_stream] no CUDA device");
  OK(kiln_set_default_device(cpu));

  kiln_array_free(a);
  kiln_array_free(b);
  kiln_array_free(c);
  kiln_vector_array_free(v);
}

/* ---- closures ----------------------------------------------------------------------- */

/* out = [in0 + in1] */
static int add_fn(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  (void)payload;
  kiln_array a = NULL, b = NULL, c = NULL;
  int rc = kiln_vector_array_get(&a, in, 0) || kiln_vector_array_get(&b, in, 1) || kiln_add(&c, a, b) ||
           kiln_vector_array_append(*out, c);
  kiln_array_free(a);
  kiln_array_free(b);
  kiln_array_free(c);
  return rc;
}

typedef struct {
  atomic_int calls;
  atomic_int dtors;
  float scale;
} payload_t;

static void payload_dtor(void* p) { atomic_fetch_add(&((payload_t*)p)->dtors, 1); }

/* out = [in0 * scale, in0 + scale] (two outputs) */
static int scale_fn(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  payload_t* p = (payload_t*)payload;
  atomic_fetch_add(&p->calls, 1);
  kiln_array x = NULL, s = NULL, y = NULL;
  int rc = kiln_vector_array_get(&x, in, 0) || kiln_array_new_float_like(&s, p->scale, x) ||
           kiln_multiply(&y, x, s) || kiln_vector_array_append(*out, y) || kiln_add(&y, x, s) ||
           kiln_vector_array_append(*out, y);
  kiln_array_free(x);
  kiln_array_free(s);
  kiln_array_free(y);
  return rc;
}

static int fail_with_message(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  (void)out;
  (void)in;
  (void)payload;
  kiln_set_error("boom from the callback");
  return 1;
}

static int fail_silently(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  (void)out;
  (void)in;
  (void)payload;
  kiln_set_error("");
  return 7;
}

/* Calls the closure in payload on its inputs (closures nest). */
static int call_inner(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  return kiln_closure_apply(out, (kiln_closure)payload, in);
}

/* Replaces *out with a new vector holding in[0] twice. */
static int reassign_out(kiln_vector_array* out, const kiln_vector_array in, void* payload) {
  (void)payload;
  kiln_vector_array v = NULL;
  int rc = kiln_vector_array_set(&v, in) || kiln_vector_array_append_vector(v, v) || kiln_vector_array_set(out, v);
  kiln_vector_array_free(v);
  return rc;
}

static void test_closures(void) {
  const float d[3] = {1, 2, 3};
  kiln_array a = vec_f32(d, 3), r = NULL;
  kiln_vector_array in = NULL, out = NULL;
  size_t n = 0;
  OK(kiln_vector_array_new(&in));
  OK(kiln_vector_array_append(in, a));
  OK(kiln_vector_array_append(in, a));

  kiln_closure add = NULL;
  OK(kiln_closure_new_func(&add, add_fn));
  OK(kiln_closure_apply(&out, add, in));
  OK(kiln_vector_array_size(&n, out));
  CHECK(n == 1);
  OK(kiln_vector_array_get(&r, out, 0));
  const float twice[3] = {2, 4, 6};
  CHECK(equals_f32(r, twice, 3));

  /* Payload: each apply calls back; the dtor runs once when the last handle goes. */
  payload_t p = {0, 0, 10.0f};
  kiln_closure sc = NULL, sc2 = NULL;
  OK(kiln_closure_new_func_payload(&sc, scale_fn, &p, payload_dtor));
  OK(kiln_closure_set(&sc2, sc));
  for (int i = 0; i < 3; ++i) OK(kiln_closure_apply(&out, sc, in));
  CHECK(atomic_load(&p.calls) == 3);
  OK(kiln_vector_array_size(&n, out));
  CHECK(n == 2);
  const float scaled[3] = {10, 20, 30}, shifted[3] = {11, 12, 13};
  OK(kiln_vector_array_get(&r, out, 0));
  CHECK(equals_f32(r, scaled, 3));
  OK(kiln_vector_array_get(&r, out, 1));
  CHECK(equals_f32(r, shifted, 3));
  OK(kiln_closure_free(sc));
  CHECK(atomic_load(&p.dtors) == 0);
  OK(kiln_closure_apply(&out, sc2, in));
  OK(kiln_closure_free(sc2));
  CHECK(atomic_load(&p.dtors) == 1);

  /* Reassigning a closure handle drops its old closure. */
  payload_t q = {0, 0, 1.0f};
  kiln_closure h = NULL;
  OK(kiln_closure_new_func_payload(&h, scale_fn, &q, payload_dtor));
  OK(kiln_closure_set(&h, add));
  CHECK(atomic_load(&q.dtors) == 1);
  kiln_closure_free(h);

  /* A failed construction still releases the payload. */
  payload_t z = {0, 0, 0};
  kiln_closure none = NULL;
  FAILS_WITH(kiln_closure_new_func_payload(&none, NULL, &z, payload_dtor), "null function");
  CHECK(none == NULL && atomic_load(&z.dtors) == 1);
  FAILS_WITH(kiln_closure_new_func(NULL, add_fn), "null output pointer");
  FAILS_WITH(kiln_closure_apply(&out, NULL, in), "[kiln_closure_apply] null closure handle");
  FAILS_WITH(kiln_closure_apply(&out, add, NULL), "null vector handle");

  /* Callback failures become apply failures, with the callback's message. */
  kiln_closure bad = NULL;
  OK(kiln_closure_new_func(&bad, fail_with_message));
  FAILS_WITH(kiln_closure_apply(&out, bad, in), "boom from the callback");
  OK(kiln_closure_new_func(&bad, fail_silently));
  FAILS_WITH(kiln_closure_apply(&out, bad, in), "[closure] callback returned 7");
  kiln_vector_array one = NULL;
  OK(kiln_vector_array_new_data(&one, &a, 1));
  FAILS_WITH(kiln_closure_apply(&out, add, one), "[kiln_vector_array_get] index 1 is out of range");

  /* An op error inside the callback. */
  kiln_array b2 = vec_f32(d, 2);
  kiln_vector_array mism = NULL;
  kiln_array pair[2] = {a, b2};
  OK(kiln_vector_array_new_data(&mism, pair, 2));
  FAILS_WITH(kiln_closure_apply(&out, add, mism), "[add] shapes (3) and (2) cannot be broadcast together");

  /* Nesting: a closure that applies another closure. */
  kiln_closure outer = NULL;
  OK(kiln_closure_new_func_payload(&outer, call_inner, add, NULL));
  OK(kiln_closure_apply(&out, outer, in));
  OK(kiln_vector_array_get(&r, out, 0));
  CHECK(equals_f32(r, twice, 3));
  OK(kiln_closure_new_func_payload(&outer, call_inner, bad, NULL));
  FAILS_WITH(kiln_closure_apply(&out, outer, in), "[closure] callback returned 7");

  /* A callback may reassign *out. */
  kiln_closure re = NULL;
  OK(kiln_closure_new_func(&re, reassign_out));
  OK(kiln_closure_apply(&out, re, one));
  OK(kiln_vector_array_size(&n, out));
  CHECK(n == 2);

  kiln_closure_free(add);
  kiln_closure_free(bad);
  kiln_closure_free(outer);
  kiln_closure_free(re);
  OK(kiln_closure_free(NULL));
  kiln_vector_array_free(in);
  kiln_vector_array_free(out);
  kiln_vector_array_free(one);
  kiln_vector_array_free(mism);
  kiln_array_free(a);
  kiln_array_free(b2);
  kiln_array_free(r);
}

/* ---- threads ------------------------------------------------------------------------ */

enum { kThreads = 8, kIters = 200 };

typedef struct {
  kiln_closure shared; /* this thread's own reference; it frees it at the end */
  int index;
} thread_arg;

static void* thread_body(void* arg) {
  thread_arg* t = (thread_arg*)arg;
  const float base[4] = {1, 2, 3, 4};
  float d[4];
  for (int k = 0; k < 4; ++k) d[k] = base[k] + (float)t->index;
  kiln_array a = vec_f32(d, 4), r = NULL;
  kiln_vector_array in = NULL, out = NULL;
  OK(kiln_vector_array_new_data(&in, &a, 1));

  /* A closure of this thread's own, with its own payload. */
  payload_t own = {0, 0, (float)t->index};
  kiln_closure mine = NULL;
  OK(kiln_closure_new_func_payload(&mine, scale_fn, &own, payload_dtor));

  int bad = 0;
  for (int i = 0; i < kIters; ++i) {
    float got[4];
    if (kiln_closure_apply(&out, t->shared, in) != 0 || kiln_vector_array_get(&r, out, 0) != 0 ||
        kiln_array_copy_to(got, sizeof got, r, KILN_FLOAT32) != 0) {
      ++bad;
      continue;
    }
    for (int k = 0; k < 4; ++k) bad += got[k] != d[k] * 10.0f;
    if (kiln_closure_apply(&out, mine, in) != 0 || kiln_vector_array_get(&r, out, 1) != 0 ||
        kiln_array_copy_to(got, sizeof got, r, KILN_FLOAT32) != 0) {
      ++bad;
      continue;
    }
    for (int k = 0; k < 4; ++k) bad += got[k] != d[k] + (float)t->index;
  }
  CHECK(bad == 0);
  CHECK(atomic_load(&own.calls) == kIters);

  /* Errors stay on the thread that made them. */
  char msg[64];
  snprintf(msg, sizeof msg, "thread %d failed", t->index);
  kiln_set_error(msg);
  CHECK(strcmp(kiln_last_error(), msg) == 0);

  kiln_closure_free(mine);
  CHECK(atomic_load(&own.dtors) == 1);
  kiln_closure_free(t->shared); /* the last of these runs the shared dtor, on some thread */
  kiln_vector_array_free(in);
  kiln_vector_array_free(out);
  kiln_array_free(a);
  kiln_array_free(r);
  return NULL;
}

static void test_threads(void) {
  payload_t shared = {0, 0, 10.0f};
  kiln_closure c = NULL;
  OK(kiln_closure_new_func_payload(&c, scale_fn, &shared, payload_dtor));
  pthread_t th[kThreads];
  thread_arg args[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    args[i].shared = NULL;
    args[i].index = i;
    OK(kiln_closure_set(&args[i].shared, c));
  }
  OK(kiln_closure_free(c)); /* the threads hold the only references now */
  for (int i = 0; i < kThreads; ++i) CHECK(pthread_create(&th[i], NULL, thread_body, &args[i]) == 0);
  for (int i = 0; i < kThreads; ++i) pthread_join(th[i], NULL);
  CHECK(atomic_load(&shared.calls) == kThreads * kIters);
  CHECK(atomic_load(&shared.dtors) == 1);
}

int main(void) {
  RUN(test_errors);
  RUN(test_dtypes);
  RUN(test_array_every_dtype);
  RUN(test_array_queries);
  RUN(test_vectors);
  RUN(test_creation);
  RUN(test_elementwise);
  RUN(test_views);
  RUN(test_eval_and_devices);
  RUN(test_closures);
  RUN(test_threads);
  return harness_finish();
}
