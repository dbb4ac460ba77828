// Text <-> token ids for language models, built from the tokenizer metadata of a GGUF file:
// byte-level BPE (tokenizer.ggml.model "gpt2") and SentencePiece-style vocabularies ("llama"),
// with the same ids llama.cpp gives (docs/llm.md, "Tokenizer"). Chat templates: ChatML and Llama 3.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

class ModelFile;  // include/kiln/llm.h

using TokenId = int32_t;

/* Token kinds, numbered as GGUF's tokenizer.ggml.token_type numbers them. */
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,  // <|im_start|>, <s>: never produced from plain text, rendered only on request
  UserDefined = 4,  // always matched as a whole in text, rendered as written
  Unused = 5,
  Byte = 6,  // SentencePiece byte fallback, <0xXX>
};

/* Everything a Tokenizer is built from: the GGUF `tokenizer.*` metadata in plain form.
   Unset optionals take the model's defaults as llama.cpp sets them. */
struct TokenizerSpec {
  std::string source = "tokenizer";  // named in error messages, e.g. the file's path
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;  // pre-tokenizer of a gpt2 model: "llama-bpe", "qwen2", "smollm", "gpt-2", ...
  std::vector<std::string> tokens;
  std::vector<float> scores;  // llama: merge priority per token (empty: all 0)
  std::vector<int32_t> token_types;  // TokenType per token (empty: all Normal)
  std::vector<std::string> merges;  // gpt2: "left right", best first
  std::optional<TokenId> bos_id, eos_id, eot_id, eom_id, pad_id, unk_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;  // Jinja source, "" when the file has none
};

/* Fills a spec from a GGUF file's metadata; errors name the file and the key. */
TokenizerSpec tokenizer_spec(const ModelFile& file);

/* An immutable tokenizer: copies share one vocabulary, and every method may be called
   from any number of threads at once. Bad specs throw kiln::Error naming the source and field. */
class Tokenizer {
 public:
  explicit Tokenizer(const TokenizerSpec& spec);
  /* The tokenizer of a GGUF file: Tokenizer(tokenizer_spec(file)). */
  explicit Tokenizer(const ModelFile& file);

  /* Text to ids. add_special: BOS/EOS as the model asks (add_bos(), add_eos()). parse_special:
     control tokens written in the text ("<|im_start|>") become their ids; user-defined tokens
     always do. Invalid UTF-8 in a BPE vocabulary's text is read as U+FFFD, byte by byte. */
  std::vector<TokenId> encode(std::string_view text, bool add_special = true, bool parse_special = false) const;

  /* The bytes one token stands for (possibly part of a UTF-8 character). Control and unknown
     tokens give "" unless render_special. */
  std::string piece(TokenId id, bool render_special = false) const;

  /* Ids to text: the pieces joined, less the space a SentencePiece vocabulary puts in front of
     the text and after each special token, so decode(encode(s)) == s. Always valid UTF-8: bytes
     that form no character become U+FFFD, as in StreamDecoder. */
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  size_t vocab_size() const;
  const std::string& token_text(TokenId id) const;  // as stored in the vocabulary
  TokenType token_type(TokenId id) const;
  std::optional<TokenId> find_token(std::string_view text) const;

  std::optional<TokenId> bos() const;
  std::optional<TokenId> eos() const;
  std::optional<TokenId> eot() const;  // end of turn: <|eot_id|>, <|im_end|>, ... when the file names none
  std::optional<TokenId> pad() const;
  std::optional<TokenId> unk() const;
  bool add_bos() const;
  bool add_eos() const;
  /* True for the tokens that end generation: eos, eot, eom and llama.cpp's list of end texts. */
  bool is_end_of_generation(TokenId id) const;

  const std::string& model() const;  // "gpt2" or "llama"
  const std::string& pre() const;
  const std::string& chat_template() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

/* Turns generated ids into text as they come, returning only whole UTF-8 characters: a character
   split over two tokens comes out once, whole, with the second. Invalid bytes come out as U+FFFD.
   One decoder per stream; it keeps the tokenizer alive. */
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false);
  /* The text that id completes (possibly ""). */
  std::string push(TokenId id);
  /* At the end of the stream: what is still held back, an unfinished character as U+FFFD. */
  std::string finish();

 private:
  std::shared_ptr<const Tokenizer::Impl> impl_;
  bool render_special_;
  bool strip_space_ = true;  // SentencePiece: the next text piece loses its leading space
  std::string pending_;  // bytes of an unfinished character
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

enum class ChatFormat { ChatML, Llama3 };

/* A chat template recognized from its Jinja source, rendered natively (no Jinja engine). */
class ChatTemplate {
 public:
  /* ChatML (<|im_start|>role\n...<|im_end|>, with the template's default system message if it
     has one) or Llama 3 (<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>). Anything else
     throws kiln::Error quoting the start of the template, so the caller can fall back to raw text. */
  static ChatTemplate recognize(std::string_view source);

  ChatFormat format() const { return format_; }
  const std::string& default_system() const { return default_system_; }

  /* The prompt text, to be encoded with parse_special (and add_special: BOS comes from the
     tokenizer, not from the text). add_generation_prompt opens the assistant's turn. */
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;

 private:
  ChatTemplate(ChatFormat format, std::string default_system)
      : format_(format), default_system_(std::move(default_system)) {}
  ChatFormat format_;
  std::string default_system_;
};

}  // namespace kiln::llm
