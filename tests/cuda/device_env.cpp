// KILN_TEST_DEVICE=cuda runs a test executable with the GPU as the default device, so the
// per-op, compile and fuzz suites check the CUDA backend against the same float64
// references. Without a GPU those runs skip every test, saying why.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include "core/config.h"

namespace {

class DeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (kiln::config::choice(kiln::config::Knob::test_device) != "cuda") return;
    if (!kiln::cuda_available()) GTEST_SKIP() << "KILN_TEST_DEVICE=cuda but no CUDA device is available";
    kiln::set_default_device(kiln::Device::cuda(0));
  }
};

const auto* const registered = ::testing::AddGlobalTestEnvironment(new DeviceEnvironment);

}  // namespace
