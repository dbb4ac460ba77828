// kiln::Executable: input checking, parameters, handles and feeds, the three modes,
// the active extent, asynchronous commits and the slot arena.
#include "kiln/executable.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "core/bounded_cache.h"
#include "core/checked.h"
#include "core/config.h"
#include "core/tensor.h"
#include "kiln/eval.h"
#include "kiln/ops.h"
#include "runtime/extent.h"
#include "runtime/interp.h"
#include "runtime/ops.h"
#include "runtime/program.h"

namespace kiln {

const char* exec_mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::eager: return "eager";
    case ExecMode::lazy: return "lazy";
    case ExecMode::compiled: return "compiled";
  }
  return "?";
}

ExecMode exec_mode_from_name(const std::string& s) {
  if (s == "eager") return ExecMode::eager;
  if (s == "lazy") return ExecMode::lazy;
  if (s == "compiled") return ExecMode::compiled;
  fail("executable", "unknown mode '", s, "' (expected eager, lazy or compiled)");
}

// KILN_MODE=no_fuse and no_simplify are compiled executables whose compile does less.
ExecMode default_exec_mode() {
  const std::string m = config::choice(config::Knob::mode);
  return m == "eager" || m == "lazy" ? exec_mode_from_name(m) : ExecMode::compiled;
}

namespace {

using ParamMap = std::unordered_map<std::string, Array>;

struct Handle {
  bool host = false;
  void* data = nullptr;  // host: caller memory
  Shape shape;
  Dtype dtype = float32;
  Array value;  // device: the current value
};

// One committed run: outputs already handed to async_eval, or a task that runs it.
struct Pending {
  std::vector<Array> outputs;
  std::shared_future<std::vector<Array>> task;
  std::vector<std::pair<size_t, HandleId>> host_feeds;
};

std::string shape_of(const Array& a) { return std::string(dtype_name(a.dtype())) + detail::shape_str(a.shape()); }

// Everything a run reads lives on the executable's device, so its ops run there (an op
// runs on the device of its first CUDA input): inputs are moved on each run, parameters,
// constants and device handles once.

// For run inputs: an array already on `d` passes unchanged (a lazy one, such as the fed
// output of a committed run, stays lazy); others are evaluated and copied.
Array place(const Array& a, Device d) { return a.device() == d ? a : to(a, d); }

// Evaluated with its data on `d`: one upload of host data for a GPU (none when it is
// already there), one download of device data for the CPU.
Array resident(const Array& a, Device d) {
  if (d.type == Device::Type::cpu) {
    Array r = place(a, d);
    r.eval();
    return r;
  }
  return to(a, d);
}

}  // namespace

struct Executable::Impl {
  Graph g;
  ExecMode mode;
  Device device;
  std::vector<const GraphNode*> inputs;
  std::unordered_map<std::string, const GraphNode*> param_decls;  // every graph's params, by name
  std::unordered_map<const GraphNode*, Array> consts;  // built once; read-only afterwards
  std::unique_ptr<runtime::Program> program;  // compiled mode; read-only afterwards
  std::vector<OutputSlot> slots;
  size_t arena = 0;
  std::string slots_error;
  bool has_control_flow = false;

  mutable std::shared_mutex mu;  // guards params, handles, bindings, feeds
  std::shared_ptr<const ParamMap> params = std::make_shared<ParamMap>();
  std::vector<Handle> handles;
  std::unordered_map<std::string, HandleId> bindings;
  std::vector<std::pair<size_t, HandleId>> feeds;

  std::mutex feed_run_mu;  // held by a run for its whole length while feeds exist

  struct ExtentPlan {
    runtime::ExtentAnalysis analysis;
    std::unique_ptr<runtime::Program> program;
  };
  detail::BoundedCache<std::shared_ptr<ExtentPlan>> extent_plans{64};  // by input shapes; guarded inside

  std::mutex pending_mu;  // guards pending
  std::deque<Pending> pending;

  Array leaf(const GraphNode& n, const ParamMap& p) const {
    if (n.kind == GraphNode::Kind::constant) return consts.at(&n);
    auto it = p.find(n.outputs[0]);
    if (it == p.end()) fail("executable", "parameter '", n.outputs[0], "' is not set");
    return it->second;
  }

