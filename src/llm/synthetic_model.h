// A Llama-shaped model file of random weights made in memory: for benchmarks at sizes no file is
// at hand for (an 8B model's shape), and for tests that run one model two ways (one rank and
// several). The values depend only on the seed and the tensor's name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/llm.h"

namespace kiln::llm {

struct SyntheticModel {
  int n_layers = 2, d_model = 64, n_heads = 4, n_kv_heads = 2, ffn_dim = 128, vocab_size = 256;
  int64_t context_length = 4096;
  int head_dim = 0;  // 0: d_model / n_heads; else written as attention.key_length (a tensor-parallel rank's shape)
  /* The matrices' type: "F32", "F16", "BF16", or "Q4" (kiln's affine 4 bits, groups of
     `group_size` (32 or 64), float16 scales and biases); norms are F32. */
  std::string type = "F32";
  int group_size = 32;
  bool tied_embeddings = false;
  uint64_t seed = 1;
};

/* The model as a ModelFile ("general.architecture" llama): each weight() call makes its tensor
   again, on the host, in parallel. Throws kiln::Error naming a bad type. */
std::shared_ptr<ModelFile> synthetic_model(const SyntheticModel& spec);

}  // namespace kiln::llm
