// CPU kernels for the layout primitives. They move element bits without looking
// at values, so they dispatch on the element width only; every kernel is a walk
// of strided views of the output, and rows contiguous on both sides are memcpy.
#include "ops/layout.h"

#include <algorithm>
#include <cstring>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/indices.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/strided.h"
#include "core/stats.h"
#include "ops/nn.h"
#include "ops/views.h"

namespace kiln {

using detail::copy_elements;
using detail::start_from;
using detail::Tensor;
using detail::view;

namespace {

// Calls f with an unsigned integer of the element width.
template <class F>
void dispatch_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  fail("layout", "unsupported element size ", bytes);
}

/* Sets every element of the (possibly strided) view t to value converted to t's dtype. */
void fill(Tensor& t, double value) {
  if (t.size() == 0) return;
  detail::dispatch_dtype(t.dtype, [&](auto z) {
    using T = decltype(z);
    const T v = math::convert<T>(value);
    T* p = t.data<T>();
    auto L = detail::merge_axes<1>(t.shape, {&t.strides});
    detail::parallel_rows<1>(L, 1, [&](auto off, int64_t n, auto st) {
      T* o = p + off[0];
      if (st[0] == 1) {
        std::fill(o, o + n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = v;
      }
    });
  });
}

/* y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride], the offsets following a_strides and
   idx_strides over y's shape: one strided walk serves take and take_along_axis. */
void gather(const Tensor& a, const Strides& a_strides, int64_t axis_stride, const std::vector<int64_t>& idx,
            const Strides& idx_strides, Tensor& y) {
  dispatch_width(y.itemsize(), [&](auto w) {
    using E = decltype(w);
    const E* ap = a.data<E>();
    const int64_t* ip = idx.data();
    E* yp = y.data<E>();
    auto L = detail::merge_axes<3>(y.shape, {&y.strides, &a_strides, &idx_strides});
    detail::parallel_rows<3>(L, 1, [&](auto off, int64_t n, auto st) {
      E* o = yp + off[0];
      const E* s = ap + off[1];
      const int64_t* k = ip + off[2];
      if (st[2] == 0) {  // one index for the whole row: a block copy
        s += k[0] * axis_stride;
        if (st[0] == 1 && st[1] == 1) {
          std::memcpy(o, s, static_cast<size_t>(n) * sizeof(E));
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] = s[i * st[1]];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = s[i * st[1] + k[i * st[2]] * axis_stride];
      }
    });
  });
}

}  // namespace

namespace detail {

void copy_elements(const Tensor& src, Tensor& dst) {
  if (dst.size() == 0) return;
  detail::count(detail::counters().layout_bytes_copied, static_cast<uint64_t>(dst.size()) * dst.itemsize());
  if (src.dtype != dst.dtype) return detail::copy_convert(src, dst);
  dispatch_width(dst.itemsize(), [&](auto w) {
    using E = decltype(w);
    const E* sp = src.data<E>();
    E* dp = dst.data<E>();
    auto L = detail::merge_axes<2>(dst.shape, {&dst.strides, &src.strides});
    detail::parallel_rows<2>(L, 1, [&](auto off, int64_t n, auto st) {
      const E* s = sp + off[1];
      E* o = dp + off[0];
      if (st[0] == 1 && st[1] == 1) {
        std::memcpy(o, s, static_cast<size_t>(n) * sizeof(E));
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = s[i * st[1]];
      }
    });
  });
}

void start_from(const Tensor& a, Tensor& y) {
  const bool reuse =
      a.donated && a.buffer && a.buffer->on_host() && a.buffer->owned() && a.row_contiguous() && a.dtype == y.dtype;
  if (reuse) {
    y.view_of(a, a.strides, a.offset);
    return;
  }
  y.allocate();
  copy_elements(a, y);
}

GatherStrides take_strides(const Tensor& a, const Tensor& ind, const Tensor& y, size_t axis) {
  const size_t r = ind.shape.size();
  GatherStrides g{Strides(y.shape.size(), 0), Strides(y.shape.size(), 0)};
  Strides dense = row_major_strides(ind.shape);
  for (size_t d = 0; d < axis; ++d) g.a[d] = a.strides[d];
  for (size_t j = 0; j < r; ++j) g.idx[axis + j] = dense[j];
  for (size_t d = axis + 1; d < a.shape.size(); ++d) g.a[d - 1 + r] = a.strides[d];
  return g;
}

GatherStrides take_along_axis_strides(const Tensor& a, const Tensor& ind, const Tensor& y, size_t axis) {
  GatherStrides g{Strides(y.shape.size()), Strides(y.shape.size())};
  Strides dense = row_major_strides(ind.shape);
  for (size_t d = 0; d < y.shape.size(); ++d) {
    bool a_bcast = a.shape[d] == 1 && y.shape[d] != 1;
    bool i_bcast = ind.shape[d] == 1 && y.shape[d] != 1;
    g.a[d] = (d == axis || a_bcast) ? 0 : a.strides[d];
    g.idx[d] = i_bcast ? 0 : dense[d];
  }
  return g;
}

/* The indices as int64 in row-major order of their shape, negative ones counted from the
   end. Checked before any gathering, so the first bad index (row-major) is reported. */
std::vector<int64_t> normalized_indices(const char* op, const Tensor& idx, int64_t size, int axis) {
  std::vector<int64_t> out(static_cast<size_t>(idx.size()));
  if (out.empty()) return out;
  Tensor dense = idx;
  if (!idx.row_contiguous()) {
    dense = Tensor(idx.shape, idx.dtype);
    dense.allocate();
    detail::copy_convert(idx, dense);
  }
  detail::dispatch_dtype(idx.dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (math::is_int_v<T>) {
      const T* p = dense.data<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_unsigned_v<T>) {
          uint64_t v = p[i];
          if (v >= static_cast<uint64_t>(size)) {
            fail(op, "index ", v, " is out of bounds for axis ", axis, " with size ", size);
          }
          out[i] = static_cast<int64_t>(v);
        } else {
          int64_t v = p[i];
          if (v < -size || v >= size) fail(op, "index ", v, " is out of bounds for axis ", axis, " with size ", size);
          out[i] = v < 0 ? v + size : v;
        }
      }
    } else {
      fail(op, "indices must be integers, got ", dtype_name(idx.dtype));
    }
  });
  return out;
}

}  // namespace detail

