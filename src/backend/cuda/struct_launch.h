// Launching kernels that take one argument struct (kernels/args.h), passed as the launch's
// words, so recordings and CUDA graphs hold it like any launch: the kernels of kernels/*.cuh
// (launch_struct) and the generated ones, whose struct ends in one record per operand
// (OperandArgs).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/codegen.h"
#include "backend/cuda/kernels/args.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/struct_source.h"

namespace kiln::cuda {

/* The struct's bytes as launch words. */
template <class Args>
std::vector<long> struct_words(const Args& a) {
  static_assert(sizeof(Args) % sizeof(long) == 0 && std::is_trivially_copyable_v<Args>);
  std::vector<long> words(sizeof(Args) / sizeof(long));
  std::memcpy(words.data(), &a, sizeof(Args));
  return words;
}

/* Launches `call`(args) on this thread's stream, compiled once per call string. A kernel that
   `waits_for_inputs` runs kiln_wait_for_inputs() before it reads what earlier kernels wrote. */
template <class Args>
void launch_struct(int device, const std::string& header, const char* args_name, const std::string& call, const Args& a,
                   unsigned grid, unsigned block, unsigned shared = 0, bool waits_for_inputs = false,
                   const std::string& attributes = "") {
  Kernel f = kernel(device, header + ":" + attributes + call, "kiln_kernel",
                    [&] { return struct_kernel_source(header, args_name, call, attributes); });
  f.waits_for_inputs = waits_for_inputs;
  launch(device, f, grid, block, struct_words(a), shared);
}

/* The argument block of a generated kernel, args::WithOperands<Head, Operand, N>, for an
   operand count N known at run time: the host fills head and one Operand each. */
template <class Head, class Operand>
struct OperandArgs {
  static_assert(std::is_trivially_copyable_v<Head> && std::is_trivially_copyable_v<Operand>);
  static_assert(sizeof(Head) % sizeof(long) == 0 && sizeof(Operand) % sizeof(long) == 0);
  using Two = args::WithOperands<Head, Operand, 2>;
  static_assert(offsetof(Two, operand) == sizeof(Head) && sizeof(Two) == sizeof(Head) + 2 * sizeof(Operand),
                "WithOperands is laid out as the head, then the operands");

  Head head{};
  std::vector<Operand> operand;

  explicit OperandArgs(size_t operands) : operand(operands) {}

  /* The block as the kernel reads it. */
  std::vector<long> words() const {
    std::vector<long> w((sizeof(Head) + operand.size() * sizeof(Operand)) / sizeof(long));
    std::memcpy(w.data(), &head, sizeof(Head));
    if (!operand.empty())
      std::memcpy(w.data() + sizeof(Head) / sizeof(long), operand.data(), operand.size() * sizeof(Operand));
    return w;
  }
};

}  // namespace kiln::cuda
