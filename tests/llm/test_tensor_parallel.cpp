// Tensor-parallel models (LoadOptions::tensor_parallel, docs/distributed.md) against the same
// model on one rank: logits at every position of a prefill and of each decode step, batched steps,
// and the errors. On the CPU the ranks are threads (every build); on two GPUs or more, NCCL ranks
// (else skipped, saying so). The models: the tiny checkpoints of tests/llm/golden/tiny, random
// Llama-shaped models (dense and 4-bit), and the default model where it is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <thread>

#include "kiln/kiln.h"
#include "llm/model_impl.h"
#include "llm/synthetic_model.h"
#include "reference.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::llm;

namespace {

fs::path tiny(const std::string& name) { return fs::path(KILN_TEST_SOURCE_DIR) / "llm" / "golden" / "tiny" / name; }

std::vector<int32_t> tokens(int n, int vocab, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + seed * 104729 + 13) % vocab));
  return t;
}

// The largest |a - b| over rows of `vocab`, each relative to its row's largest |b|.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b, size_t vocab) {
  double worst = 0;
  for (size_t row = 0; row + vocab <= b.size(); row += vocab) {
    double top = 0;
    for (size_t i = row; i < row + vocab; ++i) top = std::max(top, std::fabs(static_cast<double>(b[i])));
    for (size_t i = row; i < row + vocab; ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / top);
  }
  return worst;
}

