#include "llm/byte_level.h"

#include <array>

#include "llm/utf8.h"

namespace kiln::llm::byte_level {

namespace {

bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> to_byte{};  // every code point used is below 0x100 + 68
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    t.to_byte.fill(-1);
    uint32_t next = 0x100;  // the bytes that are not printable take U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = stands_for_itself(b) ? static_cast<uint32_t>(b) : next++;
      t.to_cp[b] = cp;
      t.to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return t;
}

// Decodes the valid UTF-8 sequence of length n at s[pos].
uint32_t decode_at(std::string_view s, size_t pos, size_t n) {
  auto c = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[pos + i])); };
  if (n == 1) return c(0);
  if (n == 2) return ((c(0) & 0x1F) << 6) | (c(1) & 0x3F);
  if (n == 3) return ((c(0) & 0x0F) << 12) | ((c(1) & 0x3F) << 6) | (c(2) & 0x3F);
  return ((c(0) & 0x07) << 18) | ((c(1) & 0x3F) << 12) | ((c(2) & 0x3F) << 6) | (c(3) & 0x3F);
}

}  // namespace

uint32_t codepoint(uint8_t b) { return tables().to_cp[b]; }

int byte_of(uint32_t cp) { return cp < tables().to_byte.size() ? tables().to_byte[cp] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view token_text) {
  std::string out;
  for (size_t pos = 0; pos < token_text.size();) {
    size_t n = utf8::sequence_length(token_text, pos);
    if (n == 0) {  // not UTF-8: keep the byte
      out += token_text[pos++];
      continue;
    }
    int b = byte_of(decode_at(token_text, pos, n));
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(token_text.substr(pos, n));
    }
    pos += n;
  }
  return out;
}

}  // namespace kiln::llm::byte_level
