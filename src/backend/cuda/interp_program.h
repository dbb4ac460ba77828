// A fused elementwise region as a program of the precompiled interpreter (kernels/interp.cuh):
// what lets a compiled call's first runs fuse on the GPU before NVRTC has compiled the region.
#pragma once

#include <optional>
#include <vector>

#include "compile/fused.h"

namespace kiln::cuda {

struct InterpProgram {
  std::vector<long> words;  // args::Interp::program
  std::vector<long> dtypes;  // each operand's (outputs, then inputs): 0 float32, args::kInterpBool
};

/* p's interpreter program, or nullopt where the interpreter cannot run it: a value neither
   float32 nor bool, an op it lacks, more than args::kInterpWords words or args::kInterpOperands
   operands. */
std::optional<InterpProgram> interp_program(const compiler::FusedProgram& p);

}  // namespace kiln::cuda