// What a model gives: every position's logits of a prompt of 13 tokens (prefilled in chunks of 8,
// 4 and 1), then those of 6 decode steps of two sessions batched in one step each.
std::vector<float> run(const std::shared_ptr<Model>& model, int seed) {
  const int vocab = model->config().vocab_size;
  std::vector<float> out;
  Session a(model), b(model);
  const std::vector<int32_t> prompt = tokens(13, vocab, seed);
  size_t at = 0;
  for (size_t chunk : {8, 4, 1}) {
    const std::vector<int32_t> part(prompt.begin() + static_cast<std::ptrdiff_t>(at),
                                    prompt.begin() + static_cast<std::ptrdiff_t>(at + chunk));
    const std::vector<float> l = model->step({&a}, {part}, true).to_vector<float>();
    out.insert(out.end(), l.begin(), l.end());
    at += chunk;
  }
  b.append(tokens(5, vocab, seed + 1));  // another session, at another position
  for (int step = 0; step < 6; ++step) {
    const std::vector<float> l =
        model->step({&a, &b}, {{(step * 31 + 3) % vocab}, {(step * 17 + 5) % vocab}}).to_vector<float>();
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// A model on `ranks` ranks from `device` against the same on one rank there.
void expect_same_as_one_rank(const std::shared_ptr<ModelFile>& file, LoadOptions options, int ranks, double tolerance,
                             const std::string& what) {
  const auto one = Model::load(file, options);
  options.tensor_parallel = ranks;
  const auto split = Model::load(file, options);
  EXPECT_EQ(split->tensor_parallel(), ranks);
  EXPECT_EQ(split->config().n_heads, one->config().n_heads);  // the whole model's shape
  const std::vector<float> want = run(one, 1), got = run(split, 1);
  ASSERT_EQ(got.size(), want.size()) << what;
  const double worst = worst_relative(got, want, static_cast<size_t>(one->config().vocab_size));
  EXPECT_LE(worst, tolerance) << what << " on " << ranks << " ranks";
  std::printf("%s, %d ranks: largest difference %.2e of the row's largest logit\n", what.c_str(), ranks, worst);
}

SyntheticModel small(const std::string& type) {
  return {
      .n_layers = 2, .d_model = 128, .n_heads = 4, .n_kv_heads = 2, .ffn_dim = 256, .vocab_size = 320, .type = type};
}

// Loading `m` with `o` fails with exactly `want`.
void expect_load_error(const SyntheticModel& m, const LoadOptions& o, const std::string& want) {
  try {
    Model::load(synthetic_model(m), o);
    ADD_FAILURE() << "loaded; expected: " << want;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
}

// Groups of CPU threads: their inputs are made on the default device, which stays the CPU for
// these tests also under KILN_TEST_DEVICE=cuda (the GPU tests name their devices).
class TensorParallelThreads : public ::testing::Test {
  kt::DefaultDevice on_cpu_;
};

}  // namespace

// float32 on both sides: the row-parallel sums add the ranks' parts in another order, nothing else.
constexpr double kFloat32 = 1e-4;

TEST_F(TensorParallelThreads, TinyCheckpointsOnThreadsEqualOneRank) {
  LoadOptions o;
  o.dtype = float32;
  for (const std::string name : {"llama-bf16", "llama2-f16", "qwen2-bf16", "qwen3-bf16", "mistral-f16"})
    expect_same_as_one_rank(ModelFile::open(tiny(name).string()), o, 2, kFloat32, name);
}

TEST_F(TensorParallelThreads, RandomModelsOnThreadsEqualOneRank) {
  LoadOptions o;
  o.dtype = float32;
  for (const std::string type : {"F32", "Q4"}) {
    for (bool tied : {false, true}) {
      SyntheticModel s = small(type);
      s.tied_embeddings = tied;
      const auto file = synthetic_model(s);
      for (auto act : {QmmActivations::exact, QmmActivations::int16}) {
        if (type == "F32" && act != QmmActivations::exact) continue;
        // int16: each rank holds whole blocks of 32, rounded as on one rank; but a code steps by 2^-14
        // of its block's largest value, so the last bits the ranks' sums change can move a code.
        o.activations = act;
        const bool int16 = act == QmmActivations::int16;
        expect_same_as_one_rank(file, o, 2, int16 ? 8 * 0x1p-14 : kFloat32,
                                "random " + type + (tied ? " tied" : "") + (int16 ? " int16" : ""));
      }
    }
  }
  SyntheticModel s = small("F32");
  s.vocab_size = 321;  // no whole share of the vocabulary: each rank keeps the output layer whole
  o.activations = QmmActivations::exact;
  expect_same_as_one_rank(synthetic_model(s), o, 2, kFloat32, "random F32, vocabulary 321");
  s.n_heads = s.n_kv_heads = 4;
  expect_same_as_one_rank(synthetic_model(s), o, 4, kFloat32, "random F32, 4 key/value heads");
}

TEST_F(TensorParallelThreads, DefaultModelOnThreeThreadsEqualsOneRank) {
  const std::string path = default_model_path();
  if (!fs::exists(path)) GTEST_SKIP() << "the default model is not at " << path << " (scripts/setup fetches it)";
  LoadOptions o;  // 9 heads, 3 key/value heads, ffn 1536, 49152 tokens: 3 ranks divide them all
  o.activations = QmmActivations::exact;
  expect_same_as_one_rank(ModelFile::open(path), o, 3, kFloat32, "SmolLM2-135M");
}

// The group aborted while the model decodes (as a failing rank aborts it): the step under way
// throws instead of leaving a rank waiting in an all_sum, and every later step says the model is
// unusable; the process goes on.
TEST_F(TensorParallelThreads, AnAbortedGroupEndsTheStepsAndLaterOnesSaySo) {
  LoadOptions o;
  o.tensor_parallel = 2;
  const auto model = Model::load(synthetic_model(small("F32")), o);
  Session session(model);
  session.append(tokens(4, 320, 1));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    model->impl().group.abort("rank 1 failed: out of memory");
  });
  std::string first;
  for (int i = 0; i < 100000 && first.empty(); ++i) {
    try {
      model->step({&session}, {{7}}).eval();
    } catch (const Error& e) {
      first = e.what();
    }
  }
  aborter.join();
  EXPECT_NE(first.find("rank 1 failed: out of memory"), std::string::npos) << first;
  try {
    model->step({&session}, {{7}});
    ADD_FAILURE() << "a step of an aborted model ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model's tensor-parallel group was aborted (rank 1 failed: out of "
                                         "memory); load the model again"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TensorParallelThreads, WhatDoesNotDivideIsNamed) {
  LoadOptions o;
  o.tensor_parallel = 2;
  SyntheticModel s = small("F32");
  s.d_model = 192;
  s.n_heads = 6;
  s.n_kv_heads = 3;
  expect_load_error(s, o,
                    "[llm] synthetic-F32-2x192: tensor parallelism over 2 ranks: n_kv_heads "
                    "(llama.attention.head_count_kv) = 3 does not divide over 2 ranks");
  s.n_kv_heads = 6;
  o.tensor_parallel = 4;
  expect_load_error(s, o,
                    "[llm] synthetic-F32-2x192: tensor parallelism over 4 ranks: n_heads "
                    "(llama.attention.head_count) = 6 does not divide over 4 ranks");
  s = small("F32");
  s.ffn_dim = 255;
  o.tensor_parallel = 2;
  expect_load_error(s, o,
                    "[llm] synthetic-F32-2x128: tensor parallelism over 2 ranks: ffn_dim "
                    "(llama.feed_forward_length) = 255 does not divide over 2 ranks");
  // A quantized row-parallel product splits at whole groups: 4 heads of 16 are two groups of 32.
  s = small("Q4");
  s.d_model = 64;
  s.n_kv_heads = 4;
  o.tensor_parallel = 4;
  expect_load_error(s, o,
                    "[llm] tensor 'blk.0.attn_output.weight': its 2 quantization groups of 32 input features "
                    "do not divide over 4 ranks");
  o.device = Device::cuda(0);
  o.tensor_parallel = std::max(2, cuda_device_count() + 1);
  expect_load_error(
      small("F32"), o,
      "[llm] tensor parallelism over " + std::to_string(o.tensor_parallel) +
          " ranks from cuda:0 needs CUDA devices cuda:0 to cuda:" + std::to_string(o.tensor_parallel - 1) + "; " +
          std::to_string(cuda_device_count()) + " are present");
}

TEST(TensorParallelGpu, LogitsEqualOneGpu) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "tensor parallelism on GPUs needs 2 or more; " << cuda_device_count() << " visible: skipped";
  if (const std::string why = distributed::nccl_unavailable_reason(); !why.empty())
    GTEST_SKIP() << "NCCL is not available (" << why << "): tensor parallelism on GPUs skipped";
  LoadOptions o;
  o.device = Device::cuda(0);
  o.dtype = float32;
  expect_same_as_one_rank(ModelFile::open(tiny("llama-bf16").string()), o, 2, kFloat32, "llama-bf16 on GPUs");
  expect_same_as_one_rank(ModelFile::open(tiny("qwen2-bf16").string()), o, 2, kFloat32, "qwen2-bf16 on GPUs");
  expect_same_as_one_rank(synthetic_model(small("F32")), o, 2, kFloat32, "random F32 on GPUs");
  expect_same_as_one_rank(synthetic_model(small("Q4")), o, 2, kFloat32, "random Q4 on GPUs");
  // bfloat16 activations: the ranks' partial sums are rounded to bfloat16 before they are added,
  // so the bound is a rounding one (32 units of bfloat16's 2^-8, as test_llm_tiny_models uses).
  o.dtype = bfloat16;
  expect_same_as_one_rank(synthetic_model(small("BF16")), o, 2, 32 * 0x1p-8, "random BF16 on GPUs");
  expect_same_as_one_rank(synthetic_model(small("Q4")), o, 2, 32 * 0x1p-8, "random Q4, bfloat16 on GPUs");
  if (cuda_device_count() >= 4) {
    SyntheticModel s = small("Q4");
    s.n_kv_heads = 4;
    o.dtype = float32;
    expect_same_as_one_rank(synthetic_model(s), o, 4, kFloat32, "random Q4 on 4 GPUs");
  }
}

// A program whose default device is the first GPU: every rank's constants (rope frequencies,
// sliding-window masks, batch indices) must still be made on that rank's own GPU.
TEST(TensorParallelGpu, RanksKeepToTheirGpusWhateverTheDefaultDevice) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "tensor parallelism on GPUs needs 2 or more; " << cuda_device_count() << " visible: skipped";
  if (const std::string why = distributed::nccl_unavailable_reason(); !why.empty())
    GTEST_SKIP() << "NCCL is not available (" << why << "): tensor parallelism on GPUs skipped";
  const kt::DefaultDevice on_gpu0(Device::cuda(0));
  LoadOptions o;
  o.device = Device::cuda(0);
  o.dtype = float32;
  expect_same_as_one_rank(ModelFile::open(tiny("llama-bf16").string()), o, 2, kFloat32, "llama-bf16, default cuda:0");
  expect_same_as_one_rank(ModelFile::open(tiny("mistral-f16").string()), o, 2, kFloat32, "mistral-f16, default cuda:0");
  expect_same_as_one_rank(synthetic_model(small("Q4")), o, 2, kFloat32, "random Q4, default cuda:0");
}
