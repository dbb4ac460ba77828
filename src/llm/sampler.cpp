// Token sampling on the host: a vocabulary row is a few hundred KB, so a pass over it costs
// microseconds next to the step that made it.
#include "kiln/llm_sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "kiln/error.h"

namespace kiln::llm {

Sampler::Sampler(const SamplerOptions& o) : options_(o), rng_(o.seed) {
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) fail("sampler", "top_p must be in (0, 1], got ", o.top_p);
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) fail("sampler", "min_p must be in [0, 1], got ", o.min_p);
  if (o.top_k < 0) fail("sampler", "top_k must be 0 (off) or positive, got ", o.top_k);
  if (!(o.repetition_penalty > 0.0f)) fail("sampler", "repetition_penalty must be positive");
  if (std::isnan(o.temperature)) fail("sampler", "temperature is NaN");
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(const float* logits, size_t vocab, const std::vector<int32_t>& history) {
  if (vocab == 0) fail("sampler", "no logits to sample from");
  const SamplerOptions& o = options_;
  candidates_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};

  if (o.repetition_penalty != 1.0f && o.repeat_last_n > 0) {
    size_t from = history.size() > static_cast<size_t>(o.repeat_last_n) ? history.size() - o.repeat_last_n : 0;
    std::unordered_set<int32_t> seen(history.begin() + static_cast<std::ptrdiff_t>(from), history.end());
    for (int32_t t : seen) {
      if (t < 0 || static_cast<size_t>(t) >= vocab) continue;
      float& l = candidates_[static_cast<size_t>(t)].first;
      l = l > 0 ? l / o.repetition_penalty : l * o.repetition_penalty;
    }
  }
  // NaN logits never win: they compare as the least likely.
  auto more_likely = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    float x = std::isnan(a.first) ? -INFINITY : a.first, y = std::isnan(b.first) ? -INFINITY : b.first;
    return x > y || (x == y && a.second < b.second);
  };
  if (o.temperature <= 0.0f) return std::min_element(candidates_.begin(), candidates_.end(), more_likely)->second;

  size_t keep = vocab;
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < vocab) keep = static_cast<size_t>(o.top_k);
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                    more_likely);
  candidates_.resize(keep);

  // Probabilities at the temperature, relative to the most likely token.
  const float top = candidates_[0].first;
  if (!std::isfinite(top)) return candidates_[0].second;
  std::vector<double> p(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    float l = candidates_[i].first;
    p[i] = std::isnan(l) ? 0.0 : std::exp((static_cast<double>(l) - top) / o.temperature);
    total += p[i];
  }
  size_t cut = keep;
  if (o.top_p < 1.0f) {
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) {
      sum += p[i];
      if (sum >= o.top_p * total) {
        cut = i + 1;
        break;
      }
    }
  }
  if (o.min_p > 0.0f) {
    size_t i = 1;
    while (i < cut && p[i] >= o.min_p * p[0]) ++i;  // p[0] is the most likely (1 before scaling)
    cut = i;
  }
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += p[i];
  double r = uniform() * kept;
  for (size_t i = 0; i < cut; ++i) {
    r -= p[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[cut - 1].second;
}

}  // namespace kiln::llm
