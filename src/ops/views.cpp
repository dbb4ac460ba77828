#include "ops/views.h"

#include <algorithm>

#include "backend/cpu/copy.h"
#include "core/checked.h"

namespace kiln {

using detail::shape_str;
using detail::Tensor;

namespace {
template <class V>
void print_list(std::ostream& os, const char* name, const V& v) {
  os << name << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ")";
}
}  // namespace

// ---- reshape ------------------------------------------------------------------
std::vector<Shape> Reshape::output_shapes(const std::vector<Shape>& in) const {
  int64_t size = detail::shape_size(in[0]);
  Shape out = shape_;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) fail("reshape", "only one dimension can be -1, got ", shape_str(shape_));
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      fail("reshape", "invalid dimension ", out[i], " in shape ", shape_str(shape_));
    } else if (__builtin_mul_overflow(known, out[i], &known)) {
      fail("reshape", "shape ", shape_str(shape_), " has more elements than int64 holds");
    }
  }
  if (infer >= 0) {
    if (known == 0 || size % known != 0) {
      fail("reshape", "cannot reshape array of size ", size, " into shape ", shape_str(shape_));
    }
    out[static_cast<size_t>(infer)] = size / known;
  } else if (known != size) {
    fail("reshape", "cannot reshape array of size ", size, " into shape ", shape_str(shape_));
  }
  return {out};
}

void Reshape::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].row_contiguous()) {
    out[0].view_of(in[0], detail::row_major_strides(out[0].shape), in[0].offset);
  } else {
    // Not expressible as a view: copy into a row-major buffer, read in the input's shape.
    out[0].allocate();
    Tensor target = out[0];
    target.shape = in[0].shape;
    target.strides = detail::row_major_strides(in[0].shape);
    detail::copy_convert(in[0], target);
  }
}

bool Reshape::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const Reshape&>(o).shape_ == shape_;
}
void Reshape::print(std::ostream& os) const { print_list(os, name(), shape_); }

// ---- transpose ----------------------------------------------------------------
std::vector<Shape> Transpose::output_shapes(const std::vector<Shape>& in) const {
  if (perm_.size() != in[0].size()) {
    fail("transpose", "permutation has ", perm_.size(), " axes but the array has ", in[0].size());
  }
  Shape out(perm_.size());
  for (size_t i = 0; i < perm_.size(); ++i) out[i] = in[0][static_cast<size_t>(perm_[i])];
  return {out};
}

void Transpose::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Strides s(perm_.size());
  for (size_t i = 0; i < perm_.size(); ++i) s[i] = in[0].strides[static_cast<size_t>(perm_[i])];
  out[0].view_of(in[0], std::move(s), in[0].offset);
}

bool Transpose::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const Transpose&>(o).perm_ == perm_;
}
void Transpose::print(std::ostream& os) const { print_list(os, name(), perm_); }

// ---- broadcast_to -------------------------------------------------------------
std::vector<Shape> BroadcastTo::output_shapes(const std::vector<Shape>& in) const {
  const Shape& s = in[0];
  if (s.size() > shape_.size()) {
    fail("broadcast_to", "cannot broadcast shape ", shape_str(s), " to ", shape_str(shape_));
  }
  size_t lead = shape_.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 1 && s[i] != shape_[lead + i]) {
      fail("broadcast_to", "cannot broadcast shape ", shape_str(s), " to ", shape_str(shape_));
    }
  }
  return {shape_};
}

void BroadcastTo::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  size_t lead = out[0].shape.size() - x.shape.size();
  Strides s(out[0].shape.size(), 0);
  for (size_t i = 0; i < x.shape.size(); ++i) {
    s[lead + i] = (x.shape[i] == 1 && out[0].shape[lead + i] != 1) ? 0 : x.strides[i];
  }
  out[0].view_of(x, std::move(s), x.offset);
}

bool BroadcastTo::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const BroadcastTo&>(o).shape_ == shape_;
}
void BroadcastTo::print(std::ostream& os) const { print_list(os, name(), shape_); }

// ---- squeeze / expand_dims ----------------------------------------------------
std::vector<Shape> Squeeze::output_shapes(const std::vector<Shape>& in) const {
  Shape out;
  size_t next = 0;
  for (size_t i = 0; i < in[0].size(); ++i) {
    if (next < axes_.size() && static_cast<size_t>(axes_[next]) == i) {
      if (in[0][i] != 1)
        fail("squeeze", "cannot squeeze axis ", i, " of size ", in[0][i], " in shape ", shape_str(in[0]));
      ++next;
      continue;
    }
    out.push_back(in[0][i]);
  }
  if (next != axes_.size()) fail("squeeze", "axis out of range for shape ", shape_str(in[0]));
  return {out};
}

