/* C API tests: groups of ranks on CPU threads and their collectives against sums computed
   here, the group of one rank (NULL), a rank that aborts the group while the other waits, and
   errors. Built as C11 with -Wall -Werror. */
#define _POSIX_C_SOURCE 200809L  /* nanosleep */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "harness.h"

enum { kRanks = 3, kN = 6 };

static kiln_group groups[kRanks];

/* Rank r's values: r + 1 + i / 8 (exact in float32, different on every rank). */
static float value(int r, int i) { return (float)(r + 1) + (float)i / 8.0f; }

static kiln_array rank_array(int r) {
  float v[kN];
  for (int i = 0; i < kN; ++i) v[i] = value(r, i);
  const int64_t shape = kN;
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, v, &shape, 1, KILN_FLOAT32));
  return a;
}

static void* collectives(void* arg) {
  const int r = (int)(intptr_t)arg;
  int rank = -1, size = -1;
  OK(kiln_group_rank(&rank, groups[r]));
  OK(kiln_group_size(&size, groups[r]));
  CHECK(rank == r && size == kRanks);
  kiln_array x = rank_array(r), sum = NULL, gathered = NULL, part = NULL;
  float got[kN * kRanks];
  OK(kiln_all_sum(&sum, x, groups[r]));
  OK(kiln_array_copy_to(got, sizeof got, sum, KILN_FLOAT32));
  for (int i = 0; i < kN; ++i) CHECK(got[i] == value(0, i) + value(1, i) + value(2, i));
  OK(kiln_all_gather(&gathered, x, groups[r], 0));
  OK(kiln_array_copy_to(got, sizeof got, gathered, KILN_FLOAT32));
  for (int q = 0; q < kRanks; ++q)
    for (int i = 0; i < kN; ++i) CHECK(got[q * kN + i] == value(q, i));
  OK(kiln_reduce_scatter(&part, x, groups[r]));  /* 6 values over 3 ranks: 2 each */
  OK(kiln_array_copy_to(got, sizeof got, part, KILN_FLOAT32));
  for (int i = 0; i < 2; ++i) CHECK(got[i] == value(0, 2 * r + i) + value(1, 2 * r + i) + value(2, 2 * r + i));
  kiln_array_free(x), kiln_array_free(sum), kiln_array_free(gathered), kiln_array_free(part);
  return NULL;
}

static void test_thread_ranks(void) {
  kiln_device cpu[kRanks] = {{KILN_DEVICE_CPU, 0}, {KILN_DEVICE_CPU, 0}, {KILN_DEVICE_CPU, 0}};
  OK(kiln_group_local(cpu, kRanks, groups));
  pthread_t t[kRanks];
  for (int r = 0; r < kRanks; ++r) pthread_create(&t[r], NULL, collectives, (void*)(intptr_t)r);
  for (int r = 0; r < kRanks; ++r) pthread_join(t[r], NULL);
  for (int r = 0; r < kRanks; ++r) OK(kiln_group_free(groups[r]));
}

static void test_group_of_one_rank(void) {
  kiln_array x = rank_array(0), y = NULL;
  float got[kN];
  OK(kiln_all_sum(&y, x, NULL));
  OK(kiln_array_copy_to(got, sizeof got, y, KILN_FLOAT32));
  for (int i = 0; i < kN; ++i) CHECK(got[i] == value(0, i));
  kiln_array_free(x), kiln_array_free(y);
}

static kiln_group pair[2];

static void* waits_in_all_sum(void* arg) {
  (void)arg;
  kiln_array x = rank_array(0), y = NULL;
  float got[kN];
  OK(kiln_all_sum(&y, x, pair[0]));  /* lazy: it waits when evaluated */
  FAILS_WITH(kiln_array_copy_to(got, sizeof got, y, KILN_FLOAT32), "[all_sum] the group was aborted: rank 1 failed");
  kiln_array_free(x), kiln_array_free(y);
  return NULL;
}

static void test_abort_ends_the_wait(void) {
  kiln_device cpu[2] = {{KILN_DEVICE_CPU, 0}, {KILN_DEVICE_CPU, 0}};
  OK(kiln_group_local(cpu, 2, pair));
  pthread_t t;
  pthread_create(&t, NULL, waits_in_all_sum, NULL);
  const struct timespec pause = {0, 200 * 1000 * 1000};  /* rank 0 is waiting by now */
  nanosleep(&pause, NULL);
  OK(kiln_group_abort(pair[1], "rank 1 failed"));
  pthread_join(t, NULL);
  kiln_array x = rank_array(1), y = NULL;
  float got[kN * 2];
  OK(kiln_all_gather(&y, x, pair[1], 0));
  FAILS_WITH(kiln_array_copy_to(got, sizeof got, y, KILN_FLOAT32), "[all_gather] the group was aborted: rank 1 failed");
  kiln_array_free(x), kiln_array_free(y);
  OK(kiln_group_free(pair[0]));
  OK(kiln_group_free(pair[1]));
}

static void test_errors(void) {
  kiln_array x = rank_array(0), y = NULL;
  int rank = 0;
  FAILS_WITH(kiln_group_rank(&rank, NULL), "[kiln_group_rank] null group handle");
  FAILS_WITH(kiln_group_local(NULL, 2, groups), "[kiln_group_local] null device pointer with 2 devices");
  kiln_device bad = {KILN_DEVICE_CUDA, 99};
  FAILS_WITH(kiln_group_local(&bad, 1, groups), "[distributed] no CUDA device 99");
  FAILS_WITH(kiln_all_sum(NULL, x, NULL), "null output pointer");
  FAILS_WITH(kiln_all_gather(&y, x, NULL, 3), "[all_gather]");
  kiln_array_free(x);
}

int main(void) {
  RUN(test_thread_ranks);
  RUN(test_group_of_one_rank);
  RUN(test_abort_ends_the_wait);
  RUN(test_errors);
  return harness_finish();
}
