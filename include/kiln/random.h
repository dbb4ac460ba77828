// Counter-based random numbers: Threefry-2x32 (20 rounds) under an explicit key, with
// the bits of MLX's random.key / split / bits and of JAX's threefry with
// jax_threefry_partitionable off (docs/random.md). A key is a uint32 array of shape (2);
// the same key gives the same numbers on every device, eagerly and compiled.
#pragma once

#include <cstdint>

#include "kiln/array.h"

namespace kiln::random {

/* The key for a seed: [seed >> 32, seed & 0xffffffff] (uint32, shape (2)). */
Array key(uint64_t seed);
/* num new keys from one (uint32, shape (num, 2)); num >= 1. */
Array split(const Array& key, int num = 2);
/* Random uint32 words of the given shape. */
Array bits(const Shape& shape, const Array& key);
/* Uniform in [low, high) for a floating dtype: the top bits of each word fill the
   mantissa (as many as the dtype has; two words an element for float64). */
Array uniform(const Shape& shape, const Array& key, Dtype dtype = float32, double low = 0, double high = 1);
/* Normal with mean loc and standard deviation scale, by Box-Muller from two uniforms an
   element (computed in float32, or float64 for float64). */
Array normal(const Shape& shape, const Array& key, Dtype dtype = float32, double loc = 0, double scale = 1);
/* True with probability p, elementwise (bool, shape of p). */
Array bernoulli(const Array& p, const Array& key);
/* Draws indices from softmax(logits) along axis (Gumbel-max over the logits). Result int32, axis removed. */
Array categorical(const Array& logits, const Array& key, int axis = -1);

}  // namespace kiln::random
