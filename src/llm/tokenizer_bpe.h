// Byte-level BPE (tokenizer.ggml.model "gpt2"): pre-tokenize, write each word's bytes in the
// byte-level alphabet, then merge adjacent symbols, the pair of lowest merge rank first.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llm/pretokenizer.h"
#include "llm/vocab.h"

namespace kiln::llm {

class BpeEncoder {
 public:
  BpeEncoder(const Vocab& vocab, std::span<const std::string> merges, std::string_view pre, const std::string& source);

  bool adds_bos() const { return pre_.adds_bos(); }

  /* Appends the ids of text (a stretch between special tokens) to out. */
  void encode(std::string_view text, std::vector<TokenId>& out) const;

 private:
  // Symbols are token ids, or vocab.size() + i for extra_[i]: a text that merges name but the
  // vocabulary lacks (kept so that broken vocabularies merge as llama.cpp merges them).
  using Symbol = uint32_t;
  struct Merge {
    int32_t rank;
    Symbol result;
  };

  Symbol symbol_of(std::string_view text);
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;
  void emit(Symbol s, std::vector<TokenId>& out) const;
  static uint64_t pair_key(Symbol left, Symbol right) { return (uint64_t{left} << 32) | right; }

  const Vocab& vocab_;
  PreTokenizer pre_;
  std::array<Symbol, 256> byte_symbol_{};  // the symbol of each byte's character
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> extra_;
  std::unordered_map<std::string, Symbol> extra_ids_;
};

}  // namespace kiln::llm
