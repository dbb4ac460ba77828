#include "llm/tokenizer_spm.h"

#include <cstdio>
#include <queue>

#include "kiln/error.h"
#include "llm/utf8.h"

namespace kiln::llm {

int byte_token_value(std::string_view text) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

SpmEncoder::SpmEncoder(const Vocab& vocab, std::optional<TokenId> unk, const std::string& source) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    char raw = static_cast<char>(b);
    // The byte token, else the byte as a one-character token, else the unknown token.
    std::optional<TokenId> id = vocab.find(name);
    if (!id) id = vocab.find(std::string_view(&raw, 1));
    if (!id) id = unk;
    if (!id)
      fail("tokenizer", source, ": the vocabulary has no byte token ", name,
           " and no unknown token (tokenizer.ggml.unknown_token_id) to stand for it");
    byte_token_[b] = *id;
  }
}

void SpmEncoder::encode(std::string_view text, std::vector<TokenId>& out) const {
  struct Node {
    size_t begin, size;  // size 0: merged into its left neighbour
    int prev, next;
  };
  struct Candidate {
    float score;
    int left, right;
    size_t size;
    bool operator<(const Candidate& o) const {  // priority_queue pops the largest: best score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Node> nodes;
  for (size_t pos = 0; pos < text.size();) {
    size_t n = std::max<size_t>(1, utf8::sequence_length(text, pos));  // a stray byte is a symbol of its own
    int i = static_cast<int>(nodes.size());
    nodes.push_back({pos, n, i - 1, pos + n < text.size() ? i + 1 : -1});
    pos += n;
  }
  std::priority_queue<Candidate> queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    size_t size = nodes[left].size + nodes[right].size;
    if (auto id = vocab_.find(text.substr(nodes[left].begin, size))) queue.push({vocab_.score[*id], left, right, size});
  };
  for (int i = 0; i + 1 < static_cast<int>(nodes.size()); ++i) consider(i, i + 1);

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Node& left = nodes[c.left];
    Node& right = nodes[c.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;  // stale
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) nodes[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int i = nodes.empty() ? -1 : 0; i >= 0; i = nodes[i].next) {
    std::string_view piece = text.substr(nodes[i].begin, nodes[i].size);
    if (auto id = vocab_.find(piece)) {
      out.push_back(*id);
    } else {
      for (char c : piece) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
    }
  }
}

}  // namespace kiln::llm
