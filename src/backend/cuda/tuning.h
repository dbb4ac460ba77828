// Code generation choices of the CUDA backend, fixed per process. The defaults (declared
// with the KILN_CUDA_* knobs in src/core/config.def) are the measured best on an H100
// (docs/benchmarks.md); the knobs exist to measure alternatives without rebuilding.
#pragma once

#include <string>

#include "core/config.h"

namespace kiln::cuda {

// One field a knob; what each means, its default and its range: src/core/config.def.
struct Tuning {
  int vector_bytes;        // KILN_CUDA_VECTOR_BYTES
  int row_threads;         // KILN_CUDA_ROW_THREADS
  bool fmad;               // KILN_CUDA_FMAD
  int row_registers;       // KILN_CUDA_ROW_REGISTERS: -1 auto (rows of 16-bit elements), 0 never, 1 always
  int row_elems;           // KILN_CUDA_ROW_ELEMS
  int row_elems_one_pass;  // KILN_CUDA_ROW_ELEMS_ONE_PASS
  int row_min_blocks;      // KILN_CUDA_ROW_MIN_BLOCKS
  bool row_vector_passes;  // KILN_CUDA_ROW_VECTOR_PASSES
  bool row_split;          // KILN_CUDA_ROW_SPLIT
  int column_parts;        // KILN_CUDA_COLUMN_PARTS
  int part_waves;          // KILN_CUDA_PART_WAVES
  int row_shared_kb;       // KILN_CUDA_ROW_SHARED_KB
  int long_row_threads;    // KILN_CUDA_LONG_ROW_THREADS
  int row_cluster;         // KILN_CUDA_ROW_CLUSTER
  int row_cluster_kb;      // KILN_CUDA_ROW_CLUSTER_KB
  bool rows_in_l2;         // KILN_CUDA_ROWS_IN_L2
  bool row_async_stage;    // KILN_CUDA_ROW_ASYNC_STAGE
  int row_blocks_per_sm;   // KILN_CUDA_ROW_BLOCKS
  int flat_blocks_per_sm;  // KILN_CUDA_FLAT_BLOCKS
  int graph_min_kernels;   // KILN_CUDA_GRAPH_MIN_KERNELS
  bool graphs;             // KILN_CUDA_GRAPHS
};

// Read once, from the registry (src/core/config.def); a bad value throws on every use.
inline const Tuning& tuning() {
  static const Tuning t = [] {
    using config::Knob;
    auto number = [](Knob k) { return static_cast<int>(config::integer(k)); };
    Tuning r{};
    r.vector_bytes = number(Knob::cuda_vector_bytes);
    r.row_threads = number(Knob::cuda_row_threads);
    r.fmad = config::flag(Knob::cuda_fmad);
    const std::string registers = config::choice(Knob::cuda_row_registers);
    r.row_registers = registers == "auto" ? -1 : registers == "1";
    r.row_elems = number(Knob::cuda_row_elems);
    r.row_elems_one_pass = number(Knob::cuda_row_elems_one_pass);
    r.row_min_blocks = number(Knob::cuda_row_min_blocks);
    r.row_vector_passes = config::flag(Knob::cuda_row_vector_passes);
    r.row_split = config::flag(Knob::cuda_row_split);
    r.column_parts = number(Knob::cuda_column_parts);
    r.part_waves = number(Knob::cuda_part_waves);
    r.row_shared_kb = number(Knob::cuda_row_shared_kb);
    r.long_row_threads = number(Knob::cuda_long_row_threads);
    r.row_cluster = number(Knob::cuda_row_cluster);
    r.row_cluster_kb = number(Knob::cuda_row_cluster_kb);
    r.rows_in_l2 = config::flag(Knob::cuda_rows_in_l2);
    r.row_async_stage = config::flag(Knob::cuda_row_async_stage);
    r.row_blocks_per_sm = number(Knob::cuda_row_blocks);
    r.flat_blocks_per_sm = number(Knob::cuda_flat_blocks);
    r.graph_min_kernels = number(Knob::cuda_graph_min_kernels);
    r.graphs = config::flag(Knob::cuda_graphs);
    return r;
  }();
  return t;
}

}  // namespace kiln::cuda