  std::vector<Array> resolve_inputs(const std::map<std::string, Array>& given, bool exact_dtype,
                                    std::unordered_set<const detail::Buffer*>& borrowed, bool place_them = true);
  std::shared_ptr<ExtentPlan> extent_plan(const std::vector<Array>& in, const std::vector<bool>& rows, int64_t B,
                                          const ParamMap& p);
  std::vector<Array> interpret(const std::vector<Array>& in, const ParamMap& p, const runtime::Program* prog,
                               const std::set<const GraphNode*>* follow);
  std::vector<Array> execute(const std::map<std::string, Array>& given, const RunOptions& opt, bool exact_dtype,
                             bool wait, std::vector<std::pair<size_t, HandleId>>* host_feeds_out);
  void layout_slots();
  void write_host_feeds(const std::vector<Array>& out, const std::vector<std::pair<size_t, HandleId>>& hf);
};

Executable::Executable(Graph g, ExecMode mode, Device device) : impl_(std::make_unique<Impl>()) {
  if (device.type == Device::Type::cuda) {
    int n = cuda_device_count();
    if (n == 0)
      fail("executable", "device ", device.str(), " requested, but kiln reports no GPU (", cuda_unavailable_reason(),
           ")");
    if (device.index < 0 || device.index >= n)
      fail("executable", "device ", device.str(), " does not exist (", n, " GPUs)");
  }
  Impl& m = *impl_;
  verify(g);
  // A symbol's bound holds at every input that names the symbol (checks, slots, extents).
  const auto bounds = g.symbol_bounds();
  for (GraphNode& n : g.nodes)
    if (n.kind == GraphNode::Kind::input)
      for (Dim& d : n.type.dims)
        if (d.symbolic()) d.bound = bounds.at(d.symbol);
  m.g = std::move(g);
  m.mode = mode;
  m.device = device;
  m.inputs = m.g.inputs();
  auto scan = [&](const Graph& x) {
    for (const GraphNode& n : x.nodes) {
      if (n.kind == GraphNode::Kind::param) m.param_decls[n.outputs[0]] = &n;
      if (n.kind == GraphNode::Kind::constant) {
        Shape s;
        for (const Dim& d : n.type.dims) s.push_back(d.size);
        m.consts[&n] = resident(array(n.data.data(), s, n.type.dtype), device);
      }
      if (n.kind == GraphNode::Kind::op && runtime::is_control_flow(n.op)) m.has_control_flow = true;
    }
  };
  for (const Graph& s : m.g.subgraphs) scan(s);
  scan(m.g);
  if (mode == ExecMode::compiled) {
    Impl* self = &m;
    m.program = std::make_unique<runtime::Program>(
        m.g, [self](const GraphNode& n) { return self->consts.at(&n); }, nullptr);
  }
  if (!m.g.params_file.empty()) {
    try {
      load_params(params_path(m.g));
    } catch (const Error& e) {  // the file as written, then the path it resolved to (in e)
      fail("executable", "params \"", m.g.params_file, "\" of ",
           m.g.source_path.empty() ? "the graph" : m.g.source_path, ": ", e.what());
    }
  }
  m.layout_slots();
}

Executable::~Executable() {
  try {
    sync_pending();
  } catch (...) {
    // Errors of runs nobody waited for are dropped with the executable.
  }
}

ExecMode Executable::mode() const { return impl_->mode; }
Device Executable::device() const { return impl_->device; }
const Graph& Executable::graph() const { return impl_->g; }

std::vector<std::string> Executable::input_names() const {
  std::vector<std::string> v;
  for (const GraphNode* n : impl_->inputs) v.push_back(n->outputs[0]);
  return v;
}
std::vector<std::string> Executable::output_names() const { return impl_->g.outputs; }

// ---- parameters ---------------------------------------------------------------

namespace {

Shape declared_shape(const GraphNode& n) {
  Shape s;
  for (const Dim& d : n.type.dims) s.push_back(d.size);
  return s;
}

}  // namespace

