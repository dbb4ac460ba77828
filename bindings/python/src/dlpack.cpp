// DLPack both ways: Array.__dlpack__ / __dlpack_device__ hand kiln's evaluated buffer to
// another library (PyTorch, JAX, NumPy, CuPy) without a copy; kiln.from_dlpack views another
// library's array in place, on the CPU or (in a CUDA build) on a GPU.
#include "buffers.h"

namespace kpy {

void init_dlpack(nb::module_& m, ArrayClass& array) {
  array.def(
      "__dlpack__",
      [](const kiln::Array& a, nb::kwargs kwargs) {
        // The buffer is evaluated first, and eval waits for a GPU to finish, so the data is
        // ready on every stream: the consumer's `stream` needs no further ordering.
        if (kwargs.contains("stream")) nb::del(kwargs["stream"]);
        nb::object nd = nb::cast(ndarray_of<nb::array_api>(view_of(a)));
        return nd.attr("__dlpack__")(**kwargs);
      },
      "A DLPack capsule over the evaluated data (no copy). Accepts the array API's stream,\n"
      "max_version, dl_device and copy keywords.");
  array.def(
      "__dlpack_device__",
      [](const kiln::Array& a) {
        const kiln::Device d = a.device();
        return nb::make_tuple(d.type == kiln::Device::Type::cpu ? 1 : 2, d.index);
      },
      "(device type, index): (1, 0) for the CPU, (2, i) for CUDA device i.");
  m.def(
      "from_dlpack", [](nb::handle obj) { return from_buffer(obj, true, std::nullopt); }, "obj"_a,
      "An array over another library's memory, without a copy: anything with __dlpack__ (a\n"
      "PyTorch or JAX array, NumPy), on the CPU or, in a CUDA build, on a GPU. kiln reads it in\n"
      "place, so it must not change while kiln may still read it. A GPU array must be ready\n"
      "(its producer's work finished, e.g. torch.cuda.synchronize()) before kiln uses it.");
}

}  // namespace kpy
