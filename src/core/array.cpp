#include <cstring>

#include "backend/cpu/copy.h"
#include "core/checked.h"
#include "core/node.h"
#include "core/stats.h"
#include "kiln/eval.h"
#include "kiln/ops.h"
#include "ops/primitive.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/cuda.h"
#endif

namespace kiln {

namespace {
const detail::Node& checked(const std::shared_ptr<detail::Node>& n) {
  if (!n) fail("array", "operation on an empty Array handle");
  return *n;
}
}  // namespace

const Shape& Array::shape() const { return checked(node_).shape; }

int64_t Array::shape(int axis) const {
  int nd = ndim();
  int a = axis < 0 ? axis + nd : axis;
  if (a < 0 || a >= nd) fail("shape", "axis ", axis, " is out of range for an array of rank ", nd);
  return shape()[static_cast<size_t>(a)];
}

Dtype Array::dtype() const { return checked(node_).dtype; }
int64_t Array::size() const { return detail::shape_size(shape()); }
Device Array::device() const { return checked(node_).device; }

void Array::eval() const { kiln::eval({*this}); }
bool Array::is_evaluated() const { return checked(node_).ready.load(std::memory_order_acquire); }

const detail::Tensor& Array::tensor() const {
  if (!is_evaluated()) fail("array", "array is not evaluated");
  return node_->tensor;
}

void Array::check_item() const {
  if (size() != 1) fail("item", "item() needs an array of size 1, got shape ", detail::shape_str(shape()));
}

void Array::copy_to(void* dst, Dtype as) const {
  eval();
  if (size() == 0) return;
  detail::Tensor target(shape(), as);
  target.buffer = detail::Buffer::borrow(dst, detail::checked_bytes("copy_to", shape(), as));
#ifdef KILN_WITH_CUDA
  detail::copy_convert(cuda::to_host(tensor()), target);
#else
  detail::copy_convert(tensor(), target);
#endif
}

Array to(const Array& a, Device device) {
  a.eval();
  detail::Tensor t = a.tensor();
#ifdef KILN_WITH_CUDA
  t = device.type == Device::Type::cuda ? cuda::to_device(t, device.index) : cuda::to_host(t);
#else
  if (device.type != Device::Type::cpu) fail("to", "kiln was built without a CUDA backend");
#endif
  return Array::from_tensor(std::move(t), device);
}

std::vector<Array> Array::make(std::vector<Shape> shapes, std::vector<Dtype> dtypes, std::shared_ptr<Primitive> prim,
                               std::vector<Array> inputs) {
  Device device = inputs.empty() ? default_device() : inputs[0].device();
  // An op with a CUDA input runs there; host inputs (scalars, arrays made from host data) move on use.
  for (auto& in : inputs) {
    if (in.device().type != Device::Type::cpu) {
      device = in.device();
      break;
    }
  }
  // Every shape an op computes is checked here once, so later size and stride products cannot wrap.
  for (size_t i = 0; i < shapes.size(); ++i) detail::check_shape(prim->name(), shapes[i], dtypes[i]);
  auto producer = std::make_shared<detail::Producer>();
  producer->prim = std::move(prim);
  producer->inputs = std::move(inputs);
  std::vector<Array> outs;
  outs.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    producer->results.emplace_back(shapes[i], dtypes[i]);
    auto node = std::make_shared<detail::Node>();
    node->shape = std::move(shapes[i]);
    node->dtype = dtypes[i];
    node->device = device;
    node->output_index = static_cast<int>(i);
    node->trace_id = detail::current_trace_id();
    node->producer = producer;
    outs.emplace_back(std::move(node));
  }
  if (eager() && detail::current_trace_id() == 0) kiln::eval(outs);
  return outs;
}

Array Array::make(Shape shape, Dtype dtype, std::shared_ptr<Primitive> prim, std::vector<Array> inputs) {
  return make(std::vector<Shape>{std::move(shape)}, std::vector<Dtype>{dtype}, std::move(prim), std::move(inputs))[0];
}

Array Array::from_tensor(detail::Tensor t, Device device) {
  auto node = std::make_shared<detail::Node>();
  node->shape = t.shape;
  node->dtype = t.dtype;
  node->device = device;
  node->tensor = std::move(t);
  node->trace_id = detail::current_trace_id();
  node->ready.store(true, std::memory_order_release);
  return Array(std::move(node));
}

Array array(const void* data, Shape shape, Dtype dtype) {
  detail::check_shape("array", shape, dtype);
  detail::Tensor t(std::move(shape), dtype);
  t.allocate();
  if (t.size() > 0) std::memcpy(t.raw(), data, static_cast<size_t>(t.size()) * t.itemsize());
  return Array::from_tensor(std::move(t), default_device());
}

Array array_checked(const void* data, size_t count, Shape shape, Dtype dtype) {
  int64_t n = detail::checked_size("array", shape);
  if (static_cast<size_t>(n) != count) {
    fail("array", "got ", count, " elements for shape ", detail::shape_str(shape), " which holds ", n);
  }
  return array(data, std::move(shape), dtype);
}

Array external_array(const void* data, Shape shape, Dtype dtype, std::shared_ptr<const void> owner) {
  const uint64_t item = static_cast<uint64_t>(size_of(dtype));
  const size_t bytes = detail::checked_bytes("external_array", shape, dtype);
  if (!owner) fail("external_array", "no owner keeps the memory alive");
  if (reinterpret_cast<uintptr_t>(data) % item != 0)
    fail("external_array", "data at ", data, " is not aligned to ", item, " bytes for ", dtype_name(dtype));
  detail::Tensor t(std::move(shape), dtype);
  t.buffer = detail::Buffer::external(data, static_cast<size_t>(bytes), std::move(owner));
  return Array::from_tensor(std::move(t), Device::cpu());
}

Array scalar(double value, Dtype dtype, Device device) {
  detail::Tensor src(Shape{}, float64), dst(Shape{}, dtype);
  src.allocate();
  dst.allocate();
  *src.data<double>() = value;
  detail::copy_convert(src, dst);
  return Array::from_tensor(std::move(dst), device);
}

Array scalar_int(int64_t value, Dtype dtype, Device device) {
  detail::Tensor src(Shape{}, int64), dst(Shape{}, dtype);
  src.allocate();
  dst.allocate();
  *src.data<int64_t>() = value;
  detail::copy_convert(src, dst);
  return Array::from_tensor(std::move(dst), device);
}

}  // namespace kiln
