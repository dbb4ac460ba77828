// Code generation choices of the CUDA backend, fixed per process. The defaults are the
// measured best on an H100 (docs/benchmarks.md); the KILN_CUDA_* variables below exist to
// measure alternatives without rebuilding.
#pragma once

#include <cstdlib>

namespace kiln::cuda {

struct Tuning {
  int vector_bytes = 16;   // KILN_CUDA_VECTOR_BYTES: widest load or store per thread (4, 8 or 16)
  int row_threads = 256;   // KILN_CUDA_ROW_THREADS: most threads per row of a row kernel (32 to 1024)
  bool fmad = false;       // KILN_CUDA_FMAD=1: let NVRTC contract a*b+c (results then differ from the CPU's)
  // Row kernels that hold the row in registers: for rows of 16-bit elements (their staged
  // kernels are bound by instructions); KILN_CUDA_ROW_REGISTERS=0 never, =1 for every row.
  int row_registers = -1;
  int row_elems = 16;      // KILN_CUDA_ROW_ELEMS: elements per thread they aim for (threads grow first)
  int row_elems_one_pass = 8;  // KILN_CUDA_ROW_ELEMS_ONE_PASS: the same for programs with one reduction pass
  int row_min_blocks = 0;  // KILN_CUDA_ROW_MIN_BLOCKS: resident blocks per SM to ask of the compiler
  bool row_vector_passes = true;  // KILN_CUDA_ROW_VECTOR_PASSES=0: staged rows read one element at a time
  bool row_split = true;   // KILN_CUDA_ROW_SPLIT=0: reductions (and arg-reductions) of long rows not in parts
  int column_parts = 256;  // KILN_CUDA_COLUMN_PARTS: parts of a column read a thread a column = SMs * 8 * this / columns
  int part_waves = 1;      // KILN_CUDA_PART_WAVES: parts of few long rows = SMs * 8 * this / rows
  int row_shared_kb = 0;  // KILN_CUDA_ROW_SHARED_KB: most shared memory of a staged row (0: the device's limit)
  int long_row_threads = 0;  // KILN_CUDA_LONG_ROW_THREADS: threads a staged row over 48 KB (0: fill the SM)
  int row_cluster = 8;  // KILN_CUDA_ROW_CLUSTER: most blocks of a cluster sharing a staged row (1: none)
  int row_cluster_kb = 32;  // KILN_CUDA_ROW_CLUSTER_KB: most shared memory a block of such a cluster stages
  bool rows_in_l2 = true;  // KILN_CUDA_ROWS_IN_L2=0: rows too long to stage with as many blocks as fit
  bool row_async_stage = true;  // KILN_CUDA_ROW_ASYNC_STAGE=0: stage rows through registers, not cp.async
  int row_blocks_per_sm = 128;  // KILN_CUDA_ROW_BLOCKS: most blocks per SM of a staged row kernel (0: a block a row)
  int flat_blocks_per_sm = 128;  // KILN_CUDA_FLAT_BLOCKS: most blocks per SM of a flat kernel (0: no limit)
  int graph_min_kernels = 1;  // KILN_CUDA_GRAPH_MIN_KERNELS: fewest kernels a plan replays as a CUDA graph
};

inline const Tuning& tuning() {
  static const Tuning t = [] {
    Tuning r;
    auto number = [](const char* name, int lo, int hi, int fallback, bool power_of_two = true) {
      const char* v = std::getenv(name);
      if (!v || !*v) return fallback;
      int x = std::atoi(v);
      return x >= lo && x <= hi && (!power_of_two || (x & (x - 1)) == 0) ? x : fallback;
    };
    r.vector_bytes = number("KILN_CUDA_VECTOR_BYTES", 1, 16, r.vector_bytes);
    r.row_threads = number("KILN_CUDA_ROW_THREADS", 32, 1024, r.row_threads);
    r.row_shared_kb = number("KILN_CUDA_ROW_SHARED_KB", 1, 1024, r.row_shared_kb, false);
    r.row_cluster = number("KILN_CUDA_ROW_CLUSTER", 1, 16, r.row_cluster);
    r.row_cluster_kb = number("KILN_CUDA_ROW_CLUSTER_KB", 8, 256, r.row_cluster_kb, false);
    r.long_row_threads = number("KILN_CUDA_LONG_ROW_THREADS", 32, 1024, r.long_row_threads);
    r.row_elems = number("KILN_CUDA_ROW_ELEMS", 1, 32, r.row_elems);
    r.row_elems_one_pass = number("KILN_CUDA_ROW_ELEMS_ONE_PASS", 1, 32, r.row_elems_one_pass);
    auto flag = [](const char* name, auto fallback) -> decltype(fallback) {  // "1" on, anything else set off
      const char* v = std::getenv(name);
      return v && *v ? v[0] == '1' : fallback;
    };
    r.fmad = flag("KILN_CUDA_FMAD", r.fmad);
    r.row_registers = flag("KILN_CUDA_ROW_REGISTERS", r.row_registers);
    r.row_vector_passes = flag("KILN_CUDA_ROW_VECTOR_PASSES", r.row_vector_passes);
    r.row_split = flag("KILN_CUDA_ROW_SPLIT", r.row_split);
    r.rows_in_l2 = flag("KILN_CUDA_ROWS_IN_L2", r.rows_in_l2);
    r.row_async_stage = flag("KILN_CUDA_ROW_ASYNC_STAGE", r.row_async_stage);
    r.column_parts = number("KILN_CUDA_COLUMN_PARTS", 1, 8192, r.column_parts);
    r.part_waves = number("KILN_CUDA_PART_WAVES", 1, 64, r.part_waves);
    r.row_min_blocks = number("KILN_CUDA_ROW_MIN_BLOCKS", 1, 32, r.row_min_blocks, false);
    r.row_blocks_per_sm = number("KILN_CUDA_ROW_BLOCKS", 0, 1024, r.row_blocks_per_sm, false);
    r.flat_blocks_per_sm = number("KILN_CUDA_FLAT_BLOCKS", 0, 1024, r.flat_blocks_per_sm, false);
    r.graph_min_kernels = number("KILN_CUDA_GRAPH_MIN_KERNELS", 1, 64, r.graph_min_kernels, false);
    return r;
  }();
  return t;
}

}  // namespace kiln::cuda
