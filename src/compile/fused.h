// A fused elementwise region: a small program over the region's inputs that
// computes all of its outputs in one pass, by a generated kernel or, without a
// compiler, by an interpreter over cache-sized tiles.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/tiered_kernel.h"
#include "compile/kernel_slots.h"
#include "ops/primitive.h"

// The CPU backend runs this region in backend/cpu/fused.cpp.

namespace kiln::compiler {

struct FusedOp {
  std::shared_ptr<Primitive> prim;  // null for a region input
  std::vector<int> args;  // earlier op indices
  Dtype dtype = float32;  // stored dtype of the result
  int input = -1;  // region input index when prim is null
  bool uniform = false;  // a region input that is one constant element, loaded once
};

struct FusedProgram {
  std::vector<FusedOp> ops;  // region inputs first, then members in order
  std::vector<int> outputs;  // op index of each region output
  KernelSlots gpu_kernels;  // filled by the CUDA backend on first use
  int num_inputs() const;
  /* C++ source of a kernel named `symbol` (see fused_codegen.cpp for its signature). */
  std::string source(const std::string& symbol) const;
  /* Hash of the program's structure, for the kernel's name. */
  std::string signature() const;
};

/* One kernel for an elementwise region. Every output has the broadcast shape of
   the inputs. */
class Fused : public Primitive {
 public:
  explicit Fused(std::shared_ptr<const FusedProgram> program);
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const Fused&>(o).program_ == program_;
  }
  void print(std::ostream& os) const override;
  const FusedProgram& program() const { return *program_; }

 private:
  using KernelFn = void (*)(int64_t n, const void* const* in, const int64_t* strides, void* const* out);
  KernelFn kernel();  // null while it compiles in the background, and without a compiler
  void interpret(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out);

  std::shared_ptr<const FusedProgram> program_;  // immutable, shared by every replay
  cpu::TieredKernel kernel_;  // generated code once compiled; guarded inside
};

}  // namespace kiln::compiler
