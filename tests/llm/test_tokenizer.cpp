// The tokenizer on small hand-made vocabularies whose right answers follow from the rules
// (merge order, scores, special tokens, byte fallback, streaming UTF-8), its errors, and chat
// templates. Agreement with llama.cpp and Hugging Face is in test_tokenizer_golden.cpp.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "kiln/error.h"
#include "kiln/llm_tokenizer.h"
#include "llm/byte_level.h"
#include "llm/pretokenizer.h"
#include "llm/utf8.h"

using namespace kiln::llm;

namespace {

std::string cp(uint32_t c) {
  std::string s;
  utf8::append(s, c);
  return s;
}

// A byte-level BPE spec: the 256 byte characters (ids 0..255), then `extra` tokens, then specials.
TokenizerSpec bpe_spec(std::vector<std::string> extra, std::vector<std::string> merges, std::string pre = "gpt-2") {
  TokenizerSpec s;
  s.source = "test.gguf";
  s.model = "gpt2";
  s.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) s.tokens.push_back(cp(byte_level::codepoint(static_cast<uint8_t>(b))));
  for (auto& t : extra) s.tokens.push_back(std::move(t));
  s.merges = std::move(merges);
  return s;
}

TokenId id_of(const Tokenizer& t, std::string_view text) {
  auto id = t.find_token(text);
  EXPECT_TRUE(id) << "no token " << text;
  return id.value_or(-1);
}

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  PreTokenizer p(pre, "test");
  std::vector<std::string_view> words;
  p.split(text, words);
  return {words.begin(), words.end()};
}

// A SentencePiece spec: <unk>, <s>, </s>, the 256 byte tokens, then (text, score) pairs.
TokenizerSpec spm_spec(std::vector<std::pair<std::string, float>> pieces) {
  TokenizerSpec s;
  s.source = "spm.gguf";
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    s.tokens.push_back(name);
    s.token_types.push_back(6);
    s.scores.push_back(0);
  }
  for (auto& [text, score] : pieces) {
    s.tokens.push_back(text);
    s.token_types.push_back(1);
    s.scores.push_back(score);
  }
  return s;
}

const std::string kSpace = "\xE2\x96\x81";  // U+2581

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ByteLevel, EveryByteHasItsOwnPrintableCharacter) {
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    uint32_t c = byte_level::codepoint(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(byte_level::byte_of(c), b);
    EXPECT_TRUE((c > 0x20 && c < 0x7F) || c > 0xA0) << b;  // no space, no control character
  }
  EXPECT_EQ(byte_level::codepoint(' '), 0x120u);  // GPT-2's Ġ
  EXPECT_EQ(byte_level::codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_level::codepoint('a'), uint32_t{'a'});
  EXPECT_EQ(byte_level::byte_of(0x4E00), -1);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_EQ(byte_level::decode("\xE4\xB8\x80"), "\xE4\xB8\x80");  // outside the alphabet: kept
}

