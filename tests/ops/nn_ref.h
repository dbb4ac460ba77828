// Reference helpers for the language-model op tests: float64 unpacking of MLX's
// quantized format and a comparison scaled by the magnitude of the terms.
#pragma once

#include <sstream>

#include "reference.h"

namespace kt {

/* Value i of a row packed as a bit stream of `bits`-bit values from the low bits up. */
inline uint32_t unpack_value(const std::vector<uint32_t>& packed, size_t row_words, size_t row, size_t i, int bits) {
  uint32_t v = 0;
  for (int b = 0; b < bits; ++b) {
    size_t bit = i * static_cast<size_t>(bits) + static_cast<size_t>(b);
    uint32_t word = packed[row * row_words + bit / 32];
    v |= ((word >> (bit % 32)) & 1u) << b;
  }
  return v;
}

/* dequantize in float64 from packed words and float scales/biases: rows x k values. */
inline std::vector<double> dequantize_ref(const std::vector<uint32_t>& packed, const std::vector<double>& scales,
                                          const std::vector<double>& biases, size_t rows, size_t k, int group_size,
                                          int bits) {
  std::vector<double> out(rows * k);
  size_t words = k * static_cast<size_t>(bits) / 32, groups = k / static_cast<size_t>(group_size);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < k; ++i) {
      size_t g = r * groups + i / static_cast<size_t>(group_size);
      out[r * k + i] = scales[g] * unpack_value(packed, words, r, i, bits) + biases[g];
    }
  }
  return out;
}

/* Expects |got - want| <= tol * scale[i] everywhere (NaN where want is NaN). */
inline void expect_within(const Array& got, const std::vector<double>& want, const std::vector<double>& scale,
                          double tol, const std::string& ctx) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int reported = 0;
  for (size_t i = 0; i < g.size() && reported < 5; ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(g[i]) : std::fabs(g[i] - want[i]) <= tol * scale[i];
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " got " << g[i] << " want " << want[i] << " (allowed "
                    << tol * scale[i] << ")";
      ++reported;
    }
  }
}

/* Expects the two arrays to hold the same bits (compiled against eager). */
inline void expect_same_bits(const Array& a, const Array& b, const std::string& ctx) {
  ASSERT_EQ(a.shape(), b.shape()) << ctx;
  ASSERT_EQ(a.dtype(), b.dtype()) << ctx;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    bool same = (std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i];
    if (!same) {
      ADD_FAILURE() << ctx << ": element " << i << " differs: " << x[i] << " vs " << y[i];
      return;
    }
  }
}

inline std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace kt
