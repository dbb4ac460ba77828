// Minimized programs from kiln_fuzz failures: compiled results must equal eager ones
// bit for bit. Each test names the seed that found it.
#include <gtest/gtest.h>

#include <cstring>

#include "fuzz/random_graph.h"

using namespace kiln;

namespace {

void expect_same(const Array& got, const Array& want, const char* what) {
  EXPECT_EQ(fuzz::compare_arrays(got, want, fuzz::Exactness::exact), "") << what;
}

}  // namespace

// Seed 1000093 (kiln_fuzz --seed 93, with the JIT): power(x, false) is 1 for every x, and
// the generated kernel's compiler, seeing that path, folded expm1f(1) at compile time to
// the correctly rounded 0x3fdbf0a9 where glibc computes 0x3fdbf0a8: one ulp apart from the
// eager kernel. Fixed by -frounding-math in the JIT flags (src/backend/cpu/jit.cpp).
TEST(FuzzRegression, JitDoesNotFoldLibmCallsOnProvenConstants) {
  auto fn = [](const std::vector<Array>& in) {
    Array one = power(in[0], false);  // integer power with exponent 0
    return std::vector<Array>{expm1(one), sin(astype(one, float64) * 3), exp(astype(in[0] * 0, float32) + 0.1f)};
  };
  Array x = array(std::vector<int32_t>{3, -2, 0, 7, 1, 5, 4, 2}, {1, 8});
  x.eval();
  auto want = fn({x});
  auto got = compile(fn)({x});
  for (size_t i = 0; i < want.size(); ++i) expect_same(got[i], want[i], ("output " + std::to_string(i)).c_str());
}
