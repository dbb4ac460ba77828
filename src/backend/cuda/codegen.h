// CUDA C++ source for kiln's GPU kernels. Elementwise work (eager ops and fused
// regions alike) is described by a FusedProgram and row reductions (eager reductions
// and fused row regions) by a RowProgram, and both become source that calls the math
// functors of backend/common/math.h, so the CPU and the GPU share one definition of
// every op. Each generated module defines one kernel named kiln_kernel.
#pragma once

#include <cstdint>
#include <string>

#include "compile/fused.h"
#include "compile/row_fused.h"

namespace kiln::cuda {

constexpr int kMaxDims = 8;  // axes a kernel indexes after merging (more: an error)

/* Device helpers included by every generated module (as "kiln/cuda_support.h"). */
const char* support_header();

/* Elementwise kernel over n elements of a (merged) shape of up to kMaxDims axes. Parameter:
   KilnMeta<elementwise_meta_len(ops)> with v[0] = n, v[1] = ndim, v[2..10) shape, then
   kMaxDims strides per operand (outputs first, then inputs), then one pointer per operand. */
std::string elementwise_source(const compiler::FusedProgram& p);
int elementwise_meta_len(int operands);

/* Elementwise kernel over n elements where every output and input is contiguous, or (inputs
   in scalar_inputs, a bit per input) one broadcast element; each thread handles `vec`
   neighbours per step with aligned vector accesses (every operand aligned to vec elements).
   Parameter: KilnMeta<flat_meta_len(ops)>: v[0] = n, then one pointer per operand. */
std::string elementwise_flat_source(const compiler::FusedProgram& p, uint64_t scalar_inputs, int vec);

/* The program over rows (the last of up to kMaxDims merged axes): every operand is
   contiguous along the rows (inner stride 1), or steps along them with a stride of its own
   (`strided`, a bit per operand, outputs first), or, for inputs in `row_inputs` (a bit
   each), is one value a row (inner stride 0); any strides on the other axes. A thread
   computes `vec` neighbours of a row (the row length a multiple of it); `narrow`: the index
   fits 32 bits. Meta: rows (all of them), the row length, the other axes' count, their
   sizes (kMaxDims), each operand's strides on them (kMaxDims each, outputs first), each
   operand's stride along the rows, then the pointers (rows_meta_len values). */
std::string elementwise_rows_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t strided, int vec,
                                   bool narrow);
int rows_meta_len(int operands);

/* The program over (batch, R, C) in 64 x 64 tiles, for outputs that run along the rows
   where the inputs in `tiled_inputs` (a bit each) run down the columns: each passes through
   a tile in shared memory, so its reads are coalesced too. Inputs in `row_inputs` are one
   value a row (a column broadcast or one element), the others run along the rows. A thread
   reads and writes pairs of neighbours where `words` (every pair aligned). Meta: batch, R,
   C, words, each operand's batch stride and row stride (a tiled input's column stride;
   outputs first), then the pointers (tiled_meta_len values). */
std::string elementwise_tiled_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t tiled_inputs);
int tiled_meta_len(int operands);
int flat_meta_len(int operands);

/* Row kernel, one block per row of a (rows, n) view: v[0] = rows, v[1] = n, then row and
   column strides per input, then input pointers, then output pointers. Per-element outputs
   are contiguous (rows, n), per-row outputs (rows). Split rows (few long rows of a program
   with one pass and only per-row outputs) then have one pointer per reduction to its
   partials (8 bytes each, rows * splits), then splits, then the part length. */
struct RowVariant {
  int threads = 256;           // per block, a power of two from 32
  // Staged (chunks == 0): elementwise work is recomputed in each pass over the row.
  uint64_t cached_inputs = 0;  // inputs (a bit each, cs == 1) staged a row at a time in shared memory
  bool vector_in = false;      // staged with 16-byte loads (every row start 16-byte aligned, n a multiple)
  bool async_stage = false;    // vector_in through asynchronous copies (kiln_stage16), no register held
  // Staged rows split over a thread-block cluster of this many blocks (sm_90), each staging
  // a part of 16-element multiples and folding the reductions through distributed shared memory.
  int cluster = 1;
  int vector_out = 1;          // per-element outputs written this many at a time (aligned, n a multiple)
  // Every pass reads vector_out neighbouring elements at a time: one vector load per input
  // (cached, or cs == 1 with aligned rows) instead of one load per element.
  bool vector_passes = false;
  // Registers (chunks > 0): each thread holds `chunks` runs of `vec` neighbouring elements
  // (elements (c * threads + tid) * vec ...) from load to store; n <= chunks * threads * vec.
  // vec > 1 needs cs == 1, n a multiple of vec and every row start and output aligned to it.
  int chunks = 0;
  int vec = 1;
  int min_blocks = 0;     // resident blocks per SM asked of the compiler (0: its choice)
  bool exact = false;     // n == chunks * threads * vec: no element lies past the row
  // Split rows (staged, nothing cached): 1, each block reduces one part of a row into its
  // partials; 2, each block folds a row's partials and computes its per-row ops and outputs;
  // 3, as 1 for rows next to each other (rs == 1), each thread reducing a part of one row
  // (with vector_passes, each lane a part of vector_out rows).
  int split = 0;
  uint64_t key() const;   // distinct for every variant that generates different source
};
std::string row_source(const compiler::RowProgram& p, const RowVariant& variant);
/* The elements of a row each block of a cluster of `cluster` stages (the last may hold fewer):
   the generated kernel cuts its rows the same way. */
int64_t cluster_part(int64_t n, int cluster);
/* split_reductions: the program's reductions when the variant is split, else 0. */
int row_meta_len(int inputs, int outputs, int split_reductions = 0);
/* Op i of a row program as a CUDA expression of t<args> (shared with the elementwise kernels). */
std::string row_member_expr(const std::vector<compiler::RowOp>& ops, size_t i);

/* A module whose kiln_kernel calls `call` (a helper of the support header) with the
   given template arguments: e.g. instantiate("kiln_argreduce<float, float, true>"). */
std::string instantiate(const std::string& call, int meta_len);

/* The unsigned type of an element's size, for kernels that move elements without reading
   them (uint8_t ... uint64_t: every dtype is 1, 2, 4 or 8 bytes). */
const char* word_type(size_t itemsize);
/* The transposing copy of elements of `itemsize` bytes (10 meta values). */
std::string transpose_source(size_t itemsize);

}  // namespace kiln::cuda
