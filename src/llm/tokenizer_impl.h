// What a Tokenizer holds; shared by its copies and by StreamDecoder, never changed once built.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/llm_tokenizer.h"
#include "llm/tokenizer_bpe.h"
#include "llm/tokenizer_spm.h"
#include "llm/vocab.h"

namespace kiln::llm {

struct Tokenizer::Impl {
  std::string source, model, pre;
  Vocab vocab;
  std::vector<std::string> pieces;  // the bytes each token decodes to (control tokens: their text)
  std::vector<bool> end_of_generation;
  std::vector<TokenId> specials;  // control, unknown and user-defined tokens, longest text first
  std::optional<TokenId> bos, eos, eot, eom, pad, unk;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: a space in front of the text and after special tokens
  std::string chat_template;
  std::unique_ptr<BpeEncoder> bpe;  // exactly one of bpe, spm
  std::unique_ptr<SpmEncoder> spm;

  bool is_special(TokenId id) const {
    TokenType t = vocab.type[id];
    return t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined;
  }
  bool is_hidden(TokenId id) const {  // not rendered unless asked
    TokenType t = vocab.type[id];
    return t == TokenType::Control || t == TokenType::Unknown;
  }
  void check_id(TokenId id) const;
};

}  // namespace kiln::llm
