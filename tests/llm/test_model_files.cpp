// GGUF and safetensors readers: every tensor type against the gguf package's reference
// dequantization, kiln's affine packing against MLX's, metadata getters, Hugging Face and
// MLX checkpoints, and the real default model when it is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/tensor.h"
#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "llm/affine.h"

using namespace kiln;
using kiln::llm::ModelFile;
using kiln::llm::Weight;

namespace {

std::string data_dir() { return std::string(KILN_SOURCE_DIR) + "/tests/llm/data/"; }

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The float values a Weight stands for: dense values, or scale*q + bias in float32 per element.
std::vector<float> values_of(const Weight& w) {
  if (!w.quantized()) return astype(w.w, float32).to_vector<float>();
  const auto words = w.w.to_vector<uint32_t>();
  const auto scales = w.scales->to_vector<float>(), biases = w.biases->to_vector<float>();
  const int64_t packed = w.w.shape(-1), in = packed * 32 / w.bits, rows = w.w.size() / packed;
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < in; ++j) {
      const uint64_t bit = static_cast<uint64_t>(j * w.bits);
      uint64_t two = words[static_cast<size_t>(r * packed + static_cast<int64_t>(bit / 32))];
      if (bit % 32 + static_cast<uint64_t>(w.bits) > 32)
        two |= uint64_t{words[static_cast<size_t>(r * packed + static_cast<int64_t>(bit / 32) + 1)]} << 32;
      const uint32_t q = static_cast<uint32_t>(two >> (bit % 32)) & ((1u << w.bits) - 1);
      const size_t g = static_cast<size_t>(r * (in / w.group_size) + j / w.group_size);
      out.push_back(scales[g] * static_cast<float>(q) + biases[g]);
    }
  return out;
}

bool views_file(const Array& a) {
  const auto& buf = a.tensor().buffer;
  return !buf->owned() && buf->immutable();
}

}  // namespace

TEST(Gguf, EveryTypeMatchesTheReferenceDequantization) {
  auto m = ModelFile::open(data_dir() + "types.gguf");
  EXPECT_EQ(m->format(), "gguf");
  auto reference = load_params(data_dir() + "types_reference.safetensors");
  ASSERT_EQ(reference.size(), 9u);
  struct Expect {
    const char* name;
    const char* type;
    int bits;  // 0: dense
  };
  for (Expect e : {Expect{"dense.f32", "F32", 0},
                   {"dense.f16", "F16", 0},
                   {"dense.bf16", "BF16", 0},
                   {"q.q8_0", "Q8_0", 8},
                   {"q.q4_0", "Q4_0", 4},
                   {"q.q4_1", "Q4_1", 4},
                   {"q.q4_k", "Q4_K", 4},
                   {"q.q5_k", "Q5_K", 0},
                   {"q.q6_k", "Q6_K", 0}}) {
    SCOPED_TRACE(e.name);
    const Array& ref = reference.at(e.name);
    EXPECT_EQ(m->tensor_info(e.name).type, e.type);
    EXPECT_EQ(m->tensor_info(e.name).shape, ref.shape());
    Weight w = m->weight(e.name);
    EXPECT_EQ(w.bits, e.bits);
    if (e.bits) {
      EXPECT_EQ(w.group_size, 32);
      EXPECT_EQ(w.w.dtype(), uint32);
      Shape packed = ref.shape(), groups = ref.shape();
      packed.back() = packed.back() * e.bits / 32;
      groups.back() /= 32;
      EXPECT_EQ(w.w.shape(), packed);
      EXPECT_EQ(w.scales->shape(), groups);
      EXPECT_EQ(w.biases->shape(), groups);
      EXPECT_EQ(w.scales->dtype(), w.biases->dtype());
    } else {
      EXPECT_EQ(w.w.shape(), ref.shape());
    }
    const auto got = values_of(w), want = ref.to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    // Bit-equal, except that a zero's sign may differ: d*(q-8) is -0 for a negative d where
    // scale*q + bias is +0.
    for (size_t i = 0; i < got.size(); ++i)
      differ += std::memcmp(&got[i], &want[i], 4) != 0 && !(got[i] == 0 && want[i] == 0);
    EXPECT_EQ(differ, 0u) << "elements not equal to gguf.quants.dequantize";
  }
  // Dense types view the mapped file; Q4_1's scales and biases are float16 exactly.
  for (const char* n : {"dense.f32", "dense.f16", "dense.bf16"}) EXPECT_TRUE(views_file(m->weight(n).w)) << n;
  EXPECT_EQ(m->weight("dense.bf16").w.dtype(), bfloat16);
  EXPECT_EQ(m->weight("q.q4_1").scales->dtype(), float16);
  EXPECT_EQ(m->weight("q.q5_k").w.dtype(), float32);
  // Converted once: the same arrays come back.
  EXPECT_EQ(m->weight("q.q4_k").w.id(), m->weight("q.q4_k").w.id());
}

