#include "llm/tokenizer_bpe.h"

#include <algorithm>

#include "kiln/error.h"
#include "llm/byte_level.h"
#include "llm/utf8.h"

namespace kiln::llm {

void BpeEncoder::MergeTable::reserve(size_t n) {
  size_t size = 16;
  while (size < 2 * n) size *= 2;  // at most half full
  slots_.assign(size, Slot{});
  mask_ = size - 1;
}

void BpeEncoder::MergeTable::insert_first(uint64_t key, Merge m) {
  size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) slots_[i] = {key, m};
}

const BpeEncoder::Merge* BpeEncoder::MergeTable::find(uint64_t key) const {
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return &slots_[i].merge;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

BpeEncoder::BpeEncoder(const Vocab& vocab, std::span<const std::string> merges, std::string_view pre,
                       const std::string& source)
    : vocab_(vocab), pre_(pre, source) {
  for (int b = 0; b < 256; ++b) {
    std::string c;
    utf8::append(c, byte_level::codepoint(static_cast<uint8_t>(b)));
    byte_symbol_[b] = symbol_of(c);
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;  // a part may itself start with ' '
    if (space == std::string::npos)
      fail("tokenizer", source, ": tokenizer.ggml.merges[", rank, "] = '", m, "' is not two parts split by a space");
    std::string_view left(m.data(), space), right(m.data() + space + 1, m.size() - space - 1);
    Symbol l = symbol_of(left), r = symbol_of(right);
    Symbol result = symbol_of(std::string(left) + std::string(right));
    merges_.insert_first(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});  // a pair's first rank wins
  }
}

BpeEncoder::Symbol BpeEncoder::symbol_of(std::string_view text) {
  if (auto id = vocab_.find(text)) return static_cast<Symbol>(*id);
  auto [it, added] = extra_ids_.emplace(std::string(text), static_cast<Symbol>(vocab_.size() + extra_.size()));
  if (added) extra_.emplace_back(text);
  return it->second;
}

void BpeEncoder::encode(std::string_view text, std::vector<TokenId>& out) const {
  std::string valid;
  for (size_t pos = 0; pos < text.size();) {  // PCRE2 needs valid UTF-8
    size_t n = utf8::sequence_length(text, pos);
    if (n == 0) {
      valid = utf8::replace_invalid(text);
      text = valid;
      break;
    }
    pos += n;
  }
  std::vector<std::string_view> words;
  pre_.split(text, words);
  Scratch scratch;
  for (std::string_view w : words) encode_word(w, scratch, out);
}

void BpeEncoder::encode_word(std::string_view word, Scratch& scratch, std::vector<TokenId>& out) const {
  if (pre_.ignore_merges()) {
    if (auto id = vocab_.find(byte_level::encode(word))) {
      out.push_back(*id);
      return;
    }
  }
  const int n = static_cast<int>(word.size());
  std::vector<Node>& nodes = scratch.nodes;
  nodes.resize(n);
  for (int i = 0; i < n; ++i)
    nodes[i] = {byte_symbol_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (const Merge* m = merges_.find(pair_key(nodes[left].symbol, nodes[right].symbol))) {
      heap.push_back({m->rank, left, right, nodes[left].symbol, nodes[right].symbol, m->result});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Candidate c = heap.back();
    heap.pop_back();
    Node& left = nodes[c.left];
    Node& right = nodes[c.right];
    // Stale when either side was merged since (a merge changes the left symbol, kills the right).
    if (!left.alive || !right.alive || left.symbol != c.left_symbol || right.symbol != c.right_symbol) continue;
    left.symbol = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) nodes[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int i = n > 0 ? 0 : -1; i >= 0; i = nodes[i].next) emit(nodes[i].symbol, out);
}

void BpeEncoder::emit(Symbol s, std::vector<TokenId>& out) const {
  if (s < vocab_.size()) {
    out.push_back(static_cast<TokenId>(s));
    return;
  }
  // Not a token: llama.cpp looks up each byte of its text alone and drops those it lacks.
  for (char c : extra_[s - vocab_.size()])
    if (auto id = vocab_.find(std::string_view(&c, 1))) out.push_back(*id);
}

}  // namespace kiln::llm