void Executable::set_param(const std::string& name, const float* data, size_t count) {
  auto it = impl_->param_decls.find(name);
  if (it == impl_->param_decls.end()) fail("set_param", "the graph has no parameter '", name, "'");
  Shape s = declared_shape(*it->second);
  const int64_t want = detail::checked_size("set_param", s);
  if (count != static_cast<size_t>(want))
    fail("set_param", "parameter '", name, "' ", detail::shape_str(s), " holds ", want, " values, given ", count);
  Array a = resident(astype(place(array_checked(data, count, s, float32), impl_->device), it->second->type.dtype),
                     impl_->device);
  std::unique_lock lock(impl_->mu);
  auto next = std::make_shared<ParamMap>(*impl_->params);
  (*next)[name] = a;
  impl_->params = std::move(next);
}

void Executable::set_param_typed(const std::string& name, const void* data, size_t nbytes, Dtype dtype) {
  auto it = impl_->param_decls.find(name);
  if (it == impl_->param_decls.end()) fail("set_param_typed", "the graph has no parameter '", name, "'");
  const GraphNode& n = *it->second;
  if (dtype != n.type.dtype)
    fail("set_param_typed", "parameter '", name, "' is ", dtype_name(n.type.dtype), ", given ", dtype_name(dtype),
         " (no conversion; use set_param for float32 data)");
  Shape s = declared_shape(n);
  size_t want = detail::checked_bytes("set_param_typed", s, dtype);
  if (nbytes != want) fail("set_param_typed", "parameter '", name, "' needs ", want, " bytes, given ", nbytes);
  Array a = resident(array(data, s, dtype), impl_->device);
  std::unique_lock lock(impl_->mu);
  auto next = std::make_shared<ParamMap>(*impl_->params);
  (*next)[name] = a;
  impl_->params = std::move(next);
}

void Executable::load_params(const std::string& path) {
  auto loaded = kiln::load_params(path);
  auto next = std::make_shared<ParamMap>();
  for (auto& [name, a] : loaded) {
    auto it = impl_->param_decls.find(name);
    if (it == impl_->param_decls.end()) fail("load_params", path, ": the graph has no parameter '", name, "'");
    const GraphNode& n = *it->second;
    if (a.dtype() != n.type.dtype || a.shape() != declared_shape(n))
      fail("load_params", path, ": parameter '", name, "' is ", shape_of(a), ", the graph declares ",
           dtype_name(n.type.dtype), detail::shape_str(declared_shape(n)));
    (*next)[name] = resident(a, impl_->device);  // CPU: the mapping itself, no copy
  }
  std::unique_lock lock(impl_->mu);
  for (const auto& [k, v] : *impl_->params)
    if (!next->count(k)) (*next)[k] = v;
  impl_->params = std::move(next);
}

bool Executable::has_param(const std::string& name) const {
  std::shared_lock lock(impl_->mu);
  return impl_->params->count(name) > 0;
}

Array Executable::param(const std::string& name) const {
  if (!impl_->param_decls.count(name)) fail("param", "the graph has no parameter '", name, "'");
  std::shared_lock lock(impl_->mu);
  auto it = impl_->params->find(name);
  if (it == impl_->params->end()) fail("param", "parameter '", name, "' is not set");
  return it->second;
}

std::string params_path(const Graph& g) {
  if (g.params_file.empty()) return "";
  std::filesystem::path p(g.params_file);
  if (p.is_relative()) p = std::filesystem::path(g.source_path).parent_path() / p;
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  return (ec ? p : abs).lexically_normal().string();
}

// ---- handles ------------------------------------------------------------------

HandleId Executable::host_handle(void* data, Shape shape, Dtype dtype) {
  detail::check_shape("host_handle", shape, dtype);
  if (!data && detail::shape_size(shape) > 0) fail("host_handle", "null data");
  std::unique_lock lock(impl_->mu);
  impl_->handles.push_back({true, data, std::move(shape), dtype, Array()});
  return static_cast<HandleId>(impl_->handles.size() - 1);
}

namespace {

// A device handle's value: the caller's array copied once, so later changes to caller
// memory do not reach it. On a GPU that copy is the one upload (device data, immutable,
// is shared as it is).
Array handle_value(const Array& value, Device d) {
  if (d.type != Device::Type::cpu) return to(value, d);
  Array v = copy(place(value, d));
  v.eval();
  return v;
}

}  // namespace

