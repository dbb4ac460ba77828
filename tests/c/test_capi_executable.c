/* The Executable from C (kiln_executable.h): graphs from text and files, modes, parameters,
   runs, slots, handles and feeds, commits, pipelined runs, the active extent, warm-up
   compiles, bad calls, and threads sharing one executable. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "kiln/c/kiln_executable.h"

static const kiln_device kCpu = {KILN_DEVICE_CPU, 0};

/* Graphs shared with the Go and Rust tests (tests/runtime/graphs). */
#define GRAPHS KILN_SOURCE_DIR "/tests/runtime/graphs/"

static const char* kX[] = {"x"};

static kiln_executable affine(kiln_exec_mode mode) {
  kiln_executable e = NULL;
  OK(kiln_executable_load(&e, GRAPHS "affine.kgraph", mode, kCpu));
  const float w[3] = {1, 2, 3};
  OK(kiln_executable_set_param(e, "w", w, 3));
  return e;
}

static kiln_vector_array rows(int n, float start) {
  float data[24];
  for (int i = 0; i < n * 3; ++i) data[i] = start + (float)i;
  int64_t shape[2] = {n, 3};
  kiln_array a = NULL;
  kiln_array_new_data(&a, data, shape, 2, KILN_FLOAT32);
  kiln_vector_array v = NULL;
  kiln_vector_array_new_data(&v, &a, 1);
  kiln_array_free(a);
  return v;
}

/* Element i of output k, as float32. */
static float element(const kiln_vector_array out, size_t k, size_t i) {
  kiln_array a = NULL;
  float buf[64] = {0};
  if (kiln_vector_array_get(&a, out, k) != 0) return -1e30f;
  size_t n = 0;
  kiln_array_size(&n, a);
  if (n > 64 || kiln_array_copy_to(buf, sizeof buf, a, KILN_FLOAT32) != 0) n = 0;
  kiln_array_free(a);
  return i < n ? buf[i] : -1e30f;
}

static void test_modes_names_and_runs(void) {
  for (int m = KILN_EXEC_EAGER; m <= KILN_EXEC_COMPILED; ++m) {
    kiln_executable e = affine((kiln_exec_mode)m);
    kiln_exec_mode got;
    OK(kiln_executable_mode(&got, e));
    CHECK((int)got == m);
    size_t n = 0;
    const char* name = NULL;
    OK(kiln_executable_num_inputs(&n, e));
    CHECK(n == 1);
    OK(kiln_executable_input_name(&name, e, 0));
    CHECK(strcmp(name, "x") == 0);
    OK(kiln_executable_num_outputs(&n, e));
    CHECK(n == 2);
    OK(kiln_executable_output_name(&name, e, 1));
    CHECK(strcmp(name, "total") == 0);
    bool has = false;
    OK(kiln_executable_has_param(&has, e, "w"));
    CHECK(has);

    kiln_vector_array in = rows(2, 0), out = NULL;
    OK(kiln_executable_run(&out, e, kX, in, KILN_NO_EXTENT));
    CHECK(element(out, 0, 5) == 5 * 3 + 1); /* x = 5 times w = 3, plus 1 */
    CHECK(element(out, 1, 0) == 1 + 3 + 7 + 4 + 9 + 16);
    /* The active extent: one live row of the two. */
    OK(kiln_executable_run(&out, e, kX, in, 1));
    size_t count = 0;
    kiln_array y = NULL;
    OK(kiln_vector_array_get(&y, out, 0));
    OK(kiln_array_size(&count, y));
    CHECK(count == 3);
    /* Float32 in and out: float64 inputs are converted. */
    kiln_array x64 = NULL;
    const double d[3] = {1, 1, 1};
    int64_t shape[2] = {1, 3};
    OK(kiln_array_new_data(&x64, d, shape, 2, KILN_FLOAT64));
    kiln_vector_array in64 = NULL;
    OK(kiln_vector_array_new_data(&in64, &x64, 1));
    FAILS_WITH(kiln_executable_run(&out, e, kX, in64, KILN_NO_EXTENT), "[run] input 'x' is float32, given float64");
    OK(kiln_executable_run_f32(&out, e, kX, in64, KILN_NO_EXTENT));
    CHECK(element(out, 0, 2) == 4);
    kiln_dtype dt;
    OK(kiln_vector_array_get(&y, out, 1));
    OK(kiln_array_dtype(&dt, y));
    CHECK(dt == KILN_FLOAT32);
    /* Warm-up compile at the bound, then a run. */
    OK(kiln_executable_warm_compile(e, NULL, NULL, NULL, 0));
    const int64_t two[2] = {2, 3};
    const int64_t* shapes[1] = {two};
    const int nd[1] = {2};
    OK(kiln_executable_warm_compile(e, kX, shapes, nd, 1));
    const char* nope[1] = {"nope"};
    FAILS_WITH(kiln_executable_warm_compile(e, nope, shapes, nd, 1), "[warm_compile] the graph has no input 'nope'");
    OK(kiln_executable_run(&out, e, kX, in, KILN_NO_EXTENT));
    CHECK(element(out, 1, 0) == 40);
    char* why = NULL;
    OK(kiln_executable_extent_blocker(&why, e, kX, shapes, nd, 1));
    CHECK(why && strstr(why, "total") != NULL); /* a sum over rows mixes them */
    kiln_string_free(why);
    kiln_array_free(y);
    kiln_array_free(x64);
    kiln_vector_array_free(in64);
    kiln_vector_array_free(in);
    kiln_vector_array_free(out);
    OK(kiln_executable_free(e));
  }
}

