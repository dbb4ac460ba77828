// C API: evaluation, counters, devices and streams.
#include "capi/capi.h"
#include "core/node.h"
#include "kiln/device.h"
#include "kiln/eval.h"

using namespace kiln;
using namespace kiln::capi;

namespace {

// Arrays this thread handed to kiln_async_eval, held weakly so that waiting
// for them keeps nothing alive; kiln_synchronize waits for those still alive.
std::vector<std::weak_ptr<detail::Node>>& pending() {
  thread_local std::vector<std::weak_ptr<detail::Node>> p;
  return p;
}

// to_device, and the device must be there: a CUDA index past the devices (any index in a
// build without the CUDA backend) fails like every other call on a missing device.
Device existing_device(const char* fn, kiln_device d) {
  Device dev = to_device(fn, d);
  if (dev.type == Device::Type::cuda && dev.index >= cuda_device_count()) {
#ifdef KILN_WITH_CUDA
    fail(fn, "no CUDA device ", dev.index, " (", cuda_device_count(), " found)");
#else
    fail(fn, "no CUDA device ", dev.index, ": kiln was built without a CUDA backend");
#endif
  }
  return dev;
}

kiln_device from_device(Device d) {
  kiln_device out;
  out.type = d.type == Device::Type::cpu ? KILN_DEVICE_CPU : KILN_DEVICE_CUDA;
  out.index = d.index;
  return out;
}

}  // namespace

Device kiln::capi::to_device(const char* fn, kiln_device d) {
  int type = enum_value(d.type);
  if (type == KILN_DEVICE_CPU) return Device::cpu();
  if (type == KILN_DEVICE_CUDA) {
    if (d.index < 0) fail(fn, "negative device index ", d.index);
    return Device::cuda(d.index);
  }
  fail(fn, "invalid device type ", type);
}

extern "C" {

int kiln_eval(const kiln_vector_array arrays) {
  return guard([&] { eval(get("kiln_eval", arrays)); });
}

int kiln_async_eval(const kiln_vector_array arrays) {
  return guard([&] {
    const auto& v = get("kiln_async_eval", arrays);
    auto& p = pending();
    std::erase_if(p, [](const std::weak_ptr<detail::Node>& w) {
      auto n = w.lock();
      return !n || n->ready.load(std::memory_order_acquire);
    });
    for (const auto& a : v) {
      if (!a.valid()) fail("kiln_async_eval", "empty array handle in the vector");
    }
    for (const auto& a : v) p.push_back(a.node());
    async_eval(v);
  });
}

int kiln_synchronize(kiln_stream stream) {
  return guard([&] {
    existing_device("kiln_synchronize", stream.device);
    std::vector<Array> live;
    auto& p = pending();
    for (auto& w : p) {
      if (auto n = w.lock()) live.emplace_back(std::move(n));
    }
    p.clear();
    // Evaluating waits for nodes the stream is computing and reruns failed ones,
    // so their error surfaces here.
    eval(live);
  });
}

int kiln_set_eager(bool e) {
  return guard([&] { set_eager(e); });
}

int kiln_get_eager(bool* out) {
  return guard([&] {
    check_out("kiln_get_eager", out);
    *out = eager();
  });
}

int kiln_get_stats(kiln_stats* out) {
  return guard([&] {
    check_out("kiln_get_stats", out);
    Stats s = stats();
    out->kernels_launched = s.kernels_launched;
    out->arrays_materialized = s.arrays_materialized;
    out->traces = s.traces;
    out->cache_hits = s.cache_hits;
    out->cache_misses = s.cache_misses;
    out->interim_calls = s.interim_calls;
    out->fused_calls = s.fused_calls;
    out->fused_arrivals = s.fused_arrivals;
    out->fused_arrival_ns = s.fused_arrival_ns;
  });
}

int kiln_reset_stats(void) {
  return guard([] { reset_stats(); });
}

int kiln_default_device(kiln_device* out) {
  return guard([&] {
    check_out("kiln_default_device", out);
    *out = from_device(default_device());
  });
}

int kiln_set_default_device(kiln_device device) {
  return guard([&] { set_default_device(to_device("kiln_set_default_device", device)); });
}

int kiln_device_count(int* out, kiln_device_type type) {
  return guard([&] {
    check_out("kiln_device_count", out);
    int t = enum_value(type);
    if (t == KILN_DEVICE_CPU)
      *out = 1;
    else if (t == KILN_DEVICE_CUDA)
      *out = cuda_device_count();
    else
      fail("kiln_device_count", "invalid device type ", t);
  });
}

int kiln_default_stream(kiln_stream* out, kiln_device device) {
  return guard([&] {
    check_out("kiln_default_stream", out);
    existing_device("kiln_default_stream", device);
    out->device = device;
    out->index = 0;  // each thread's default stream; the thread is implied
  });
}

}  // extern "C"
