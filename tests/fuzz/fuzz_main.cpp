// kiln_fuzz: checks compiled against eager results on random programs.
//   kiln_fuzz --seed S --count N [--verbose] [--interp] [--no-shapeless] [--minimize]
//   kiln_fuzz --seeds S1,S2,... (those seeds in that order, in one process)
//   kiln_fuzz --llm-fraction 1 (every program with inputs for the language-model ops)
// Exits 1 when any case fails; each failure prints its seed and program listing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/jit.h"
#include "fuzz/random_graph.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: kiln_fuzz [--seed S] [--count N] [--verbose] [--interp] [--no-shapeless] [--minimize]\n"
               "                 [--max-failures K] [--seeds A,B,..] [--llm-fraction F] [--max-steps M]\n"
               "  --seed S        first seed (default 1)\n"
               "  --count N       number of cases (default 1000)\n"
               "  --seeds A,B,..  these seeds, in this order (one process: caches carry over)\n"
               "  --verbose       print every program and its result\n"
               "  --interp        run fused regions in the interpreter instead of compiled kernels\n"
               "  --no-shapeless  skip the shapeless compile\n"
               "  --minimize      shrink each failing program and print the smallest that fails alike\n"
               "  --max-failures  stop after K failing seeds (default 20)\n"
               "  --llm-fraction F  share of programs with inputs for the language-model ops (default 0.4;\n"
               "                  1 to fuzz those ops alone; other values give other programs for a seed)\n"
               "  --max-steps M   longest program (default 25; another value gives other programs)\n");
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1, count = 1000;
  std::vector<uint64_t> seeds;
  int max_failures = 20;
  bool verbose = false, interp = false, minimize = false;
  kiln::fuzz::CheckOptions opts;
  kiln::fuzz::GenOptions gen;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seed")
      seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--count")
      count = std::strtoull(next(), nullptr, 10);
    else if (a == "--seeds") {
      for (const char* p = next(); *p;) {
        char* end = nullptr;
        seeds.push_back(std::strtoull(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) {
          usage();
          return 2;
        }
      }
    } else if (a == "--max-failures")
      max_failures = std::atoi(next());
    else if (a == "--llm-fraction")
      gen.llm_fraction = std::atof(next());
    else if (a == "--max-steps")
      gen.max_steps = std::max(gen.min_steps, std::atoi(next()));
    else if (a == "--verbose" || a == "-v")
      verbose = true;
    else if (a == "--interp")
      interp = true;
    else if (a == "--minimize")
      minimize = true;
    else if (a == "--no-shapeless")
      opts.shapeless = false;
    else {
      usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  opts.verbose = verbose;
  if (interp) kiln::cpu::reset_jit_for_tests("/nonexistent/kiln-fuzz-c++");
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint64_t> failed;
  uint64_t steps = 0, reductions = 0, compared = 0, inexact = 0, unchecked = 0, variants = 0, values = 0;
  if (seeds.empty()) {
    for (uint64_t s = seed; s < seed + count; ++s) seeds.push_back(s);
  }
  for (uint64_t s : seeds) {
    kiln::fuzz::Program p = kiln::fuzz::generate(s, gen);
    steps += p.steps.size();
    reductions += p.has_reduction;
    if (verbose) std::printf("%s", p.listing().c_str());
    kiln::fuzz::CheckResult r = kiln::fuzz::check(p, opts);
    compared += static_cast<uint64_t>(r.outputs_compared);
    inexact += static_cast<uint64_t>(r.outputs_inexact);
    unchecked += static_cast<uint64_t>(r.outputs_unchecked);
    variants += r.variant_checked;
    values += r.values_checked;
    if (verbose) std::printf("=> %s\n\n", r.ok ? "ok" : "FAILED");
    if (!r.ok) {
      failed.push_back(s);
      std::printf("FAILED seed %llu: %s\n", static_cast<unsigned long long>(s), r.failure.c_str());
      if (minimize) {
        std::string kind = kiln::fuzz::failure_kind(r.failure);
        kiln::fuzz::Program m = kiln::fuzz::minimize(p, [&](const kiln::fuzz::Program& q) {
          auto rq = kiln::fuzz::check(q, opts);
          return !rq.ok && kiln::fuzz::failure_kind(rq.failure) == kind;
        });
        std::printf("minimized (%s): %s\n", kind.c_str(), kiln::fuzz::check(m, opts).failure.c_str());
      }
      std::fflush(stdout);
      if (static_cast<int>(failed.size()) >= max_failures) {
        std::printf("stopping after %d failures\n", max_failures);
        break;
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "kiln_fuzz: %zu seeds from %llu to %llu, %zu failed, %llu steps, %llu with reductions, %llu output comparisons "
      "(%llu within tolerance but not bit-equal, %llu shape/dtype only), %llu programs replayed shapeless at other "
      "shapes, %llu on other values, %.1f s\n",
      seeds.size(), static_cast<unsigned long long>(seeds.front()), static_cast<unsigned long long>(seeds.back()),
      failed.size(), static_cast<unsigned long long>(steps), static_cast<unsigned long long>(reductions),
      static_cast<unsigned long long>(compared), static_cast<unsigned long long>(inexact),
      static_cast<unsigned long long>(unchecked), static_cast<unsigned long long>(variants),
      static_cast<unsigned long long>(values), secs);
  if (!failed.empty()) {
    std::printf("failing seeds:");
    for (auto s : failed) std::printf(" %llu", static_cast<unsigned long long>(s));
    std::printf("\n");
  }
  return failed.empty() ? 0 : 1;
}
