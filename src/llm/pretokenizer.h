// The pre-tokenizer of a byte-level BPE vocabulary: the regular expressions, named by
// tokenizer.ggml.pre, that cut text into words before merging. Matched with PCRE2 (UTF, Unicode
// properties). Each expression cuts every piece the previous one left into its matches and the
// text between them, as llama.cpp and Hugging Face's Split(..., "isolated") do.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

class PreTokenizer {
 public:
  /* The pre-tokenizer named `name` ("" means "default"); throws kiln::Error naming the source
     for a name it does not know. */
  PreTokenizer(std::string_view name, const std::string& source);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  /* Whether a word that is itself a token skips the merges (Llama 3's tokenizers). */
  bool ignore_merges() const { return ignore_merges_; }
  /* Whether the vocabulary's models start with BOS unless the file says otherwise. */
  bool adds_bos() const { return adds_bos_; }

  /* Cuts text (valid UTF-8) into words, appended to `words` as views into text. */
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace kiln::llm
