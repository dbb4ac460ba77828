// Index arrays for take and take_along_axis, checked and normalized on the host.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln::detail {

/* The indices as int64 in row-major order of their shape, negative ones counted from the
   end; throws "[op] index i is out of bounds for axis a with size n" at the first bad one
   (row-major), or when the dtype is not an integer. */
std::vector<int64_t> normalized_indices(const char* op, const Tensor& idx, int64_t size, int axis);

/* How a gather walks y's shape: the strides into `a` (the gathered axis excluded: the
   index times a's stride there is added) and into the dense row-major indices. */
struct GatherStrides {
  Strides a, idx;
};
/* take: y's axes are a's leading axes, then the indices' axes, then a's trailing axes. */
GatherStrides take_strides(const Tensor& a, const Tensor& ind, const Tensor& y, size_t axis);
/* take_along_axis: a and the indices broadcast against each other to y's shape. */
GatherStrides take_along_axis_strides(const Tensor& a, const Tensor& ind, const Tensor& y, size_t axis);

}  // namespace kiln::detail