TEST(Gguf, UnsupportedTypeAndMissingTensorNameTheFile) {
  auto m = ModelFile::open(data_dir() + "types.gguf");
  EXPECT_EQ(m->tensor_info("q.q5_0").type, "Q5_0");
  std::string e = error_of([&] { m->weight("q.q5_0"); });
  EXPECT_NE(e.find("types.gguf: tensor 'q.q5_0': type Q5_0 is not supported"), std::string::npos) << e;
  e = error_of([&] { m->weight("nope"); });
  EXPECT_NE(e.find("types.gguf: no tensor 'nope'"), std::string::npos) << e;
  EXPECT_FALSE(m->has_tensor("nope"));
}

TEST(Gguf, MetadataOfEveryValueType) {
  auto m = ModelFile::open(data_dir() + "types.gguf");
  EXPECT_EQ(m->get_string("general.architecture"), "llama");
  EXPECT_EQ(m->get_int("test.u8"), 200);
  EXPECT_EQ(m->get_int("test.i8"), -100);
  EXPECT_EQ(m->get_int("test.u16"), 60000);
  EXPECT_EQ(m->get_int("test.i16"), -30000);
  EXPECT_EQ(m->get_int("test.u32"), 4000000000);
  EXPECT_EQ(m->get_int("test.i32"), -2000000000);
  EXPECT_EQ(m->get_int("test.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(m->get_float("test.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(m->get_float("test.f64"), 0.1);
  EXPECT_EQ(m->get_float("test.u16"), 60000.0);  // integers read as numbers
  EXPECT_TRUE(m->get_bool("test.bool"));
  EXPECT_EQ(m->get_int("test.bool"), 1);
  EXPECT_EQ(m->get_string("test.string"), "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93");
  EXPECT_EQ(m->get_strings("test.strings"), (std::vector<std::string>{"a", "", "\xc4\xa0The", "<|im_end|>"}));
  EXPECT_EQ(m->get_ints("test.ints"), (std::vector<int64_t>{3, -1, 7}));
  EXPECT_EQ(m->get_floats("test.floats"), (std::vector<float>{0.5f, -2.25f, 1e-3f}));
  EXPECT_EQ(m->get_floats("test.ints"), (std::vector<float>{3, -1, 7}));
  EXPECT_EQ(m->get_ints("test.bools"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(m->find_int("llama.block_count"), 1);
  EXPECT_FALSE(m->find_int("missing.key").has_value());
  EXPECT_FALSE(m->find_strings("missing.key").has_value());
  EXPECT_TRUE(m->has("test.nested"));
  EXPECT_FALSE(m->has("missing.key"));
  auto keys = m->metadata_keys();
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));

  // Errors name the file and the key.
  auto expect = [&](auto f, const std::string& want) {
    std::string e = error_of(f);
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  expect([&] { m->get_int("missing.key"); }, "[gguf] " + data_dir() + "types.gguf: metadata 'missing.key' is missing");
  expect([&] { m->get_int("test.string"); }, "types.gguf: metadata 'test.string' is string, not an integer");
  expect([&] { m->get_int("test.u64"); }, "metadata 'test.u64' holds a value past the int64 range");
  expect([&] { m->get_string("test.u8"); }, "metadata 'test.u8' is uint8, not a string");
  expect([&] { m->get_strings("test.ints"); }, "metadata 'test.ints' is array of int32, not an array of strings");
  expect([&] { m->get_ints("test.nested"); }, "metadata 'test.nested' is array of array, not an array of integers");
  expect([&] { m->get_floats("test.strings"); }, "not an array of numbers");
  expect([&] { m->get_bool("test.u8"); }, "not a bool");
  expect([&] { m->find_float("test.string"); }, "not a number");
}

TEST(Affine, PackingMatchesMlx) {
  // Codes MLX's mx.quantize chose and the words it packed them into, at every width.
  auto golden = load_params(data_dir() + "mlx_packing.safetensors");
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    SCOPED_TRACE(bits);
    const Array& codes = golden.at("codes." + std::to_string(bits));
    const Array& packed = golden.at("packed." + std::to_string(bits));
    const auto c = codes.to_vector<uint8_t>();
    const auto want = packed.to_vector<uint32_t>();
    const int64_t rows = codes.shape(0), cols = codes.shape(1);
    ASSERT_EQ(packed.shape(1), cols * bits / 32);
    std::vector<uint32_t> got(want.size());
    for (int64_t r = 0; r < rows; ++r)
      llm::pack_codes(c.data() + r * cols, cols, bits, got.data() + r * packed.shape(1));
    EXPECT_EQ(got, want);
  }
}

TEST(Gguf, ArraysOutliveTheModelFile) {
  auto m = ModelFile::open(data_dir() + "types.gguf");
  Weight w = m->weight("dense.f32");
  const auto before = w.w.to_vector<float>();
  m.reset();
  EXPECT_EQ(w.w.to_vector<float>(), before);
  std::vector<float> twice(before.size());
  for (size_t i = 0; i < before.size(); ++i) twice[i] = 2 * before[i];
  EXPECT_EQ(add(w.w, w.w).to_vector<float>(), twice);
}

namespace {

namespace fs = std::filesystem;

// A tiny Llama checkpoint in Hugging Face's layout, written with kiln's own safetensors writer.
struct Checkpoint {
  std::string dir;
  std::map<std::string, Array> tensors;
};

Array random_array(Shape shape, Dtype dtype, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(detail::shape_size(shape)));
  for (auto& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int64_t>(seed >> 40) % 1000) / 250.0f - 2.0f;
  }
  return astype(array(v, shape), dtype);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
  "intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1,
  "max_position_embeddings": 128, "rms_norm_eps": 1e-05, "vocab_size": 6, "rope_theta": 500000.0,
  "bos_token_id": 1, "eos_token_id": [2, 3], "tie_word_embeddings": true,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}})";

