#define PCRE2_CODE_UNIT_WIDTH 8
#include "llm/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <initializer_list>

#include "kiln/error.h"
#include "llm/utf8.h"

namespace kiln::llm {

namespace {

// The expressions of the pre-tokenizers llama.cpp knows by these names (which copy the
// tokenizer.json of the models they come from).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Kind {
  std::initializer_list<std::string_view> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges = false;
  bool adds_bos = false;
};

const Kind kKinds[] = {
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}, {kLlama3}, true, true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {kQwen2}},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais", "exaone4",
      "trillion"},
     {kGpt2}},
    {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
    {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
    {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"}},
    {{"deepseek-v3"}, {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3Words}},
};

// PCRE2 counts U+180E as \s (Perl's old list); Unicode's White_Space property, which llama.cpp,
// Rust's regex and Oniguruma (Hugging Face) use, no longer does. Escape-aware rewrite of \s, \S.
std::string with_unicode_spaces(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char next = pattern[++i];
    if (next == 's') {
      out += "\\p{White_Space}";
    } else if (next == 'S') {
      out += "\\P{White_Space}";
    } else {
      out += '\\';
      out += next;
    }
  }
  return out;
}

std::string known_names() {
  std::string all;
  for (const Kind& k : kKinds)
    for (std::string_view n : k.names) all += (all.empty() ? "" : ", ") + std::string(n);
  return all;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::string_view name, const std::string& source) {
  if (name.empty()) name = "default";
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds)
    if (std::find(k.names.begin(), k.names.end(), name) != k.names.end()) kind = &k;
  if (!kind)
    fail("tokenizer", source, ": unknown pre-tokenizer tokenizer.ggml.pre = '", name, "' (known: ", known_names(), ")");
  ignore_merges_ = kind->ignore_merges;
  adds_bos_ = kind->adds_bos;
  for (const char* pattern : kind->regexes) {
    auto re = std::make_unique<Regex>();
    int err = 0;
    PCRE2_SIZE offset = 0;
    std::string rewritten = with_unicode_spaces(pattern);
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(), PCRE2_UTF | PCRE2_UCP,
                             &err, &offset, nullptr);
    if (!re->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(err, message, sizeof message);
      fail("tokenizer", "pre-tokenizer '", name, "': PCRE2 rejects its expression at ", offset, ": ",
           reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // without JIT support pcre2_match interprets
    regexes_.push_back(std::move(re));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  std::vector<std::string_view> pieces{text}, next;
  for (const auto& re : regexes_) {
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
        pcre2_match_data_create_from_pattern(re->code, nullptr), pcre2_match_data_free);
    next.clear();
    for (std::string_view piece : pieces) {
      auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t kept = 0;  // start of the text not yet given to a word
      size_t from = 0;  // where the next search starts
      while (from < piece.size()) {
        int rc = pcre2_match(re->code, subject, piece.size(), from, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          fail("tokenizer", "pre-tokenizer match failed: ", reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
        if (span[1] == span[0]) {  // an empty match cuts nothing: step over one character
          from = span[0] + std::max<size_t>(1, utf8::sequence_length(piece, span[0]));
          continue;
        }
        if (span[0] > kept) next.push_back(piece.substr(kept, span[0] - kept));
        next.push_back(piece.substr(span[0], span[1] - span[0]));
        kept = from = span[1];
      }
      if (kept < piece.size()) next.push_back(piece.substr(kept));
    }
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

}  // namespace kiln::llm
