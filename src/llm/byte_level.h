// Byte-level BPE stores bytes as printable characters: each of the 256 byte values has one
// code point (printable Latin-1 bytes stand for themselves, the others for U+0100 onwards).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::llm::byte_level {

/* The code point that stands for byte b. */
uint32_t codepoint(uint8_t b);

/* The byte that code point cp stands for, or -1 when it stands for none. */
int byte_of(uint32_t cp);

/* bytes written in the byte-level alphabet (what the vocabulary's token texts look like). */
std::string encode(std::string_view bytes);

/* A token text mapped back to bytes; a code point outside the alphabet is kept as UTF-8. */
std::string decode(std::string_view token_text);

}  // namespace kiln::llm::byte_level