HandleId Executable::device_handle(const Array& value) {
  if (!value.valid()) fail("device_handle", "empty array");
  Array v = handle_value(value, impl_->device);
  std::unique_lock lock(impl_->mu);
  impl_->handles.push_back({false, nullptr, v.shape(), v.dtype(), v});
  return static_cast<HandleId>(impl_->handles.size() - 1);
}

void Executable::write_handle(HandleId h, const Array& value) {
  std::unique_lock lock(impl_->mu);
  if (h < 0 || static_cast<size_t>(h) >= impl_->handles.size()) fail("write_handle", "no handle ", h);
  Handle& hd = impl_->handles[static_cast<size_t>(h)];
  if (hd.host) {
    if (value.shape() != hd.shape)
      fail("write_handle", "handle ", h, " holds ", detail::shape_str(hd.shape), ", given ",
           detail::shape_str(value.shape()));
    value.copy_to(hd.data, hd.dtype);
    return;
  }
  Array v = handle_value(value, impl_->device);
  hd.value = v;
  hd.shape = v.shape();
  hd.dtype = v.dtype();
}

Array Executable::read_handle(HandleId h) const {
  std::shared_lock lock(impl_->mu);
  if (h < 0 || static_cast<size_t>(h) >= impl_->handles.size()) fail("read_handle", "no handle ", h);
  const Handle& hd = impl_->handles[static_cast<size_t>(h)];
  if (hd.host) return array(hd.data, hd.shape, hd.dtype);
  return hd.value;
}

void Executable::bind_input(const std::string& name, HandleId h) {
  bool known = false;
  for (const GraphNode* n : impl_->inputs) known |= n->outputs[0] == name;
  if (!known) fail("bind_input", "the graph has no input '", name, "'");
  std::unique_lock lock(impl_->mu);
  if (h < 0 || static_cast<size_t>(h) >= impl_->handles.size()) fail("bind_input", "no handle ", h);
  impl_->bindings[name] = h;
}

void Executable::unbind_input(const std::string& name) {
  std::unique_lock lock(impl_->mu);
  impl_->bindings.erase(name);
}

void Executable::feed(size_t output_index, HandleId h) {
  if (output_index >= impl_->g.outputs.size())
    fail("feed", "output ", output_index, " does not exist (", impl_->g.outputs.size(), " outputs)");
  std::unique_lock lock(impl_->mu);
  if (h < 0 || static_cast<size_t>(h) >= impl_->handles.size()) fail("feed", "no handle ", h);
  impl_->feeds.emplace_back(output_index, h);
}

void Executable::clear_feeds() {
  std::unique_lock lock(impl_->mu);
  impl_->feeds.clear();
}

// ---- running ------------------------------------------------------------------

// With place_them false the inputs are only checked (nothing is uploaded) and none are returned.
std::vector<Array> Executable::Impl::resolve_inputs(const std::map<std::string, Array>& given, bool exact_dtype,
                                                    std::unordered_set<const detail::Buffer*>& borrowed,
                                                    bool place_them) {
  for (const auto& [name, v] : given) {
    bool known = false;
    for (const GraphNode* n : inputs) known |= n->outputs[0] == name;
    if (!known) fail("run", "the graph has no input '", name, "'");
  }
  std::vector<Array> out;
  std::unordered_map<std::string, int64_t> symbols;
  std::shared_lock lock(mu);
  for (const GraphNode* n : inputs) {
    const std::string& name = n->outputs[0];
    Array v;
    auto it = given.find(name);
    if (it != given.end()) {
      v = it->second;
      if (!v.valid()) fail("run", "input '", name, "' is an empty array");
    } else if (auto b = bindings.find(name); b != bindings.end()) {
      const Handle& h = handles[static_cast<size_t>(b->second)];
      if (h.host) {
        detail::Tensor t(h.shape, h.dtype);
        t.buffer = detail::Buffer::borrow(h.data, static_cast<size_t>(t.size()) * t.itemsize());
        borrowed.insert(t.buffer.get());
        v = Array::from_tensor(std::move(t), Device::cpu());
      } else {
        v = h.value;
      }
    } else {
      fail("run", "input '", name, "' is missing");
    }
    if (v.dtype() != n->type.dtype) {
      if (exact_dtype)
        fail("run", "input '", name, "' is ", dtype_name(n->type.dtype), ", given ", dtype_name(v.dtype()));
      v = astype(v, n->type.dtype);
    }
    if (v.ndim() != static_cast<int>(n->type.dims.size()))
      fail("run", "input '", name, "' has rank ", n->type.dims.size(), ", given ", shape_of(v));
    for (size_t d = 0; d < n->type.dims.size(); ++d) {
      const Dim& dim = n->type.dims[d];
      int64_t got = v.shape(static_cast<int>(d));
      if (!dim.symbolic()) {
        if (got != dim.size)
          fail("run", "input '", name, "' dimension ", d, " must be ", dim.size, ", given ", shape_of(v));
        continue;
      }
      if (dim.bound > 0 && got > dim.bound)
        fail("run", "input '", name, "' dimension ", d, " (", dim.symbol, ") is ", got, ", above its bound ",
             dim.bound);
      auto [s, fresh] = symbols.emplace(dim.symbol, got);
      if (!fresh && s->second != got)
        fail("run", "symbol ", dim.symbol, " is ", s->second, " elsewhere but ", got, " in input '", name, "'");
    }
    // Host data (host handles too, read again on every run) is uploaded for a GPU;
    // device handles are already there.
    if (place_them) out.push_back(place(v, device));
  }
  return out;
}

