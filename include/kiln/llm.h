// Language-model files: GGUF and safetensors checkpoints read through one interface
// (docs/llm.md, "Model files").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln::llm {

/* One tensor as kiln arrays. Dense: `w` holds the values (float32, float16 or bfloat16).
   Quantized in kiln's affine format (MLX's): for a [out, in] weight, `w` is uint32
   [out, in*bits/32], element j of a row at bit offset j*bits from the low bits of the row's
   first word up; `scales` and `biases` are [out, in/group_size] (float16 or float32) and the
   value is scale*q + bias. Leading axes of a higher-rank tensor are kept as they are. */
struct Weight {
  Array w;
  std::optional<Array> scales, biases;  // quantized only
  int group_size = 0, bits = 0;  // 0 when dense
  bool tiled = false;  // 4-bit rows in the GPU decode product's tile order (models on a GPU make these)
  bool quantized() const { return bits != 0; }
};

/* What the file says about one tensor, before anything is loaded. */
struct TensorInfo {
  std::string name;  // GGUF name ("blk.0.attn_q.weight")
  std::string type;  // "F32", "Q4_1", "Q6_K" (GGUF); "BF16", "F32" or, MLX-quantized, "affine4/g64" (safetensors)
  Shape shape;  // logical and row-major ([out, in] for a matrix), before any packing
};

/* A model file opened and checked; shared read-only by every thread (all methods are
   thread-safe). Tensors view the mapped file in place wherever their layout allows, and
   the arrays keep the mapping alive after the ModelFile is gone. */
class ModelFile {
 public:
  /* A .gguf file, a .safetensors file, or a directory with model.safetensors or
     model.safetensors.index.json (shards) and config.json. Throws kiln::Error naming the
     file and field on anything malformed. */
  static std::shared_ptr<ModelFile> open(const std::string& path);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const;
  /* "gguf" or "safetensors". */
  std::string format() const;

  /* Metadata in GGUF's key names ("general.architecture", "llama.block_count",
     "tokenizer.ggml.tokens"). A safetensors config.json is translated to these keys for the
     Llama family's fields. get_* throw kiln::Error naming the file and key when the key is
     missing or holds another kind of value; find_* return nullopt when it is missing. */
  bool has(const std::string& key) const;
  std::vector<std::string> metadata_keys() const;  // sorted
  int64_t get_int(const std::string& key) const;  // any integer type, or a bool as 0/1
  double get_float(const std::string& key) const;  // a float, or an integer converted
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<float> get_floats(const std::string& key) const;  // float or integer elements
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;
  std::optional<std::vector<std::string>> find_strings(const std::string& key) const;
  std::optional<std::vector<float>> find_floats(const std::string& key) const;
  std::optional<std::vector<int64_t>> find_ints(const std::string& key) const;

  /* Tensor names in GGUF's naming (a safetensors checkpoint's Hugging Face names are mapped
     to them: "model.layers.0.self_attn.q_proj.weight" is "blk.0.attn_q.weight"), sorted. */
  std::vector<std::string> tensor_names() const;
  bool has_tensor(const std::string& name) const;
  /* Throws kiln::Error naming the file when there is no such tensor. */
  const TensorInfo& tensor_info(const std::string& name) const;
  /* The tensor as kiln arrays, shape [out, in] as stored in the file's logical order. F32,
     F16, BF16 (and U32) view the mapped file. GGUF Q4_0, Q4_1, Q8_0 and Q4_K become affine
     groups of 32 exactly; Q5_K and Q6_K are dequantized to float32 (one line on stderr per
     file says so). Converted tensors are made once and kept. */
  Weight weight(const std::string& name) const;

  struct Impl;
  explicit ModelFile(std::unique_ptr<Impl> impl);

 private:
  friend class Model;  // drops the kept conversions of weights it stacks
  std::unique_ptr<Impl> impl_;
};

/* Where scripts/setup puts downloaded models: $KILN_MODELS_DIR, else
   ${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models. */
std::string models_dir();
/* The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) in models_dir(); it may not exist. */
std::string default_model_path();

}  // namespace kiln::llm

// The rest of the language-model API: tokenizer, model and sessions, sampling, generation.
#include "kiln/llm_generate.h"
#include "kiln/llm_model.h"
#include "kiln/llm_sampler.h"
#include "kiln/llm_tokenizer.h"
