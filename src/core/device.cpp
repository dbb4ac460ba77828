#include <atomic>

#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

std::string Device::str() const { return type == Type::cpu ? "cpu" : "cuda:" + std::to_string(index); }

namespace {
std::atomic<int> g_default_cuda{-1};  // -1: CPU, else the CUDA ordinal
}

Device default_device() {
  int d = g_default_cuda.load(std::memory_order_relaxed);
  return d < 0 ? Device::cpu() : Device::cuda(d);
}

void set_default_device(Device d) {
  if (d.type == Device::Type::cuda) fail("set_default_device", "kiln was built without a CUDA backend");
  g_default_cuda.store(d.type == Device::Type::cpu ? -1 : d.index);
}

}  // namespace kiln
