// Small UTF-8 helpers for the tokenizer: sequence lengths, validation, encoding one code point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::llm::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/* Length of the valid UTF-8 sequence starting at text[pos], or 0 when the bytes there are not
   one (bad lead byte, missing continuation, overlong form, surrogate, past U+10FFFF). */
size_t sequence_length(std::string_view text, size_t pos);

/* Whether text[pos..] could still become a valid sequence with more bytes (a cut-off character). */
bool is_incomplete_sequence(std::string_view text, size_t pos);

/* text with every byte that does not start a valid sequence replaced by U+FFFD. */
std::string replace_invalid(std::string_view text);

/* Appends the UTF-8 form of code point cp (< 0x110000) to out. */
void append(std::string& out, uint32_t cp);

}  // namespace kiln::llm::utf8
