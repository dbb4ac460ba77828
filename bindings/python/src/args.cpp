// Python argument forms shared by the bindings: axes and shapes as an int or a sequence.
#include "common.h"

namespace kpy {

std::vector<int64_t> ints_arg(nb::handle h) {
  std::vector<int64_t> v;
  if (PyIndex_Check(h.ptr()) && !nb::isinstance<kiln::Array>(h)) {
    v.push_back(nb::cast<int64_t>(nb::int_(h)));
    return v;
  }
  for (nb::handle x : h) v.push_back(nb::cast<int64_t>(nb::int_(x)));
  return v;
}

std::vector<int> axes_arg(const std::optional<nb::object>& axis) {
  if (!axis || axis->is_none()) return {};
  std::vector<int> axes;
  for (int64_t a : ints_arg(*axis)) axes.push_back(static_cast<int>(a));
  if (axes.empty()) kiln::fail("axis", "an empty axis list: give None to reduce every axis");
  return axes;
}

kiln::Shape shape_arg(nb::handle shape) {
  kiln::Shape s;
  for (int64_t d : ints_arg(shape)) s.push_back(d);
  return s;
}

}  // namespace kpy
