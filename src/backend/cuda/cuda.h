// What the rest of kiln calls in the CUDA backend (built when KILN_WITH_CUDA is defined).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kiln/device.h"

namespace kiln {
class Primitive;
}

namespace kiln::cuda {

/* Whether a CUDA driver and at least one device are present (checked once). */
bool available();
int device_count();
/* Runs a primitive on the device: uploads host inputs, waits for inputs written on other
   streams, allocates and computes the outputs on this thread's stream. */
void eval(Device device, const Primitive& prim, std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out);
/* The tensor on the device (uploads host data; owned host buffers once). */
detail::Tensor to_device(const detail::Tensor& t, int device);
/* The tensor's data on the host, row-major (waits for the device). */
detail::Tensor to_host(const detail::Tensor& t);
/* Copies host-side every device-resident tensor (for CPU kernels). */
void ensure_host(std::vector<detail::Tensor>& ts);
/* Waits for the work this thread queued on the device. */
void synchronize(int device);
/* The device of the first device-resident tensor, else the CPU. */
Device device_of(const std::vector<detail::Tensor>& ts);

}  // namespace kiln::cuda