std::vector<Array> Executable::Impl::interpret(const std::vector<Array>& in, const ParamMap& p,
                                               const runtime::Program* prog, const std::set<const GraphNode*>* follow) {
  runtime::Hooks h;
  h.leaf = [&](const GraphNode& n) { return leaf(n, p); };
  if (prog) return prog->call(g, in, h.leaf);
  h.follow_rows = follow;
  if (mode == ExecMode::eager) h.after_node = [](const std::vector<Array>& out) { eval(out); };
  h.call = [&](const Graph& sub, const std::vector<Array>& args) { return runtime::call_graph(g, sub, args, h); };
  return runtime::call_graph(g, g, in, h);
}

std::shared_ptr<Executable::Impl::ExtentPlan> Executable::Impl::extent_plan(const std::vector<Array>& in,
                                                                            const std::vector<bool>& rows, int64_t B,
                                                                            const ParamMap& p) {
  std::string key;
  for (const Array& a : in) key += shape_of(a) + ";";
  return extent_plans.get(key, [&] {
    auto plan = std::make_shared<ExtentPlan>();
    std::vector<Array> ph;
    for (const Array& a : in) ph.push_back(broadcast_to(zeros({}, a.dtype()), a.shape()));
    plan->analysis = runtime::analyze_extent(g, ph, rows, B, [&](const GraphNode& n) { return leaf(n, p); });
    if (mode == ExecMode::compiled && plan->analysis.blocker.empty()) {
      Impl* self = this;
      plan->program = std::make_unique<runtime::Program>(
          g, [self](const GraphNode& n) { return self->consts.at(&n); }, &plan->analysis.follow_rows);
    }
    return plan;
  });
}