Checkpoint llama_checkpoint(const std::string& name, Dtype dtype) {
  Checkpoint c;
  c.dir = testing::TempDir() + "/" + name;
  fs::remove_all(c.dir);
  fs::create_directories(c.dir);
  c.tensors = {{"model.embed_tokens.weight", random_array({6, 8}, dtype, 1)},
               {"model.norm.weight", random_array({8}, dtype, 2)},
               {"model.layers.0.input_layernorm.weight", random_array({8}, dtype, 3)},
               {"model.layers.0.post_attention_layernorm.weight", random_array({8}, dtype, 4)},
               {"model.layers.0.self_attn.q_proj.weight", random_array({8, 8}, dtype, 5)},
               {"model.layers.0.self_attn.k_proj.weight", random_array({4, 8}, dtype, 6)},
               {"model.layers.0.self_attn.v_proj.weight", random_array({4, 8}, dtype, 7)},
               {"model.layers.0.self_attn.o_proj.weight", random_array({8, 8}, dtype, 8)},
               {"model.layers.0.mlp.gate_proj.weight", random_array({16, 8}, dtype, 9)},
               {"model.layers.0.mlp.up_proj.weight", random_array({16, 8}, dtype, 10)},
               {"model.layers.0.mlp.down_proj.weight", random_array({8, 16}, dtype, 11)},
               {"extra.tensor", random_array({3}, dtype, 12)}};
  save_params(c.dir + "/model.safetensors", c.tensors);
  write_text(c.dir + "/config.json", kLlamaConfig);
  return c;
}

// Rows of each head reordered as GGUF's llama stores Q and K: halves interleaved.
std::vector<float> interleaved(const Array& a, int64_t heads) {
  const auto v = astype(a, float32).to_vector<float>();
  const int64_t rows = a.shape(0), cols = a.size() / rows, head = rows / heads;
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head, i = r % head;
    const int64_t from = h * head + (i % 2 ? head / 2 : 0) + i / 2;
    std::copy_n(v.begin() + from * cols, cols, out.begin() + r * cols);
  }
  return out;
}

}  // namespace

