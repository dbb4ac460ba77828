// Copies between host and device memory (declared in cuda.h).
#include "backend/cpu/copy.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "core/stats.h"

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

// Uploads `bytes` from host memory into a fresh device buffer.
std::shared_ptr<Buffer> upload(int device, const void* src, size_t bytes) {
  auto buf = allocate(device, bytes);
  if (bytes > 0) {
    detail::count(detail::counters().host_to_device_copies);
    // From pageable memory the call returns once the source has been staged, so the
    // host buffer may go away afterwards.
    not_replayable();
    check(drv().cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(buf->data()), src, bytes, stream(device)),
          "cuMemcpyHtoDAsync");
  }
  Tensor tmp;
  tmp.buffer = buf;
  finish_outputs(device, {tmp});
  return buf;
}

}  // namespace

Tensor to_device(const Tensor& t, int device) {
  if (!t.buffer) return t;
  if (on_device(t)) {
    if (t.buffer->device().index == device) return t;
    return to_device(to_host(t), device);
  }
  Tensor r = t;
  if (t.buffer->immutable()) {
    Buffer* host = t.buffer.get();
    r.buffer = host->mirror(Device::cuda(device), [&] { return upload(device, host->data(), host->bytes()); });
    return r;
  }
  // Borrowed memory may change under us: upload just the viewed elements, every time.
  Tensor dense = t;
  if (!t.row_contiguous()) {
    dense = Tensor(t.shape, t.dtype);
    dense.allocate();
    detail::copy_convert(t, dense);
  }
  r = Tensor(t.shape, t.dtype);
  r.buffer = upload(device, dense.raw(), static_cast<size_t>(t.size()) * t.itemsize());
  return r;
}

Tensor contiguous_on_device(const Tensor& t, int device);  // kernels.cpp

Tensor to_host(const Tensor& t) {
  if (!on_device(t)) return t;
  int device = t.buffer->device().index;
  std::vector<Tensor> in{t};
  prepare_inputs(device, in);
  Tensor src = in[0].row_contiguous() ? in[0] : contiguous_on_device(in[0], device);
  Tensor h(t.shape, t.dtype);
  h.allocate();
  size_t bytes = static_cast<size_t>(t.size()) * t.itemsize();
  CUstream st = stream(device);
  const Driver& d = drv();
  if (bytes > 0) {
    detail::count(detail::counters().device_to_host_copies);
    not_replayable();
    check(d.cuMemcpyDtoHAsync(h.raw(), reinterpret_cast<CUdeviceptr>(src.raw()), bytes, st), "cuMemcpyDtoHAsync");
  }
  check(d.cuStreamSynchronize(st), "waiting for the device");
  return h;
}

void ensure_host(std::vector<Tensor>& ts) {
  for (auto& t : ts) {
    if (on_device(t)) t = to_host(t);
  }
}

}  // namespace kiln::cuda