std::vector<Array> Executable::Impl::execute(const std::map<std::string, Array>& given, const RunOptions& opt,
                                             bool exact_dtype, bool wait,
                                             std::vector<std::pair<size_t, HandleId>>* host_feeds_out) {
  std::unique_lock<std::mutex> serial(feed_run_mu, std::defer_lock);
  std::shared_ptr<const ParamMap> p;
  std::vector<std::pair<size_t, HandleId>> my_feeds;
  {
    std::shared_lock lock(mu);
    if (!feeds.empty()) {
      lock.unlock();
      serial.lock();  // recurrent state: read, run and write back as one step
      lock.lock();
    }
    p = params;
    my_feeds = feeds;
  }
  std::unordered_set<const detail::Buffer*> borrowed;
  std::vector<Array> in = resolve_inputs(given, exact_dtype, borrowed);

  std::vector<Array> out;
  if (opt.active_extent) {
    int64_t n = *opt.active_extent;
    std::vector<bool> rows;
    int64_t B = -1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool r = !inputs[i]->type.dims.empty() && inputs[i]->type.dims[0].symbolic();
      rows.push_back(r);
      if (!r) continue;
      if (B >= 0 && in[i].shape(0) != B)
        fail("run", "active extent: inputs with a symbolic leading axis disagree on its size (", B, " and ",
             in[i].shape(0), ")");
      B = in[i].shape(0);
    }
    if (B < 0) fail("run", "active extent given, but no input has a symbolic leading dimension");
    if (n < 0 || n > B) fail("run", "active extent ", n, " is outside the bucket of ", B, " rows");
    auto plan = extent_plan(in, rows, B, *p);
    if (plan->analysis.blocker.empty()) {
      for (size_t i = 0; i < in.size(); ++i)
        if (rows[i]) in[i] = slice(in[i], {SliceArg{0, n, 1}});
      out = interpret(in, *p, plan->program.get(), &plan->analysis.follow_rows);
    } else {
      out = interpret(in, *p, program.get(), nullptr);
      for (size_t k = 0; k < out.size(); ++k)
        if (plan->analysis.output_rows[k]) out[k] = slice(out[k], {SliceArg{0, n, 1}});
    }
  } else {
    out = interpret(in, *p, program.get(), nullptr);
  }
  if (wait) {
    eval(out);
    for (Array& o : out) {
      // An output that views a host handle's memory would change under the caller: copy it.
      if (!borrowed.empty() && borrowed.count(o.tensor().buffer.get())) {
        o = copy(o);
        o.eval();
      }
      // Outputs made by creation ops alone ran on the process's default device.
      if (o.device() != device) o = to(o, device);
    }
  } else {
    if (!borrowed.empty())
      for (Array& o : out) o = copy(o);
    async_eval(out);
  }
  std::vector<std::pair<size_t, HandleId>> host_feeds;
  if (!my_feeds.empty()) {
    std::unique_lock lock(mu);
    for (auto [i, h] : my_feeds) {
      Handle& hd = handles[static_cast<size_t>(h)];
      if (hd.host)
        host_feeds.emplace_back(i, h);
      else {
        hd.value = out[i];
        hd.shape = out[i].shape();
        hd.dtype = out[i].dtype();
      }
    }
  }
  if (wait)
    write_host_feeds(out, host_feeds);
  else if (host_feeds_out)
    *host_feeds_out = host_feeds;
  return out;
}

void Executable::Impl::write_host_feeds(const std::vector<Array>& out,
                                        const std::vector<std::pair<size_t, HandleId>>& hf) {
  for (auto [i, h] : hf) {
    std::shared_lock lock(mu);
    const Handle& hd = handles[static_cast<size_t>(h)];
    if (out[i].shape() != hd.shape)
      fail("feed", "output ", i, " is ", shape_of(out[i]), " but host handle ", h, " holds ",
           detail::shape_str(hd.shape));
    out[i].copy_to(hd.data, hd.dtype);
  }
}

std::vector<HostTensor> Executable::run(const std::map<std::string, HostTensor>& inputs, const RunOptions& opt) {
  std::map<std::string, Array> arrays;
  for (const auto& [name, t] : inputs) arrays[name] = array_checked(t.data.data(), t.data.size(), t.shape, float32);
  auto out = impl_->execute(arrays, opt, /*exact_dtype=*/false, /*wait=*/true, nullptr);
  std::vector<HostTensor> res;
  for (const Array& a : out) res.push_back({a.shape(), a.to_vector<float>()});
  return res;
}

std::vector<Array> Executable::run_typed(const std::map<std::string, Array>& inputs, const RunOptions& opt) {
  return impl_->execute(inputs, opt, /*exact_dtype=*/true, /*wait=*/true, nullptr);
}

// ---- slots --------------------------------------------------------------------

