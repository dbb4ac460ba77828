// Strided copy with dtype conversion, shared by astype, copies and host transfers.
#pragma once

#include "backend/cpu/strided.h"
#include "core/tensor.h"

namespace kiln::detail {

/* Copies src into dst elementwise (same shape, any strides on both), converting dtypes. */
void copy_convert(const Tensor& src, Tensor& dst);
/* Copies src into dst elementwise (same shape, any strides on both), counted as a layout op's bytes. */
void copy_elements(const Tensor& src, Tensor& dst);
/* Makes y the input a itself when a arrived donated (nothing else can see its buffer) in a
   layout an update may write through; else y is a fresh copy of a. */
void start_from(const Tensor& a, Tensor& y);

}  // namespace kiln::detail
