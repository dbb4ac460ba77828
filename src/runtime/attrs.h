// Typed access to a node's attributes, with errors that name the attribute.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::runtime {

class AttrReader {
 public:
  AttrReader(const std::string& op, const Attrs& attrs) : op_(op), attrs_(attrs) {}
  bool has(const std::string& key) const { return attrs_.count(key) > 0; }
  std::optional<int64_t> int_opt(const std::string& key);
  int64_t int_(const std::string& key);
  int64_t int_or(const std::string& key, int64_t def) { return int_opt(key).value_or(def); }
  /* For C++ parameters of type int (axes, counts): a value outside int's range is an error,
     not truncated (axis=4294967296 ran as axis 0). */
  std::optional<int> int32_opt(const std::string& key);
  int int32(const std::string& key);
  int int32_or(const std::string& key, int def) { return int32_opt(key).value_or(def); }
  bool bool_or(const std::string& key, bool def);
  std::optional<double> float_opt(const std::string& key);
  double float_(const std::string& key);
  double float_or(const std::string& key, double def) { return float_opt(key).value_or(def); }
  std::optional<std::vector<int64_t>> ints_opt(const std::string& key);
  std::vector<int64_t> ints(const std::string& key);
  std::vector<int> ints32_or(const std::string& key, std::vector<int> def);
  Dtype dtype_or(const std::string& key, Dtype def);
  /* A word out of `choices` (its index), or def when absent. */
  size_t choice_or(const std::string& key, const std::vector<std::string>& choices, size_t def);
  std::string graph(const std::string& key);
  /* Throws for any attribute that no getter asked for (typos, wrong op). */
  void done() const;

 private:
  const AttrValue* find(const std::string& key);
  [[noreturn]] void wrong(const std::string& key, const char* want) const;
  std::string op_;
  const Attrs& attrs_;
  std::set<std::string> used_;
};

}  // namespace kiln::runtime