void Executable::Impl::layout_slots() {
  std::vector<Array> ph;
  for (const GraphNode* n : inputs) {
    Shape s;
    for (const Dim& d : n->type.dims) {
      if (d.symbolic() && d.bound <= 0) {
        slots_error = "input '" + n->outputs[0] + "' dimension " + d.symbol + " has no upper bound";
        return;
      }
      s.push_back(d.symbolic() ? d.bound : d.size);
    }
    ph.push_back(broadcast_to(zeros({}, n->type.dtype), s));
  }
  runtime::Hooks h;
  h.symbolic = true;
  h.leaf = [](const GraphNode& n) { return broadcast_to(zeros({}, n.type.dtype), declared_shape(n)); };
  runtime::call_each_signature_once(g, h);
  std::vector<Array> out;
  try {
    out = runtime::call_graph(g, g, ph, h);
  } catch (const Error& e) {
    slots_error = e.what();
    return;
  }
  int64_t off = 0;
  try {  // checked: broadcast outputs cost nothing to build, and wrapped offsets would write past the arena
    for (const Array& a : out) {
      off = detail::checked_add("run_slots", off, 63) / 64 * 64;
      const int64_t bytes = static_cast<int64_t>(detail::checked_bytes("run_slots", a.shape(), a.dtype()));
      slots.push_back({static_cast<size_t>(off), static_cast<size_t>(bytes), a.shape(), a.dtype()});
      off = detail::checked_add("run_slots", off, bytes);
    }
    arena = static_cast<size_t>(detail::checked_add("run_slots", off, 63) / 64 * 64);
  } catch (const Error& e) {
    slots.clear();
    slots_error = std::string("the outputs at the symbols' bounds do not fit one arena: ") + e.what();
  }
}

size_t Executable::arena_bytes() const {
  if (!impl_->slots_error.empty()) fail("run_slots", impl_->slots_error);
  return impl_->arena;
}

const OutputSlot& Executable::output_slot(size_t i) const {
  if (!impl_->slots_error.empty()) fail("run_slots", impl_->slots_error);
  if (i >= impl_->slots.size()) fail("output_slot", "output ", i, " does not exist");
  return impl_->slots[i];
}

void Executable::run_slots(const std::vector<const void*>& inputs, void* arena, const RunOptions& opt) {
  Impl& m = *impl_;
  if (!m.slots_error.empty()) fail("run_slots", m.slots_error);
  if (inputs.size() != m.inputs.size())
    fail("run_slots", "the graph takes ", m.inputs.size(), " inputs, given ", inputs.size());
  if (!arena) fail("run_slots", "null arena");
  std::map<std::string, Array> named;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GraphNode* n = m.inputs[i];
    Shape s;
    for (const Dim& d : n->type.dims) s.push_back(d.symbolic() ? d.bound : d.size);
    if (!inputs[i]) fail("run_slots", "input ", i, " ('", n->outputs[0], "') is null");
    named[n->outputs[0]] = array(inputs[i], s, n->type.dtype);
  }
  auto out = m.execute(named, opt, true, true, nullptr);
  for (size_t i = 0; i < out.size(); ++i) {
    const OutputSlot& slot = m.slots[i];
    if (out[i].nbytes() > slot.bytes || out[i].dtype() != slot.dtype)
      fail("run_slots", "output ", i, " is ", shape_of(out[i]), ", larger than its slot");
    out[i].copy_to(static_cast<char*>(arena) + slot.offset, slot.dtype);
  }
}

void Executable::warm_compile(const std::map<std::string, Shape>& input_shapes) {
  Impl& m = *impl_;
  for (const auto& [name, shape] : input_shapes) {
    bool known = false;
    for (const GraphNode* n : m.inputs) known |= n->outputs[0] == name;
    if (!known) fail("warm_compile", "the graph has no input '", name, "'");
  }
  if (m.mode != ExecMode::compiled) return;
  std::map<std::string, Array> zeros_in;
  for (const GraphNode* n : m.inputs) {
    auto it = input_shapes.find(n->outputs[0]);
    Shape s;
    if (it != input_shapes.end())
      s = it->second;
    else
      for (const Dim& d : n->type.dims) {
        if (d.symbolic() && d.bound <= 0)
          fail("warm_compile", "input '", n->outputs[0], "' dimension ", d.symbol, " has no bound; give its shape");
        s.push_back(d.symbolic() ? d.bound : d.size);
      }
    zeros_in[n->outputs[0]] = zeros(s, n->type.dtype);
  }
  std::unordered_set<const detail::Buffer*> borrowed;
  auto in = m.resolve_inputs(zeros_in, true, borrowed);
  std::shared_ptr<const ParamMap> p;
  {
    std::shared_lock lock(m.mu);
    p = m.params;
  }
  eval(m.interpret(in, *p, m.program.get(), nullptr));  // no feeds: state handles keep their values
}

