// Kernels compiled at build time by NVRTC (build/precompile.cpp), as kiln compiles every kernel
// at run time, and built into kiln: the elementwise interpreter (kernels/interp.cuh; cubins and
// PTX that the driver compiles for newer GPUs) and the library kernels of
// precompiled.list (cubins), so that neither waits for NVRTC at its first launch.
#pragma once

#include <cstddef>
#include <string>

namespace kiln::cuda::embedded {

struct PrecompiledImage {
  const char* name;  // the kernel's name in the module
  const char* source;  // the module's source, as kiln makes it at run time
  const char* arch;  // "sm_90", or "compute_90" for PTX
  int major, minor;  // the architecture's compute capability
  bool ptx;  // a PTX text (NUL-terminated): runs on that capability and newer
  const unsigned char* bytes;
  size_t size;
};

extern const PrecompiledImage precompiled_images[];
extern const size_t precompiled_image_count;
/* Why there are none ("" when there are): the build found no NVRTC. */
extern const char precompiled_unavailable[];

/* The image of kernel `name` of `source` that a device of capability major.minor runs: a cubin
   of its major version and no newer minor one, else PTX of an older or equal capability (the
   driver compiles it once and caches it); null when there is none. */
const PrecompiledImage* precompiled_image(const std::string& name, const std::string& source, int major, int minor);

/* The interpreter's kernel name and the source every image of it is compiled from. */
inline constexpr const char* kInterpKernel = "kiln_interp";
inline constexpr const char* kInterpSource = "#include \"backend/cuda/kernels/interp.cuh\"\n";

}  // namespace kiln::cuda::embedded
