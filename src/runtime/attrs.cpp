#include "runtime/attrs.h"

#include <climits>
#include <cmath>

namespace kiln::runtime {

const AttrValue* AttrReader::find(const std::string& key) {
  used_.insert(key);
  auto it = attrs_.find(key);
  return it == attrs_.end() ? nullptr : &it->second;
}

void AttrReader::wrong(const std::string& key, const char* want) const {
  fail(op_.c_str(), "attribute '", key, "' must be ", want);
}

std::optional<int64_t> AttrReader::int_opt(const std::string& key) {
  const AttrValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  wrong(key, "an integer");
}

int64_t AttrReader::int_(const std::string& key) {
  auto v = int_opt(key);
  if (!v) fail(op_.c_str(), "missing attribute '", key, "'");
  return *v;
}

std::optional<int> AttrReader::int32_opt(const std::string& key) {
  auto v = int_opt(key);
  if (v && (*v < INT_MIN || *v > INT_MAX))
    fail(op_.c_str(), "attribute '", key, "' value ", *v, " is out of range (", INT_MIN, " to ", INT_MAX, ")");
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

int AttrReader::int32(const std::string& key) {
  auto v = int32_opt(key);
  if (!v) fail(op_.c_str(), "missing attribute '", key, "'");
  return *v;
}

bool AttrReader::bool_or(const std::string& key, bool def) {
  const AttrValue* v = find(key);
  if (!v) return def;
  if (auto* i = std::get_if<int64_t>(v); i && (*i == 0 || *i == 1)) return *i == 1;
  wrong(key, "true, false, 0 or 1");
}

std::optional<double> AttrReader::float_opt(const std::string& key) {
  const AttrValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  wrong(key, "a number");
}

double AttrReader::float_(const std::string& key) {
  auto v = float_opt(key);
  if (!v) fail(op_.c_str(), "missing attribute '", key, "'");
  return *v;
}

std::optional<std::vector<int64_t>> AttrReader::ints_opt(const std::string& key) {
  const AttrValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
  if (auto* i = std::get_if<int64_t>(v)) return std::vector<int64_t>{*i};
  wrong(key, "a list of integers");
}

std::vector<int64_t> AttrReader::ints(const std::string& key) {
  auto v = ints_opt(key);
  if (!v) fail(op_.c_str(), "missing attribute '", key, "'");
  return *v;
}

std::vector<int> AttrReader::ints32_or(const std::string& key, std::vector<int> def) {
  auto v = ints_opt(key);
  if (!v) return def;
  std::vector<int> out;
  for (int64_t x : *v) {
    if (x < -(1 << 20) || x > (1 << 20)) fail(op_.c_str(), "attribute '", key, "' value ", x, " is out of range");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

Dtype AttrReader::dtype_or(const std::string& key, Dtype def) {
  const AttrValue* v = find(key);
  if (!v) return def;
  auto* s = std::get_if<std::string>(v);
  if (!s) wrong(key, "a dtype name");
  try {
    return dtype_from_name(*s);
  } catch (const Error&) {
    fail(op_.c_str(), "attribute '", key, "': unknown dtype '", *s, "'");
  }
}

size_t AttrReader::choice_or(const std::string& key, const std::vector<std::string>& choices, size_t def) {
  const AttrValue* v = find(key);
  if (!v) return def;
  auto* s = std::get_if<std::string>(v);
  if (!s) wrong(key, "a word");
  for (size_t i = 0; i < choices.size(); ++i)
    if (choices[i] == *s) return i;
  std::string all;
  for (const auto& c : choices) all += (all.empty() ? "" : ", ") + c;
  fail(op_.c_str(), "attribute '", key, "': '", *s, "' is not one of ", all);
}

std::string AttrReader::graph(const std::string& key) {
  const AttrValue* v = find(key);
  if (!v) fail(op_.c_str(), "missing attribute '", key, "' (a graph reference, @name)");
  if (auto* g = std::get_if<GraphRef>(v)) return g->name;
  wrong(key, "a graph reference (@name)");
}

void AttrReader::done() const {
  for (const auto& [k, v] : attrs_)
    if (!used_.count(k)) fail(op_.c_str(), "unknown attribute '", k, "'");
}

}  // namespace kiln::runtime
