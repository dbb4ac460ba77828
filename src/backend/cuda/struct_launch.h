// Launching the kernels of kernels/*.cuh: each takes one argument struct (kernels/args.h),
// passed as the launch's words, so recordings and CUDA graphs hold it like any launch.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/nvrtc.h"

namespace kiln::cuda {

/* The module source whose kiln_kernel includes `header` and calls `call`(a) for an
   args::<args_name> a (e.g. "llm::rope<float>"). */
inline std::string struct_kernel_source(const std::string& header, const std::string& args_name,
                                        const std::string& call) {
  return "#include \"kiln/cuda_support.h\"\n#include \"" + header +
         "\"\n\nextern \"C\" __global__ void kiln_kernel(const kiln::cuda::args::" + args_name +
         " a) { kiln::cuda::" + call + "(a); }\n";
}

/* Launches `call`(args) on this thread's stream, compiled once per call string. A kernel that
   `waits_for_inputs` runs kiln_wait_for_inputs() before it reads what earlier kernels wrote. */
template <class Args>
void launch_struct(int device, const std::string& header, const char* args_name, const std::string& call,
                   const Args& a, unsigned grid, unsigned block, unsigned shared = 0, bool waits_for_inputs = false) {
  static_assert(sizeof(Args) % sizeof(long) == 0 && std::is_trivially_copyable_v<Args>);
  Kernel f = kernel(device, header + ":" + call, "kiln_kernel", [&] { return struct_kernel_source(header, args_name, call); });
  f.waits_for_inputs = waits_for_inputs;
  std::vector<long> words(sizeof(Args) / sizeof(long));
  std::memcpy(words.data(), &a, sizeof(Args));
  launch(device, f, grid, block, words, shared);
}

}  // namespace kiln::cuda
