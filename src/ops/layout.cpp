// Shape rules, identity and printing of the layout primitives (kernels live in
// backend/cpu/layout.cpp). Front ends validate through output_shapes, so each
// message is written once and also guards shapeless replays.
#include "ops/layout.h"

#include <bit>

#include "core/checked.h"
#include "ops/views.h"

namespace kiln {

using detail::shape_str;

namespace {
void print_slice_args(std::ostream& os, const std::vector<SliceArg>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    os << (i ? "," : "");
    if (args[i].start) os << *args[i].start;
    os << ":";
    if (args[i].stop) os << *args[i].stop;
    if (args[i].step != 1) os << ":" << args[i].step;
  }
}

bool same_slice_args(const std::vector<SliceArg>& a, const std::vector<SliceArg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].start != b[i].start || a[i].stop != b[i].stop || a[i].step != b[i].step) return false;
  }
  return true;
}

void check_axis(const char* op, int axis, size_t ndim) {
  if (axis < 0 || static_cast<size_t>(axis) >= ndim) {
    fail(op, "axis ", axis, " is out of range for an array of rank ", ndim);
  }
}
}  // namespace

// ---- concatenate ----------------------------------------------------------------
std::vector<Shape> Concatenate::output_shapes(const std::vector<Shape>& in) const {
  if (in.empty()) fail("concatenate", "need at least one array to concatenate");
  const Shape& first = in[0];
  if (first.empty()) fail("concatenate", "zero-dimensional arrays cannot be concatenated");
  check_axis("concatenate", axis_, first.size());
  Shape out = first;
  out[static_cast<size_t>(axis_)] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].size() != first.size()) {
      fail("concatenate", "array ", i, " has rank ", in[i].size(), " but array 0 has rank ", first.size());
    }
    for (size_t d = 0; d < first.size(); ++d) {
      if (d != static_cast<size_t>(axis_) && in[i][d] != first[d]) {
        fail("concatenate", "array ", i, " of shape ", shape_str(in[i]), " does not match array 0 of shape ",
             shape_str(first), " off axis ", axis_);
      }
    }
    out[static_cast<size_t>(axis_)] =
        detail::checked_add("concatenate", out[static_cast<size_t>(axis_)], in[i][static_cast<size_t>(axis_)]);
  }
  return {out};
}

bool Concatenate::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const Concatenate&>(o).axis_ == axis_;
}
void Concatenate::print(std::ostream& os) const { os << name() << "(" << axis_ << ")"; }

// ---- pad ------------------------------------------------------------------------
std::vector<Shape> Pad::output_shapes(const std::vector<Shape>& in) const {
  if (widths_.size() != in[0].size()) {
    fail("pad", "got ", widths_.size(), " (before, after) pairs for an array of rank ", in[0].size());
  }
  Shape out = in[0];
  for (size_t i = 0; i < out.size(); ++i) {
    auto [before, after] = widths_[i];
    if (before < 0 || after < 0) {
      fail("pad", "pad widths must be non-negative, got (", before, ",", after, ") for axis ", i);
    }
    out[i] = detail::checked_add("pad", out[i], detail::checked_add("pad", before, after));
  }
  return {out};
}

bool Pad::is_equivalent(const Primitive& o) const {
  if (o.kind() != kind()) return false;
  auto& p = static_cast<const Pad&>(o);
  // Compared by bits so that NaN pads match each other and -0 differs from 0.
  return p.widths_ == widths_ && std::bit_cast<uint64_t>(p.value_) == std::bit_cast<uint64_t>(value_);
}

void Pad::print(std::ostream& os) const {
  os << name() << "(";
  for (auto& [before, after] : widths_) os << "(" << before << "," << after << "),";
  os << value_ << ")";
}

// ---- slice_update -----------------------------------------------------------------
std::vector<Shape> SliceUpdate::output_shapes(const std::vector<Shape>& in) const {
  Shape region = resolve_slice("slice_update", in[0], args_).length;
  const Shape& u = in[1];
  bool ok = u.size() <= region.size();
  size_t lead = ok ? region.size() - u.size() : 0;
  for (size_t i = 0; ok && i < u.size(); ++i) ok = u[i] == 1 || u[i] == region[lead + i];
  if (!ok) {
    fail("slice_update", "cannot broadcast update of shape ", shape_str(u), " to the region's shape ",
         shape_str(region));
  }
  return {in[0]};
}

bool SliceUpdate::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && same_slice_args(static_cast<const SliceUpdate&>(o).args_, args_);
}

void SliceUpdate::print(std::ostream& os) const {
  os << name() << "(";
  print_slice_args(os, args_);
  os << ")";
}

// ---- take -----------------------------------------------------------------------
std::vector<Shape> Take::output_shapes(const std::vector<Shape>& in) const {
  const Shape& a = in[0];
  check_axis("take", axis_, a.size());
  Shape out(a.begin(), a.begin() + axis_);
  out.insert(out.end(), in[1].begin(), in[1].end());
  out.insert(out.end(), a.begin() + axis_ + 1, a.end());
  return {out};
}

bool Take::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const Take&>(o).axis_ == axis_;
}
void Take::print(std::ostream& os) const { os << name() << "(" << axis_ << ")"; }

// ---- take_along_axis ----------------------------------------------------------------
std::vector<Shape> TakeAlongAxis::output_shapes(const std::vector<Shape>& in) const {
  const Shape& a = in[0];
  const Shape& idx = in[1];
  if (idx.size() != a.size()) {
    fail("take_along_axis", "indices of rank ", idx.size(), " do not match the array's rank ", a.size());
  }
  check_axis("take_along_axis", axis_, a.size());
  Shape out(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    if (d == static_cast<size_t>(axis_)) {
      out[d] = idx[d];
    } else if (a[d] == idx[d] || idx[d] == 1) {
      out[d] = a[d];
    } else if (a[d] == 1) {
      out[d] = idx[d];
    } else {
      fail("take_along_axis", "indices of shape ", shape_str(idx), " do not broadcast against the array's shape ",
           shape_str(a), " off axis ", axis_);
    }
  }
  return {out};
}

bool TakeAlongAxis::is_equivalent(const Primitive& o) const {
  return o.kind() == kind() && static_cast<const TakeAlongAxis&>(o).axis_ == axis_;
}
void TakeAlongAxis::print(std::ostream& os) const { os << name() << "(" << axis_ << ")"; }

}  // namespace kiln
