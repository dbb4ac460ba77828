// Helpers for the threading stress tests: arrays that carry their expected float32
// values, deterministic random inputs, and a runner that starts threads together.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

namespace stress {

using kiln::Array;
using kiln::Shape;

constexpr int kThreads = 8;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

/* Small integers as floats: every op the tests use is then an exact float32 op that
   the reference below repeats in the same order. */
inline std::vector<float> random_floats(int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

/* An array with the values it must evaluate to. */
struct Ref {
  Array a;
  std::vector<float> v;
};

inline Ref leaf(const Shape& s, std::mt19937_64& rng) {
  auto v = random_floats(numel(s), rng);
  return {kiln::array(v, s), std::move(v)};
}

inline bool same_float(float x, float y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

/* Compares values without gtest macros in the hot loop; returns the first mismatch. */
inline std::string mismatch(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!same_float(got[i], want[i])) {
      return "at " + std::to_string(i) + ": " + std::to_string(got[i]) + " != " + std::to_string(want[i]);
    }
  }
  return {};
}

/* Runs body(t) on kThreads threads that pass a barrier first, so they really overlap.
   Failures inside threads are collected and reported by the caller's thread. */
inline void run_together(const std::function<void(int)>& body, int threads = kThreads) {
  std::barrier start(threads);
  std::vector<std::thread> ts;
  std::vector<std::string> errors(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        body(t);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : ts) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(errors[static_cast<size_t>(t)], "") << "thread " << t;
}

/* A failure message from a worker thread, thrown so run_together reports it. */
[[noreturn]] inline void fail_in_thread(const std::string& what) { throw std::runtime_error(what); }

}  // namespace stress