static void test_slots_params_and_errors(void) {
  kiln_executable e = affine(KILN_EXEC_COMPILED);
  size_t arena = 0, off = 0, bytes = 0;
  OK(kiln_executable_arena_bytes(&arena, e));
  OK(kiln_executable_output_slot(&off, &bytes, e, 0));
  CHECK(bytes == 8 * 3 * 4 && off % 64 == 0);
  float x[24];
  for (int i = 0; i < 24; ++i) x[i] = 1;
  const void* in[1] = {x};
  void* mem = aligned_alloc(64, arena);
  OK(kiln_executable_run_slots(e, in, 1, mem, KILN_NO_EXTENT));
  OK(kiln_executable_output_slot(&off, &bytes, e, 1));
  CHECK(*(float*)((char*)mem + off) == 8 * (2 + 3 + 4));
  free(mem);
  FAILS_WITH(kiln_executable_output_slot(&off, &bytes, e, 2), "[output_slot] output 2 does not exist");

  const int32_t wrong[3] = {1, 2, 3};
  FAILS_WITH(kiln_executable_set_param_typed(e, "w", wrong, sizeof wrong, KILN_INT32), "is float32, given int32");
  const float w4[4] = {1, 2, 3, 4};
  FAILS_WITH(kiln_executable_set_param(e, "w", w4, 4), "[set_param] parameter 'w' (3) holds 3 values, given 4");
  FAILS_WITH(kiln_executable_set_param(e, "v", w4, 3), "has no parameter 'v'");
  kiln_vector_array out = NULL, in2 = rows(2, 0);
  const char* y[1] = {"y"};
  FAILS_WITH(kiln_executable_run(&out, e, y, in2, KILN_NO_EXTENT), "[run] the graph has no input 'y'");
  FAILS_WITH(kiln_executable_run(&out, e, kX, in2, 3), "active extent 3 is outside the bucket of 2 rows");
  FAILS_WITH(kiln_executable_run(&out, e, kX, in2, -2), "extent -2 is negative");
  FAILS_WITH(kiln_executable_run(&out, e, NULL, in2, KILN_NO_EXTENT), "null names");
  FAILS_WITH(kiln_executable_run(&out, NULL, kX, in2, KILN_NO_EXTENT), "null executable handle");
  kiln_vector_array_free(in2);
  OK(kiln_executable_free(e));

  kiln_executable bad = NULL;
  FAILS_WITH(kiln_executable_parse(&bad, "kgraph 1\ngraph g {\n  output y\n}\n", "bad.kgraph", KILN_EXEC_LAZY, kCpu),
             "bad.kgraph:3:3: [verify] output 'y' is not defined");
  CHECK(bad == NULL);
  FAILS_WITH(kiln_executable_load(&bad, GRAPHS "affine.kgraph", (kiln_exec_mode)7, kCpu), "invalid mode 7");
  FAILS_WITH(kiln_executable_load(&bad, "/nonexistent/g.kgraph", KILN_EXEC_LAZY, kCpu), "/nonexistent/g.kgraph");
  kiln_device gpu = {KILN_DEVICE_CUDA, 99};
  FAILS_WITH(kiln_executable_load(&bad, GRAPHS "affine.kgraph", KILN_EXEC_LAZY, gpu), "[executable] device cuda:99");
  OK(kiln_executable_free(NULL));
  /* A handle is reassigned in place, as kiln.h's handles are. */
  kiln_executable e2 = NULL, same;
  OK(kiln_executable_load(&e2, GRAPHS "affine.kgraph", KILN_EXEC_LAZY, kCpu));
  same = e2;
  OK(kiln_executable_load(&e2, GRAPHS "accumulator.kgraph", KILN_EXEC_EAGER, kCpu));
  CHECK(e2 == same);
  size_t n_in = 0;
  OK(kiln_executable_num_inputs(&n_in, e2));
  CHECK(n_in == 2);
  OK(kiln_executable_free(e2));
}

