// C API: kiln::Executable (graphs as data) behind kiln_executable handles.
#include "kiln/c/kiln_executable.h"

#include "capi/capi.h"
#include "core/checked.h"
#include "kiln/executable.h"
#include "kiln/ops.h"

using namespace kiln;
using namespace kiln::capi;

struct kiln_executable_s {
  std::unique_ptr<Executable> exe;  // its own locks make it safe to share between threads
  std::vector<std::string> inputs, outputs;  // immutable: the names handed out
};

namespace {

Executable& get(const char* fn, kiln_executable e) {
  if (!e || !e->exe) fail(fn, "null executable handle");
  return *e->exe;
}

ExecMode to_mode(const char* fn, const kiln_exec_mode& m) {
  switch (enum_value(m)) {
    case KILN_EXEC_EAGER: return ExecMode::eager;
    case KILN_EXEC_LAZY: return ExecMode::lazy;
    case KILN_EXEC_COMPILED: return ExecMode::compiled;
  }
  fail(fn, "invalid mode ", enum_value(m), " (eager 0, lazy 1, compiled 2)");
}

const char* text_arg(const char* fn, const char* s, const char* what) {
  if (!s) fail(fn, "null ", what);
  return s;
}

// names[i] -> inputs[i]; the names must be there for every input given.
std::map<std::string, Array> named(const char* fn, const char* const* names, const kiln_vector_array inputs) {
  std::map<std::string, Array> m;
  if (!inputs) return m;
  const auto& v = capi::get(fn, inputs);
  if (!v.empty() && !names) fail(fn, "null names for ", v.size(), " inputs");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!names[i]) fail(fn, "input name ", i, " is null");
    if (!m.emplace(names[i], v[i]).second) fail(fn, "input '", names[i], "' is given twice");
  }
  return m;
}

std::map<std::string, Shape> named_shapes(const char* fn, const char* const* names, const int64_t* const* shapes,
                                          const int* ndims, size_t n) {
  std::map<std::string, Shape> m;
  if (n > 0 && (!names || !shapes || !ndims)) fail(fn, "null names, shapes or ndims for ", n, " inputs");
  for (size_t i = 0; i < n; ++i) {
    if (!names[i]) fail(fn, "input name ", i, " is null");
    m[names[i]] = to_shape(fn, shapes[i], ndims[i]);
  }
  return m;
}

RunOptions options(const char* fn, int64_t extent) {
  RunOptions o;
  if (extent < KILN_NO_EXTENT) fail(fn, "extent ", extent, " is negative (KILN_NO_EXTENT is -1)");
  if (extent >= 0) o.active_extent = extent;
  return o;
}

std::vector<Array> flatten(std::vector<std::vector<Array>> runs) {
  std::vector<Array> flat;
  for (auto& r : runs)
    for (auto& a : r) flat.push_back(std::move(a));
  return flat;
}

void make(kiln_executable* out, Graph g, const kiln_exec_mode& mode, kiln_device device, const char* fn) {
  check_out(fn, out);
  auto exe = std::make_unique<Executable>(std::move(g), to_mode(fn, mode), to_device(fn, device));
  auto inputs = exe->input_names(), outputs = exe->output_names();
  if (!*out) *out = new kiln_executable_s;
  (*out)->exe = std::move(exe);  // in place, as kiln.h's handles are; the old executable goes
  (*out)->inputs = std::move(inputs);
  (*out)->outputs = std::move(outputs);
}

}  // namespace

