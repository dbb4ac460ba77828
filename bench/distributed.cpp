// kiln's side of the multi-GPU benchmark (bench/run_distributed.sh; docs/benchmarks.md, "Several
// GPUs"). Two parts, each writing one JSON object a line on stdout:
//
//   bench_distributed all_sum [--min-mib 1] [--max-mib 1024]
//     kiln::all_sum of float32 over every visible GPU (one thread a GPU, Group::local), at sizes
//     doubling from --min-mib to --max-mib. A timed run is a chain of `iters` all_sums built lazily
//     and evaluated once (each NCCL call queued behind the last, as torch.distributed's loop of
//     all_reduce calls is), after two warm-up calls; time = wall time / iters on rank 0 (the ranks
//     finish together). Bus bandwidth is NCCL's: bytes / time * 2 (n - 1) / n, as
//     bench/nccl_allreduce.py reports PyTorch's.
//
//   bench_distributed all_sum_graph
//     kiln::all_sum of bfloat16 at 8 KiB to 1 MiB inside a compiled call's CUDA graph, 64 a call
//     (decode's collectives); bench/nccl_allreduce.py --graph times PyTorch's in a captured graph.
//
//   bench_distributed decode [--tp 1,2] [--types BF16,Q4,Q4G64] [--tokens 64] [--model llama3-8b]
//                            [--layers 32] [--sessions 1] [--context 32]
//     Decode tokens/s of a Llama-3-8B-shaped model of random weights (d_model 4096, 32 heads, 8
//     key/value heads, ffn 14336, 32 layers, vocabulary 128256; src/llm/synthetic_model.h), or
//     with --model smollm2 of SmolLM2-135M's shape (30 layers, d_model 576, 9 heads, 3 key/value
//     heads, ffn 1536, vocabulary 49152, tied embeddings), or with --model llama3-8b-half of what one
//     rank of two computes at TP=2 (16 heads and 4 key/value heads of 128, ffn 7168, vocabulary
//     64128) as a model of its own: TP=2's step without its collectives,
//     bfloat16 activations, its matrices BF16 or 4-bit (kiln's affine format, float16 scales and
//     biases for groups of 32, or of 64 with Q4G64), at
//     each tensor-parallel size on cuda:0.. (LoadOptions::tensor_parallel): a --context-token prompt,
//     8 decode steps of warm-up (the first traces, records and builds the step's CUDA graphs),
//     then --tokens steps timed, greedy-free (a fixed token each step), of each --sessions count
//     decoding together (one step a token for all of them; tokens/s counts every session's).
//     --threads 1,2,4,8 (TP=1 only): that many sessions instead, each decoding on a thread of its
//     own on the one loaded model (`kiln bench-llm --threads`: a 16-token prompt, then --tokens
//     steps a session; tokens/s over all of them).
//
//     --prefill N: prefill instead, tokens/s of an N-token prompt into a fresh session (median of 3,
//     after one that compiles the step) and the time to its first token.
//
//   --cpu (either part): a dry run of the plumbing on CPU threads, 2 ranks, at a small shape (measures nothing).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "llm_sessions_bench.h"

#include "backend/cuda/plan_graph.h"

#include "kiln/kiln.h"
#include "llm/synthetic_model.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs fn(r) on a thread per rank; rethrows the first rank's error.
void on_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/* One rank per visible GPU (two CPU threads with --cpu); none, after saying so, with fewer than 2. */
std::vector<Device> rank_devices(const char* mode, bool cpu) {
  const int n = cpu ? 2 : cuda_device_count();
  if (n < 2) {
    std::fprintf(stderr, "bench_distributed %s: needs 2 GPUs or more, %d visible\n", mode, n);
    return {};
  }
  std::vector<Device> devices;
  for (int r = 0; r < n; ++r) devices.push_back(cpu ? Device::cpu() : Device::cuda(r));
  return devices;
}

