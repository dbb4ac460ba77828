// Registry ops that move data without computing: views, copies, joins, padding, gathers and
// slice_update.
#include "ops_registry.h"

namespace kpy {

namespace {

std::vector<kiln::Array> arrays_arg(nb::handle seq) {
  std::vector<kiln::Array> v;
  for (nb::handle h : seq) v.push_back(to_array_like(h).get());
  return v;
}

nb::list array_list(const std::vector<kiln::Array>& v) {
  nb::list l;
  for (const auto& a : v) l.append(nb::cast(a));
  return l;
}

}  // namespace

void bind_reshape(nb::module_& m) {
  m.def(
      "reshape", [](const ArrayLike& a, const ShapeLike& shape) { return kiln::reshape(a.get(), shape.dims); }, "a"_a,
      "shape"_a, op_doc("reshape"));
}

void bind_transpose(nb::module_& m) {
  m.def(
      "transpose",
      [](const ArrayLike& a, const std::optional<nb::object>& axes) {
        std::vector<int> perm;
        if (axes && !axes->is_none())
          for (int64_t x : ints_arg(*axes)) perm.push_back(static_cast<int>(x));
        return kiln::transpose(a.get(), perm);
      },
      "a"_a, "axes"_a = nb::none(), op_doc("transpose"));
}

void bind_broadcast_to(nb::module_& m) {
  m.def(
      "broadcast_to",
      [](const ArrayLike& a, const ShapeLike& shape) { return kiln::broadcast_to(a.get(), shape.dims); }, "a"_a,
      "shape"_a, op_doc("broadcast_to"));
}

void bind_slice(nb::module_& m) {
  m.def(
      "slice",
      [](const ArrayLike& a, nb::handle start, nb::handle stop, const std::optional<nb::object>& step) {
        kiln::Shape st = shape_arg(start), sp = shape_arg(stop), s;
        if (step) s = shape_arg(*step);
        return kiln::slice(a.get(), st, sp, s);
      },
      "a"_a, "start"_a, "stop"_a, "step"_a = nb::none(),
      "a[start:stop:step] with one entry per axis (Python's slicing rules); a[...] does the same.");
}

void bind_squeeze(nb::module_& m) {
  m.def(
      "squeeze",
      [](const ArrayLike& a, const std::optional<nb::object>& axis) { return kiln::squeeze(a.get(), axes_arg(axis)); },
      "a"_a, "axis"_a = nb::none(), op_doc("squeeze"));
}

void bind_expand_dims(nb::module_& m) {
  m.def(
      "expand_dims", [](const ArrayLike& a, int axis) { return kiln::expand_dims(a.get(), axis); }, "a"_a, "axis"_a,
      op_doc("expand_dims"));
}

void bind_flatten(nb::module_& m) {
  m.def(
      "flatten", [](const ArrayLike& a) { return kiln::flatten(a.get()); }, "a"_a, op_doc("flatten"));
}

void bind_swapaxes(nb::module_& m) {
  m.def(
      "swapaxes", [](const ArrayLike& a, int x, int y) { return kiln::swapaxes(a.get(), x, y); }, "a"_a, "axis1"_a,
      "axis2"_a, op_doc("swapaxes"));
}

void bind_copy(nb::module_& m) {
  m.def(
      "copy", [](const ArrayLike& a) { return kiln::copy(a.get()); }, "a"_a, op_doc("copy"));
}

void bind_concatenate(nb::module_& m) {
  m.def(
      "concatenate", [](nb::handle arrays, int axis) { return kiln::concatenate(arrays_arg(arrays), axis); },
      "arrays"_a, "axis"_a = 0, op_doc("concatenate"));
}

void bind_stack(nb::module_& m) {
  m.def(
      "stack", [](nb::handle arrays, int axis) { return kiln::stack(arrays_arg(arrays), axis); }, "arrays"_a,
      "axis"_a = 0, op_doc("stack"));
}

void bind_split(nb::module_& m) {
  m.def(
      "split",
      [](const ArrayLike& a, nb::handle sections, int axis) {
        if (PyLong_Check(sections.ptr())) return array_list(kiln::split(a.get(), nb::cast<int>(sections), axis));
        return array_list(kiln::split(a.get(), ints_arg(sections), axis));
      },
      "a"_a, "indices_or_sections"_a, "axis"_a = 0,
      "Equal parts (an int) or parts split before each index (a sequence), as numpy.split.");
}

void bind_pad(nb::module_& m) {
  m.def(
      "pad",
      [](const ArrayLike& a, nb::handle widths, double value) {
        kiln::Array x = a.get();
        std::vector<std::pair<int64_t, int64_t>> w;
        if (PyLong_Check(widths.ptr())) {
          const auto n = nb::cast<int64_t>(widths);
          w.assign(static_cast<size_t>(x.ndim()), {n, n});
        } else {
          for (nb::handle h : widths) {
            std::vector<int64_t> p = ints_arg(h);
            if (p.size() == 1) p.push_back(p[0]);
            if (p.size() != 2) kiln::fail("pad", "each axis takes (before, after)");
            w.push_back({p[0], p[1]});
          }
        }
        return kiln::pad(x, w, value);
      },
      "a"_a, "pad_width"_a, "constant_values"_a = 0.0,
      "Pads each axis with (before, after) elements of constant_values (an int pads every side).");
}

void bind_slice_update(nb::module_& m) {
  m.def(
      "slice_update",
      [](const ArrayLike& a, const ArrayLike& update, nb::handle start, nb::handle stop_or_axes,
         const std::optional<nb::object>& step) {
        kiln::Array x = a.get();
        kiln::Array u = update.like(x);
        if (nb::isinstance<kiln::Array>(start)) {
          // A start held in an array: the region is update's shape at start along `axes`.
          std::vector<int> axes;
          for (int64_t v : ints_arg(stop_or_axes)) axes.push_back(static_cast<int>(v));
          return kiln::slice_update(x, u, nb::cast<const kiln::Array&>(start), axes);
        }
        kiln::Shape s;
        if (step) s = shape_arg(*step);
        return kiln::slice_update(x, u, shape_arg(start), shape_arg(stop_or_axes), s);
      },
      "a"_a, "update"_a, "start"_a, "stop"_a, "step"_a = nb::none(),
      "A copy of a with the region start:stop:step (one entry per axis) replaced by update.\n"
      "With start a kiln int32 array, `stop` is the list of axes it indexes and the region has\n"
      "update's shape (a compiled decode step writes a KV cache at position t without recompiling).");
}

void bind_take(nb::module_& m) {
  m.def(
      "take",
      [](const ArrayLike& a, const ArrayLike& idx, std::optional<int> axis) {
        kiln::Array x = a.get();
        if (!axis) return kiln::take(kiln::flatten(x), idx.get(), 0);
        return kiln::take(x, idx.get(), *axis);
      },
      "a"_a, "indices"_a, "axis"_a = nb::none(), op_doc("take"));
}

void bind_take_along_axis(nb::module_& m) {
  m.def(
      "take_along_axis",
      [](const ArrayLike& a, const ArrayLike& idx, int axis) {
        return kiln::take_along_axis(a.get(), idx.get(), axis);
      },
      "a"_a, "indices"_a, "axis"_a, op_doc("take_along_axis"));
}

}  // namespace kpy
