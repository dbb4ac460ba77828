#include "llm/utf8.h"

namespace kiln::llm::utf8 {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Sequence length announced by a lead byte, and the allowed range of its second byte
// (which rules out overlong forms, surrogates and code points past U+10FFFF); 0 if not a lead.
struct Lead {
  size_t length;
  unsigned char second_min, second_max;
};

Lead lead(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from pos agree with a valid sequence (stopping at the end of text).
size_t valid_prefix(std::string_view text, size_t pos, const Lead& l) {
  size_t n = 1;
  for (; n < l.length && pos + n < text.size(); ++n) {
    auto c = static_cast<unsigned char>(text[pos + n]);
    bool ok = n == 1 ? (c >= l.second_min && c <= l.second_max) : is_continuation(c);
    if (!ok) break;
  }
  return n;
}

}  // namespace

size_t sequence_length(std::string_view text, size_t pos) {
  Lead l = lead(static_cast<unsigned char>(text[pos]));
  if (l.length == 0) return 0;
  return valid_prefix(text, pos, l) == l.length ? l.length : 0;
}

bool is_incomplete_sequence(std::string_view text, size_t pos) {
  Lead l = lead(static_cast<unsigned char>(text[pos]));
  if (l.length <= 1) return false;
  size_t n = valid_prefix(text, pos, l);
  return n < l.length && pos + n == text.size();
}

std::string replace_invalid(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t n = sequence_length(text, pos);
    if (n == 0) {
      out += kReplacement;
      pos += 1;
    } else {
      out.append(text.substr(pos, n));
      pos += n;
    }
  }
  return out;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace kiln::llm::utf8