/* An all-reduce's JSON line: `extra` holds its own fields; bus bandwidth as NCCL reports it. */
void print_all_reduce(const char* bench, const char* dtype, int n, int64_t bytes, const std::string& extra, double t) {
  const double algbw = static_cast<double>(bytes) / t / 1e9;
  std::printf(
      "{\"bench\":\"%s\",\"engine\":\"kiln\",\"ranks\":%d,\"dtype\":\"%s\",\"bytes\":%lld,%s,\"time_us\":%.3f,"
      "\"algbw_gbs\":%.3f,\"busbw_gbs\":%.3f}\n",
      bench, n, dtype, static_cast<long long>(bytes), extra.c_str(), t * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
  std::fflush(stdout);
}

int bench_all_sum(int64_t min_mib, int64_t max_mib, bool cpu) {
  const std::vector<Device> devices = rank_devices("all_sum", cpu);
  if (devices.empty()) return 1;
  const int n = static_cast<int>(devices.size());
  const std::vector<distributed::Group> groups = distributed::Group::local(devices);
  for (int64_t mib = min_mib; mib <= max_mib; mib *= 2) {
    const int64_t bytes = mib << 20, count = bytes / 4;
    const int iters = static_cast<int>(std::max<int64_t>(10, std::min<int64_t>(200, (int64_t{4} << 30) / bytes)));
    double elapsed = 0;
    on_ranks(n, [&](int r) {
      const distributed::Group& g = groups[static_cast<size_t>(r)];
      const Array x = to(ones({count}), devices[static_cast<size_t>(r)]);
      auto chain = [&](int k) {
        Array y = x;
        for (int i = 0; i < k; ++i) y = all_sum(y, g);
        return y;
      };
      chain(2).eval();  // warm-up: NCCL's connections and buffers; the ranks leave it together
      const auto start = Clock::now();
      chain(iters).eval();
      if (r == 0) elapsed = seconds_since(start);
    });
    print_all_reduce("all_sum", "float32", n, bytes, "\"iters\":" + std::to_string(iters), elapsed / iters);
  }
  return 0;
}

/* all_sum of decode-sized messages inside a compiled call's CUDA graph: one call holds `k` chained
   all_sums of `bytes` of bfloat16 (a Llama-3-8B decode step holds 64 of 8 KiB), between a copy in
   and a scale out, so every collective is an internal node the graph captures. time = wall time of
   `calls` calls, each evaluated, / (calls * k) on rank 0. */
int bench_all_sum_graph(int64_t min_kib, int64_t max_kib, bool cpu) {
  const std::vector<Device> devices = rank_devices("all_sum_graph", cpu);
  if (devices.empty()) return 1;
  const int n = static_cast<int>(devices.size());
  constexpr int k = 64, calls = 20;
  const std::vector<distributed::Group> groups = distributed::Group::local(devices);
  for (int64_t kib = min_kib; kib <= max_kib; kib *= 2) {
    const int64_t bytes = kib << 10, count = bytes / 2;
    double elapsed = 0;
    on_ranks(n, [&](int r) {
      const distributed::Group& g = groups[static_cast<size_t>(r)];
      const Array x = to(full({count}, 0.5, bfloat16), devices[static_cast<size_t>(r)]);
      auto step = compile([&g](const Array& in) {
        Array y = in + 0.0f;
        for (int i = 0; i < k; ++i) y = all_sum(y, g);
        return y * 0.5f;
      });
      for (int i = 0; i < 3; ++i) step(x).eval();  // traces, records, builds the graph
      const auto start = Clock::now();
      for (int i = 0; i < calls; ++i) step(x).eval();
      if (r == 0) elapsed = seconds_since(start);
    });
    print_all_reduce("all_sum_graph", "bfloat16", n, bytes, "\"per_call\":" + std::to_string(k), elapsed / (calls * k));
  }
  return 0;
}

/* The decode benchmark's model: a Llama-shaped model of random weights at the named shape
   (--model), or a small one for a dry run on the CPU. */
struct ModelShape {
  std::string name;  // llama3-8b-shape, smollm2-135m-shape, small-cpu-dry-run
  int layers;  // --layers: the 8B shape's layers (the others keep theirs)
  bool cpu;
};

llm::SyntheticModel synthetic(const std::string& type, const ModelShape& shape) {
  llm::SyntheticModel s;
  if (shape.cpu)
    s = {.n_layers = 2, .d_model = 256, .n_heads = 8, .n_kv_heads = 4, .ffn_dim = 512, .vocab_size = 1024};
  else if (shape.name == "smollm2-135m-shape")  // SmolLM2-135M's shape (the default model's)
    s = {.n_layers = 30,
         .d_model = 576,
         .n_heads = 9,
         .n_kv_heads = 3,
         .ffn_dim = 1536,
         .vocab_size = 49152,
         .context_length = 8192,
         .tied_embeddings = true};
  else  // Llama-3-8B's shape
    s = {.n_layers = shape.layers,
         .d_model = 4096,
         .n_heads = 32,
         .n_kv_heads = 8,
         .ffn_dim = 14336,
         .vocab_size = 128256,
         .context_length = 8192};
  if (shape.name == "llama3-8b-half-shape") {  // the weights one rank of two holds at TP=2, as one model
    s.head_dim = s.d_model / s.n_heads;
    s.n_heads /= 2, s.n_kv_heads /= 2, s.ffn_dim /= 2, s.vocab_size /= 2;
  }
  const bool g64 = type == "Q4G64";
  s.type = g64 ? "Q4" : type;
  s.group_size = g64 ? 64 : 32;
  return s;
}

/* The model on cuda:0 (its ranks on cuda:0.. with tp > 1), or on the CPU, computing in bfloat16. */
std::shared_ptr<llm::Model> load(const llm::SyntheticModel& s, int tp, bool cpu) {
  llm::LoadOptions o;
  o.device = cpu ? Device::cpu() : Device::cuda(0);
  o.dtype = bfloat16;
  o.tensor_parallel = tp;
  return llm::Model::load(llm::synthetic_model(s), o);
}

/* A fixed prompt of n tokens. */
std::vector<int32_t> prompt_of(int n, int vocab_size) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 7919 + 11) % vocab_size);
  return tokens;
}

