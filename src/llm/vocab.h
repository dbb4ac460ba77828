// A tokenizer vocabulary: each token's text, type and score, and the id of each text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/llm_tokenizer.h"

namespace kiln::llm {

struct Vocab {
  std::vector<std::string> text;
  std::vector<TokenType> type;
  std::vector<float> score;
  // Keys view the strings of `text`, which never move once built. A text given to several ids
  // maps to the last of them, as in llama.cpp.
  std::unordered_map<std::string_view, TokenId> ids;

  size_t size() const { return text.size(); }
  std::optional<TokenId> find(std::string_view t) const {
    auto it = ids.find(t);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace kiln::llm
