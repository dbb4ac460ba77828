// kiln.compile for Python functions. Arguments are trees (tuples, lists, dicts) of arrays and
// constants; as in MLX's mx.compile, the arrays become the compiled function's inputs and
// everything else (the tree's structure, None, bools, ints, floats, strings, keyword names) is
// part of the cache key: each distinct structure and constant set has its own kiln
// CompiledFunction, which traces once per input signature. Calls release the GIL; the trace
// takes it back to run the Python function.
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "common.h"

namespace kpy {

namespace {

/* Marks where an array goes in a template: a unique object. */
nb::object array_slot() {
  static nb::object* slot =
      new nb::object(nb::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type))));
  return *slot;
}

/* Appends h's structure and constants to key, its arrays to arrays, and returns its template
   (the same tree with each array replaced by array_slot()). outputs: only arrays may be leaves. */
nb::object flatten(nb::handle h, std::string& key, std::vector<kiln::Array>& arrays, bool outputs) {
  if (nb::isinstance<kiln::Array>(h)) {
    key += 'a';
    arrays.push_back(nb::cast<const kiln::Array&>(h));
    return array_slot();
  }
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    const bool tuple = PyTuple_Check(h.ptr());
    key += tuple ? '(' : '[';
    nb::list items;
    for (nb::handle x : h) items.append(flatten(x, key, arrays, outputs));
    key += tuple ? ')' : ']';
    return tuple ? nb::object(nb::tuple(items)) : nb::object(items);
  }
  if (PyDict_Check(h.ptr())) {
    key += '{';
    nb::dict out;
    for (auto [k, v] : nb::borrow<nb::dict>(h)) {
      nb::str name = nb::str(k);
      key += 'k' + std::to_string(PyUnicode_GetLength(name.ptr())) + ':' + name.c_str();
      out[k] = flatten(v, key, arrays, outputs);
    }
    key += '}';
    return out;
  }
  if (!outputs) {
    if (h.is_none()) {
      key += 'N';
      return nb::borrow(h);
    }
    if (PyBool_Check(h.ptr())) {
      key += h.ptr() == Py_True ? 'T' : 'F';
      return nb::borrow(h);
    }
    if (PyLong_Check(h.ptr())) {
      key += 'i' + nb::cast<std::string>(nb::str(h)) + ';';
      return nb::borrow(h);
    }
    if (PyFloat_Check(h.ptr())) {
      const double d = PyFloat_AsDouble(h.ptr());
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      key += 'f' + std::to_string(bits) + ';';
      return nb::borrow(h);
    }
    if (PyUnicode_Check(h.ptr())) {
      key += 's' + std::to_string(PyUnicode_GetLength(h.ptr())) + ':' + nb::cast<std::string>(h);
      return nb::borrow(h);
    }
    if (is_buffer_like(h)) {  // a NumPy array: an input like a kiln array (copied)
      key += 'a';
      arrays.push_back(from_buffer(h, false, std::nullopt));
      return array_slot();
    }
  }
  kiln::fail("compile",
             outputs ? "a compiled function returns arrays, or tuples, lists and dicts of arrays, not "
                     : "arguments are arrays or constants (None, bool, int, float, str), or tuples, lists "
                       "and dicts of them, not ",
             nb::cast<std::string>(nb::repr(nb::type_name(h.type()))));
}

/* The template with its array slots filled from arrays, in order. */
nb::object fill(nb::handle t, const std::vector<kiln::Array>& arrays, size_t& next) {
  if (t.is(array_slot())) return nb::cast(arrays.at(next++));
  if (PyTuple_Check(t.ptr()) || PyList_Check(t.ptr())) {
    nb::list items;
    for (nb::handle x : t) items.append(fill(x, arrays, next));
    return PyTuple_Check(t.ptr()) ? nb::object(nb::tuple(items)) : nb::object(items);
  }
  if (PyDict_Check(t.ptr())) {
    nb::dict out;
    for (auto [k, v] : nb::borrow<nb::dict>(t)) out[k] = fill(v, arrays, next);
    return out;
  }
  return nb::borrow(t);
}

/* What a traced function returned, as a template; the same for every trace of one entry. */
struct Outputs {
  std::mutex mu;  // guards both fields
  std::shared_ptr<nb::object> tmpl;  // null until the first trace
  std::string key;
};

struct Entry {
  kiln::CompiledFunction f;
  std::shared_ptr<Outputs> outputs;
};

class Compiled {
 public:
  Compiled(nb::object fn, bool shapeless, std::string name)
      : fn_(hold(std::move(fn))), options_{.shapeless = shapeless, .name = std::move(name)} {}

