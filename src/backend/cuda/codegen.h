// CUDA C++ source for kiln's GPU kernels. Elementwise work (eager ops and fused
// regions alike) is described by a FusedProgram and row reductions (eager reductions
// and fused row regions) by a RowProgram, and both become source that calls the math
// functors of backend/common/math.h, so the CPU and the GPU share one definition of
// every op. Each generated module defines one kernel named kiln_kernel, whose one parameter
// is an argument struct of kernels/args.h.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/kernels/args.h"
#include "backend/cuda/struct_source.h"
#include "compile/fused.h"
#include "compile/row_fused.h"

namespace kiln::cuda {

constexpr int kMaxDims = args::kMaxAxes;  // axes a kernel indexes after merging (more: an error)

/* Elementwise kernel over n elements of a (merged) shape of up to kMaxDims axes, any strides:
   reads args::Elementwise<operands> (outputs first, then inputs). */
std::string elementwise_source(const compiler::FusedProgram& p);

/* Elementwise kernel over n elements where every output and input is contiguous, or (inputs
   in scalar_inputs, a bit per input) one broadcast element; each thread handles `vec`
   neighbours per step with aligned vector accesses (every operand aligned to vec elements).
   Reads args::ElementwiseFlat<operands>. */
std::string elementwise_flat_source(const compiler::FusedProgram& p, uint64_t scalar_inputs, int vec);

/* The program over rows (the last of up to kMaxDims merged axes): every operand is
   contiguous along the rows (inner stride 1), or steps along them with a stride of its own
   (`strided`, a bit per operand, outputs first), or, for inputs in `row_inputs` (a bit
   each), is one value a row (inner stride 0); any strides on the other axes. A thread
   computes `vec` neighbours of a row (the row length a multiple of it); `narrow`: the index
   fits 32 bits. Reads args::ElementwiseRows<operands>. */
std::string elementwise_rows_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t strided, int vec,
                                    bool narrow);

/* The program over (batch, R, C) in 64 x 64 tiles, for outputs that run along the rows
   where the inputs in `tiled_inputs` (a bit each) run down the columns: each passes through
   a tile in shared memory, so its reads are coalesced too. Inputs in `row_inputs` are one
   value a row (a column broadcast or one element), the others run along the rows. A thread
   reads and writes pairs of neighbours where `words` (every pair aligned). Reads
   args::ElementwiseTiled<operands>. */
std::string elementwise_tiled_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t tiled_inputs);

/* Which of the kernels above runs a program, and its variant: everything its source depends
   on besides the program (a program's kernels are kept by it, one per device and variant). */
struct ElementwiseVariant {
  enum class Form { strided, flat, rows, tiled };
  Form form = Form::strided;
  uint64_t scalar_inputs = 0;  // flat
  uint64_t row_inputs = 0;  // rows, tiled
  uint64_t tiled_inputs = 0;  // tiled
  uint64_t strided = 0;  // rows
  int vec = 1;  // flat, rows
  bool narrow = false;  // rows
  bool operator==(const ElementwiseVariant&) const = default;
  size_t hash() const;
};
std::string elementwise_source(const compiler::FusedProgram& p, const ElementwiseVariant& variant);

/* Row kernel, one block per row of a (rows, n) view, reading args::Row<operands>: the
   inputs, the outputs (per-element ones contiguous (rows, n), per-row ones (rows)), and for
   split rows (few long rows of a program with one pass and only per-row outputs) one
   operand per reduction for its partials. */
struct RowVariant {
  int threads = 256;  // per block, a power of two from 32
  // Staged (chunks == 0): elementwise work is recomputed in each pass over the row.
  uint64_t cached_inputs = 0;  // inputs (a bit each, cs == 1) staged a row at a time in shared memory
  bool vector_in = false;  // staged with 16-byte loads (every row start 16-byte aligned, n a multiple)
  bool async_stage = false;  // vector_in through asynchronous copies (kiln_stage16), no register held
  // Staged rows split over a thread-block cluster of this many blocks (sm_90), each staging
  // a part of 16-element multiples and folding the reductions through distributed shared memory.
  int cluster = 1;
  int vector_out = 1;  // per-element outputs written this many at a time (aligned, n a multiple)
  // Every pass reads vector_out neighbouring elements at a time: one vector load per input
  // (cached, or cs == 1 with aligned rows) instead of one load per element.
  bool vector_passes = false;
  // Registers (chunks > 0): each thread holds `chunks` runs of `vec` neighbouring elements
  // (elements (c * threads + tid) * vec ...) from load to store; n <= chunks * threads * vec.
  // vec > 1 needs cs == 1, n a multiple of vec and every row start and output aligned to it.
  int chunks = 0;
  int vec = 1;
  int min_blocks = 0;  // resident blocks per SM asked of the compiler (0: its choice)
  bool exact = false;  // n == chunks * threads * vec: no element lies past the row
  // Split rows (staged, nothing cached): 1, each block reduces one part of a row into its
  // partials; 2, each block folds a row's partials and computes its per-row ops and outputs;
  // 3, as 1 for rows next to each other (rs == 1), each thread reducing a part of one row
  // (with vector_passes, each lane a part of vector_out rows).
  int split = 0;
  bool operator==(const RowVariant&) const = default;  // equal variants generate equal source
  size_t hash() const;
};
std::string row_source(const compiler::RowProgram& p, const RowVariant& variant);
/* The elements of a row each block of a cluster of `cluster` stages (the last may hold fewer):
   the generated kernel cuts its rows the same way. */
int64_t cluster_part(int64_t n, int cluster);
/* Op i of a row program as a CUDA expression of t<args> (shared with the elementwise kernels). */
std::string row_member_expr(const std::vector<compiler::RowOp>& ops, size_t i);

/* The unsigned type of an element's size, for kernels that move elements without reading
   them (uint8_t ... uint64_t: every dtype is 1, 2, 4 or 8 bytes). */
const char* word_type(size_t itemsize);

}  // namespace kiln::cuda
