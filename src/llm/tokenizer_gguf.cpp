// The tokenizer spec from a model file's tokenizer.* metadata (GGUF key names).
#include <limits>

#include "kiln/error.h"
#include "kiln/llm.h"
#include "kiln/llm_tokenizer.h"

namespace kiln::llm {

namespace {

std::optional<TokenId> find_id(const ModelFile& file, const std::string& key) {
  std::optional<int64_t> v = file.find_int(key);
  if (!v) return std::nullopt;
  if (*v < 0 || *v > std::numeric_limits<TokenId>::max())
    fail("tokenizer", file.path(), ": ", key, " = ", *v, " is not a token id");
  return static_cast<TokenId>(*v);
}

}  // namespace

TokenizerSpec tokenizer_spec(const ModelFile& file) {
  const std::string k = "tokenizer.ggml.";
  TokenizerSpec s;
  s.source = file.path();
  s.model = file.get_string(k + "model");
  s.pre = file.find_string(k + "pre").value_or("");
  s.tokens = file.get_strings(k + "tokens");
  s.scores = file.find_floats(k + "scores").value_or(std::vector<float>{});
  for (int64_t t : file.find_ints(k + "token_type").value_or(std::vector<int64_t>{}))
    s.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);  // unknown kinds: undefined
  s.merges = file.find_strings(k + "merges").value_or(std::vector<std::string>{});
  s.bos_id = find_id(file, k + "bos_token_id");
  s.eos_id = find_id(file, k + "eos_token_id");
  s.eot_id = find_id(file, k + "eot_token_id");
  s.eom_id = find_id(file, k + "eom_token_id");
  s.pad_id = find_id(file, k + "padding_token_id");
  s.unk_id = find_id(file, k + "unknown_token_id");
  s.add_bos = file.find_bool(k + "add_bos_token");
  s.add_eos = file.find_bool(k + "add_eos_token");
  s.add_space_prefix = file.find_bool(k + "add_space_prefix");
  s.chat_template = file.find_string("tokenizer.chat_template").value_or("");
  return s;
}

Tokenizer::Tokenizer(const ModelFile& file) : Tokenizer(tokenizer_spec(file)) {}

}  // namespace kiln::llm
