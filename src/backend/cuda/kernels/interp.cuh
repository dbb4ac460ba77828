// The elementwise interpreter, compiled into kiln at build time (no compiler at run time): a
// fused region's program (args::Interp, built by backend/cuda/interp_program.cpp) run element
// by element in registers, calling the functors the generated kernels call, so a compiled
// call's first runs fuse without waiting for NVRTC and give the generated kernel's values.
#pragma once
#include "backend/cuda/kernels/support.cuh"

namespace interp {

using kiln::cuda::args::InterpOperand;

__device__ inline float load(const InterpOperand& o, long at) {
  if (o.dtype == kiln::cuda::args::kInterpBool) return static_cast<const bool*>(o.data)[at] ? 1.0f : 0.0f;
  return static_cast<const float*>(o.data)[at];
}

__device__ inline void store(const InterpOperand& o, long at, float v) {
  if (o.dtype == kiln::cuda::args::kInterpBool)
    static_cast<bool*>(const_cast<void*>(o.data))[at] = v != 0.0f;
  else
    static_cast<float*>(const_cast<void*>(o.data))[at] = v;
}

// One program word's value at element i; r holds the earlier words' values.
__device__ inline float step(const kiln::cuda::args::Interp& a, long w, const float* r, long i) {
  using namespace kiln::cuda::args;
  const int x = static_cast<int>((w >> 8) & 255), y = static_cast<int>((w >> 16) & 255),
            z = static_cast<int>((w >> 24) & 255);
  switch (static_cast<int>(w & 255)) {
    case kInterpLoad: {
      const InterpOperand& o = a.operand[x];
      return load(o, kiln_offset(i, static_cast<int>(a.nd), a.shape, o.strides));
    }
    case kInterpStore: {
      const InterpOperand& o = a.operand[y];
      store(o, kiln_offset(i, static_cast<int>(a.nd), a.shape, o.strides), r[x]);
      return 0.0f;
    }
    case kInterpWhere: return r[x] != 0.0f ? r[y] : r[z];
    case kInterpToBool: return kiln::math::convert<bool>(r[x]) ? 1.0f : 0.0f;
    case kInterpFromBool:
      return kiln::math::convert<float>(r[x] != 0.0f);
// clang-format off
#define KILN_INTERP_UNARY(F) \
  case kInterp##F: return static_cast<float>(kiln::math::F{}(r[x]));
#define KILN_INTERP_BINARY(F) \
  case kInterp##F: return static_cast<float>(kiln::math::F{}(r[x], r[y]));
#define KILN_INTERP_TEST(F) \
  case kInterp##F: return kiln::math::F{}(r[x]) ? 1.0f : 0.0f;
#define KILN_INTERP_COMPARE(F) \
  case kInterp##F: return kiln::math::F{}(r[x], r[y]) ? 1.0f : 0.0f;
// clang-format on
#include "backend/cuda/kernels/interp_ops.def"
#undef KILN_INTERP_UNARY
#undef KILN_INTERP_BINARY
#undef KILN_INTERP_TEST
#undef KILN_INTERP_COMPARE
    default: return 0.0f;
  }
}

}  // namespace interp

extern "C" __global__ void __launch_bounds__(256) kiln_interp(const kiln::cuda::args::Interp a) {
  for (long i = kiln_gid(); i < a.n; i += kiln_gstride()) {
    float r[kiln::cuda::args::kInterpWords];
    for (int k = 0; k < static_cast<int>(a.words); ++k) r[k] = interp::step(a, a.program[k], r, i);
  }
}