static void test_handles_feeds_commits(void) {
  for (int m = KILN_EXEC_EAGER; m <= KILN_EXEC_COMPILED; ++m) {
    kiln_executable e = NULL;
    OK(kiln_executable_load(&e, GRAPHS "accumulator.kgraph", (kiln_exec_mode)m, kCpu));
    float state[3] = {0, 0, 0};
    int64_t three = 3;
    int hs = -1;
    OK(kiln_executable_host_handle(&hs, e, state, &three, 1, KILN_FLOAT32));
    OK(kiln_executable_bind_input(e, "s", hs));
    OK(kiln_executable_feed(e, 0, hs));
    const float ones[3] = {1, 1, 1};
    kiln_array x = NULL;
    OK(kiln_array_new_data(&x, ones, &three, 1, KILN_FLOAT32));
    kiln_vector_array in = NULL, out = NULL;
    OK(kiln_vector_array_new_data(&in, &x, 1));
    for (int k = 0; k < 4; ++k) OK(kiln_executable_run(&out, e, kX, in, KILN_NO_EXTENT));
    CHECK(element(out, 0, 0) == 1.875f);
    CHECK(state[0] == 1.875f); /* the host handle holds the last state */
    /* A device handle keeps the state in kiln, also across commits. */
    int hd = -1;
    const float zero[3] = {0, 0, 0};
    kiln_array z = NULL;
    OK(kiln_array_new_data(&z, zero, &three, 1, KILN_FLOAT32));
    OK(kiln_executable_device_handle(&hd, e, z));
    OK(kiln_executable_clear_feeds(e));
    OK(kiln_executable_bind_input(e, "s", hd));
    OK(kiln_executable_feed(e, 0, hd));
    for (int k = 0; k < 4; ++k) OK(kiln_executable_commit(e, kX, in, KILN_NO_EXTENT));
    size_t runs = 0;
    OK(kiln_executable_sync(&out, &runs, e));
    CHECK(runs == 4);
    CHECK(element(out, 3, 0) == 1.875f);
    kiln_array v = NULL;
    OK(kiln_executable_read_handle(&v, e, hd));
    float got[3];
    OK(kiln_array_copy_to(got, sizeof got, v, KILN_FLOAT32));
    CHECK(got[0] == 1.875f);
    kiln_array_free(z);
    OK(kiln_executable_write_handle(e, hd, x));
    FAILS_WITH(kiln_executable_read_handle(&v, e, 9), "[read_handle] no handle 9");
    FAILS_WITH(kiln_executable_feed(e, 3, hd), "[feed] output 3 does not exist");
    OK(kiln_executable_unbind_input(e, "s"));
    FAILS_WITH(kiln_executable_run(&out, e, kX, in, KILN_NO_EXTENT), "[run] input 's' is missing");
    /* A bad input fails at commit in every mode. */
    kiln_array wrong = NULL;
    OK(kiln_array_new_data(&wrong, ones, &three, 1, KILN_FLOAT32));
    OK(kiln_array_new_int(&wrong, 1, KILN_INT32));
    kiln_vector_array bad = NULL;
    OK(kiln_vector_array_new_data(&bad, &wrong, 1));
    FAILS_WITH(kiln_executable_commit(e, kX, bad, KILN_NO_EXTENT), "[run] input 'x' is float32, given int32");
    /* Pipelined: each set after the previous one. */
    OK(kiln_executable_bind_input(e, "s", hd));
    kiln_vector_array sets[3] = {in, in, in};
    OK(kiln_executable_run_pipelined(&out, e, kX, sets, 3, KILN_NO_EXTENT));
    size_t n = 0;
    OK(kiln_vector_array_size(&n, out));
    CHECK(n == 3);
    CHECK(element(out, 2, 0) == 1.875f);
    kiln_array_free(v);
    kiln_array_free(x);
    kiln_array_free(wrong);
    kiln_vector_array_free(bad);
    kiln_vector_array_free(in);
    kiln_vector_array_free(out);
    OK(kiln_executable_free(e));
  }
}

enum { kThreads = 8, kRunsPerThread = 20 };

static void* run_shared(void* arg) {
  kiln_executable e = (kiln_executable)arg;
  for (int i = 0; i < kRunsPerThread; ++i) {
    kiln_vector_array in = rows(1 + i % 8, (float)i), out = NULL;
    OK(kiln_executable_run(&out, e, kX, in, KILN_NO_EXTENT));
    int n = 1 + i % 8;
    float want = 0;
    for (int k = 0; k < n * 3; ++k) want += ((float)i + (float)k) * (float)(1 + k % 3) + 1;
    CHECK(element(out, 1, 0) == want);
    OK(kiln_executable_commit(e, kX, in, KILN_NO_EXTENT));
    kiln_vector_array_free(in);
    kiln_vector_array_free(out);
  }
  return NULL;
}

static void test_threads_share_one_executable(void) {
  for (int m = KILN_EXEC_EAGER; m <= KILN_EXEC_COMPILED; ++m) {
    kiln_executable e = affine((kiln_exec_mode)m);
    pthread_t th[kThreads];
    for (int t = 0; t < kThreads; ++t) CHECK(pthread_create(&th[t], NULL, run_shared, e) == 0);
    for (int t = 0; t < kThreads; ++t) pthread_join(th[t], NULL);
    kiln_vector_array out = NULL;
    size_t runs = 0;
    OK(kiln_executable_sync(&out, &runs, e));
    CHECK(runs == kThreads * kRunsPerThread);
    kiln_vector_array_free(out);
    OK(kiln_executable_free(e));
  }
}

int main(void) {
  RUN(test_modes_names_and_runs);
  RUN(test_slots_params_and_errors);
  RUN(test_handles_feeds_commits);
  RUN(test_threads_share_one_executable);
  return harness_finish();
}