/* One configuration of the decode benchmark: its JSON line on stdout. */
void decode_once(const std::string& type, int tp, int batch, int tokens, int context, const ModelShape& shape) {
  const bool cpu = shape.cpu;
  const llm::SyntheticModel s = synthetic(type, shape);
  auto t0 = Clock::now();
  double load_s = 0, warm_s = 0, decode_s = 0;
  size_t weight_bytes = 0;
  std::string products;  // what the quantized products multiply (QmmActivations)
  double launches = 0;  // kernels launched a step (a replayed CUDA graph counts its kernels)
  uint64_t interim = 0;  // timed steps that ran a fused region interpreted (its kernel compiling)
  double replays = 0;  // compiled calls replayed as CUDA graphs a step (one a rank when the step is one graph)
  {
    auto model = load(s, tp, cpu);
    load_s = seconds_since(t0);
    weight_bytes = model->weight_bytes();
    products = kQmmActivationNames[static_cast<int>(model->activations())];
    std::vector<std::unique_ptr<llm::Session>> sessions;
    std::vector<llm::Session*> all;
    for (int b = 0; b < batch; ++b) {
      sessions.push_back(std::make_unique<llm::Session>(model));
      all.push_back(sessions.back().get());
    }
    auto tokens_of = [&](int i, int mul, int add) {
      std::vector<std::vector<int32_t>> t;
      for (int b = 0; b < batch; ++b) t.push_back({(i * mul + add + b * 17) % s.vocab_size});
      return t;
    };
    const std::vector<int32_t> prompt = prompt_of(context, s.vocab_size);
    t0 = Clock::now();
    for (auto& session : sessions) session->append(prompt);
    for (int i = 0; i < 8; ++i) model->step(all, tokens_of(i, 31, 7));
    warm_s = seconds_since(t0);
    const Stats before = stats();
    const uint64_t replays_before = cpu ? 0 : cuda::graph_replays();
    t0 = Clock::now();
    for (int i = 0; i < tokens; ++i) model->step(all, tokens_of(i, 131, 5));
    decode_s = seconds_since(t0);
    const Stats after = stats();
    if (!cpu) replays = static_cast<double>(cuda::graph_replays() - replays_before) / tokens;
    launches = static_cast<double>(after.kernels_launched - before.kernels_launched) / tokens;
    interim = after.interim_calls - before.interim_calls;
  }
  clear_memory_cache();  // the next configuration starts with the GPUs' memory free
  std::printf(
      "{\"bench\":\"decode\",\"engine\":\"kiln\",\"model\":\"%s\",\"layers\":%d,\"type\":\"%s\","
      "\"activations\":\"bfloat16\",\"products\":\"%s\",\"tp\":%d,\"sessions\":%d,\"context\":%d,\"tokens\":%d,"
      "\"tokens_per_s\":%.3f,\"ms_per_step\":%.4f,\"weight_gb\":%.3f,\"load_s\":%.2f,\"warmup_s\":%.2f,"
      "\"launches_per_step\":%.1f,\"graph_replays_per_step\":%.1f,\"interim_steps\":%llu}\n",
      shape.name.c_str(), s.n_layers, type.c_str(), products.c_str(), tp, batch, context, tokens,
      static_cast<double>(tokens) * batch / decode_s, decode_s * 1e3 / tokens, weight_bytes / 1e9, load_s, warm_s,
      launches, replays, static_cast<unsigned long long>(interim));
  std::fflush(stdout);
}

