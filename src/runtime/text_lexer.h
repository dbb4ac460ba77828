// Tokens of the .kgraph text format, each with its line and column.
#pragma once

#include <string>
#include <vector>

namespace kiln::runtime {

struct Token {
  enum class Kind { ident, number, string, punct, end };
  Kind kind = Kind::end;
  std::string text;  // identifier, number as written, unescaped string, or the punctuation
  int line = 1;
  int column = 1;
};

/* Splits text into tokens; throws kiln::Error "path:line:column: [parse] ..." on a bad character
   or an unterminated string. */
std::vector<Token> tokenize(const std::string& text, const std::string& path);

}  // namespace kiln::runtime
