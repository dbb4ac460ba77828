// The small JSON subset that safetensors headers use: objects, arrays, strings,
// integers (floats, bools and null are read and kept as such).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::runtime {

struct Json {
  enum class Kind { null, boolean, integer, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string str;
  std::vector<Json> array;
  std::map<std::string, Json> object;
  const Json* get(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

/* Throws kiln::Error "what:line:column: [json] ..." on malformed text. */
Json parse_json(const std::string& text, const std::string& what);
std::string json_quote(const std::string& s);

}  // namespace kiln::runtime