extern "C" {

int kiln_executable_parse(kiln_executable* out, const char* text, const char* path, kiln_exec_mode mode,
                          kiln_device device) {
  return guard([&] {
    const char* fn = "kiln_executable_parse";
    make(out, parse_graph(text_arg(fn, text, "text"), path ? path : "<text>"), mode, device, fn);
  });
}

int kiln_executable_load(kiln_executable* out, const char* path, kiln_exec_mode mode, kiln_device device) {
  return guard([&] {
    const char* fn = "kiln_executable_load";
    make(out, load_graph(text_arg(fn, path, "path")), mode, device, fn);
  });
}

int kiln_executable_free(kiln_executable e) {
  delete e;  // ~Executable waits for committed runs and never throws
  return 0;
}

int kiln_executable_mode(kiln_exec_mode* out, const kiln_executable e) {
  return guard([&] {
    check_out("kiln_executable_mode", out);
    ExecMode m = get("kiln_executable_mode", e).mode();
    *out = m == ExecMode::eager ? KILN_EXEC_EAGER : m == ExecMode::lazy ? KILN_EXEC_LAZY : KILN_EXEC_COMPILED;
  });
}

int kiln_executable_num_inputs(size_t* out, const kiln_executable e) {
  return guard([&] {
    check_out("kiln_executable_num_inputs", out);
    get("kiln_executable_num_inputs", e);
    *out = e->inputs.size();
  });
}

int kiln_executable_input_name(const char** out, const kiln_executable e, size_t i) {
  return guard([&] {
    check_out("kiln_executable_input_name", out);
    get("kiln_executable_input_name", e);
    if (i >= e->inputs.size())
      fail("kiln_executable_input_name", "input ", i, " does not exist (", e->inputs.size(), " inputs)");
    *out = e->inputs[i].c_str();
  });
}

int kiln_executable_num_outputs(size_t* out, const kiln_executable e) {
  return guard([&] {
    check_out("kiln_executable_num_outputs", out);
    get("kiln_executable_num_outputs", e);
    *out = e->outputs.size();
  });
}

int kiln_executable_output_name(const char** out, const kiln_executable e, size_t i) {
  return guard([&] {
    check_out("kiln_executable_output_name", out);
    get("kiln_executable_output_name", e);
    if (i >= e->outputs.size())
      fail("kiln_executable_output_name", "output ", i, " does not exist (", e->outputs.size(), " outputs)");
    *out = e->outputs[i].c_str();
  });
}

int kiln_executable_set_param(kiln_executable e, const char* name, const float* data, size_t count) {
  return guard([&] {
    const char* fn = "kiln_executable_set_param";
    if (!data && count > 0) fail(fn, "null data for ", count, " values");
    get(fn, e).set_param(text_arg(fn, name, "name"), data, count);
  });
}

int kiln_executable_set_param_typed(kiln_executable e, const char* name, const void* data, size_t nbytes,
                                    kiln_dtype dtype) {
  return guard([&] {
    const char* fn = "kiln_executable_set_param_typed";
    if (!data && nbytes > 0) fail(fn, "null data for ", nbytes, " bytes");
    get(fn, e).set_param_typed(text_arg(fn, name, "name"), data, nbytes, to_dtype(fn, dtype));
  });
}

int kiln_executable_load_params(kiln_executable e, const char* path) {
  return guard([&] {
    const char* fn = "kiln_executable_load_params";
    get(fn, e).load_params(text_arg(fn, path, "path"));
  });
}

int kiln_executable_has_param(bool* out, const kiln_executable e, const char* name) {
  return guard([&] {
    const char* fn = "kiln_executable_has_param";
    check_out(fn, out);
    *out = get(fn, e).has_param(text_arg(fn, name, "name"));
  });
}

int kiln_executable_run(kiln_vector_array* out, kiln_executable e, const char* const* names,
                        const kiln_vector_array inputs, int64_t extent) {
  return guard([&] {
    const char* fn = "kiln_executable_run";
    check_out(fn, out);
    put(out, get(fn, e).run_typed(named(fn, names, inputs), options(fn, extent)));
  });
}

int kiln_executable_run_f32(kiln_vector_array* out, kiln_executable e, const char* const* names,
                            const kiln_vector_array inputs, int64_t extent) {
  return guard([&] {
    const char* fn = "kiln_executable_run_f32";
    check_out(fn, out);
    std::map<std::string, HostTensor> host;
    for (const auto& [name, a] : named(fn, names, inputs))
      host[name] = {a.shape(), astype(a, float32).to_vector<float>()};
    std::vector<Array> res;
    for (auto& t : get(fn, e).run(host, options(fn, extent))) res.push_back(array(t.data.data(), t.shape, float32));
    put(out, std::move(res));
  });
}

int kiln_executable_run_slots(kiln_executable e, const void* const* inputs, size_t n_inputs, void* arena,
                              int64_t extent) {
  return guard([&] {
    const char* fn = "kiln_executable_run_slots";
    if (n_inputs > 0 && !inputs) fail(fn, "null inputs for ", n_inputs, " inputs");
    std::vector<const void*> in(inputs, inputs + n_inputs);
    get(fn, e).run_slots(in, arena, options(fn, extent));
  });
}

int kiln_executable_arena_bytes(size_t* out, const kiln_executable e) {
  return guard([&] {
    check_out("kiln_executable_arena_bytes", out);
    *out = get("kiln_executable_arena_bytes", e).arena_bytes();
  });
}

int kiln_executable_output_slot(size_t* offset, size_t* nbytes, const kiln_executable e, size_t i) {
  return guard([&] {
    const char* fn = "kiln_executable_output_slot";
    check_out(fn, offset);
    check_out(fn, nbytes);
    const OutputSlot& s = get(fn, e).output_slot(i);
    *offset = s.offset;
    *nbytes = s.bytes;
  });
}

int kiln_executable_host_handle(int* out, kiln_executable e, void* data, const int64_t* shape, int ndim,
                                kiln_dtype dtype) {
  return guard([&] {
    const char* fn = "kiln_executable_host_handle";
    check_out(fn, out);
    *out = get(fn, e).host_handle(data, to_shape(fn, shape, ndim), to_dtype(fn, dtype));
  });
}

int kiln_executable_device_handle(int* out, kiln_executable e, const kiln_array value) {
  return guard([&] {
    const char* fn = "kiln_executable_device_handle";
    check_out(fn, out);
    *out = get(fn, e).device_handle(capi::get(fn, value));
  });
}

int kiln_executable_write_handle(kiln_executable e, int handle, const kiln_array value) {
  return guard([&] {
    const char* fn = "kiln_executable_write_handle";
    get(fn, e).write_handle(handle, capi::get(fn, value));
  });
}

int kiln_executable_read_handle(kiln_array* out, const kiln_executable e, int handle) {
  return guard([&] {
    const char* fn = "kiln_executable_read_handle";
    check_out(fn, out);
    put(out, get(fn, e).read_handle(handle));
  });
}

int kiln_executable_bind_input(kiln_executable e, const char* name, int handle) {
  return guard([&] {
    const char* fn = "kiln_executable_bind_input";
    get(fn, e).bind_input(text_arg(fn, name, "name"), handle);
  });
}

int kiln_executable_unbind_input(kiln_executable e, const char* name) {
  return guard([&] {
    const char* fn = "kiln_executable_unbind_input";
    get(fn, e).unbind_input(text_arg(fn, name, "name"));
  });
}

int kiln_executable_feed(kiln_executable e, size_t output, int handle) {
  return guard([&] { get("kiln_executable_feed", e).feed(output, handle); });
}

int kiln_executable_clear_feeds(kiln_executable e) {
  return guard([&] { get("kiln_executable_clear_feeds", e).clear_feeds(); });
}

int kiln_executable_commit(kiln_executable e, const char* const* names, const kiln_vector_array inputs,
                           int64_t extent) {
  return guard([&] {
    const char* fn = "kiln_executable_commit";
    get(fn, e).commit_no_wait(named(fn, names, inputs), options(fn, extent));
  });
}

int kiln_executable_sync(kiln_vector_array* out, size_t* runs, kiln_executable e) {
  return guard([&] {
    const char* fn = "kiln_executable_sync";
    check_out(fn, out);
    check_out(fn, runs);
    auto res = get(fn, e).sync_pending();
    *runs = res.size();
    put(out, flatten(std::move(res)));
  });
}

int kiln_executable_run_pipelined(kiln_vector_array* out, kiln_executable e, const char* const* names,
                                  const kiln_vector_array* sets, size_t n, int64_t extent) {
  return guard([&] {
    const char* fn = "kiln_executable_run_pipelined";
    check_out(fn, out);
    if (n > 0 && !sets) fail(fn, "null sets for ", n, " sets");
    std::vector<std::map<std::string, Array>> in;
    for (size_t i = 0; i < n; ++i) in.push_back(named(fn, names, sets[i]));
    put(out, flatten(get(fn, e).run_pipelined(in, options(fn, extent))));
  });
}

int kiln_executable_warm_compile(kiln_executable e, const char* const* names, const int64_t* const* shapes,
                                 const int* ndims, size_t n) {
  return guard([&] {
    const char* fn = "kiln_executable_warm_compile";
    get(fn, e).warm_compile(named_shapes(fn, names, shapes, ndims, n));
  });
}

int kiln_executable_extent_blocker(char** out, const kiln_executable e, const char* const* names,
                                   const int64_t* const* shapes, const int* ndims, size_t n) {
  return guard([&] {
    const char* fn = "kiln_executable_extent_blocker";
    check_out(fn, out);
    *out = c_string(get(fn, e).extent_blocker(named_shapes(fn, names, shapes, ndims, n)));
  });
}

}  // extern "C"