void Copy::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  out[0].allocate();
  copy_elements(in[0], out[0]);
}

void Concatenate::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  y.allocate();
  const size_t ax = static_cast<size_t>(axis_);
  int64_t pos = 0;
  for (const Tensor& x : in) {
    Tensor part = view(y, x.shape, y.strides, pos * y.strides[ax]);
    copy_elements(x, part);
    pos += x.shape[ax];
  }
}

void Pad::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  y.allocate();
  if (y.size() == 0) return;
  // The border is 2 * ndim disjoint slabs: on axis d the before and after widths, with
  // the axes before d limited to the interior and those after d taken whole.
  Shape slab = y.shape;
  int64_t interior = 0;
  for (size_t d = 0; d < y.shape.size(); ++d) {
    auto [before, after] = widths_[d];
    slab[d] = before;
    Tensor lo = view(y, slab, y.strides, interior);
    fill(lo, value_);
    slab[d] = after;
    Tensor hi = view(y, slab, y.strides, interior + (before + x.shape[d]) * y.strides[d]);
    fill(hi, value_);
    slab[d] = x.shape[d];
    interior += before * y.strides[d];
  }
  Tensor inner = view(y, x.shape, y.strides, interior);
  copy_elements(x, inner);
}

void SliceUpdate::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& a = in[0];
  const Tensor& u = in[1];
  Tensor& y = out[0];
  start_from(a, y);
  auto r = resolve_slice("slice_update", a.shape, args_);
  if (detail::shape_size(r.length) == 0) return;
  const size_t nd = a.shape.size();
  Strides rs(nd);
  int64_t off = y.offset;
  for (size_t i = 0; i < nd; ++i) {
    rs[i] = r.length[i] > 1 ? y.strides[i] * r.step[i] : y.strides[i];  // a huge step on one element could wrap
    off += r.start[i] * y.strides[i];
  }
  Tensor region = view(y, r.length, std::move(rs), off);
  // The update broadcast to the region's shape: stride 0 on added and size-1 axes.
  Strides us(nd, 0);
  const size_t lead = nd - u.shape.size();
  for (size_t i = 0; i < u.shape.size(); ++i) us[lead + i] = u.shape[i] == 1 ? 0 : u.strides[i];
  Tensor src = view(u, r.length, std::move(us), u.offset);
  copy_elements(src, region);
}

void DynamicSliceUpdate::check_start(const Shape& a, const Shape& u, const Tensor& start_tensor) const {
  const std::vector<int32_t> start = detail::elements_as<int32_t>(start_tensor);
  for (size_t i = 0; i < axes_.size(); ++i) {
    const size_t ax = static_cast<size_t>(axes_[i]);
    if (start[i] < 0 || start[i] + u[ax] > a[ax]) {
      fail("slice_update", "start ", start[i], " on axis ", ax, " puts the update of length ", u[ax],
           " outside the axis of length ", a[ax]);
    }
  }
}

void DynamicSliceUpdate::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& a = in[0];
  const Tensor& u = in[1];
  check_start(a.shape, u.shape, in[2]);
  const std::vector<int32_t> start = detail::elements_as<int32_t>(in[2]);
  Tensor& y = out[0];
  start_from(a, y);
  int64_t at = y.offset;
  for (size_t i = 0; i < axes_.size(); ++i) at += start[i] * y.strides[static_cast<size_t>(axes_[i])];
  Tensor region = view(y, u.shape, y.strides, at);
  copy_elements(u, region);
}

void Take::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& a = in[0];
  const Tensor& ind = in[1];
  Tensor& y = out[0];
  y.allocate();
  const size_t ax = static_cast<size_t>(axis_);
  std::vector<int64_t> idx = normalized_indices("take", ind, a.shape[ax], axis_);
  if (y.size() == 0) return;
  const detail::GatherStrides g = detail::take_strides(a, ind, y, ax);
  gather(a, g.a, a.strides[ax], idx, g.idx, y);
}

void TakeAlongAxis::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& a = in[0];
  const Tensor& ind = in[1];
  Tensor& y = out[0];
  y.allocate();
  const size_t ax = static_cast<size_t>(axis_);
  std::vector<int64_t> idx = normalized_indices("take_along_axis", ind, a.shape[ax], axis_);
  if (y.size() == 0) return;
  const detail::GatherStrides g = detail::take_along_axis_strides(a, ind, y, ax);
  gather(a, g.a, a.strides[ax], idx, g.idx, y);
}

}  // namespace kiln
