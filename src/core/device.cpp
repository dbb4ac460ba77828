#include <atomic>

#include "kiln/device.h"
#include "kiln/executable.h"
#include "kiln/error.h"
#include "core/thread_device.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/cuda.h"
#include "backend/cuda/driver.h"
#endif

namespace kiln {

std::string Device::str() const { return type == Type::cpu ? "cpu" : "cuda:" + std::to_string(index); }

namespace {
std::atomic<int> g_default_cuda{-1};  // -1: CPU, else the CUDA ordinal
std::atomic<bool> g_tf32{false};  // atomic; TF32 matmuls off unless allowed
constexpr int kProcessDefault = -2;
thread_local int t_default = kProcessDefault;  // a ThreadDefaultDevice's: -1 CPU, else the CUDA ordinal
}  // namespace

detail::ThreadDefaultDevice::ThreadDefaultDevice(Device d) : saved_(t_default) {
  t_default = d.type == Device::Type::cpu ? -1 : d.index;
}
detail::ThreadDefaultDevice::~ThreadDefaultDevice() { t_default = saved_; }

bool cuda_available() {
#ifdef KILN_WITH_CUDA
  return cuda::available();
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef KILN_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef KILN_WITH_CUDA
  if (cuda::available()) return "";
  const std::string why = cuda::unavailable_reason();
  return "this build has the CUDA backend, but " + (why.empty() ? std::string("no CUDA device was found") : why);
#else
  return "this build has no CUDA backend (configure with the CUDA toolkit installed, or -DKILN_CUDA=ON)";
#endif
}

void set_cuda_matmul_allow_tf32(bool allow) { g_tf32.store(allow); }
bool cuda_matmul_allow_tf32() { return g_tf32.load(); }

Device default_device() {
  const int d = t_default != kProcessDefault ? t_default : g_default_cuda.load(std::memory_order_relaxed);
  return d < 0 ? Device::cpu() : Device::cuda(d);
}

void set_default_device(Device d) {
  if (d.type == Device::Type::cuda) {
#ifdef KILN_WITH_CUDA
    if (!cuda::available()) fail("set_default_device", "no CUDA device is available");
    if (d.index < 0 || d.index >= cuda::device_count()) fail("set_default_device", "no CUDA device ", d.index);
#else
    fail("set_default_device", "kiln was built without a CUDA backend");
#endif
  }
  g_default_cuda.store(d.type == Device::Type::cpu ? -1 : d.index);
}

}  // namespace kiln
