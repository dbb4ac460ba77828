// Strided copy with dtype conversion, shared by astype, copies and host transfers.
#pragma once

#include "backend/cpu/strided.h"
#include "core/tensor.h"

namespace kiln::detail {

/* Copies src into dst elementwise (same shape, any strides on both), converting dtypes. */
void copy_convert(const Tensor& src, Tensor& dst);

}  // namespace kiln::detail
