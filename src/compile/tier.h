// Which tier a compiled call ran: its fused regions through their generated kernels, or
// (while those compile in the background) through the interpreter. Plan::run keeps a
// record per call; the regions write into it as they run.
#pragma once

#include <cstdint>

#include "kiln/compile.h"

namespace kiln::compiler {

struct Plan;

struct TierRecord {
  int interim = 0;  // regions that ran through the interpreter
  int64_t latest_ready_ns = 0;  // steady clock: when the last of the compiled regions' kernels became ready
};

/* The record of the compiled call running on this thread; null outside one. */
TierRecord*& current_tier_record();
/* Called by a fused region as it runs: by its kernel (ready at ready_ns) or interpreted. */
void note_region(bool compiled, int64_t ready_ns);
/* Counts a finished call in stats(): its tier and, at the plan's first fully fused call, how
   long after the plan's cache miss its last kernel became ready. */
void count_call(const Plan& plan, const TierRecord& record);
/* Steady clock in nanoseconds. */
int64_t now_ns();

/* Sets the thread's record for the life of the guard (a plan run inside a plan run keeps its own). */
class TierScope {
 public:
  explicit TierScope(TierRecord* r) : saved_(current_tier_record()) { current_tier_record() = r; }
  ~TierScope() { current_tier_record() = saved_; }
  TierScope(const TierScope&) = delete;
  TierScope& operator=(const TierScope&) = delete;

 private:
  TierRecord* saved_;
};

}  // namespace kiln::compiler
