// Index arrays for take and take_along_axis, checked and normalized on the host.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln::detail {

/* The indices as int64 in row-major order of their shape, negative ones counted from the
   end; throws "[op] index i is out of bounds for axis a with size n" at the first bad one
   (row-major), or when the dtype is not an integer. */
std::vector<int64_t> normalized_indices(const char* op, const Tensor& idx, int64_t size, int axis);

}  // namespace kiln::detail
