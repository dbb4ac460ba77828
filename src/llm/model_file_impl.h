// What a reader fills in for ModelFile: metadata values, tensor entries that know how to
// make their Weight, and the cache of converted weights.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "kiln/llm.h"

namespace kiln::llm {

// One metadata value, GGUF's types collapsed into the kinds the getters return.
struct MetaValue {
  enum class Kind { integer, real, boolean, string, array };
  Kind kind = Kind::integer;
  std::string type;  // the file's type, for messages: "uint32", "array of string"
  bool out_of_range = false;  // a uint64 above INT64_MAX (in `integer` or one of `ints`)
  int64_t integer = 0;
  double real = 0;
  bool boolean = false;
  std::string str;
  Kind elem = Kind::integer;  // arrays: the elements' kind, held in one of:
  std::vector<int64_t> ints;  // integer and boolean elements
  std::vector<double> reals;  // real elements
  std::vector<std::string> strings;  // string elements
  std::vector<MetaValue> nested;  // array elements
};

/* Metadata values made by a reader rather than read from a file (a config.json translated, a
   model made in memory). */
inline MetaValue real_meta(double d) {
  MetaValue v;
  v.kind = MetaValue::Kind::real;
  v.type = "number";
  v.real = d;
  return v;
}
inline MetaValue int_meta(int64_t i) {
  MetaValue v;
  v.kind = MetaValue::Kind::integer;
  v.type = "integer";
  v.integer = i;
  return v;
}
inline MetaValue string_meta(const std::string& s) {
  MetaValue v;
  v.kind = MetaValue::Kind::string;
  v.type = "string";
  v.str = s;
  return v;
}

struct TensorEntry {
  TensorInfo info;
  std::function<Weight()> load;  // reads the file; throws kiln::Error naming file and tensor
  bool converts = false;  // makes new arrays (not views of the file): kept once made
  bool dequantizes = false;  // a quantized type the affine format cannot hold exactly
};

struct ModelFile::Impl {
  std::string path, format;
  std::vector<std::shared_ptr<const detail::MappedFile>> files;  // what the tensors view
  std::map<std::string, MetaValue> meta;
  std::map<std::string, TensorEntry> tensors;
  std::string dequantize_note;  // printed once, when the first dequantized tensor is loaded
  std::once_flag note_once;
  std::mutex mu;  // guards converted
  std::map<std::string, Weight> converted;  // guarded by mu
};

/* Readers: each checks everything it reads and throws kiln::Error naming file and field. */
std::unique_ptr<ModelFile::Impl> read_gguf(std::shared_ptr<const detail::MappedFile> file);
/* A directory (config.json with model.safetensors or model.safetensors.index.json and its
   shards) or a single .safetensors file (with the config.json beside it, if there is one). */
std::unique_ptr<ModelFile::Impl> open_safetensors(const std::string& path);
/* The checkpoint made of `shards`, named `path` in errors; `config_json` is the text of
   config.json, empty when there is none. `weight_map`, when given, is the shard index (tensor
   name to shard file name) that the shards must agree with. */
std::unique_ptr<ModelFile::Impl> read_safetensors(const std::string& path,
                                                  const std::vector<std::shared_ptr<const detail::MappedFile>>& shards,
                                                  const std::string& config_json,
                                                  const std::map<std::string, std::string>* weight_map = nullptr);

}  // namespace kiln::llm
