// A fused row region: reductions over the trailing axes together with the
// elementwise work before and after them (RMSNorm, softmax, LayerNorm, sum(x*x)),
// run as one kernel that makes a few passes over each row.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/tiered_kernel.h"
#include "compile/kernel_slots.h"
#include "ops/primitive.h"

// The CPU backend runs this region in backend/cpu/row_fused.cpp.

namespace kiln::compiler {

struct RowOp {
  std::shared_ptr<Primitive> prim;  // null for a region input; else elementwise or a Reduce
  std::vector<int> args;  // earlier op indices
  Dtype dtype = float32;
  bool per_row = false;  // one value per row (reduced axes of size 1) rather than per element
  int input = -1;  // region input index when prim is null
  bool uniform = false;  // a region input that is one constant element
};

struct RowProgram {
  std::vector<RowOp> ops;  // inputs first, then members in order
  std::vector<int> outputs;  // op index of each region output
  int reduced_axes = 1;  // the trailing axes that the reductions remove
  KernelSlots gpu_kernels;  // filled by the CUDA backend on first use
  std::string source(const std::string& symbol) const;
  std::string signature() const;
};

/* Whether op is one of the region's reductions. */
bool is_row_reduce(const RowOp& op);
/* The pass after which each op's value is known (0: before the first pass; a reduction
   ends the pass after its argument's); the largest is the number of passes. */
std::vector<int> row_pass_levels(const RowProgram& p);
/* The per-element ops that the roots need (themselves included), in op order; op `leaf`
   is taken as known (its arguments are not needed for it). */
std::set<size_t> row_element_closure(const RowProgram& p, const std::vector<size_t>& roots, size_t leaf = SIZE_MAX);

/* Collapses strides (of an input broadcast to `full`) into one stride over the leading
   `lead` axes and one over the rest; false when the axes do not collapse that way. */
bool row_col_strides(const Strides& s, const Shape& full, size_t lead, int64_t& rs, int64_t& cs);

class RowFused : public Primitive {
 public:
  explicit RowFused(std::shared_ptr<const RowProgram> program);
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const RowFused&>(o).program_ == program_;
  }
  void print(std::ostream& os) const override;
  const RowProgram& program() const { return *program_; }

 private:
  using KernelFn = void (*)(int64_t r0, int64_t r1, int64_t rows, int64_t n, const void* const* in,
                            const int64_t* row_strides, const int64_t* col_strides, void* const* out);
  KernelFn kernel();  // null while it compiles in the background, and without a compiler
  bool per_row_inputs_hold(const std::vector<detail::Tensor>& in, const Shape& full, size_t lead) const;
  // Runs the member kernels one after another (no compiler, or an input layout
  // the generated kernel does not take).
  void run_unfused(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out);

  std::shared_ptr<const RowProgram> program_;
  cpu::TieredKernel kernel_;  // generated code once compiled; guarded inside
};

}  // namespace kiln::compiler