/* Prefill of `prompt` tokens into a fresh session (as llama-bench's pp): its JSON line, the median
   of 3 timed prompts after one that traces and compiles the step's shape. */
void prefill_once(const std::string& type, int tp, int prompt, const ModelShape& shape) {
  const bool cpu = shape.cpu;
  const llm::SyntheticModel s = synthetic(type, shape);
  std::vector<double> times;
  {
    const std::vector<int32_t> tokens = prompt_of(prompt, s.vocab_size);
    llm::Session session(load(s, tp, cpu));
    session.append(tokens).eval();
    wait_for_kernels();  // timed prompts run the fused tier
    for (int r = 0; r < 3; ++r) {
      session.reset();
      const auto t0 = Clock::now();
      session.append(tokens).eval();
      times.push_back(seconds_since(t0));
    }
  }
  clear_memory_cache();
  std::sort(times.begin(), times.end());
  std::printf(
      "{\"bench\":\"prefill\",\"engine\":\"kiln\",\"model\":\"%s\",\"layers\":%d,\"type\":\"%s\","
      "\"activations\":\"bfloat16\",\"tp\":%d,\"prompt\":%d,\"tokens_per_s\":%.3f,\"ms_to_first_token\":%.3f}\n",
      shape.name.c_str(), s.n_layers, type.c_str(), tp, prompt, prompt / times[1], times[1] * 1e3);
  std::fflush(stdout);
}

/* Sessions on threads of their own, one loaded model: a JSON line a thread count. */
void decode_threads(const std::string& type, const std::vector<int>& threads, int tokens, const ModelShape& shape) {
  const bool cpu = shape.cpu;
  const llm::SyntheticModel s = synthetic(type, shape);
  auto model = load(s, 1, cpu);
  for (const cli::SessionsSpeed& r : cli::bench_sessions(model, {}, threads, tokens))
    std::printf(
        "{\"bench\":\"decode_threads\",\"engine\":\"kiln\",\"model\":\"%s\",\"layers\":%d,\"type\":\"%s\","
        "\"threads\":%d,\"tokens\":%d,\"tokens_per_s\":%.3f}\n",
        shape.name.c_str(), s.n_layers, type.c_str(), r.count, tokens, r.tokens_per_s);
  std::fflush(stdout);
}

