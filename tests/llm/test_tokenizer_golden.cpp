// kiln's tokenizer against llama.cpp's ids on the strings of tests/llm/golden/tokenizer.json
// (made by make_tokenizer_golden.py, which also checks llama.cpp against Hugging Face): a small
// byte-level BPE under every pre-tokenizer, a SentencePiece vocabulary, and the default model read
// from its GGUF file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/error.h"
#include "kiln/llm.h"
#include "kiln/llm_tokenizer.h"
#include "runtime/json.h"

using namespace kiln::llm;
using kiln::runtime::Json;

namespace {

const Json& golden() {
  static const Json data = [] {
    std::string path = std::string(KILN_TOKENIZER_GOLDEN_DIR) + "/tokenizer.json";
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return kiln::runtime::parse_json(text.str(), path);
  }();
  return data;
}

const Json& field(const Json& j, const std::string& key) {
  const Json* v = j.get(key);
  if (!v) throw std::runtime_error("tokenizer.json: no field '" + key + "'");
  return *v;
}

std::vector<TokenId> ids_of(const Json& array) {
  std::vector<TokenId> ids;
  for (const Json& v : array.array) ids.push_back(static_cast<TokenId>(v.integer));
  return ids;
}

TokenizerSpec spec_of(const std::string& name, const Json& pre) {
  const Json& v = field(field(golden(), "vocabularies"), name);
  TokenizerSpec s;
  s.source = "tokenizer.json:" + name;
  s.model = field(v, "model").str;
  if (pre.kind == Json::Kind::string) s.pre = pre.str;
  for (const Json& t : field(v, "tokens").array) s.tokens.push_back(t.str);
  s.token_types = ids_of(field(v, "token_types"));
  if (const Json* merges = v.get("merges"))
    for (const Json& m : merges->array) s.merges.push_back(m.str);
  if (const Json* scores = v.get("scores"))
    for (const Json& x : scores->array)
      s.scores.push_back(static_cast<float>(x.kind == Json::Kind::integer ? x.integer : x.number));
  s.bos_id = static_cast<TokenId>(field(v, "bos_id").integer);
  s.eos_id = static_cast<TokenId>(field(v, "eos_id").integer);
  if (const Json* unk = v.get("unk_id")) s.unk_id = static_cast<TokenId>(unk->integer);
  return s;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out.size() > 120 ? out.substr(0, 120) + "..." : out;
}

std::string list(const std::vector<TokenId>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) {
    if (i) out += ' ';  // appended apart: GCC 12 warns falsely (-Wrestrict) on " " + std::to_string
    out += std::to_string(ids[i]);
  }
  return ids.size() > 40 ? out + " ..." : out;
}

// Encodes every string of the configuration both ways it was recorded and counts differences.
void check_config(const Json& config, const Tokenizer& t) {
  const std::string name = field(config, "name").str;
  const auto& strings = field(golden(), "strings").array;
  int differ = 0, total = 0;
  auto check = [&](const char* strings_key, const char* ids_key, bool add_special, bool parse_special) {
    const auto& index = field(config, strings_key).array;
    const auto& expected = field(config, ids_key).array;
    ASSERT_EQ(index.size(), expected.size()) << name;
    for (size_t k = 0; k < index.size(); ++k) {
      const std::string& text = strings.at(static_cast<size_t>(index[k].integer)).str;
      std::vector<TokenId> want = ids_of(expected[k]);
      std::vector<TokenId> got = t.encode(text, add_special, parse_special);
      ++total;
      if (got != want && ++differ <= 5)
        ADD_FAILURE() << name << (parse_special ? " (parse_special)" : "") << ": '" << printable(text)
                      << "'\n  llama.cpp: " << list(want) << "\n  kiln:      " << list(got);
    }
  };
  check("strings", "plain", true, false);
  check("special_strings", "special", false, true);
  EXPECT_EQ(differ, 0) << name << ": " << differ << " of " << total << " encodings differ from llama.cpp";
  EXPECT_GT(total, 100) << name;
}

}  // namespace

TEST(TokenizerGolden, SmallBpeUnderEveryPreTokenizer) {
  int configs = 0;
  for (const Json& config : field(golden(), "configs").array) {
    if (field(config, "vocab").str != "bpe") continue;
    SCOPED_TRACE(field(config, "name").str);
    check_config(config, Tokenizer(spec_of("bpe", field(config, "pre"))));
    ++configs;
  }
  EXPECT_GE(configs, 4);  // at least gpt-2, llama-bpe, qwen2, smollm
}

TEST(TokenizerGolden, SentencePiece) {
  int configs = 0;
  for (const Json& config : field(golden(), "configs").array) {
    if (field(config, "vocab").str != "spm") continue;
    check_config(config, Tokenizer(spec_of("spm", field(config, "pre"))));
    ++configs;
  }
  EXPECT_EQ(configs, 1);
}

TEST(TokenizerGolden, DefaultModelFromItsGguf) {
  const std::string path = default_model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no default model at " << path << " (scripts/setup fetches it)";
  Tokenizer t(*ModelFile::open(path));
  EXPECT_EQ(t.model(), "gpt2");
  EXPECT_EQ(t.pre(), "smollm");
  EXPECT_EQ(t.vocab_size(), 49152u);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.eot(), 2);  // <|im_end|>
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_EQ(ChatTemplate::recognize(t.chat_template()).format(), ChatFormat::ChatML);
  int configs = 0;
  for (const Json& config : field(golden(), "configs").array) {
    if (field(config, "vocab").str != std::filesystem::path(path).filename().string()) continue;
    check_config(config, t);
    ++configs;
  }
  EXPECT_EQ(configs, 1);
  for (const Json& s : field(golden(), "strings").array) EXPECT_EQ(t.decode(t.encode(s.str)), s.str);
}

TEST(TokenizerGolden, FileWithoutATokenizerIsAClearError) {
  const std::string path = std::string(KILN_TOKENIZER_GOLDEN_DIR) + "/../data/types.gguf";
  try {
    Tokenizer t(*ModelFile::open(path));
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("types.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
}

TEST(TokenizerGolden, DecodeInvertsEncode) {
  // Every test string is valid UTF-8, and both vocabularies can spell every byte.
  const auto& strings = field(golden(), "strings").array;
  for (const char* vocab : {"bpe", "spm"}) {
    Json pre;
    pre.kind = Json::Kind::string;
    pre.str = "smollm";
    Tokenizer t(spec_of(vocab, pre));
    int differ = 0;
    for (const Json& s : strings) {
      std::string back = t.decode(t.encode(s.str, true, false));
      if (back != s.str && ++differ <= 5)
        ADD_FAILURE() << vocab << ": '" << printable(s.str) << "' decodes back as '" << printable(back) << "'";
    }
    EXPECT_EQ(differ, 0) << vocab;
  }
}

TEST(TokenizerGolden, ChatTemplatesRenderAsJinjaDoes) {
  const Json& templates = field(golden(), "chat_templates");
  int cases = 0;
  for (const Json& c : field(golden(), "chats").array) {
    const std::string name = field(c, "template").str;
    std::vector<ChatMessage> messages;
    for (const Json& m : field(c, "messages").array)
      messages.push_back({field(m, "role").str, field(m, "content").str});
    ChatTemplate chat = ChatTemplate::recognize(field(templates, name).str);
    EXPECT_EQ(chat.render(messages, field(c, "add_generation_prompt").boolean), field(c, "text").str) << name;
    ++cases;
  }
  EXPECT_GE(cases, 16);
}
