// Batched decode (sessions joined in one Model::step, the weights read once for all) and
// independent sessions on many threads at once (no lock around the forward pass).
#include "llm_sessions_bench.h"

#include <barrier>
#include <chrono>
#include <exception>
#include <random>
#include <thread>

#include <kiln/compile.h>

namespace kiln::cli {
namespace {

using llm::Model;
using llm::Session;
constexpr int kPromptTokens = 16;

std::vector<int32_t> random_tokens(std::mt19937& rng, int vocab, int n) {
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = pick(rng);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double batched(const std::shared_ptr<Model>& model, int sessions, int tokens) {
  std::mt19937 rng(7);
  const int vocab = model->config().vocab_size;
  std::vector<Session> owned;
  owned.reserve(static_cast<size_t>(sessions));
  std::vector<Session*> all;
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < sessions; ++b) {
    owned.emplace_back(model);
    all.push_back(&owned.back());
    prompts.push_back(random_tokens(rng, vocab, kPromptTokens));
  }
  auto one_each = [&] {
    std::vector<std::vector<int32_t>> t;
    for (int b = 0; b < sessions; ++b) t.push_back(random_tokens(rng, vocab, 1));
    return t;
  };
  model->step(all, prompts);
  model->step(all, one_each());  // traces the decode shape before the clock starts
  wait_for_kernels();  // and the clock times the fused tier, not the interpreter
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < tokens; ++i) model->step(all, one_each());
  return sessions * tokens / seconds_since(t0);
}

double threaded(const std::shared_ptr<Model>& model, int threads, int tokens) {
  const int vocab = model->config().vocab_size;
  // Every session prefilled before the clock starts; it starts as the barrier opens (read after
  // it, a thread woken late would miss the others' first steps).
  auto t0 = std::chrono::steady_clock::now();
  auto start_clock = [&t0]() noexcept { t0 = std::chrono::steady_clock::now(); };
  std::barrier start(threads + 1, start_clock);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto decode = [&](int t) {
    bool started = false;
    try {
      std::mt19937 rng(static_cast<uint32_t>(t + 1));
      Session s(model);
      s.append(random_tokens(rng, vocab, kPromptTokens));
      s.append(random_tokens(rng, vocab, 1));
      wait_for_kernels();  // the clock times the fused tier, not the interpreter
      started = true;
      start.arrive_and_wait();
      for (int i = 0; i < tokens; ++i) s.append(random_tokens(rng, vocab, 1));
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
      if (!started) start.arrive_and_drop();  // the others start without this one
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(decode, t);
  start.arrive_and_wait();
  for (auto& t : pool) t.join();
  const double secs = seconds_since(t0);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return threads * tokens / secs;
}

}  // namespace

std::vector<SessionsSpeed> bench_sessions(const std::shared_ptr<Model>& model, const std::vector<int>& batches,
                                          const std::vector<int>& threads, int tokens) {
  std::vector<SessionsSpeed> out;
  for (int b : batches) out.push_back({"batch", b, batched(model, b, tokens)});
  for (int t : threads) out.push_back({"threads", t, threaded(model, t, tokens)});
  return out;
}

}  // namespace kiln::cli
