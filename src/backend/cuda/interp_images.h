// The interpreter kernel (kernels/interp.cuh) as module images, made at build time by NVRTC
// (build/precompile_interp.cpp) and compiled into kiln: cubins for given architectures and
// PTX that the driver compiles for newer ones.
#pragma once

#include <cstddef>

namespace kiln::cuda::embedded {

struct InterpImage {
  const char* arch;  // "sm_90", or "compute_90" for PTX
  int major, minor;  // the architecture's compute capability
  bool ptx;  // a PTX text (NUL-terminated): runs on that capability and newer
  const unsigned char* bytes;
  size_t size;
};

extern const InterpImage interp_images[];
extern const size_t interp_image_count;
/* Why there are none ("" when there are): the build found no NVRTC. */
extern const char interp_unavailable[];

/* The interpreter's kernel name and the source every image is compiled from. */
inline constexpr const char* kInterpKernel = "kiln_interp";
inline constexpr const char* kInterpSource = "#include \"backend/cuda/kernels/interp.cuh\"\n";

}  // namespace kiln::cuda::embedded