TEST(Utf8, SequencesAndReplacement) {
  EXPECT_EQ(utf8::sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8::sequence_length("\xC3\xA9", 0), 2u);
  EXPECT_EQ(utf8::sequence_length("\xF0\x9F\x98\x80", 0), 4u);
  EXPECT_EQ(utf8::sequence_length("\xC3", 0), 0u);
  EXPECT_EQ(utf8::sequence_length("\xC0\x80", 0), 0u);  // overlong
  EXPECT_EQ(utf8::sequence_length("\xED\xA0\x80", 0), 0u);  // surrogate
  EXPECT_EQ(utf8::sequence_length("\xF4\x90\x80\x80", 0), 0u);  // past U+10FFFF
  EXPECT_TRUE(utf8::is_incomplete_sequence("\xF0\x9F\x98", 0));
  EXPECT_FALSE(
      utf8::is_incomplete_sequence("\xF0\x9F"
                                   "a",
                                   0));
  EXPECT_FALSE(utf8::is_incomplete_sequence("\x80", 0));
  EXPECT_EQ(utf8::replace_invalid("a\xFF"
                                  "b\xC3"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(PreTokenizer, SplitsAsEachModelFamily) {
  const std::string text = "Hello world's  123";
  using V = std::vector<std::string>;
  EXPECT_EQ(split("gpt-2", text), (V{"Hello", " world", "'s", " ", " 123"}));
  EXPECT_EQ(split("smollm", text), (V{"Hello", " world", "'s", "  ", "1", "2", "3"}));
  EXPECT_EQ(split("llama-bpe", text), (V{"Hello", " world", "'s", " ", " ", "123"}));
  EXPECT_EQ(split("qwen2", text), (V{"Hello", " world", "'s", " ", " ", "1", "2", "3"}));
  // Llama 3 groups digits by three and takes contractions in any case; GPT-2 only lower case.
  EXPECT_EQ(split("llama-bpe", "1234567 IT'S"), (V{"123", "456", "7", " IT", "'S"}));
  EXPECT_EQ(split("gpt-2", "IT'S"), (V{"IT", "'", "S"}));
  EXPECT_EQ(split("gpt-2", "it's"), (V{"it", "'s"}));
  // Unicode classes: letters of any script, other digits, non-ASCII spaces.
  EXPECT_EQ(split("gpt-2", "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87"), (V{"caf\xC3\xA9", " \xE4\xB8\xAD\xE6\x96\x87"}));
  EXPECT_EQ(split("smollm", "\xD9\xA3\xD9\xA4"), (V{"\xD9\xA3", "\xD9\xA4"}));  // Arabic-Indic digits are \p{N}
  EXPECT_EQ(split("gpt-2",
                  "a\xC2\xA0\xC2\xA0"
                  "b"),
            (V{"a", "\xC2\xA0", "\xC2\xA0", "b"}));
  EXPECT_EQ(split("gpt-2", ""), V{});
  EXPECT_EQ(split("", "a+b"), (V{"a", "+", "b"}));  // "default"
}

TEST(PreTokenizer, UnknownNameIsAClearError) {
  std::string e = error_of([] { PreTokenizer p("nonesuch", "model.gguf"); });
  EXPECT_NE(e.find("model.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("tokenizer.ggml.pre = 'nonesuch'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen2"), std::string::npos) << e;  // lists the names it knows
}

TEST(Bpe, MergesByRankThenLeftmost) {
  // "abc": rank decides which pair merges first.
  Tokenizer first_bc(bpe_spec({"bc", "ab"}, {"b c", "a b"}));
  EXPECT_EQ(first_bc.encode("abc"), (std::vector<TokenId>{'a', id_of(first_bc, "bc")}));
  Tokenizer first_ab(bpe_spec({"bc", "ab"}, {"a b", "b c"}));
  EXPECT_EQ(first_ab.encode("abc"), (std::vector<TokenId>{id_of(first_ab, "ab"), 'c'}));
  // Equal ranks (one pair, three letters): the leftmost pair merges.
  Tokenizer aa(bpe_spec({"aa"}, {"a a"}));
  TokenId AA = id_of(aa, "aa");
  EXPECT_EQ(aa.encode("aaa"), (std::vector<TokenId>{AA, 'a'}));
  EXPECT_EQ(aa.encode("aaaa"), (std::vector<TokenId>{AA, AA}));
  // Merges chain: "Ġw" then "Ġwo" ...; the space is the byte character Ġ.
  const std::string G = cp(0x120);
  Tokenizer w(bpe_spec({G + "w", G + "wo", "rl", G + "worl", G + "world"},
                       {G + " w", G + "w o", "r l", G + "wo rl", G + "worl d"}));
  EXPECT_EQ(w.encode("a world"), (std::vector<TokenId>{'a', id_of(w, G + "world")}));
  EXPECT_EQ(w.decode(w.encode("a world")), "a world");
}

TEST(Bpe, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token, but no merge leads to it: Llama 3 vocabularies take it whole.
  auto spec = bpe_spec({"abc", "ab"}, {"a b"}, "llama-bpe");
  spec.add_bos = false;
  Tokenizer llama3(spec);
  Tokenizer gpt2(bpe_spec({"abc", "ab"}, {"a b"}, "gpt-2"));
  EXPECT_EQ(llama3.encode("abc", false), (std::vector<TokenId>{id_of(llama3, "abc")}));
  EXPECT_EQ(gpt2.encode("abc"), (std::vector<TokenId>{id_of(gpt2, "ab"), 'c'}));
}

TEST(Bpe, BytesOfAnyKindRoundTrip) {
  Tokenizer t(bpe_spec({}, {"a b"}));
  std::string text = "tab\there, new\nline \xF0\x9F\x98\x80 \xE4\xB8\xAD, \x01\x7F";
  auto ids = t.encode(text);
  EXPECT_EQ(t.decode(ids), text);
  for (TokenId id : ids) EXPECT_LT(id, 256);
  // Invalid UTF-8 is read as U+FFFD, byte by byte (as llama.cpp does).
  EXPECT_EQ(t.decode(t.encode("a\xFF"
                              "b")),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Bpe, LongWordsMergeInNLogN) {
  // 2^20 letters merged into 2^k blocks: a quadratic merge loop would not finish.
  std::vector<std::string> tokens, merges;
  std::string block = "a";
  for (int k = 0; k < 10; ++k) {
    merges.push_back(block + " " + block);
    block += block;
    tokens.push_back(block);
  }
  Tokenizer t(bpe_spec(tokens, merges));
  auto ids = t.encode(std::string(1 << 20, 'a'));
  EXPECT_EQ(ids.size(), 1024u);
  for (TokenId id : ids) EXPECT_EQ(id, id_of(t, block));
}

TEST(Bpe, SpecialTokens) {
  auto spec = bpe_spec({"<|im_start|>", "<|im_end|>", "<tool>", "<tool>x"}, {"a b"});
  spec.token_types.assign(spec.tokens.size(), 1);
  spec.token_types[256] = spec.token_types[257] = 3;  // control
  spec.token_types[258] = spec.token_types[259] = 4;  // user-defined
  spec.bos_id = 256;
  spec.add_bos = true;
  Tokenizer t(spec);
  const TokenId start = 256, end = 257, tool = 258, toolx = 259;
  // Control tokens are parsed out of text only when asked; user-defined ones always.
  auto parsed = t.encode("<|im_start|>hi<|im_end|>", true, true);
  EXPECT_EQ(parsed, (std::vector<TokenId>{start, start, 'h', 'i', end}));
  auto plain = t.encode("<|im_start|>", false, false);
  EXPECT_EQ(plain.size(), 12u);
  EXPECT_EQ(t.encode("<tool>", false), (std::vector<TokenId>{tool}));
  // Longer special tokens are cut first.
  EXPECT_EQ(t.encode("<tool>x<tool>", false), (std::vector<TokenId>{toolx, tool}));
  // Control tokens are rendered only on request; user-defined tokens always.
  EXPECT_EQ(t.decode(parsed), "hi");
  EXPECT_EQ(t.decode(parsed, true), "<|im_start|><|im_start|>hi<|im_end|>");
  EXPECT_EQ(t.decode(std::vector<TokenId>{tool}), "<tool>");
  // <|im_end|> ends generation without being named eos.
  EXPECT_TRUE(t.is_end_of_generation(end));
  EXPECT_EQ(t.eot(), end);
  EXPECT_FALSE(t.is_end_of_generation('a'));
}

TEST(Spm, HighestScoreMergesFirst) {
  auto make = [](float ab_score, float a_score) {
    return Tokenizer(spm_spec({{kSpace, -1}, {"a", -2}, {"b", -2}, {kSpace + "a", a_score}, {"ab", ab_score}}));
  };
  // "ab" becomes "▁ab" (space prefix); "▁a" or "ab" merges first by score.
  Tokenizer ab_first = make(-0.5f, -1.5f);
  EXPECT_EQ(ab_first.encode("ab", false), (std::vector<TokenId>{id_of(ab_first, kSpace), id_of(ab_first, "ab")}));
  Tokenizer a_first = make(-1.5f, -0.5f);
  EXPECT_EQ(a_first.encode("ab", false), (std::vector<TokenId>{id_of(a_first, kSpace + "a"), id_of(a_first, "b")}));
  // BOS by default, and decode drops the space the encoder added.
  auto ids = ab_first.encode("ab ab");
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ab_first.decode(ids), "ab ab");
}

TEST(Spm, ByteFallbackAndSpecials) {
  Tokenizer t(spm_spec({{kSpace, -1}, {"a", -2}}));
  // "é" is no token: its two bytes are <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_EQ(t.encode("a\xC3\xA9", false), (std::vector<TokenId>{id_of(t, kSpace), id_of(t, "a"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9 \xF0\x9F\x98\x80")), "a\xC3\xA9 \xF0\x9F\x98\x80");
  // A special token written in text: parsed on request, and the text after it gets its own space.
  auto ids = t.encode("a</s>a", false, true);
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(t, kSpace), id_of(t, "a"), 2, id_of(t, kSpace), id_of(t, "a")}));
  EXPECT_EQ(t.decode(ids, true), "a</s>a");
  EXPECT_EQ(t.bos(), 1);  // SentencePiece defaults
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.unk(), 0);
}

TEST(StreamDecoder, CharactersSplitOverTokensComeOutWhole) {
  Tokenizer t(spm_spec({{kSpace, -1}, {"a", -2}}));
  auto ids = t.encode("a\xF0\x9F\x98\x80!", false);  // ▁ a <F0> <9F> <98> <80> <21>
  ASSERT_EQ(ids.size(), 7u);
  StreamDecoder stream(t);
  std::vector<std::string> out;
  for (TokenId id : ids) out.push_back(stream.push(id));
  EXPECT_EQ(out, (std::vector<std::string>{"", "a", "", "", "", "\xF0\x9F\x98\x80", "!"}));
  EXPECT_EQ(stream.finish(), "");
  // A stray continuation byte is U+FFFD at once; a cut-off character is U+FFFD at the end.
  StreamDecoder broken(t);
  EXPECT_EQ(broken.push(3 + 0x80), "\xEF\xBF\xBD");
  EXPECT_EQ(broken.push(3 + 0xE4), "");
  EXPECT_EQ(broken.push(3 + 0xB8), "");
  EXPECT_EQ(broken.finish(), "\xEF\xBF\xBD");
  // A character cut off by a byte that cannot continue it.
  StreamDecoder cut(t);
  EXPECT_EQ(cut.push(3 + 0xC3), "");
  EXPECT_EQ(cut.push(id_of(t, "a")),
            "\xEF\xBF\xBD"
            "a");
}

TEST(Tokenizer, BadSpecsAreClearErrors) {
  auto expect = [](TokenizerSpec spec, const std::string& part) {
    std::string e = error_of([&] { Tokenizer t(spec); });
    EXPECT_NE(e.find(part), std::string::npos) << e;
    EXPECT_NE(e.find(spec.source), std::string::npos) << e;
  };
  auto spec = bpe_spec({}, {"a b"});
  spec.model = "bert";
  expect(spec, "tokenizer.ggml.model = 'bert'");
  spec = bpe_spec({}, {"ab"});
  expect(spec, "tokenizer.ggml.merges[0] = 'ab'");
  spec = bpe_spec({}, {});
  expect(spec, "tokenizer.ggml.merges is empty");
  spec = bpe_spec({}, {"a b"});
  spec.bos_id = 256;
  expect(spec, "tokenizer.ggml.bos_token_id = 256 is outside the vocabulary of 256 tokens");
  spec = bpe_spec({}, {"a b"});
  spec.add_bos = true;
  expect(spec, "add_bos_token is set but there is no bos_token_id");
  spec = bpe_spec({}, {"a b"}, "llama-bpe");  // adds BOS by default
  expect(spec, "add_bos_token is set");
  spec = bpe_spec({}, {"a b"});
  spec.scores = {1.0f};
  expect(spec, "tokenizer.ggml.scores has 1 entries for 256 tokens");
  spec = bpe_spec({}, {"a b"});
  spec.tokens.clear();
  expect(spec, "tokenizer.ggml.tokens is empty");
  spec = spm_spec({});
  spec.tokens.resize(3);
  spec.unk_id = std::nullopt;
  spec.token_types.resize(3);
  spec.scores.resize(3);
  spec.tokens[0] = "x";  // no byte tokens; id 0 is still the default unknown token, so fine
  EXPECT_NO_THROW(Tokenizer{spec});

  Tokenizer t(bpe_spec({}, {"a b"}));
  EXPECT_NE(error_of([&] { t.decode(std::vector<TokenId>{256}); }).find("token id 256 is outside"), std::string::npos);
  EXPECT_NE(error_of([&] { t.piece(-1); }).find("token id -1"), std::string::npos);
}

TEST(Tokenizer, SharedAcrossThreads) {
  Tokenizer t(bpe_spec({"ab", "abab"}, {"a b", "ab ab"}));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += i % 7 ? "abab " : "ba\xC3\xA9 12 ";
  const auto expected = t.encode(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&, k] {
      Tokenizer copy = t;  // copies share the vocabulary
      ok[k] = copy.encode(text) == expected && copy.decode(expected) == text;
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_TRUE(ok[k]) << k;
}

TEST(ChatTemplate, ChatMLWithTheTemplatesDefaultSystemMessage) {
  // SmolLM2's template, as in its GGUF.
  const std::string smollm =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
      "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
      "%}{{ '<|im_start|>assistant\n' }}{% endif %}";
  ChatTemplate chat = ChatTemplate::recognize(smollm);
  EXPECT_EQ(chat.format(), ChatFormat::ChatML);
  EXPECT_EQ(chat.default_system(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  std::vector<ChatMessage> msgs{{"user", "Hi"}};
  EXPECT_EQ(chat.render(msgs),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  msgs = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
  EXPECT_EQ(chat.render(msgs, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello.<|im_end|>\n");
  // Escaped newlines in the Jinja literal count the same as written ones.
  EXPECT_EQ(ChatTemplate::recognize("{{ '<|im_start|>system\\nBe kind.<|im_end|>\\n' }}").default_system(), "Be kind.");
  EXPECT_EQ(ChatTemplate::recognize("{{'<|im_start|>' + m['role'] }}").default_system(), "");
}

TEST(ChatTemplate, Llama3) {
  // Recognized by its two header markers (the real template is in the golden test).
  const std::string llama3 = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}";
  ChatTemplate chat = ChatTemplate::recognize(llama3);
  EXPECT_EQ(chat.format(), ChatFormat::Llama3);
  std::vector<ChatMessage> msgs{{"system", "Be brief. "}, {"user", "\nHi"}};
  EXPECT_EQ(chat.render(msgs),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, OthersAreAClearError) {
  std::string e = error_of([] { ChatTemplate::recognize("{% for m in messages %}[INST] {{ m.content }} [/INST]"); });
  EXPECT_NE(e.find("[chat] unrecognized chat template"), std::string::npos) << e;
  EXPECT_NE(e.find("it starts '{% for m in messages %}[INST]"), std::string::npos) << e;
  EXPECT_NE(error_of([] { ChatTemplate::recognize(""); }).find("no chat template"), std::string::npos);
}
