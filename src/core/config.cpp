// The configuration registry (config.def): the only place kiln reads its environment.
#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "kiln/config.h"
#include "kiln/error.h"

extern char** environ;

namespace kiln::config {

namespace {

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  std::string s = choices;
  size_t start = 0;
  while (start <= s.size()) {
    size_t bar = s.find('|', start);
    if (bar == std::string::npos) bar = s.size();
    out.push_back(s.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}

// 1 for on, 0 for off, -1 for neither.
int parse_flag(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "1" || v == "true" || v == "on" || v == "yes") return 1;
  if (v == "0" || v == "false" || v == "off" || v == "no") return 0;
  return -1;
}

bool parse_long(const std::string& v, long* out) {
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

bool power_of_two(long x) { return x > 0 && (x & (x - 1)) == 0; }

// The value that applies: the environment's when set and not empty, else the default.
std::string effective(const Spec& s) {
  std::string v = raw(s);
  return v.empty() ? std::string(s.fallback) : v;
}

// Checks the value that applies and returns it; throws naming the knob when it is bad.
std::string checked(Knob k) {
  const Spec& s = spec(k);
  std::string v = effective(s);
  std::string why = problem(s, v);
  if (!why.empty()) fail("config", s.name, "='", v, "' is not accepted: ", why, " (kiln info lists every knob)");
  return v;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::flag: return "flag";
    case Type::integer: return "integer";
    case Type::power_of_two: return "power of two";
    case Type::choice: return "choice";
    case Type::text: return "text";
    case Type::path: return "path";
  }
  return "?";
}

}  // namespace

const std::vector<Spec>& specs() {
  static const std::vector<Spec> all = {
#define KILN_KNOB(id, name, type, fallback, lo, hi, choices, help) {name, Type::type, fallback, lo, hi, choices, help},
#include "core/config.def"
#undef KILN_KNOB
  };
  return all;
}

const Spec& spec(Knob k) { return specs()[static_cast<size_t>(k)]; }

std::string raw(const Spec& s) {
  const char* v = std::getenv(s.name);
  return v ? std::string(v) : std::string();
}

std::string system_variable(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string accepts(const Spec& s) {
  auto range = [&] { return std::to_string(s.lo) + " to " + std::to_string(s.hi); };
  switch (s.type) {
    case Type::flag: return "1 or 0 (also true/false, on/off, yes/no)";
    case Type::integer: return "an integer from " + range();
    case Type::power_of_two:
      return std::string("a power of two from ") + range() + (std::string(s.fallback) == "0" ? ", or 0" : "");
    case Type::choice: return std::string("one of ") + s.choices;
    case Type::text: return "any text";
    case Type::path: return "a directory or file path";
  }
  return "?";
}

std::string problem(const Spec& s, const std::string& value) {
  long x = 0;
  switch (s.type) {
    case Type::flag:
      if (parse_flag(value) >= 0) return {};
      break;
    case Type::integer:
      if (parse_long(value, &x) && x >= s.lo && x <= s.hi) return {};
      break;
    case Type::power_of_two:
      if (parse_long(value, &x) &&
          ((x == 0 && std::string(s.fallback) == "0") || (power_of_two(x) && x >= s.lo && x <= s.hi)))
        return {};
      break;
    case Type::choice: {
      auto all = split_choices(s.choices);
      if (std::find(all.begin(), all.end(), value) != all.end()) return {};
      break;
    }
    case Type::text:
    case Type::path: return {};
  }
  return "expected " + accepts(s);
}

bool flag(Knob k) { return parse_flag(checked(k)) == 1; }

long integer(Knob k) {
  long x = 0;
  parse_long(checked(k), &x);
  return x;
}

std::string choice(Knob k) { return checked(k); }

std::string text(Knob k) { return checked(k); }

}  // namespace kiln::config

namespace kiln {

std::vector<ConfigKnob> config_knobs() {
  std::vector<ConfigKnob> out;
  for (const config::Spec& s : config::specs()) {
    std::string value = config::raw(s);
    out.push_back({s.name, config::type_name(s.type), config::accepts(s), s.fallback, value,
                   value.empty() ? std::string() : config::problem(s, value), s.help});
  }
  return out;
}

void check_config() {
  for (size_t i = 0; i < config::specs().size(); ++i) config::checked(static_cast<config::Knob>(i));
}

std::vector<std::string> unknown_config_variables() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("KILN_", 0) != 0) continue;
    std::string name = kv.substr(0, kv.find('='));
    const auto& all = config::specs();
    if (std::none_of(all.begin(), all.end(), [&](const config::Spec& s) { return name == s.name; })) out.push_back(kv);
  }
  return out;
}

}  // namespace kiln
