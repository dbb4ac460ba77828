// The generation loop: prefill, then one step and one sample per token.
#include "kiln/llm_generate.h"

#include <algorithm>
#include <chrono>

#include "kiln/kiln.h"

namespace kiln::llm {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double GenerateResult::prompt_tokens_per_second() const {
  return prompt_seconds > 0 ? static_cast<double>(prompt_tokens) / prompt_seconds : 0.0;
}
double GenerateResult::generate_tokens_per_second() const {
  // The first token comes from the prefill's logits, so n tokens took n - 1 steps.
  return generate_seconds > 0 && tokens.size() > 1 ? static_cast<double>(tokens.size() - 1) / generate_seconds : 0.0;
}

GenerateResult generate(Session& session, const Tokenizer& tokenizer, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt.empty()) fail("generate", "the prompt has no tokens");
  if (options.max_tokens < 0) fail("generate", "max_tokens must not be negative");
  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  const int64_t context = session.model().config().context_length;
  if (session.position() + r.prompt_tokens > context)
    fail("generate", "the prompt (", prompt.size(), " tokens after ", session.position(),
         ") does not fit the model's context length ", context);

  Sampler sampler(options.sampling);
  StreamDecoder text(tokenizer);
  std::vector<TokenId> history(prompt);
  auto stops = [&](TokenId t) {
    return tokenizer.is_end_of_generation(t) ||
           std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) != options.stop_tokens.end();
  };

  auto t0 = std::chrono::steady_clock::now();
  Array logits = session.append(prompt);
  r.prompt_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  r.stop_reason = "max tokens";
  const size_t vocab = static_cast<size_t>(session.model().config().vocab_size);
  while (static_cast<int>(r.tokens.size()) < options.max_tokens) {
    std::vector<float> row = logits.to_vector<float>();
    TokenId next = sampler.sample(row.data(), vocab, history);
    if (stops(next)) {
      r.stop_reason = "stop token";
      break;
    }
    r.tokens.push_back(next);
    history.push_back(next);
    std::string piece = text.push(next);
    r.text += piece;
    if (on_token && !on_token(next, piece)) {
      r.stop_reason = "callback";
      break;
    }
    if (static_cast<int>(r.tokens.size()) == options.max_tokens) break;
    if (session.position() >= context) {
      r.stop_reason = "context full";
      break;
    }
    logits = session.append({next});
  }
  std::string rest = text.finish();
  r.text += rest;
  if (on_token && !rest.empty()) on_token(-1, rest);
  r.generate_seconds = seconds_since(t0);
  return r;
}

}  // namespace kiln::llm
