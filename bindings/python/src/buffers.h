// kiln arrays as memory other libraries read (NumPy, DLPack, the buffer protocol), and back.
// The only file group of the module that reads kiln's evaluated tensors (src/core/tensor.h).
#pragma once

#include <nanobind/ndarray.h>

#include "common.h"

namespace kpy {

/* DLPack's description of a kiln dtype, and back (throws kiln::Error for a type kiln lacks). */
nb::dlpack::dtype to_dlpack(kiln::Dtype d);
kiln::Dtype from_dlpack_dtype(nb::dlpack::dtype t, const char* op);

/* The evaluated data of `a`, where it lies: pointer, shape and strides in elements, and an owner
   capsule that keeps it alive. Evaluates with the GIL released. */
struct View {
  void* data = nullptr;
  std::vector<size_t> shape;
  std::vector<int64_t> strides;
  kiln::Dtype dtype = kiln::float32;
  kiln::Device device;
  nb::capsule owner;
};
View view_of(const kiln::Array& a);

/* An ndarray of the given framework over the view (no copy). */
template <class Framework>
nb::ndarray<Framework> ndarray_of(const View& v) {
  const int device_type = v.device.type == kiln::Device::Type::cpu ? nb::device::cpu::value : nb::device::cuda::value;
  return nb::ndarray<Framework>(v.data, v.shape.size(), v.shape.data(), v.owner, v.strides.data(), to_dlpack(v.dtype),
                                device_type, v.device.index);
}

}  // namespace kpy
