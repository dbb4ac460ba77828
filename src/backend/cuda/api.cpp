#include "backend/cuda/cuda.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"

namespace kiln::cuda {

bool available() { return driver() != nullptr; }

Device device_of(const std::vector<detail::Tensor>& ts) {
  for (auto& t : ts) {
    if (on_device(t)) return t.buffer->device();
  }
  return Device::cpu();
}

}  // namespace kiln::cuda
