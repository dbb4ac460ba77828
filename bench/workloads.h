// The workloads the benchmarks share (bench_compile, compile_latency, gpu_peers; mirrored
// in bench/gpu_peers.py), written once so every harness times the same formulas.
#pragma once

#include <kiln/kiln.h>

namespace bench {

using kiln::Array;

// GELU written out in elementwise ops (the tanh form), as kiln::gelu_tanh computes it.
inline Array gelu_ops(const Array& x) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + kiln::tanh(k * (x + 0.044715f * x * x * x)));
}
inline Array swiglu(const Array& a, const Array& b) { return a * kiln::sigmoid(a) * b; }
inline Array rmsnorm(const Array& x, const Array& w, float eps) {
  return x * kiln::rsqrt(kiln::mean(x * x, {-1}, true) + eps) * w;
}
inline Array softmax_rows(const Array& x) { return kiln::softmax(x, {-1}); }
inline Array layernorm(const Array& x, const Array& g, const Array& b) {
  Array m = kiln::mean(x, {-1}, true);
  Array d = x - m;
  return d * kiln::rsqrt(kiln::mean(d * d, {-1}, true) + 1e-5f) * g + b;
}
// Ten ops: four sin, three multiply, three add.
inline Array chain10(const Array& x) {
  Array y = kiln::sin(x);
  y = y * 1.5f;
  y = y + x;
  y = kiln::sin(y);
  y = y * x;
  y = y + 0.25f;
  y = kiln::sin(y);
  y = y * 2.0f;
  y = y + x;
  return kiln::sin(y);
}

// 32 cheap elementwise ops over two inputs, so the kernel is short and the host path of a
// compiled call dominates.
inline Array graph32(const Array& x, const Array& y) {
  Array a = x + y, b = x * y;  // 2
  for (int i = 0; i < 5; ++i) {
    a = a * b + 0.5f;  // 2
    b = kiln::maximum(b - a, x);  // 2
    a = kiln::minimum(a, y) - b;  // 2
  }
  return a;  // 2 + 5 * 6 = 32 ops
}

}  // namespace bench
