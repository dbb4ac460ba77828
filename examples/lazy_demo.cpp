// A short tour of lazy evaluation: ops build a graph, eval runs it.
#include <cstdio>

#include <kiln/kiln.h>

int main() {
  using namespace kiln;
  reset_stats();
  Array x = reshape(arange(0.0, 12.0, 1.0, float32), {3, 4});
  Array y = sigmoid(x * 0.5f) + sum(x, {1}, /*keepdims=*/true) / 10.0f;
  std::printf("built a graph: shape (%lld,%lld) %s, evaluated=%s, kernels launched so far=%llu\n",
              static_cast<long long>(y.shape(0)), static_cast<long long>(y.shape(1)), dtype_name(y.dtype()),
              y.is_evaluated() ? "yes" : "no", static_cast<unsigned long long>(stats().kernels_launched));
  eval({y});
  std::printf("after eval: evaluated=%s, kernels launched=%llu, arrays materialized=%llu\n",
              y.is_evaluated() ? "yes" : "no", static_cast<unsigned long long>(stats().kernels_launched),
              static_cast<unsigned long long>(stats().arrays_materialized));
  auto v = y.to_vector<float>();
  std::printf("y[0,:] = %.4f %.4f %.4f %.4f\n", v[0], v[1], v[2], v[3]);
  return 0;
}
