#include "backend/cuda/streams.h"

#include <atomic>
#include <mutex>

#include "backend/cuda/allocator.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/driver.h"

namespace kiln::cuda {

using detail::Tensor;

namespace {

// Streams of threads that have exited, per device, for later threads.
struct IdleStreams {
  std::mutex mu;  // guards streams
  std::vector<CUstream> streams;
};

IdleStreams& idle_streams(int device) {
  static auto* idle = new IdleStreams[kMaxDevices];  // never destroyed: threads may exit during static teardown
  return idle[device];
}

std::atomic<size_t> g_stream_waits{0};  // statistics; relaxed

// One stream per device for each thread; a thread's streams go back to an idle list
// when it exits and serve later threads, so the number of streams stays bounded.
struct ThreadStreams {
  CUstream s[kMaxDevices] = {};
  ~ThreadStreams() {
    for (int i = 0; i < kMaxDevices; ++i) {
      if (!s[i]) continue;
      IdleStreams& idle = idle_streams(i);
      std::lock_guard<std::mutex> lock(idle.mu);
      idle.streams.push_back(s[i]);
    }
  }
};

}  // namespace

CUstream stream(int device) {
  thread_local ThreadStreams streams;
  bind(device);
  CUstream& s = streams.s[device];
  if (!s) {
    IdleStreams& idle = idle_streams(device);
    {
      std::lock_guard<std::mutex> lock(idle.mu);
      if (!idle.streams.empty()) {
        s = idle.streams.back();
        idle.streams.pop_back();
      }
    }
    if (!s) check(drv().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  return s;
}

void prepare_inputs(int device, std::vector<Tensor>& in) {
  CUstream st = stream(device);
  const Driver& d = drv();
  for (auto& t : in) {
    if (!t.buffer) continue;
    if (!on_device(t) || t.buffer->device().index != device) t = to_device(t, device);
    Block* b = block_of(t);
    if (!b || b->stream == st) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    // A block is written once while allocated (reuse needs no other readers), so a stream
    // that waited for it once never waits again: shared weights or constants read by many
    // threads would otherwise chain every call to the uploading thread's queue.
    bool known = false;
    for (CUstream u : b->users) known = known || u == st;
    if (known) continue;
    if (b->written) {
      // Marks the owning stream now: everything queued there so far includes the write.
      if (!b->ready) check(d.cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      check(d.cuEventRecord(b->ready, b->stream), "cuEventRecord");
      check(d.cuStreamWaitEvent(st, b->ready, 0), "cuStreamWaitEvent");
      g_stream_waits.fetch_add(1, std::memory_order_relaxed);
    }
    b->users.push_back(st);
  }
}

void finish_outputs(int device, const std::vector<Tensor>& out) {
  CUstream st = stream(device);
  for (auto& t : out) {
    Block* b = block_of(t);
    if (!b || b->stream != st) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    b->written = true;  // the event is recorded when another stream first needs it
  }
}

void synchronize(int device) { check(drv().cuStreamSynchronize(stream(device)), "waiting for the device"); }

size_t input_stream_waits() { return g_stream_waits.load(); }

}  // namespace kiln::cuda
