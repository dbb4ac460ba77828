// kiln bench-llm --batch and --threads: aggregate decode speed of many sessions on one model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <kiln/llm_model.h>

namespace kiln::cli {

struct SessionsSpeed {
  std::string mode;  // "batch": one step over all sessions; "threads": a session per thread
  int count;  // sessions in the step, or threads
  double tokens_per_s;  // all sessions' tokens together
};

/* For each count: `tokens` decode steps after a 16-token prompt, counted over all sessions. */
std::vector<SessionsSpeed> bench_sessions(const std::shared_ptr<llm::Model>& model, const std::vector<int>& batches,
                                          const std::vector<int>& threads, int tokens);

}  // namespace kiln::cli
