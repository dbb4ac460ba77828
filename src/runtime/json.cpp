#include "runtime/json.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

class JsonParser {
 public:
  JsonParser(const std::string& s, const std::string& what) : s_(s), what_(what) {}
  Json document() {
    Json v = value(0);
    skip();
    if (i_ != s_.size()) error("trailing characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    throw Error(detail::concat(what_, ":", line, ":", col, ": [json] ", msg));
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void want(char c) {
    if (!eat(c))
      error(i_ >= s_.size() ? std::string("unexpected end (truncated?)") : std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  std::string string() {
    want('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) error("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) error("unterminated string");
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) error("truncated \\u escape");
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<unsigned>(h - 'A' + 10);
            else
              error("bad \\u escape");
          }
          // UTF-8 for the basic plane; names in parameter files are almost always ASCII.
          if (cp < 0x80)
            out += static_cast<char>(cp);
          else if (cp < 0x800)
            out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
          else
            out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                out += static_cast<char>(0x80 | (cp & 0x3F));
          break;
        }
        default: error(std::string("unknown escape '\\") + e + "'");
      }
    }
  }
  Json value(int depth) {
    if (depth > 64) error("nesting too deep");
    skip();
    if (i_ >= s_.size()) error("unexpected end (truncated?)");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::Kind::object;
      if (eat('}')) return v;
      do {
        skip();
        std::string k = string();
        want(':');
        if (v.object.count(k)) error("duplicate key '" + k + "'");
        v.object[k] = value(depth + 1);
      } while (eat(','));
      want('}');
    } else if (c == '[') {
      ++i_;
      v.kind = Json::Kind::array;
      if (eat(']')) return v;
      do v.array.push_back(value(depth + 1));
      while (eat(','));
      want(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.str = string();
    } else if (word("true")) {
      v.kind = Json::Kind::boolean;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = Json::Kind::boolean;
    } else if (word("null")) {
      v.kind = Json::Kind::null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = i_;
      bool frac = false;
      ++i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == 'e' ||
                                s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
        frac |= !std::isdigit(static_cast<unsigned char>(s_[i_]));
        ++i_;
      }
      std::string num = s_.substr(start, i_ - start);
      char* end = nullptr;
      errno = 0;
      if (!frac) {
        v.kind = Json::Kind::integer;
        v.integer = std::strtoll(num.c_str(), &end, 10);
      } else {
        v.kind = Json::Kind::number;
        v.number = std::strtod(num.c_str(), &end);
      }
      if (errno == ERANGE || *end != '\0') {
        i_ = start;
        error("bad number '" + num + "'");
      }
    } else {
      error(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;
};

}  // namespace

Json parse_json(const std::string& text, const std::string& what) { return JsonParser(text, what).document(); }

std::string json_quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      q += '\\', q += static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      q += buf;
    } else
      q += static_cast<char>(c);
  }
  return q + "\"";
}

}  // namespace kiln::runtime
