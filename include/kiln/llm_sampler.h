// kiln::llm::Sampler: picks the next token from a row of logits.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::llm {

struct SamplerOptions {
  /* 0 or less: greedy (the most likely token). */
  float temperature = 0.8f;
  /* Keep the k most likely tokens (0: all). */
  int top_k = 40;
  /* Keep the most likely tokens whose probabilities sum to at least top_p (1: all). */
  float top_p = 0.95f;
  /* Drop tokens less likely than min_p times the most likely one (0: none). */
  float min_p = 0.05f;
  /* Logits of tokens among the last repeat_last_n divided (positive) or multiplied (negative)
     by this (1: off). */
  float repetition_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

/* Filters in llama.cpp's order (repetition penalty, top-k, temperature, top-p, min-p), then
   draws. Deterministic for a seed on every platform. One sampler per session. */
class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options = {});
  const SamplerOptions& options() const { return options_; }
  /* history: the session's tokens so far (for the repetition penalty). */
  int32_t sample(const float* logits, size_t vocab, const std::vector<int32_t>& history);

 private:
  double uniform();  // in [0, 1), from 53 random bits
  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace kiln::llm