int bench_decode(const std::vector<std::string>& tps, const std::vector<std::string>& types,
                 const std::vector<std::string>& batches, const std::vector<int>& threads, int tokens, int prefill,
                 int context, const ModelShape& shape) {
  const bool cpu = shape.cpu;
  if (!threads.empty()) {
    for (const std::string& type : types) decode_threads(type, threads, tokens, shape);
    return 0;
  }
  for (const std::string& type : types) {
    for (const std::string& tp_s : tps) {
      const int tp = std::atoi(tp_s.c_str());
      if (!cpu && tp > cuda_device_count()) {
        std::fprintf(stderr, "bench_distributed decode: skipping TP=%d (%d GPUs visible)\n", tp, cuda_device_count());
        continue;
      }
      if (prefill > 0) {
        prefill_once(type, tp, prefill, shape);
        continue;
      }
      for (const std::string& b : batches)
        decode_once(type, tp, std::max(1, std::atoi(b.c_str())), tokens, context, shape);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: bench_distributed all_sum [--min-mib M] [--max-mib M] [--cpu]\n"
      "       bench_distributed all_sum_graph [--cpu]\n"
      "       bench_distributed decode [--tp 1,2] [--types BF16,Q4] [--tokens N] [--model "
      "llama3-8b|llama3-8b-half|smollm2]"
      " [--layers N] [--sessions 1,4] [--context N]"
      " [--threads 1,2,4,8] [--prefill N] [--cpu]\n";
  if (argc < 2) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string mode = argv[1];
  int64_t min_mib = 1, max_mib = 1024;
  std::vector<std::string> tps = {"1", "2"}, types = {"BF16", "Q4"}, batches = {"1"};
  std::vector<int> threads;
  int tokens = 64, layers = 32, prefill = 0, context = 32;
  std::string model = "llama3-8b-shape";
  bool cpu = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cpu") {
      cpu = true;
      continue;
    }
    const std::string v = i + 1 < argc ? argv[++i] : "";
    if (a == "--min-mib")
      min_mib = std::atoll(v.c_str());
    else if (a == "--max-mib")
      max_mib = std::atoll(v.c_str());
    else if (a == "--tp")
      tps = split(v);
    else if (a == "--types")
      types = split(v);
    else if (a == "--tokens")
      tokens = std::atoi(v.c_str());
    else if (a == "--model")
      model = v == "smollm2"          ? "smollm2-135m-shape"
              : v == "llama3-8b"      ? "llama3-8b-shape"
              : v == "llama3-8b-half" ? "llama3-8b-half-shape"
                                      : "";
    else if (a == "--layers")
      layers = std::atoi(v.c_str());
    else if (a == "--sessions")
      batches = split(v);
    else if (a == "--prefill")
      prefill = std::atoi(v.c_str());
    else if (a == "--context")
      context = std::max(1, std::atoi(v.c_str()));
    else if (a == "--threads")
      for (const std::string& t : split(v)) threads.push_back(std::max(1, std::atoi(t.c_str())));
    else {
      std::fprintf(stderr, "bench_distributed: unknown option %s\n%s", a.c_str(), usage.c_str());
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "bench_distributed: --model is llama3-8b, llama3-8b-half or smollm2\n%s", usage.c_str());
    return 2;
  }
  try {
    if (mode == "all_sum") return bench_all_sum(std::max<int64_t>(1, min_mib), max_mib, cpu);
    if (mode == "all_sum_graph") return bench_all_sum_graph(8, 1024, cpu);
    if (mode == "decode")
      return bench_decode(tps, types, batches, threads, std::max(1, tokens), prefill, context,
                          ModelShape{cpu ? "small-cpu-dry-run" : model, std::max(1, layers), cpu});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_distributed %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::fputs(usage.c_str(), stderr);
  return 2;
}
