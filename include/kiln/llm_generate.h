// Text generation over a Session: prompt in, streamed text out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/llm_model.h"
#include "kiln/llm_sampler.h"
#include "kiln/llm_tokenizer.h"

namespace kiln::llm {

struct GenerateOptions {
  /* Tokens to generate at most. */
  int max_tokens = 256;
  SamplerOptions sampling;
  /* Ids that end generation besides the tokenizer's end-of-generation tokens. */
  std::vector<TokenId> stop_tokens;
};

struct GenerateResult {
  std::vector<TokenId> tokens;  // generated, the stop token excluded
  std::string text;  // their text
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0;  // prefill, to the first token's logits
  double generate_seconds = 0;  // every later step
  std::string stop_reason;  // "stop token", "max tokens", "context full" or "callback"
  double prompt_tokens_per_second() const;
  double generate_tokens_per_second() const;
};

/* Called with each generated token and the whole UTF-8 characters it completes (possibly none);
   once more at the end with token -1 if an unfinished character was held back. Return false to stop. */
using TokenCallback = std::function<bool(TokenId token, const std::string& text)>;

/* Appends the prompt's ids to the session, then samples until a stop token, max_tokens, the
   model's context length, or on_token says stop. The session keeps every token (a chat goes on
   by calling generate again with the next turn's ids). */
GenerateResult generate(Session& session, const Tokenizer& tokenizer, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

}  // namespace kiln::llm
