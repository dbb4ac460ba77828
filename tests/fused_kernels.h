// Tests of generated kernels (their results against eager, their caches) need compiled calls
// to use them from the first call: they set the knob benchmarks use, KILN_FUSED_KERNELS=wait.
#pragma once

#include <gtest/gtest.h>

#include <kiln/kiln.h>

namespace kt {

/* Sets a fused-kernel policy for one scope. */
class FusedKernelsScope {
 public:
  explicit FusedKernelsScope(kiln::FusedKernels p) : saved_(kiln::fused_kernels()) { kiln::set_fused_kernels(p); }
  ~FusedKernelsScope() { kiln::set_fused_kernels(saved_); }
  FusedKernelsScope(const FusedKernelsScope&) = delete;
  FusedKernelsScope& operator=(const FusedKernelsScope&) = delete;

 private:
  kiln::FusedKernels saved_;
};

/* For a whole test binary: `static auto* env = ::testing::AddGlobalTestEnvironment(new kt::WaitForFusedKernels);` */
class WaitForFusedKernels : public ::testing::Environment {
 public:
  void SetUp() override { kiln::set_fused_kernels(kiln::FusedKernels::wait); }
};

/* a and b (float32) hold the same bits: an interim call's results against the kernel's. */
inline void expect_bits_equal(const kiln::Array& a, const kiln::Array& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << "at " << i;
}

}  // namespace kt
