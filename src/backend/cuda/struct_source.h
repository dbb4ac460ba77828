// The module source of a kernel of kernels/*.cuh that takes one argument struct (args.h): made
// alike by its launches (struct_launch.h) and by the build-time tool that precompiles the listed
// ones (build/precompile.cpp), so the embedded images are found by their source.
#pragma once

#include <string>

namespace kiln::cuda {

/* The include name of the device helpers every kernel module includes first (kernels/support.cuh). */
inline constexpr const char* kSupportHeader = "backend/cuda/kernels/support.cuh";

/* The module source whose kiln_kernel includes `header` and calls `call`(a) for an
   args::<args_name> a (e.g. "llm::rope<float>"); `attributes` go before the kernel's name (e.g.
   "__cluster_dims__(8, 1, 1)"). */
inline std::string struct_kernel_source(const std::string& header, const std::string& args_name,
                                        const std::string& call, const std::string& attributes = "") {
  return std::string("#include \"") + kSupportHeader + "\"\n#include \"" + header +
         "\"\n\nextern \"C\" __global__ void " + attributes + (attributes.empty() ? "" : " ") +
         "kiln_kernel(const kiln::cuda::args::" + args_name + " a) { kiln::cuda::" + call + "(a); }\n";
}

}  // namespace kiln::cuda
