#include <vector>

#include "kiln/error.h"
#include "kiln/llm_tokenizer.h"

namespace kiln::llm {

namespace {

constexpr std::string_view kSystemHeader = "<|im_start|>system\n";
constexpr std::string_view kImEnd = "<|im_end|>";

// The string literals of a Jinja source, their escapes resolved.
std::vector<std::string> string_literals(std::string_view source) {
  std::vector<std::string> literals;
  for (size_t pos = 0; pos < source.size(); ++pos) {
    char quote = source[pos];
    if (quote != '\'' && quote != '"') continue;
    std::string value;
    size_t end = pos + 1;
    for (; end < source.size() && source[end] != quote; ++end) {
      if (source[end] == '\\' && end + 1 < source.size()) {
        char c = source[++end];
        value += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        value += source[end];
      }
    }
    if (end == source.size()) break;  // unterminated: not a literal
    literals.push_back(std::move(value));
    pos = end;
  }
  return literals;
}

// The system message a ChatML template writes when the conversation brings none (SmolLM2's
// "You are a helpful AI assistant named SmolLM...", Qwen2.5's "You are Qwen..."): the content of a
// literal '<|im_start|>system\n...<|im_end|>'.
std::string default_system_message(std::string_view source) {
  for (const std::string& literal : string_literals(source)) {
    if (!literal.starts_with(kSystemHeader)) continue;
    size_t end = literal.find(kImEnd);
    if (end != std::string::npos && end > kSystemHeader.size())
      return literal.substr(kSystemHeader.size(), end - kSystemHeader.size());
  }
  return "";
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

}  // namespace

ChatTemplate ChatTemplate::recognize(std::string_view source) {
  if (source.find("<|im_start|>") != std::string_view::npos)
    return ChatTemplate(ChatFormat::ChatML, default_system_message(source));
  if (source.find("<|start_header_id|>") != std::string_view::npos &&
      source.find("<|end_header_id|>") != std::string_view::npos)
    return ChatTemplate(ChatFormat::Llama3, "");
  if (trim(source).empty()) fail("chat", "the model has no chat template (tokenizer.chat_template); use raw text");
  std::string start(source.substr(0, 80));
  for (char& c : start)
    if (c == '\n') c = ' ';
  fail("chat",
       "unrecognized chat template: neither ChatML (<|im_start|>) nor Llama 3 (<|start_header_id|>); it starts '",
       start, source.size() > 80 ? "...'" : "'", "; use raw text");
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out;
  if (format_ == ChatFormat::ChatML) {
    if (!default_system_.empty() && !messages.empty() && messages.front().role != "system")
      out += std::string(kSystemHeader) + default_system_ + std::string(kImEnd) + "\n";
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else {
    // Llama 3 templates trim each message; BOS is the tokenizer's to add, not the text's.
    for (const ChatMessage& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + std::string(trim(m.content)) + "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

}  // namespace kiln::llm
