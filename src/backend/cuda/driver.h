// The CUDA driver API loaded with dlopen (so a CPU-only machine runs the same binary),
// the devices, their primary contexts and what kiln reads about them, and driver errors.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

namespace kiln::cuda {

constexpr int kMaxDevices = 16;

// Driver entry points, resolved once through cuGetProcAddress.
struct Driver {
#define KILN_CU_FN(name) decltype(&::name) name = nullptr;
#include "backend/cuda/driver_fns.def"
#undef KILN_CU_FN
  decltype(&::cuGraphAddDependencies) cuGraphAddDependencies = nullptr;  // CUDA 12.3+; null before
};

/* The loaded driver, or null when there is none (no libcuda, no device, init failed). */
const Driver* driver();
/* Why driver() is null, for messages. */
const std::string& unavailable_reason();
int device_count();
/* The loaded driver; throws kiln::Error naming the reason when there is none. */
const Driver& drv();
/* Throws kiln::Error "[cuda] <what>: <driver message>" unless r is CUDA_SUCCESS. */
void check(CUresult r, const char* what);

struct DeviceInfo {
  int major = 0, minor = 0, sms = 0;
  int shared_optin = 0;  // bytes of shared memory a block may ask for beyond the default 48 KB
  int shared_per_sm = 0;  // bytes of shared memory of an SM, for all its blocks
  int threads_per_sm = 0;  // resident threads an SM holds
  int l2_bytes = 0;  // the L2 cache
  size_t memory_bytes = 0;  // the device's memory
  std::string name;
  std::string arch() const { return "sm_" + std::to_string(major) + std::to_string(minor); }
};
const DeviceInfo& device_info(int device);
/* Dynamic shared memory a block gets without asking (more needs the kernel's opt-in). */
constexpr unsigned kDefaultSharedBytes = 48 * 1024;

/* Makes the device's primary context current on this thread. */
void bind(int device);
/* The same without throwing, for destructors: false when the context cannot be made current. */
bool try_bind(int device) noexcept;
/* Forgets which context this thread has current, so the next bind sets it again: after a library
   call (NCCL) that may have made another device's context current. */
void forget_bound() noexcept;

}  // namespace kiln::cuda
