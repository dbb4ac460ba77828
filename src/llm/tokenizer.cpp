#include <algorithm>

#include "kiln/error.h"
#include "llm/byte_level.h"
#include "llm/tokenizer_impl.h"

namespace kiln::llm {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t at; (at = s.find(from, pos)) != std::string_view::npos; pos = at + from.size()) {
    out.append(s.substr(pos, at - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

// Texts that end a turn or the generation when the file names no such token (llama.cpp's lists),
// best first: the first one present becomes eot().
constexpr std::string_view kEndOfTurnTexts[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                                "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                                                "<EOT>",         "_<EOT>",        "<end_of_utterance>"};
constexpr std::string_view kEndOfGenerationTexts[] = {"<|eom_id|>"};

TokenType token_type_from(int32_t value) {
  return value >= 0 && value <= 6 ? static_cast<TokenType>(value) : TokenType::Undefined;
}

void build_vocab(Tokenizer::Impl& t, const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) fail("tokenizer", t.source, ": tokenizer.ggml.tokens is empty or missing");
  if (n > size_t{INT32_MAX}) fail("tokenizer", t.source, ": tokenizer.ggml.tokens has ", n, " entries");
  if (!spec.scores.empty() && spec.scores.size() < n)
    fail("tokenizer", t.source, ": tokenizer.ggml.scores has ", spec.scores.size(), " entries for ", n, " tokens");
  if (!spec.token_types.empty() && spec.token_types.size() < n)
    fail("tokenizer", t.source, ": tokenizer.ggml.token_type has ", spec.token_types.size(), " entries for ", n,
         " tokens");
  Vocab& v = t.vocab;
  v.text.resize(n);
  v.type.resize(n, TokenType::Normal);
  v.score.resize(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp names empty tokens so that every id has a text of its own
    v.text[i] = spec.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : spec.tokens[i];
    if (!spec.token_types.empty()) v.type[i] = token_type_from(spec.token_types[i]);
    if (!spec.scores.empty()) v.score[i] = spec.scores[i];
  }
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) v.ids[v.text[i]] = static_cast<TokenId>(i);
}

std::optional<TokenId> checked_id(const Tokenizer::Impl& t, std::optional<TokenId> id, const char* key) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= t.vocab.size()))
    fail("tokenizer", t.source, ": tokenizer.ggml.", key, " = ", *id, " is outside the vocabulary of ", t.vocab.size(),
         " tokens");
  return id;
}

void find_special_ids(Tokenizer::Impl& t, const TokenizerSpec& spec) {
  t.bos = checked_id(t, spec.bos_id, "bos_token_id");
  t.eos = checked_id(t, spec.eos_id, "eos_token_id");
  t.eot = checked_id(t, spec.eot_id, "eot_token_id");
  t.eom = checked_id(t, spec.eom_id, "eom_token_id");
  t.pad = checked_id(t, spec.pad_id, "padding_token_id");
  t.unk = checked_id(t, spec.unk_id, "unknown_token_id");
  if (t.model == "llama") {  // SentencePiece's usual ids, llama.cpp's defaults
    auto fallback = [&](std::optional<TokenId>& id, TokenId value) {
      if (!id && static_cast<size_t>(value) < t.vocab.size()) id = value;
    };
    fallback(t.bos, 1);
    fallback(t.eos, 2);
    fallback(t.unk, 0);
  }
  // End of turn and generation by text, as llama.cpp finds them; such tokens become control tokens.
  t.end_of_generation.assign(t.vocab.size(), false);
  auto mark = [&](TokenId id) {
    t.end_of_generation[id] = true;
    t.vocab.type[id] = TokenType::Control;
  };
  for (std::string_view text : kEndOfTurnTexts) {
    if (auto id = t.vocab.find(text)) {
      if (!t.eot) t.eot = id;
      mark(*id);
    }
  }
  for (std::string_view text : kEndOfGenerationTexts)
    if (auto id = t.vocab.find(text)) {
      if (!t.eom) t.eom = id;
      mark(*id);
    }
  for (auto id : {t.eos, t.eot, t.eom})
    if (id) t.end_of_generation[*id] = true;
}

void build_pieces(Tokenizer::Impl& t) {
  const bool spm = t.model == "llama";
  t.pieces.resize(t.vocab.size());
  for (size_t i = 0; i < t.vocab.size(); ++i) {
    const std::string& text = t.vocab.text[i];
    std::string& piece = t.pieces[i];
    switch (t.vocab.type[i]) {
      case TokenType::Control:
      case TokenType::Unknown:
      case TokenType::UserDefined: piece = text; break;
      case TokenType::Normal:
        if (spm) {
          piece = replace_all(text, kSpaceMark, " ");
        } else {
          piece = byte_level::decode(text);
        }
        break;
      case TokenType::Byte:
        if (int b = spm ? byte_token_value(text) : -1; b >= 0) {
          piece = std::string(1, static_cast<char>(b));
        } else {
          piece = spm ? text : byte_level::decode(text);
        }
        break;
      case TokenType::Undefined:
      case TokenType::Unused: break;  // llama.cpp renders these as nothing
    }
  }
}

}  // namespace

