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

  struct Node {  // one symbol of the word being merged, in a linked list
    Symbol symbol;
    int prev, next;
    bool alive;
  };
  struct Candidate {  // a pair that a merge applies to
    int32_t rank;
    int left, right;
    Symbol left_symbol, right_symbol, result;
    bool operator<(const Candidate& o) const {  // the heap pops the largest: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  struct Scratch {  // reused from word to word
    std::vector<Node> nodes;
    std::vector<Candidate> heap;
  };
  // Open addressing on (left, right) keys: the lookup is the inner loop of encoding.
  class MergeTable {
   public:
    void reserve(size_t n);
    void insert_first(uint64_t key, Merge m);  // keeps an existing entry
    const Merge* find(uint64_t key) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    struct Slot {
      uint64_t key = kEmpty;
      Merge merge{};
    };
    size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull >> 20) & mask_; }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
  };

  Symbol symbol_of(std::string_view text);
  void encode_word(std::string_view word, Scratch& scratch, std::vector<TokenId>& out) const;
  void emit(Symbol s, std::vector<TokenId>& out) const;
  static uint64_t pair_key(Symbol left, Symbol right) { return (uint64_t{left} << 32) | right; }

  const Vocab& vocab_;
  PreTokenizer pre_;
  std::array<Symbol, 256> byte_symbol_{};  // the symbol of each byte's character
  MergeTable merges_;
  std::vector<std::string> extra_;
  std::unordered_map<std::string, Symbol> extra_ids_;
};

}  // namespace kiln::llm
