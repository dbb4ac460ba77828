/* A small assert-style harness for the C API tests: checks count passes and
   failures (atomically, so threads may check too), and finish() prints
   "N passed, N failed" and returns the exit status. */
#ifndef KILN_TESTS_C_HARNESS_H
#define KILN_TESTS_C_HARNESS_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kiln/c/kiln.h"

static atomic_int harness_passed;
static atomic_int harness_failed;

static void harness_fail(const char* file, int line, const char* what) {
  atomic_fetch_add(&harness_failed, 1);
  fprintf(stderr, "%s:%d: failed: %s (last error: \"%s\")\n", file, line, what, kiln_last_error());
}

#define CHECK(cond)                            \
  do {                                         \
    if (cond)                                  \
      atomic_fetch_add(&harness_passed, 1);    \
    else                                       \
      harness_fail(__FILE__, __LINE__, #cond); \
  } while (0)

/* The call succeeds. */
#define OK(call) CHECK((call) == 0)

/* The call fails and the thread's last error contains `text`. */
#define FAILS_WITH(call, text)                                              \
  do {                                                                      \
    int harness_rc_ = (call);                                               \
    CHECK(harness_rc_ != 0);                                                \
    if (harness_rc_ != 0 && !strstr(kiln_last_error(), (text))) {           \
      harness_fail(__FILE__, __LINE__, "last error contains \"" text "\""); \
    } else if (harness_rc_ != 0) {                                          \
      atomic_fetch_add(&harness_passed, 1);                                 \
    }                                                                       \
  } while (0)

#define RUN(test)                                                                             \
  do {                                                                                        \
    int harness_before_ = atomic_load(&harness_failed);                                       \
    test();                                                                                   \
    if (atomic_load(&harness_failed) != harness_before_) fprintf(stderr, "  in %s\n", #test); \
  } while (0)

static int harness_finish(void) {
  int p = atomic_load(&harness_passed), f = atomic_load(&harness_failed);
  printf("%d passed, %d failed\n", p, f);
  return f == 0 ? 0 : 1;
}

#endif
