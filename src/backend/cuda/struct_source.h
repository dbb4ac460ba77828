// The module source of a kernel of kernels/*.cuh that takes one argument struct (args.h): made
// alike by its launches (struct_launch.h) and by the build-time tool that precompiles the listed
// ones (build/precompile.cpp), so the embedded images are found by their source.
#pragma once

#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

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

/* The module sources of a list of such kernels (precompiled.list), a line each as
   header|struct|call|attributes ('#' starts a comment). Throws std::runtime_error on another line. */
inline std::vector<std::string> listed_kernel_sources(std::istream& in) {
  std::vector<std::string> sources;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    for (size_t at = 0;;) {
      const size_t bar = line.find('|', at);
      f.push_back(line.substr(at, bar - at));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    if (f.size() != 4) throw std::runtime_error("not header|struct|call|attributes: " + line);
    sources.push_back(struct_kernel_source(f[0], f[1], f[2], f[3]));
  }
  return sources;
}

}  // namespace kiln::cuda
