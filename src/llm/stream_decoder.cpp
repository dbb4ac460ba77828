#include "llm/tokenizer_impl.h"
#include "llm/utf8.h"

namespace kiln::llm {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool render_special)
    : impl_(tokenizer.impl_), render_special_(render_special), strip_space_(impl_->add_space_prefix) {}

std::string StreamDecoder::push(TokenId id) {
  const Tokenizer::Impl& t = *impl_;
  t.check_id(id);
  std::string_view piece = t.pieces[id];
  if (t.is_special(id)) {
    if (t.is_hidden(id) && !render_special_) piece = {};
    strip_space_ = t.add_space_prefix;  // the encoder put a space after it
  } else {
    if (strip_space_ && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    strip_space_ = false;
  }
  pending_ += piece;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    size_t n = utf8::sequence_length(pending_, pos);
    if (n > 0) {
      out.append(pending_, pos, n);
      pos += n;
    } else if (utf8::is_incomplete_sequence(pending_, pos)) {
      break;  // the rest of the character comes with a later token
    } else {
      out += utf8::kReplacement;
      pos += 1;
    }
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = pending_.empty() ? "" : std::string(utf8::kReplacement);
  pending_.clear();
  return out;
}

}  // namespace kiln::llm
