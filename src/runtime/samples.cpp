// Deterministic sample inputs and parameters (splitmix64), so examples and tests
// give the same numbers on every machine.
#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/tensor.h"
#include "kiln/executable.h"
#include "kiln/ops.h"

namespace kiln {

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0; }
};

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Array filled(const char* op, Dtype dtype, const Shape& shape, Rng& rng, double scale, double offset) {
  // Drawn as 8-byte values first, so the shape must fit as float64; too much memory is a kiln::Error.
  detail::check_shape(op, shape, float64);
  const int64_t n = detail::checked_size(op, shape);
  if (is_floating(dtype)) {
    std::vector<double> v;
    detail::checked_resize(op, v, n);
    for (auto& x : v) x = offset + scale * rng.uniform();
    return astype(array(v, shape), dtype);
  }
  std::vector<int64_t> v;
  detail::checked_resize(op, v, n);
  for (auto& x : v) x = static_cast<int64_t>(rng.next() % (dtype == bool_ ? 2 : 4));
  return astype(array(v, shape), dtype);
}

}  // namespace

std::map<std::string, Array> sample_inputs(const Graph& g, uint64_t seed, int64_t symbol_size) {
  std::map<std::string, Array> out;
  const auto bounds = g.symbol_bounds();
  for (const GraphNode* n : g.inputs()) {
    Shape s;
    for (const Dim& d : n->type.dims) {
      const int64_t b = d.symbolic() ? bounds.at(d.symbol) : 0;
      s.push_back(d.symbolic() ? (b > 0 && b < symbol_size ? b : symbol_size) : d.size);
    }
    Rng rng{hash_name(n->outputs[0], seed)};
    Array a = filled("sample_inputs", n->type.dtype, s, rng, 1.0, 0.0);
    a.eval();
    out[n->outputs[0]] = a;
  }
  return out;
}

std::map<std::string, Array> sample_params(const Graph& g, uint64_t seed) {
  std::map<std::string, Array> out;
  auto add = [&](const Graph& x) {
    for (const GraphNode* n : x.params()) {
      if (out.count(n->outputs[0])) continue;
      Shape s;
      for (const Dim& d : n->type.dims) s.push_back(d.size);
      Rng rng{hash_name(n->outputs[0], seed)};
      bool vec = s.size() <= 1;
      double scale = vec ? 0.1 : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s[0], 1)));
      Array a = filled("sample_params", n->type.dtype, s, rng, scale, vec ? 1.0 : 0.0);
      a.eval();
      out[n->outputs[0]] = a;
    }
  };
  for (const Graph& sub : g.subgraphs) add(sub);
  add(g);
  return out;
}

}  // namespace kiln