// ---- asynchronous -------------------------------------------------------------

void Executable::commit_no_wait(const std::map<std::string, Array>& inputs, const RunOptions& opt) {
  Impl& m = *impl_;
  std::lock_guard lock(m.pending_mu);
  Pending p;
  if (m.mode == ExecMode::eager || m.has_control_flow) {
    // Work that needs values on the host runs on a task; tasks of one executable run in order.
    // Its inputs are checked here, so a bad one fails at commit as in the other modes.
    std::unordered_set<const detail::Buffer*> borrowed;
    m.resolve_inputs(inputs, true, borrowed, /*place_them=*/false);
    std::shared_future<std::vector<Array>> prev;
    if (!m.pending.empty()) prev = m.pending.back().task;
    Impl* self = &m;
    p.task = std::async(std::launch::async, [self, inputs, opt, prev] {
               if (prev.valid()) prev.wait();
               return self->execute(inputs, opt, true, true, nullptr);
             }).share();
  } else {
    p.outputs = m.execute(inputs, opt, true, /*wait=*/false, &p.host_feeds);
  }
  m.pending.push_back(std::move(p));
}

std::vector<std::vector<Array>> Executable::sync_pending() {
  Impl& m = *impl_;
  std::deque<Pending> mine;
  {
    std::lock_guard lock(m.pending_mu);
    mine.swap(m.pending);
  }
  std::vector<std::vector<Array>> results;
  std::exception_ptr first;
  for (Pending& p : mine) {
    try {
      if (p.task.valid()) {
        results.push_back(p.task.get());
      } else {
        eval(p.outputs);
        m.write_host_feeds(p.outputs, p.host_feeds);
        results.push_back(p.outputs);
      }
    } catch (...) {
      if (!first) first = std::current_exception();
      results.emplace_back();
    }
  }
  if (first) std::rethrow_exception(first);
  return results;
}

std::vector<std::vector<Array>> Executable::run_pipelined(const std::vector<std::map<std::string, Array>>& sets,
                                                          const RunOptions& opt) {
  sync_pending();  // earlier commits are not part of this batch
  for (const auto& s : sets) commit_no_wait(s, opt);
  return sync_pending();
}

std::vector<Array> Executable::build_lazy(const std::map<std::string, Array>& inputs) {
  std::unordered_set<const detail::Buffer*> borrowed;
  auto in = impl_->resolve_inputs(inputs, true, borrowed);
  std::shared_ptr<const ParamMap> p;
  {
    std::shared_lock lock(impl_->mu);
    p = impl_->params;
  }
  runtime::Hooks h;
  h.leaf = [&](const GraphNode& n) { return impl_->leaf(n, *p); };
  h.call = [&](const Graph& sub, const std::vector<Array>& args) {
    return runtime::call_graph(impl_->g, sub, args, h);
  };
  return runtime::call_graph(impl_->g, impl_->g, in, h);
}

std::string Executable::extent_blocker(const std::map<std::string, Shape>& input_shapes) const {
  Impl& m = *impl_;
  std::vector<Array> in;
  std::vector<bool> rows;
  int64_t B = -1;
  for (const GraphNode* n : m.inputs) {
    auto it = input_shapes.find(n->outputs[0]);
    if (it == input_shapes.end()) fail("extent_blocker", "no shape for input '", n->outputs[0], "'");
    in.push_back(broadcast_to(zeros({}, n->type.dtype), it->second));
    bool r = !n->type.dims.empty() && n->type.dims[0].symbolic() && !it->second.empty();
    rows.push_back(r);
    if (r) B = it->second[0];
  }
  if (B < 0) return "no input has a symbolic leading dimension";
  std::shared_ptr<const ParamMap> p;
  {
    std::shared_lock lock(m.mu);
    p = m.params;
  }
  // Shapes are all the analysis needs, so unset parameters are stood in for.
  auto leaf = [&](const GraphNode& n) {
    if (n.kind == GraphNode::Kind::constant) return m.consts.at(&n);
    return broadcast_to(zeros({}, n.type.dtype), declared_shape(n));
  };
  return runtime::analyze_extent(m.g, in, rows, B, leaf).blocker;
}

}  // namespace kiln