Tokenizer::Tokenizer(const TokenizerSpec& spec) {
  auto t = std::make_shared<Impl>();
  t->source = spec.source;
  t->model = spec.model;
  t->pre = spec.pre;
  t->chat_template = spec.chat_template;
  if (spec.model != "gpt2" && spec.model != "llama")
    fail("tokenizer", t->source, ": tokenizer.ggml.model = '", spec.model,
         "' is not supported (kiln reads 'gpt2', byte-level BPE, and 'llama', SentencePiece)");
  build_vocab(*t, spec);
  find_special_ids(*t, spec);
  if (spec.model == "gpt2") {
    if (spec.merges.empty()) fail("tokenizer", t->source, ": tokenizer.ggml.merges is empty or missing");
    t->bpe = std::make_unique<BpeEncoder>(t->vocab, spec.merges, spec.pre, t->source);
    t->add_bos = spec.add_bos.value_or(t->bpe->adds_bos());
  } else {
    t->spm = std::make_unique<SpmEncoder>(t->vocab, t->unk, t->source);
    t->add_bos = spec.add_bos.value_or(true);
    t->add_space_prefix = spec.add_space_prefix.value_or(true);
  }
  t->add_eos = spec.add_eos.value_or(false);
  if (t->add_bos && !t->bos)
    fail("tokenizer", t->source, ": tokenizer.ggml.add_bos_token is set but there is no bos_token_id");
  if (t->add_eos && !t->eos)
    fail("tokenizer", t->source, ": tokenizer.ggml.add_eos_token is set but there is no eos_token_id");
  build_pieces(*t);
  for (size_t i = 0; i < t->vocab.size(); ++i)
    if (t->is_special(static_cast<TokenId>(i))) t->specials.push_back(static_cast<TokenId>(i));
  std::stable_sort(t->specials.begin(), t->specials.end(),
                   [&](TokenId a, TokenId b) { return t->vocab.text[a].size() > t->vocab.text[b].size(); });
  impl_ = std::move(t);
}

void Tokenizer::Impl::check_id(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab.size())
    fail("tokenizer", source, ": token id ", id, " is outside the vocabulary of ", vocab.size(), " tokens");
}

namespace {

struct Fragment {
  size_t begin, end;
  TokenId token;  // -1: text still to tokenize
};

// Cuts out the special tokens written in text: longer tokens first, each one everywhere it
// occurs in text not yet cut, left to right (llama.cpp's order, which decides overlaps).
std::vector<Fragment> cut_special_tokens(const Tokenizer::Impl& t, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments, next;
  if (!text.empty()) fragments.push_back({0, text.size(), -1});  // "" is no text at all: no space prefix
  for (TokenId id : t.specials) {
    if (!parse_special && t.is_hidden(id)) continue;  // user-defined tokens are always cut out
    const std::string& token = t.vocab.text[id];
    if (text.find(token) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.begin;
      for (size_t at; (at = text.substr(0, f.end).find(token, pos)) != std::string_view::npos;) {
        if (at > pos) next.push_back({pos, at, -1});
        next.push_back({at, at + token.size(), id});
        pos = at + token.size();
      }
      if (pos < f.end) next.push_back({pos, f.end, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& t = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.add_bos) out.push_back(*t.bos);
  bool after_special = true;  // SentencePiece puts a space in front of text that starts or follows a special token
  for (const Fragment& f : cut_special_tokens(t, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    std::string_view part = text.substr(f.begin, f.end - f.begin);
    if (t.bpe) {
      t.bpe->encode(part, out);
    } else {
      std::string marked = replace_all(part, " ", kSpaceMark);
      if (t.add_space_prefix && after_special) marked.insert(0, kSpaceMark);
      t.spm->encode(marked, out);
    }
    after_special = false;
  }
  if (add_special && t.add_eos) out.push_back(*t.eos);
  return out;
}

std::string Tokenizer::piece(TokenId id, bool render_special) const {
  impl_->check_id(id);
  return !render_special && impl_->is_hidden(id) ? std::string() : impl_->pieces[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  StreamDecoder stream(*this, render_special);
  std::string out;
  for (TokenId id : ids) out += stream.push(id);
  return out + stream.finish();
}

size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }

const std::string& Tokenizer::token_text(TokenId id) const {
  impl_->check_id(id);
  return impl_->vocab.text[id];
}

TokenType Tokenizer::token_type(TokenId id) const {
  impl_->check_id(id);
  return impl_->vocab.type[id];
}

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }
std::optional<TokenId> Tokenizer::bos() const { return impl_->bos; }
std::optional<TokenId> Tokenizer::eos() const { return impl_->eos; }
std::optional<TokenId> Tokenizer::eot() const { return impl_->eot; }
std::optional<TokenId> Tokenizer::pad() const { return impl_->pad; }
std::optional<TokenId> Tokenizer::unk() const { return impl_->unk; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->vocab.size() && impl_->end_of_generation[id];
}

const std::string& Tokenizer::model() const { return impl_->model; }
const std::string& Tokenizer::pre() const { return impl_->pre; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace kiln::llm
