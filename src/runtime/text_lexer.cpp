#include "runtime/text_lexer.h"

#include <cctype>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

}  // namespace

std::vector<Token> tokenize(const std::string& s, const std::string& path) {
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  auto error = [&](int l, int c, const std::string& msg) {
    throw Error(detail::concat(path, ":", l, ":", c, ": [parse] ", msg));
  };
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance(1);
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') advance(1);
      continue;
    }
    Token t;
    t.line = line;
    t.column = col;
    size_t start = i;
    bool neg = c == '-' && i + 1 < s.size() &&
               (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.' || s[i + 1] == 'i');
    if (ident_start(c)) {
      while (i < s.size() && ident_char(s[i])) advance(1);
      t.kind = Token::Kind::ident;
      t.text = s.substr(start, i - start);
    } else if (std::isdigit(static_cast<unsigned char>(c)) || neg ||
               (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      advance(1);
      if (neg && s[i] == 'i') {  // -inf
        while (i < s.size() && ident_char(s[i])) advance(1);
        t.kind = Token::Kind::number;
        t.text = s.substr(start, i - start);
        if (t.text != "-inf") error(t.line, t.column, "unexpected '" + t.text + "'");
        out.push_back(t);
        continue;
      }
      while (i < s.size()) {
        char d = s[i];
        bool exp_sign = (d == '+' || d == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E');
        if (std::isalnum(static_cast<unsigned char>(d)) || d == '.' || exp_sign)
          advance(1);
        else
          break;
      }
      t.kind = Token::Kind::number;
      t.text = s.substr(start, i - start);
    } else if (c == '"') {
      advance(1);
      t.kind = Token::Kind::string;
      while (true) {
        if (i >= s.size() || s[i] == '\n') error(t.line, t.column, "unterminated string");
        char d = s[i];
        if (d == '"') {
          advance(1);
          break;
        }
        if (d == '\\') {
          if (i + 1 >= s.size()) error(t.line, t.column, "unterminated string");
          char e = s[i + 1];
          if (e == 'n')
            t.text += '\n';
          else if (e == '"' || e == '\\')
            t.text += e;
          else
            error(line, col, std::string("unknown escape '\\") + e + "'");
          advance(2);
          continue;
        }
        t.text += d;
        advance(1);
      }
    } else if (c == '<' && i + 1 < s.size() && s[i + 1] == '=') {
      advance(2);
      t.kind = Token::Kind::punct;
      t.text = "<=";
    } else if (std::string("{}()[],:=@;").find(c) != std::string::npos) {
      advance(1);
      t.kind = Token::Kind::punct;
      t.text = std::string(1, c);
    } else {
      unsigned char u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u < 0x7f) error(line, col, std::string("unexpected character '") + c + "'");
      error(line, col, detail::concat("unexpected byte 0x", std::hex, static_cast<int>(u)));
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Token::Kind::end;
  end.line = line;
  end.column = col;
  out.push_back(end);
  return out;
}

}  // namespace kiln::runtime
