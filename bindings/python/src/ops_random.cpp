// kiln.random: Threefry keys and the distributions over them (include/kiln/random.h). The
// registry's random_<name> rows are kiln.random.<name> here.
#include "ops_registry.h"

namespace kpy {

void bind_random_bits(nb::module_& m) {
  nb::module_ r = random_module(m);
  r.def("key", &kiln::random::key, "seed"_a, "The key for a seed: uint32 [seed >> 32, seed & 0xffffffff].");
  r.def(
      "bits", [](const ShapeLike& shape, const kiln::Array& key) { return kiln::random::bits(shape.dims, key); },
      "shape"_a, "key"_a, "Random uint32 words of the given shape.");
}

void bind_random_split(nb::module_& m) {
  random_module(m).def("split", &kiln::random::split, "key"_a, "num"_a = 2, "num new keys from one: uint32 (num, 2).");
}

void bind_random_uniform(nb::module_& m) {
  random_module(m).def(
      "uniform",
      [](const ShapeLike& shape, const kiln::Array& key, kiln::Dtype dtype, double low, double high) {
        return kiln::random::uniform(shape.dims, key, dtype, low, high);
      },
      "shape"_a, "key"_a, "dtype"_a = kiln::float32, "low"_a = 0.0, "high"_a = 1.0, "Uniform in [low, high).");
}

void bind_random_normal(nb::module_& m) {
  random_module(m).def(
      "normal",
      [](const ShapeLike& shape, const kiln::Array& key, kiln::Dtype dtype, double loc, double scale) {
        return kiln::random::normal(shape.dims, key, dtype, loc, scale);
      },
      "shape"_a, "key"_a, "dtype"_a = kiln::float32, "loc"_a = 0.0, "scale"_a = 1.0,
      "Normal with mean loc and standard deviation scale.");
}

void bind_random_bernoulli(nb::module_& m) {
  random_module(m).def(
      "bernoulli", [](const ArrayLike& p, const kiln::Array& key) { return kiln::random::bernoulli(p.get(), key); },
      "p"_a, "key"_a, "True with probability p, elementwise (bool, p's shape).");
}

void bind_random_categorical(nb::module_& m) {
  random_module(m).def(
      "categorical",
      [](const ArrayLike& logits, const kiln::Array& key, int axis) {
        return kiln::random::categorical(logits.get(), key, axis);
      },
      "logits"_a, "key"_a, "axis"_a = -1, "Indices drawn from softmax(logits) along axis (int32, axis removed).");
}

}  // namespace kpy