  nb::object call(const nb::args& args, const nb::kwargs& kwargs) {
    if (!fn_) kiln::fail("compile", "the function was cleared by the garbage collector");
    std::shared_ptr<Entry> e;
    std::vector<kiln::Array> in;
    const size_t n = args.size();
    bool plain = kwargs.size() == 0;
    for (size_t i = 0; plain && i < n; ++i) plain = nb::isinstance<kiln::Array>(args[i]);
    if (plain) {
      in.reserve(n);
      for (size_t i = 0; i < n; ++i) in.push_back(nb::cast<const kiln::Array&>(args[i]));
      std::shared_lock lock(mu_);
      if (n < positional_.size()) e = positional_[n];
    }
    if (!e) e = lookup(args, kwargs, plain, in);
    std::vector<kiln::Array> out;
    {
      nb::gil_scoped_release nogil;
      out = e->f(in);
    }
    std::shared_ptr<nb::object> tmpl;
    {
      std::lock_guard lock(e->outputs->mu);
      tmpl = e->outputs->tmpl;
    }
    if (!tmpl) kiln::fail("compile", "no outputs were recorded for this call");
    if (tmpl->is(array_slot())) return nb::cast(out.at(0));
    size_t next = 0;
    return fill(*tmpl, out, next);
  }

  const std::string& name() const { return options_.name; }
  nb::object function() const { return fn_ ? *fn_ : nb::none(); }

  // The garbage collector's view: the Python function may refer back to this object (a
  // decorated module-level function sits in its own globals).
  static int traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    if (!nb::inst_ready(self)) return 0;
    Compiled* c = nb::inst_ptr<Compiled>(self);
    if (c->fn_) Py_VISIT(c->fn_->ptr());
    return 0;
  }
  static int clear(PyObject* self) {
    Compiled* c = nb::inst_ptr<Compiled>(self);
    std::unique_lock lock(c->mu_);
    c->entries_.clear();
    c->positional_.clear();
    c->fn_.reset();
    return 0;
  }

 private:
  std::shared_ptr<Entry> lookup(const nb::args& args, const nb::kwargs& kwargs, bool plain,
                                std::vector<kiln::Array>& in) {
    std::string key;
    in.clear();
    nb::object targs = flatten(args, key, in, false);
    key += '|';
    nb::dict sorted;
    nb::list names = nb::list(kwargs.attr("keys")());
    names.sort();
    for (nb::handle k : names) sorted[k] = kwargs[k];
    nb::object tkw = flatten(sorted, key, in, false);
    {
      std::shared_lock lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    std::unique_lock lock(mu_);
    auto& slot = entries_[key];
    if (!slot) slot = make_entry(hold(nb::make_tuple(targs, tkw)));
    if (plain) {
      if (positional_.size() <= args.size()) positional_.resize(args.size() + 1);
      positional_[args.size()] = slot;
    }
    return slot;
  }

  std::shared_ptr<Entry> make_entry(std::shared_ptr<nb::object> tmpl) {
    auto e = std::make_shared<Entry>();
    e->outputs = std::make_shared<Outputs>();
    e->f = kiln::compile(
        [fn = fn_, tmpl, outputs = e->outputs](const std::vector<kiln::Array>& in) {
          nb::gil_scoped_acquire gil;
          size_t next = 0;
          nb::object call = fill(*tmpl, in, next);
          nb::tuple args = nb::borrow<nb::tuple>(call[0]);
          nb::dict kwargs = nb::borrow<nb::dict>(call[1]);
          nb::object result = (*fn)(*args, **kwargs);
          std::string key;
          std::vector<kiln::Array> out;
          nb::object t = flatten(result, key, out, true);
          std::lock_guard lock(outputs->mu);
          if (!outputs->tmpl) {
            outputs->tmpl = hold(t);
            outputs->key = key;
          } else if (outputs->key != key) {
            kiln::fail("compile", "the function returned a different structure of outputs for other input shapes");
          }
          return out;
        },
        options_);
    return e;
  }

  std::shared_ptr<nb::object> fn_;
  kiln::CompileOptions options_;
  std::shared_mutex mu_;  // guards entries_ and positional_
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;  // by structure and constants
  std::vector<std::shared_ptr<Entry>> positional_;  // calls of n arrays and no keywords
};

}  // namespace

PyType_Slot compiled_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(&Compiled::traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&Compiled::clear)},
    {0, nullptr},
};

void init_compile(nb::module_& m) {
  nb::class_<Compiled>(m, "CompiledFunction", nb::type_slots(compiled_slots),
                       "A Python function compiled by kiln.compile: call it like the function.")
      .def(nb::init<nb::object, bool, std::string>(), "fn"_a, "shapeless"_a = false, "name"_a = "")
      .def("__call__", &Compiled::call,
           "Calls the compiled function: traces on the first call for a new signature (the tree\n"
           "of arguments and its constants, then the arrays' shapes and dtypes), replays after.\n"
           "Releases the GIL while kiln works, so Python threads calling it run in parallel.")
      .def_prop_ro("name", &Compiled::name)
      .def_prop_ro("__wrapped__", &Compiled::function, "The function compiled.");
}

}  // namespace kpy
