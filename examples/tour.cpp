// The five-minute tour from README.md as one program: the snippets there are
// taken from the sections below, and this file is built with the examples and
// run by the test suite, so the README cannot drift from the API.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "tour: check failed at line %d: %s\n", __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int main() {
  using namespace kiln;

  // ---- 1. arrays ---------------------------------------------------------------
  Array a = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // copies host data
  Array r = arange(0.0, 6.0);  // float32: 0 1 2 3 4 5
  Array z = zeros({2, 3}, int32);
  Array one = array(1.5f);  // a 0-d array
  CHECK(a.shape() == (Shape{2, 3}) && a.dtype() == float32 && a.size() == 6);
  CHECK(r.shape(0) == 6 && z.nbytes() == 24 && one.ndim() == 0);

  // ---- 2. lazy ops, eval and stats -----------------------------------------------
  reset_stats();
  Array b = exp(a) * 2.0f + 1.0f;  // builds nodes; computes nothing yet
  Array c = reshape(r, {2, 3}) - b;  // reshape of a contiguous array is a view
  CHECK(!c.is_evaluated() && stats().kernels_launched == 0);

  eval({c});  // runs arange, exp, *, + and -: five kernels
  CHECK(c.is_evaluated() && b.is_evaluated());
  CHECK(stats().kernels_launched == 5);

  std::vector<float> v = c.to_vector<float>();  // evaluates if needed, then copies out
  CHECK(v.size() == 6 && v[0] < -6.43f && v[0] > -6.44f);  // 0 - (2e + 1)
  Array d = b + c;  // builds on evaluated arrays
  float first = slice(d, {{0, 1}, {0, 1}}).item<float>();  // item() evaluates too
  CHECK(first == 0.0f);  // b + (r - b) at [0,0]
  CHECK(stats().kernels_launched == 6);  // only the new add ran

  // ---- 3. dtypes -----------------------------------------------------------------
  Array i = array(std::vector<int32_t>{1, 2, 3}, {3});
  Array u = array(std::vector<uint8_t>{1, 2, 3}, {3});
  CHECK((i + 1).dtype() == int32);  // a C++ int does not widen int32
  CHECK((i * 0.5f).dtype() == float32);  // a float scalar makes it floating
  CHECK((i + u).dtype() == int32);  // mixed signedness: a signed type wide enough
  CHECK(sqrt(i).dtype() == float32);  // float math on integers computes in float32
  CHECK((i < 2).dtype() == bool_);
  CHECK(promote_types(float16, bfloat16) == float32);
  Array h = astype(a, float16);  // float16_t / bfloat16_t are storage types
  CHECK(h.to_vector<float>()[5] == 6.0f);
  CHECK(i.to_vector<double>() == (std::vector<double>{1, 2, 3}));  // converts on the way out

  // ---- 4. views and layout -------------------------------------------------------
  reset_stats();
  Array t = transpose(a);  // (3,2): shares a's buffer
  Array row = slice(a, {{1, 2}});  // a[1:2, :]
  Array col = broadcast_to(slice(a, {{}, {0, 1}}), {2, 3});
  eval({t, row, col});
  CHECK(stats().kernels_launched == 0);  // views launch no kernel
  CHECK(t.to_vector<float>() == (std::vector<float>{1, 4, 2, 5, 3, 6}));
  CHECK(col.to_vector<float>() == (std::vector<float>{1, 1, 1, 4, 4, 4}));

  // ---- 5. errors -------------------------------------------------------------------
  try {
    reshape(a, {4, 2});
    CHECK(false);
  } catch (const Error& e) {  // kiln::Error derives from std::invalid_argument
    std::printf("error as expected: %s\n", e.what());
    // [reshape] cannot reshape array of size 6 into shape (4,2)
  }

  // ---- 6. threads ----------------------------------------------------------------
  reset_stats();
  Array shared = exp(arange(0.0, 1000.0) / 1000.0f);  // three nodes, shared below
  std::vector<Array> results(4);
  std::vector<std::thread> workers;
  for (int k = 0; k < 4; ++k) {
    workers.emplace_back([&, k] {
      results[k] = shared * static_cast<float>(k);
      results[k].eval();  // threads race to evaluate `shared`; it is computed once
    });
  }
  for (auto& w : workers) w.join();
  CHECK(stats().kernels_launched == 3 + 4);  // arange, divide, exp once; a multiply per thread
  CHECK(results[3].to_vector<float>()[0] == 3.0f);

  // ---- 7. compile ----------------------------------------------------------------
  auto gelu_ish = compile([](const Array& x, const Array& y) { return x * sigmoid(1.702f * x) + y; });
  Array x1 = arange(0.0, 8.0), y1 = ones({8});
  reset_stats();
  Array o1 = gelu_ish(x1, y1);  // first call for these shapes: traces, fuses, compiles
  Array o2 = gelu_ish(y1, x1);  // same signature: replays without tracing
  eval({o1, o2});
  CHECK(stats().traces == 1 && stats().cache_hits == 1);
  float eager = (sigmoid(array(1.702f)) * 1.0f).item<float>();  // o2[0] computed without compile
  CHECK(std::fabs(o2.to_vector<float>()[0] - eager) < 1e-6f);

  std::printf("tour ok\n");
  return 0;
}
