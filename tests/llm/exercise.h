// What the model-file fuzzers do with each input, shared with the gtest that replays the
// seed corpus and the regressions: open the bytes, read every metadata value through every
// getter, load every tensor and read all its values. Only kiln::Error may come out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "kiln/llm.h"
#include "llm/model_file_impl.h"

namespace kiln_test {

inline void exercise(const kiln::llm::ModelFile& m) {
  for (const auto& key : m.metadata_keys()) {
    auto quietly = [](auto f) {
      try {
        f();
      } catch (const kiln::Error&) {
      }
    };
    quietly([&] { m.get_int(key); });
    quietly([&] { m.get_float(key); });
    quietly([&] { m.get_bool(key); });
    quietly([&] { m.get_string(key); });
    quietly([&] { m.get_strings(key); });
    quietly([&] { m.get_floats(key); });
    quietly([&] { m.get_ints(key); });
  }
  for (const auto& name : m.tensor_names()) {
    try {
      kiln::llm::Weight w = m.weight(name);
      std::vector<uint8_t> bytes(w.w.nbytes());
      w.w.copy_to(bytes.data(), w.w.dtype());  // reads every byte the array views
      for (const auto* a : {&w.scales, &w.biases})
        if (*a) {
          std::vector<uint8_t> more((*a)->nbytes());
          (*a)->copy_to(more.data(), (*a)->dtype());
        }
    } catch (const kiln::Error&) {
    }
  }
}

inline void exercise_gguf(const uint8_t* data, size_t size) {
  auto file = kiln::detail::MappedFile::from_bytes("fuzz.gguf", std::vector<uint8_t>(data, data + size));
  try {
    kiln::llm::ModelFile m(kiln::llm::read_gguf(file));
    exercise(m);
  } catch (const kiln::Error&) {
  }
}

// A Llama config with MLX quantization, so that quantized and reordered tensors are reached.
inline const char* kFuzzConfig =
    R"({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 1, "num_key_value_heads": 1,
        "hidden_size": 8, "num_hidden_layers": 1, "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        "quantization": {"group_size": 32, "bits": 4}})";

// An input that starts with '{' is a config.json (a checkpoint with no tensors); any other is
// a .safetensors file read with kFuzzConfig.
inline void exercise_safetensors(const uint8_t* data, size_t size) {
  const bool config = size > 0 && data[0] == '{';
  std::vector<std::shared_ptr<const kiln::detail::MappedFile>> shards;
  if (!config)
    shards.push_back(kiln::detail::MappedFile::from_bytes("fuzz.safetensors", std::vector<uint8_t>(data, data + size)));
  try {
    kiln::llm::ModelFile m(kiln::llm::read_safetensors(
        "fuzz", shards, config ? std::string(reinterpret_cast<const char*>(data), size) : std::string(kFuzzConfig)));
    exercise(m);
  } catch (const kiln::Error&) {
  }
}

}  // namespace kiln_test