void Squeeze::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Strides s;
  size_t next = 0;
  for (size_t i = 0; i < in[0].shape.size(); ++i) {
    if (next < axes_.size() && static_cast<size_t>(axes_[next]) == i) {
      ++next;
      continue;
    }
    s.push_back(in[0].strides[i]);
  }
  out[0].view_of(in[0], std::move(s), in[0].offset);
}

bool Squeeze::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const Squeeze&>(o).axes_ == axes_;
}
void Squeeze::print(std::ostream& os) const { print_list(os, name(), axes_); }

std::vector<Shape> ExpandDims::output_shapes(const std::vector<Shape>& in) const {
  Shape out = in[0];
  for (int ax : axes_) {
    if (ax < 0 || static_cast<size_t>(ax) > out.size()) fail("expand_dims", "axis ", ax, " out of range");
    out.insert(out.begin() + ax, 1);
  }
  return {out};
}

void ExpandDims::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Strides s = in[0].strides;
  for (int ax : axes_) s.insert(s.begin() + ax, 0);
  out[0].view_of(in[0], std::move(s), in[0].offset);
}

bool ExpandDims::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const ExpandDims&>(o).axes_ == axes_;
}
void ExpandDims::print(std::ostream& os) const { print_list(os, name(), axes_); }

// ---- slice --------------------------------------------------------------------
int64_t slice_length(int64_t start, int64_t stop, int64_t step);

ResolvedSlice resolve_slice(const char* op, const Shape& shape, const std::vector<SliceArg>& args) {
  if (args.size() > shape.size()) {
    fail(op, "got ", args.size(), " slice arguments for an array of rank ", shape.size());
  }
  ResolvedSlice r;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t n = shape[i];
    SliceArg a = i < args.size() ? args[i] : SliceArg{};
    if (a.step == 0) fail(op, "slice step cannot be zero (axis ", i, ")");
    int64_t start, stop;
    if (a.step > 0) {
      start = a.start ? (*a.start < 0 ? std::max<int64_t>(0, *a.start + n) : std::min(*a.start, n)) : 0;
      stop = a.stop ? (*a.stop < 0 ? std::max<int64_t>(0, *a.stop + n) : std::min(*a.stop, n)) : n;
    } else {
      start = a.start ? (*a.start < 0 ? std::max<int64_t>(-1, *a.start + n) : std::min(*a.start, n - 1)) : n - 1;
      stop = a.stop ? (*a.stop < 0 ? std::max<int64_t>(-1, *a.stop + n) : std::min(*a.stop, n - 1)) : -1;
    }
    r.start.push_back(start);
    r.step.push_back(a.step);
    r.length.push_back(slice_length(start, stop, a.step));
  }
  return r;
}

int64_t slice_length(int64_t start, int64_t stop, int64_t step) {
  // Bounds are clamped to [-1, n], so the distance fits; 1 + (d - 1) / |step| has no
  // d + |step| - 1 to wrap (step = INT64_MAX gives one element, as in numpy).
  uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
  int64_t d = step > 0 ? stop - start : start - stop;
  return d > 0 ? static_cast<int64_t>(1 + (static_cast<uint64_t>(d) - 1) / mag) : 0;
}

std::vector<Shape> Slice::output_shapes(const std::vector<Shape>& in) const {
  return {resolve_slice("slice", in[0], args_).length};
}

void Slice::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  auto r = resolve_slice("slice", x.shape, args_);
  int64_t off = x.offset;
  Strides s(x.shape.size());
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (r.length[i] > 0) off += r.start[i] * x.strides[i];
    // With one element the stride is never used, and stride * a huge step could wrap.
    s[i] = r.length[i] > 1 ? x.strides[i] * r.step[i] : x.strides[i];
  }
  out[0].view_of(x, std::move(s), out[0].size() == 0 ? x.offset : off);
}

bool Slice::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& b = static_cast<const Slice&>(o).args_;
  if (b.size() != args_.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].start != args_[i].start || b[i].stop != args_[i].stop || b[i].step != args_[i].step) return false;
  }
  return true;
}

void Slice::print(std::ostream& os) const {
  os << name() << "(";
  for (size_t i = 0; i < args_.size(); ++i) {
    os << (i ? "," : "");
    if (args_[i].start) os << *args_[i].start;
    os << ":";
    if (args_[i].stop) os << *args_[i].stop;
    if (args_[i].step != 1) os << ":" << args_[i].step;
  }
  os << ")";
}

}  // namespace kiln
