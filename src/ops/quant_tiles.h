// Quantized weights permuted into the tile order of backend/common/tile_order.h (the GPU's
// one-row decode product reads each step's weights as contiguous runs) and back.
#pragma once

#include <tuple>

#include "backend/common/tile_order.h"
#include "kiln/array.h"

namespace kiln::detail {
struct Tensor;
}

namespace kiln::quant_tiles {

using tile_order::fits;
using tile_order::kChunk;
using tile_order::kRows;

/* Packed weights [n, k / 8], scales and biases [n, k / group_size] permuted into tile order
   (`into_tiles`) or back to row order, as new row-major tensors. Throws [op] errors when the
   shapes cannot take tile order. */
void permute(const char* op, const detail::Tensor& packed, const detail::Tensor& scales, const detail::Tensor& biases,
             int group_size, bool into_tiles, detail::Tensor& packed_out, detail::Tensor& scales_out,
             detail::Tensor& biases_out);

/* Host arrays of quantized weights (evaluated here) in tile order, on the CPU. */
std::tuple<Array, Array, Array> tiled(const Array& packed, const Array& scales, const Array& biases, int group_size);

}  // namespace kiln::quant_tiles
