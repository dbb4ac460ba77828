// SentencePiece-style vocabularies (tokenizer.ggml.model "llama"): start from single
// characters and merge the adjacent pair whose joined text is the token of highest score, as
// llama.cpp does; characters that are no token fall back to <0xXX> byte tokens.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/vocab.h"

namespace kiln::llm {

class SpmEncoder {
 public:
  SpmEncoder(const Vocab& vocab, std::optional<TokenId> unk, const std::string& source);

  /* Appends the ids of text, whose spaces are already written as U+2581, to out. */
  void encode(std::string_view text, std::vector<TokenId>& out) const;

 private:
  const Vocab& vocab_;
  std::array<TokenId, 256> byte_token_{};
};

/* The byte a <0xXX> token stands for, or -1 when text is not of that form. */
int byte_token_value(std::string_view text);

}  // namespace kiln::llm
