// Where an array lives.
#pragma once

#include <string>

namespace kiln {

struct Device {
  enum class Type { cpu, cuda };
  Type type = Type::cpu;
  int index = 0;

  static Device cpu() { return {Type::cpu, 0}; }
  static Device cuda(int i = 0) { return {Type::cuda, i}; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

/* The device new arrays are placed on (per process; CPU unless changed). Arrays made
   from host data keep it on the host until a device op uses them (then it is copied
   once); ops run on the device of their first input. */
Device default_device();
void set_default_device(Device d);

/* Whether kiln was built with CUDA and finds a driver and a GPU (false otherwise:
   then only the CPU is used, and Device::cuda throws where it would be used). */
bool cuda_available();
/* Number of usable CUDA devices (0 without CUDA). */
int cuda_device_count();
/* Allow TF32 tensor-core math in float32 matmuls on the GPU (off by default: float32
   products then round like float32 arithmetic). */
void set_cuda_matmul_allow_tf32(bool allow);
bool cuda_matmul_allow_tf32();

class Array;
/* The array's data on `device` (evaluates it, then copies between host and device). */
Array to(const Array& a, Device device);

}  // namespace kiln
