// How many GPUs kiln can use. A CUDA backend, when linked in, defines
// kiln_cuda_device_count; without one the weak reference stays null.
#include "kiln/executable.h"

extern "C" int kiln_cuda_device_count(void) __attribute__((weak));

namespace kiln {

int cuda_device_count() { return kiln_cuda_device_count ? kiln_cuda_device_count() : 0; }

}  // namespace kiln
