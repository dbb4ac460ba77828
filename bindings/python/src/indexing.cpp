// NumPy-style indexing: a[1:3, ::2], a[i], a[..., None], a[idx] with one integer array (take),
// and assignment through slice_update (a[1:3] = v makes a new node; the handle moves to it).
#include <algorithm>

#include "common.h"

namespace kpy {

namespace {

/* One axis of the input as an index selects it. */
struct AxisSel {
  int64_t start = 0, step = 1, length = 0;  // the positions start + k*step, k < length
  bool squeeze = false;  // an integer index: the axis goes away
};

struct Index {
  std::vector<AxisSel> axes;  // one per input axis
  std::optional<kiln::Array> take;  // the one integer-array index
  int take_axis = -1;  // its input axis
  bool take_first = false;  // NumPy puts its dimensions first (advanced indices apart)
  std::vector<int> new_axes;  // output positions of None, ascending
};

bool is_array_index(nb::handle h) {
  return nb::isinstance<kiln::Array>(h) || is_buffer_like(h) || nb::isinstance<nb::list>(h);
}

kiln::Array index_array(nb::handle h) {
  kiln::Array idx = to_array_like(h).get();
  if (idx.dtype() == kiln::bool_)
    kiln::fail("getitem", "a boolean mask gives a shape that depends on the data; use kiln.where instead");
  if (!kiln::is_integral(idx.dtype()))
    kiln::fail("getitem", "array indices must be integers, not ", kiln::dtype_name(idx.dtype()));
  return idx;
}

Index parse(const kiln::Array& a, nb::handle key, const char* op) {
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(key)) {
    for (nb::handle h : key) items.push_back(h);
  } else {
    items.push_back(key);
  }
  int consuming = 0, ellipses = 0;
  for (nb::handle h : items) {
    if (h.is_none()) continue;
    if (h.ptr() == Py_Ellipsis)
      ++ellipses;
    else
      ++consuming;
  }
  if (ellipses > 1) throw nb::index_error("an index can only have a single ellipsis ('...')");
  const int nd = a.ndim();
  if (consuming > nd)
    throw nb::index_error(("too many indices: the array has " + std::to_string(nd) + " dimensions but " +
                           std::to_string(consuming) + " were indexed")
                              .c_str());
  Index ix;
  ix.axes.resize(static_cast<size_t>(nd));
  int axis = 0, out = 0;
  std::vector<int> advanced;  // positions in `items` of integer and array indices
  auto full = [&](int ax) { ix.axes[ax] = {0, 1, a.shape(ax), false}; };
  for (size_t k = 0; k < items.size(); ++k) {
    nb::handle h = items[k];
    if (h.is_none()) {
      ix.new_axes.push_back(out++);
    } else if (h.ptr() == Py_Ellipsis) {
      for (int n = nd - consuming; n > 0; --n) full(axis++), ++out;
    } else if (PySlice_Check(h.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      const Py_ssize_t len = PySlice_AdjustIndices(static_cast<Py_ssize_t>(a.shape(axis)), &start, &stop, step);
      ix.axes[axis++] = {start, step, len, false};
      ++out;
    } else if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
      int64_t i = nb::cast<int64_t>(h), n = a.shape(axis);
      if (i < -n || i >= n)
        throw nb::index_error(("index " + std::to_string(i) + " is out of bounds for axis " + std::to_string(axis) +
                               " with size " + std::to_string(n))
                                  .c_str());
      ix.axes[axis++] = {i < 0 ? i + n : i, 1, 1, true};
      advanced.push_back(static_cast<int>(k));
    } else if (is_array_index(h)) {
      if (ix.take) kiln::fail(op, "only one array index is supported (kiln has take, not NumPy's multi-array gather)");
      ix.take = index_array(h);
      ix.take_axis = axis;
      full(axis++);
      out += ix.take->ndim();
      advanced.push_back(static_cast<int>(k));
    } else if (PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
      nb::object i = nb::steal(PyNumber_Index(h.ptr()));
      if (!i) throw nb::python_error();
      items[k] = i;  // kept alive by the caller's key for the plain types; re-read below as an int
      int64_t v = nb::cast<int64_t>(i), n = a.shape(axis);
      if (v < -n || v >= n) throw nb::index_error(("index " + std::to_string(v) + " is out of bounds").c_str());
      ix.axes[axis++] = {v < 0 ? v + n : v, 1, 1, true};
      advanced.push_back(static_cast<int>(k));
    } else {
      throw nb::index_error(
          ("kiln arrays cannot be indexed by " + nb::cast<std::string>(nb::repr(nb::type_name(h.type())))).c_str());
    }
  }
  while (axis < nd) full(axis++);
  // With an array index, NumPy counts integers as advanced indices too; when they are not side
  // by side the array index's dimensions go first.
  if (ix.take && advanced.size() > 1)
    ix.take_first = advanced.back() - advanced.front() + 1 != static_cast<int>(advanced.size());
  return ix;
}

kiln::Array get(const kiln::Array& a, nb::handle key) {
  Index ix = parse(a, key, "getitem");
  const int nd = a.ndim();
  std::vector<kiln::SliceArg> args;
  bool whole = true;
  for (const AxisSel& s : ix.axes) {
    whole = whole && s.start == 0 && s.step == 1;
    if (s.length == 0) {
      args.push_back({0, 0, 1});
      continue;
    }
    std::optional<int64_t> stop = s.start + s.step * (s.length - 1) + (s.step > 0 ? 1 : -1);
    if (*stop < 0) stop = std::nullopt;  // a negative step down to index 0: -1 would count from the end
    args.push_back({s.start, stop, s.step});
  }
  for (int i = 0; i < nd; ++i) whole = whole && ix.axes[i].length == a.shape(i);
  kiln::Array r = whole ? a : kiln::slice(a, args);
  int shift = 0;  // extra dimensions the array index adds after its axis
  if (ix.take) {
    r = kiln::take(r, *ix.take, ix.take_axis);
    shift = ix.take->ndim() - 1;
  }
  std::vector<int> squeeze;
  for (int i = 0; i < nd; ++i) {
    if (ix.axes[i].squeeze) squeeze.push_back(ix.take && i > ix.take_axis ? i + shift : i);
  }
  if (!squeeze.empty()) r = kiln::squeeze(r, squeeze);
  if (ix.take_first) {
    int pos = ix.take_axis;
    for (int i = 0; i < ix.take_axis; ++i) pos -= ix.axes[i].squeeze ? 1 : 0;
    const int k = ix.take->ndim();
    std::vector<int> perm;
    for (int i = pos; i < pos + k; ++i) perm.push_back(i);
    for (int i = 0; i < r.ndim(); ++i)
      if (i < pos || i >= pos + k) perm.push_back(i);
    r = kiln::transpose(r, perm);
  }
  for (int p : ix.new_axes) r = kiln::expand_dims(r, p);
  return r;
}

void set(kiln::Array& a, nb::handle key, const ArrayLike& value) {
  Index ix = parse(a, key, "setitem");
  if (ix.take)
    kiln::fail("setitem",
               "assignment through an array index needs a scatter, which kiln does not have; "
               "use slices and integers");
  const int nd = a.ndim();
  kiln::Shape start(nd), stop(nd), step(nd), region(nd), selected;
  std::vector<int> reverse;
  for (int i = 0; i < nd; ++i) {
    const AxisSel& s = ix.axes[i];
    if (s.length == 0) return;  // nothing selected
    int64_t first = s.start, st = s.step;
    if (st < 0) {
      first = s.start + st * (s.length - 1);  // the same positions walked upwards
      st = -st;
      reverse.push_back(i);
    }
    start[i] = first;
    stop[i] = first + st * (s.length - 1) + 1;
    step[i] = st;
    region[i] = s.length;
    if (!s.squeeze) selected.push_back(s.length);
  }
  for (int p : ix.new_axes) selected.insert(selected.begin() + p, 1);
  kiln::Array v = kiln::astype(value.like(a), a.dtype());
  v = kiln::reshape(kiln::broadcast_to(v, selected), region);
  for (int i : reverse) {
    std::vector<kiln::SliceArg> args(static_cast<size_t>(nd));
    args[i] = {std::nullopt, std::nullopt, -1};
    v = kiln::slice(v, args);
  }
  a = kiln::slice_update(a, v, start, stop, step);
}

}  // namespace

void init_indexing(ArrayClass& array) {
  array.def("__getitem__", &get, "key"_a.none(),
            "NumPy indexing: integers, slices, ..., None, and one integer array (kiln.take) on one axis.\n"
            "Views (slices) share the buffer; nothing is computed until evaluation.");
  array.def(
      "__setitem__", [](kiln::Array& a, nb::handle key, const ArrayLike& v) { set(a, key, v); }, "key"_a.none(),
      "value"_a,
      "a[key] = value through kiln.slice_update: the value, broadcast to the selected region and\n"
      "cast to a's dtype, replaces it in a new array that this handle then refers to (other handles\n"
      "to the old array keep the old values).");
}

}  // namespace kpy
