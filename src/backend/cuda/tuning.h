// Code generation choices of the CUDA backend, fixed per process. The defaults (declared
// with the KILN_CUDA_* knobs in src/core/config.def) are the measured best on an H100
// (docs/benchmarks.md); the knobs exist to measure alternatives without rebuilding.
#pragma once

#include <string>

#include "core/config.h"

namespace kiln::cuda {

namespace tuning_detail {
inline int number(config::Knob k) { return static_cast<int>(config::integer(k)); }
// KILN_CUDA_ROW_REGISTERS: auto (-1: rows of 16-bit elements), 0 (never) or 1 (every row).
inline int registers(const std::string& choice) { return choice == "auto" ? -1 : choice == "1"; }
}  // namespace tuning_detail

// One field a knob, read when the process first asks; what each means, its default and
// its range: src/core/config.def. A bad value throws on every use.
struct Tuning {
  using Knob = config::Knob;
  int vector_bytes = tuning_detail::number(Knob::cuda_vector_bytes);
  int row_threads = tuning_detail::number(Knob::cuda_row_threads);
  bool fmad = config::flag(Knob::cuda_fmad);
  int mma_product_rows = tuning_detail::number(Knob::cuda_mma_product_rows);
  int mv_split = tuning_detail::number(Knob::cuda_mv_split);
  int attention_cluster = tuning_detail::number(Knob::cuda_attention_cluster);
  int row_registers = tuning_detail::registers(config::choice(Knob::cuda_row_registers));
  int row_elems = tuning_detail::number(Knob::cuda_row_elems);
  int row_elems_one_pass = tuning_detail::number(Knob::cuda_row_elems_one_pass);
  int row_min_blocks = tuning_detail::number(Knob::cuda_row_min_blocks);
  bool row_vector_passes = config::flag(Knob::cuda_row_vector_passes);
  bool row_split = config::flag(Knob::cuda_row_split);
  int column_parts = tuning_detail::number(Knob::cuda_column_parts);
  int part_waves = tuning_detail::number(Knob::cuda_part_waves);
  int row_shared_kb = tuning_detail::number(Knob::cuda_row_shared_kb);
  int long_row_threads = tuning_detail::number(Knob::cuda_long_row_threads);
  int row_cluster = tuning_detail::number(Knob::cuda_row_cluster);
  int row_cluster_kb = tuning_detail::number(Knob::cuda_row_cluster_kb);
  bool rows_in_l2 = config::flag(Knob::cuda_rows_in_l2);
  bool row_async_stage = config::flag(Knob::cuda_row_async_stage);
  int row_blocks_per_sm = tuning_detail::number(Knob::cuda_row_blocks);
  int flat_blocks_per_sm = tuning_detail::number(Knob::cuda_flat_blocks);
  int graph_min_kernels = tuning_detail::number(Knob::cuda_graph_min_kernels);
  bool graphs = config::flag(Knob::cuda_graphs);
  bool graph_overlap = config::flag(Knob::cuda_graph_overlap);
};

inline const Tuning& tuning() {
  static const Tuning t;
  return t;
}

}  // namespace kiln::cuda
