// Differential fuzzing of compile against eager evaluation: KILN_TEST_FUZZ_COUNT random
// programs (300 by default) from KILN_TEST_FUZZ_SEED on (1 by default). A failure prints
// the seed and the program; `kiln_fuzz --seed S --count 1 --verbose` replays it.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cpu/jit.h"
#include "core/config.h"
#include "fuzz/random_graph.h"

using namespace kiln;

namespace {

uint64_t knob(config::Knob k) { return static_cast<uint64_t>(config::integer(k)); }

// Checks the seeds, then says how many outputs were compared by shape and dtype only, and
// fails when they pass fuzz::kMaxUncheckedShare of the comparisons.
void run_cases(uint64_t first, uint64_t count) {
  int failures = 0;
  uint64_t compared = 0, unchecked = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    fuzz::CheckResult r = fuzz::check(fuzz::generate(seed));
    compared += static_cast<uint64_t>(r.outputs_compared);
    unchecked += static_cast<uint64_t>(r.outputs_unchecked);
    if (!r.ok) {
      ADD_FAILURE() << "seed " << seed << ": " << r.failure;
      if (++failures >= 5) {
        ADD_FAILURE() << "stopping after 5 failing seeds";
        return;
      }
    }
  }
  const std::string report = fuzz::unchecked_report(unchecked, compared);
  std::printf("seeds %llu to %llu: %s\n", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(first + count - 1), report.c_str());
  ::testing::Test::RecordProperty("outputs_unchecked", std::to_string(unchecked));
  ::testing::Test::RecordProperty("outputs_compared", std::to_string(compared));
  EXPECT_LE(static_cast<double>(unchecked), fuzz::kMaxUncheckedShare * static_cast<double>(compared))
      << report << ": more than " << 100 * fuzz::kMaxUncheckedShare << "% went unchecked";
}

// The fused kernels' interpreter (no compiler): fast, so it gets the many cases.
class FuzzInterpreter : public ::testing::Test {
 protected:
  void SetUp() override { cpu::reset_jit_for_tests("/nonexistent/kiln-fuzz-c++"); }
  void TearDown() override { cpu::reset_jit_for_tests(""); }
};

}  // namespace

TEST(Fuzz, ProgramIsAPureFunctionOfTheSeed) {
  for (uint64_t seed : {1ull, 7ull, 123456789ull}) {
    fuzz::Program a = fuzz::generate(seed), b = fuzz::generate(seed);
    EXPECT_EQ(a.listing(), b.listing());
    auto x = a.make_inputs(), y = b.make_inputs();
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(fuzz::compare_arrays(x[i], y[i], fuzz::Exactness::exact), "");
  }
  EXPECT_NE(fuzz::generate(1).listing(), fuzz::generate(2).listing());
}

TEST(Fuzz, GeneratorCoversTheOps) {
  // Over a few hundred seeds every step kind shows up, and programs are not trivial.
  std::vector<int> kinds(fuzz::kStepKinds, 0);
  std::vector<int> nn(fuzz::nn_names().size(), 0), sel(fuzz::selection_names().size(), 0),
      rnd(fuzz::random_names().size(), 0);
  int reductions = 0, steps = 0, checked_nn = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    fuzz::Program p = fuzz::generate(seed);
    EXPECT_GE(p.steps.size(), 1u) << p.listing();
    EXPECT_GE(p.outputs.size(), 1u);
    EXPECT_LE(p.outputs.size(), 3u);
    steps += static_cast<int>(p.steps.size());
    reductions += p.has_reduction;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      auto& s = p.steps[i];
      ++kinds[static_cast<size_t>(s.kind)];
      auto fn = static_cast<size_t>(s.fn);
      if (s.kind == fuzz::StepKind::nn) {
        ++nn[fn];
        checked_nn += p.exactness[p.inputs.size() + i] != fuzz::Exactness::unreliable;
      }
      if (s.kind == fuzz::StepKind::selection) ++sel[fn];
      if (s.kind == fuzz::StepKind::random) ++rnd[fn];
    }
  }
  for (int k = 0; k < fuzz::kStepKinds; ++k) EXPECT_GT(kinds[static_cast<size_t>(k)], 0) << "step kind " << k;
  // Each language-model op, selection op and random op a few times: their operands' shapes
  // are narrow (4-D attention operands, weights with 32 to 256 columns, keys), so this is
  // what shows that the generator still finds them.
  for (size_t i = 0; i < nn.size(); ++i) EXPECT_GE(nn[i], 5) << fuzz::nn_names()[i];
  for (size_t i = 0; i < sel.size(); ++i) EXPECT_GE(sel[i], 5) << fuzz::selection_names()[i];
  for (size_t i = 0; i < rnd.size(); ++i) EXPECT_GE(rnd[i], 5) << fuzz::random_names()[i];
  EXPECT_GT(checked_nn, 100);  // and most are compared by value, not only by shape
  EXPECT_GT(reductions, 50);
  EXPECT_GT(steps, 300 * 8);
}

TEST_F(FuzzInterpreter, SeededCasesMatchEager) {
  run_cases(knob(config::Knob::test_fuzz_seed), knob(config::Knob::test_fuzz_count));
}

// Generated kernels through the system compiler: fewer cases, as each new fused
// region costs a compile (the disk cache makes reruns cheap).
TEST(Fuzz, SeededCasesMatchEagerWithJit) {
  run_cases(knob(config::Knob::test_fuzz_seed) + 1000000, knob(config::Knob::test_fuzz_jit_count));
}