TEST(Safetensors, HuggingFaceLlamaFolder) {
  Checkpoint c = llama_checkpoint("hf_llama", bfloat16);
  auto m = ModelFile::open(c.dir);
  EXPECT_EQ(m->format(), "safetensors");
  EXPECT_EQ(m->get_string("general.architecture"), "llama");
  EXPECT_EQ(m->get_int("llama.block_count"), 1);
  EXPECT_EQ(m->get_int("llama.embedding_length"), 8);
  EXPECT_EQ(m->get_int("llama.feed_forward_length"), 16);
  EXPECT_EQ(m->get_int("llama.attention.head_count"), 2);
  EXPECT_EQ(m->get_int("llama.attention.head_count_kv"), 1);
  EXPECT_EQ(m->get_int("llama.context_length"), 128);
  EXPECT_EQ(m->get_int("llama.vocab_size"), 6);
  EXPECT_EQ(m->get_int("llama.rope.dimension_count"), 4);  // hidden_size / num_attention_heads
  EXPECT_EQ(m->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5);
  EXPECT_EQ(m->get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(m->get_string("llama.rope.scaling.type"), "llama3");
  EXPECT_EQ(m->get_float("llama.rope.scaling.factor"), 8.0);
  EXPECT_EQ(m->get_int("llama.rope.scaling.original_context_length"), 64);
  EXPECT_EQ(m->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(m->get_int("tokenizer.ggml.eos_token_id"), 2);

  EXPECT_EQ(m->tensor_names(),
            (std::vector<std::string>{"blk.0.attn_k.weight", "blk.0.attn_norm.weight", "blk.0.attn_output.weight",
                                      "blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight",
                                      "blk.0.ffn_gate.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_up.weight",
                                      "extra.tensor", "output_norm.weight", "rope_freqs.weight", "token_embd.weight"}));
  EXPECT_EQ(m->tensor_info("blk.0.ffn_down.weight").shape, (Shape{8, 16}));
  EXPECT_EQ(m->tensor_info("blk.0.ffn_down.weight").type, "BF16");
  Weight down = m->weight("blk.0.ffn_down.weight");
  EXPECT_FALSE(down.quantized());
  EXPECT_EQ(down.w.dtype(), bfloat16);
  EXPECT_TRUE(views_file(down.w));
  EXPECT_EQ(astype(down.w, float32).to_vector<float>(),
            astype(c.tensors.at("model.layers.0.mlp.down_proj.weight"), float32).to_vector<float>());
  // Q and K rows are reordered to GGUF's llama layout (2 query heads, 1 key head).
  EXPECT_EQ(astype(m->weight("blk.0.attn_q.weight").w, float32).to_vector<float>(),
            interleaved(c.tensors.at("model.layers.0.self_attn.q_proj.weight"), 2));
  EXPECT_EQ(astype(m->weight("blk.0.attn_k.weight").w, float32).to_vector<float>(),
            interleaved(c.tensors.at("model.layers.0.self_attn.k_proj.weight"), 1));
  EXPECT_EQ(astype(m->weight("blk.0.attn_v.weight").w, float32).to_vector<float>(),
            astype(c.tensors.at("model.layers.0.self_attn.v_proj.weight"), float32).to_vector<float>());
  // Llama 3 rope scaling as llama.cpp stores it: per-frequency divisors, 1 for the highest
  // frequencies, the factor for the lowest (head dim 4: two frequencies).
  auto divisors = m->weight("rope_freqs.weight").w.to_vector<float>();
  ASSERT_EQ(divisors.size(), 2u);
  EXPECT_EQ(divisors[0], 1.0f);
  EXPECT_EQ(divisors[1], 8.0f);
}

// config.json as transformers 5 writes it: RoPE settings in "rope_parameters" (rope_theta
// inside; rope_type "default" when unscaled). And a config with model_type alone (transformers
// needs no "architectures"): a Llama or Mistral checkpoint is still reordered for GGUF's rotation.
TEST(Safetensors, RopeParametersAndModelTypeAlone) {
  Checkpoint c = llama_checkpoint("hf_v5", bfloat16);
  std::string config = kLlamaConfig;
  const std::string arch = R"("architectures": ["LlamaForCausalLM"], "model_type": "llama")";
  config.replace(config.find(arch), arch.size(), R"("model_type": "mistral")");
  const std::string rope = R"("rope_theta": 500000.0)";
  config.replace(config.find(rope), rope.size(), R"("rope_theta_unused": 1)");
  const size_t scaling = config.find(R"("rope_scaling")");
  write_text(c.dir + "/config.json",
             config.substr(0, scaling) + R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})");
  auto m = ModelFile::open(c.dir);
  EXPECT_EQ(m->get_string("general.architecture"), "llama");
  EXPECT_EQ(m->get_float("llama.rope.freq_base"), 1e6);
  EXPECT_FALSE(m->find_string("llama.rope.scaling.type"));
  EXPECT_FALSE(m->has_tensor("rope_freqs.weight"));
  EXPECT_EQ(astype(m->weight("blk.0.attn_q.weight").w, float32).to_vector<float>(),
            interleaved(c.tensors.at("model.layers.0.self_attn.q_proj.weight"), 2));

  write_text(c.dir + "/config.json", config.substr(0, scaling) + R"("rope_parameters": {"rope_type": "llama3",
      "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 64}})");
  m = ModelFile::open(c.dir);
  EXPECT_EQ(m->get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(m->get_string("llama.rope.scaling.type"), "llama3");
  EXPECT_EQ(m->weight("rope_freqs.weight").w.to_vector<float>(), (std::vector<float>{1.0f, 8.0f}));
  EXPECT_EQ(kiln::llm::Model::load(c.dir)->config().rope_base, 500000.0f);  // llama3 scaling loads
}

// Which layers use a sliding window, as transformers decides it; kiln holds one for all or none.
TEST(Safetensors, SlidingWindowFromConfig) {
  Checkpoint c = llama_checkpoint("hf_window", bfloat16);  // one layer
  auto config = [&](const std::string& fields) {
    write_text(c.dir + "/config.json", R"({"num_attention_heads": 2, "num_key_value_heads": 1, )" + fields + "}");
  };
  auto window_of = [&](const std::string& fields) {
    config(fields);
    return ModelFile::open(c.dir)->find_int("llama.attention.sliding_window");
  };
  const std::string llama = R"("model_type": "llama", "num_hidden_layers": 1, )";
  const std::string mistral = R"("model_type": "mistral", "num_hidden_layers": 1, )";
  EXPECT_FALSE(window_of(llama + R"("sliding_window": 4096)"));
  EXPECT_FALSE(window_of(mistral + R"("sliding_window": null)"));
  EXPECT_EQ(window_of(mistral + R"("sliding_window": 4096)"), 4096);
  EXPECT_FALSE(window_of(llama + R"("sliding_window": 64, "layer_types": ["full_attention"])"));
  EXPECT_EQ(window_of(llama + R"("sliding_window": 64, "layer_types": ["sliding_attention"])"), 64);
  EXPECT_FALSE(window_of(llama + R"("sliding_window": 64, "use_sliding_window": true, "max_window_layers": 1)"));
  EXPECT_EQ(window_of(llama + R"("sliding_window": 64, "use_sliding_window": true, "max_window_layers": 0)"), 64);
  config(R"("model_type": "llama", "num_hidden_layers": 2, "sliding_window": 64,
            "layer_types": ["full_attention", "sliding_attention"])");
  std::string e = error_of([&] { ModelFile::open(c.dir); });
  EXPECT_NE(e.find("config.json: sliding-window attention on 1 of 2 layers"), std::string::npos) << e;
  config(mistral + R"("sliding_window": -1)");
  e = error_of([&] { ModelFile::open(c.dir); });
  EXPECT_NE(e.find("config.json: 'sliding_window' must be a positive integer"), std::string::npos) << e;
}

TEST(Safetensors, ShardedFolderAndSingleFile) {
  Checkpoint c = llama_checkpoint("hf_sharded", float16);
  std::map<std::string, Array> a, b;
  std::string index = R"({"metadata": {}, "weight_map": {)";
  int i = 0;
  for (const auto& [name, t] : c.tensors) {
    (i % 2 ? a : b)[name] = t;
    index +=
        std::string(i ? "," : "") + "\"" + name + "\": \"model-0000" + (i % 2 ? "1" : "2") + "-of-00002.safetensors\"";
    ++i;
  }
  index += "}}";
  fs::remove(c.dir + "/model.safetensors");
  save_params(c.dir + "/model-00001-of-00002.safetensors", a);
  save_params(c.dir + "/model-00002-of-00002.safetensors", b);
  write_text(c.dir + "/model.safetensors.index.json", index);
  auto m = ModelFile::open(c.dir);
  EXPECT_EQ(m->tensor_names().size(), 13u);
  EXPECT_EQ(m->weight("token_embd.weight").w.dtype(), float16);
  EXPECT_EQ(astype(m->weight("blk.0.ffn_up.weight").w, float32).to_vector<float>(),
            astype(c.tensors.at("model.layers.0.mlp.up_proj.weight"), float32).to_vector<float>());

  // A single file opens with the config.json beside it.
  auto single = ModelFile::open(c.dir + "/model-00001-of-00002.safetensors");
  EXPECT_EQ(single->get_int("llama.block_count"), 1);
  EXPECT_LT(single->tensor_names().size(), 13u);

  // The index and the shards must agree.
  std::string e;
  std::string wrong = index;
  const std::string entry = "\"extra.tensor\": \"model-0000";
  const size_t at = wrong.find(entry) + entry.size();  // the shard's digit: 1 becomes 2, 2 becomes 1
  ASSERT_LT(at, wrong.size());
  wrong[at] = wrong[at] == '1' ? '2' : '1';
  write_text(c.dir + "/model.safetensors.index.json", wrong);
  e = error_of([&] { ModelFile::open(c.dir); });
  EXPECT_NE(e.find("tensor 'extra.tensor' is not where model.safetensors.index.json puts it"), std::string::npos) << e;
  write_text(c.dir + "/model.safetensors.index.json",
             index.substr(0, index.size() - 2) + R"(, "ghost": "model-00001-of-00002.safetensors"}})");
  e = error_of([&] { ModelFile::open(c.dir); });
  EXPECT_NE(e.find("model.safetensors.index.json: tensor 'ghost' is not in its shard"), std::string::npos) << e;

  // A shard that escapes the folder is refused.
  write_text(c.dir + "/model.safetensors.index.json", R"({"weight_map": {"x": "../x.safetensors"}})");
  e = error_of([&] { ModelFile::open(c.dir); });
  EXPECT_NE(e.find("tensor 'x': shard must be a file name in the folder"), std::string::npos) << e;
}

TEST(Safetensors, MlxQuantizedCheckpoint) {
  const std::string dir = testing::TempDir() + "/mlx_q";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // [out=4, in=64] at 4 bits, groups of 32: 8 words a row, 2 groups; the down projection stays
  // dense through a per-module override.
  std::vector<uint32_t> words(32);
  for (size_t k = 0; k < words.size(); ++k) words[k] = 0x9E3779B9u * static_cast<uint32_t>(k + 1);
  std::map<std::string, Array> t = {{"model.layers.0.mlp.up_proj.weight", array(words, {4, 8})},
                                    {"model.layers.0.mlp.up_proj.scales", random_array({4, 2}, float16, 21)},
                                    {"model.layers.0.mlp.up_proj.biases", random_array({4, 2}, float16, 22)},
                                    {"model.layers.0.mlp.down_proj.weight", random_array({64, 4}, float16, 23)}};
  save_params(dir + "/model.safetensors", t);
  write_text(dir + "/config.json", R"({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
      "num_attention_heads": 2, "quantization": {"group_size": 32, "bits": 4,
      "model.layers.0.mlp.down_proj": false}})");
  auto m = ModelFile::open(dir);
  EXPECT_EQ(m->get_string("general.architecture"), "qwen2");
  EXPECT_EQ(m->tensor_names(), (std::vector<std::string>{"blk.0.ffn_down.weight", "blk.0.ffn_up.weight"}));
  EXPECT_EQ(m->tensor_info("blk.0.ffn_up.weight").shape, (Shape{4, 64}));
  EXPECT_EQ(m->tensor_info("blk.0.ffn_up.weight").type, "affine4/g32");
  Weight up = m->weight("blk.0.ffn_up.weight");
  ASSERT_TRUE(up.quantized());
  EXPECT_EQ(up.bits, 4);
  EXPECT_EQ(up.group_size, 32);
  EXPECT_EQ(up.w.to_vector<uint32_t>(), words);
  EXPECT_TRUE(views_file(up.w));
  EXPECT_TRUE(views_file(*up.scales));
  EXPECT_EQ(up.scales->to_vector<float>(), t.at("model.layers.0.mlp.up_proj.scales").to_vector<float>());
  EXPECT_FALSE(m->weight("blk.0.ffn_down.weight").quantized());

  // Scales without a quantization block, or shapes that disagree, name the tensor.
  write_text(dir + "/config.json", R"({"model_type": "qwen2"})");
  std::string e = error_of([&] { ModelFile::open(dir); });
  EXPECT_NE(e.find("tensor 'model.layers.0.mlp.up_proj.weight' has scales and biases but config.json does not "
                   "quantize it"),
            std::string::npos)
      << e;
  write_text(dir + "/config.json", R"({"model_type": "qwen2", "quantization": {"group_size": 64, "bits": 4}})");
  e = error_of([&] { ModelFile::open(dir); });
  EXPECT_NE(e.find("packed width 8 is not 2 groups of 64 at 4 bits"), std::string::npos) << e;
}

TEST(Safetensors, FolderWithoutConfigOrWeights) {
  const std::string dir = testing::TempDir() + "/empty_model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string e = error_of([&] { ModelFile::open(dir); });
  EXPECT_NE(e.find("empty_model: no config.json"), std::string::npos) << e;
  write_text(dir + "/config.json", "{}");
  e = error_of([&] { ModelFile::open(dir); });
  EXPECT_NE(e.find("no model.safetensors or model.safetensors.index.json"), std::string::npos) << e;
  write_text(dir + "/notes.txt", "hello");
  e = error_of([&] { ModelFile::open(dir + "/notes.txt"); });
  EXPECT_NE(e.find("notes.txt: neither a GGUF file"), std::string::npos) << e;
}

TEST(DefaultModel, OpensListsAndMatchesReferenceRows) {
  const std::string path = llm::default_model_path();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent: run scripts/setup to fetch it";
  auto m = ModelFile::open(path);
  EXPECT_EQ(m->get_string("general.architecture"), "llama");
  EXPECT_EQ(m->get_int("llama.block_count"), 30);
  EXPECT_EQ(m->get_int("llama.embedding_length"), 576);
  EXPECT_EQ(m->get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(m->get_strings("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(m->get_ints("tokenizer.ggml.token_type").size(), 49152u);
  EXPECT_EQ(m->get_strings("tokenizer.ggml.merges").size(), 48900u);
  EXPECT_EQ(m->tensor_names().size(), 272u);
  EXPECT_EQ(m->tensor_info("token_embd.weight").type, "Q8_0");
  EXPECT_EQ(m->tensor_info("token_embd.weight").shape, (Shape{49152, 576}));
  Weight q = m->weight("blk.0.attn_q.weight");
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.w.shape(), (Shape{576, 72}));
  EXPECT_TRUE(views_file(m->weight("output_norm.weight").w));
  // Rows dequantized by the gguf package (tests/llm/make_test_data.py).
  auto reference = load_params(data_dir() + "smollm2_rows.safetensors");
  for (const auto& [key, ref] : reference) {
    SCOPED_TRACE(key);
    const std::string name = key.substr(0, key.rfind('.'));  // "<tensor>.<row>"
    const int64_t row = std::stoll(key.substr(key.rfind('.') + 1));
    const auto all = values_of(m->weight(name));
    const int64_t cols = m->tensor_info(name).shape.back();
    std::vector<float> got(all.begin() + row * cols, all.begin() + (row + 1) * cols);
    EXPECT_EQ(got, ref.to_vector<float>());
  }
}

TEST(Gguf, WeightsFromManyThreadsAtOnce) {
  auto m = ModelFile::open(data_dir() + "types.gguf");
  const std::vector<std::string> names = {"q.q4_k", "q.q8_0", "q.q6_k", "dense.f32", "q.q4_1"};
  std::vector<std::vector<const void*>> ids(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < ids.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < names.size(); ++k) ids[t].push_back(m->weight(names[(k + t) % names.size()]).w.id());
    });
  for (auto& t : threads) t.join();
  // Every thread got the one converted copy of each quantized tensor.
  for (size_t t = 1; t < ids.size(); ++t)
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string& name = names[(k + t) % names.size()];
      if (name == "dense.f32") continue;  // views: a new handle each time
      EXPECT_EQ(ids[t][k], m->weight(name).w.id()) << name;
    }
}
