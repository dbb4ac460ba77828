#include "backend/cuda/plan_graph.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>
#include <string>

#include "backend/cuda/runtime.h"
#include "backend/cuda/tuning.h"
#include "core/stats.h"

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

constexpr int kMaxLayouts = 4;   // graphs kept per plan and stream; more layouts replay step by step
constexpr int kMaxAttempts = 3;  // recordings spoiled by uploads (constants go up once) before giving up
std::atomic<uint64_t> g_replays{0};

bool graphs_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_CUDA_GRAPHS");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

size_t graph_min_kernels() { return static_cast<size_t>(tuning().graph_min_kernels); }

// Where a recorded pointer parameter points: into input `operand`, or (operand < 0) into
// the per-call output buffer -operand - 1, at a byte offset.
struct Patch {
  size_t launch, word;
  int operand;
  long offset;
};

// How an output of the call sits in its per-call buffer.
struct OutputLayout {
  int buffer;
  Shape shape;
  Strides strides;
  int64_t offset;
  Dtype dtype;
};

// A run of consecutive recorded kernels, replayed as one graph launch.
struct Segment {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  size_t first = 0, end = 0;  // its launches
};

// One recorded run on one stream, instantiated as graphs: one for each run of kernels
// between the host steps (cuBLASLt products). Each stream (each calling
// thread) records its own: its replays share the graph's intermediates, which CUDA's stream
// order keeps apart, and threads never wait for each other, on the host or on the device.
struct Layout {
  Layout(std::string k, CUstream s) : key(std::move(k)), stream(s) {}
  ~Layout() {
    if (!driver()) return;
    for (auto& g : segments) {
      if (g.exec) driver()->cuGraphExecDestroy(g.exec);  // freed once in-flight launches finish
      if (g.graph) driver()->cuGraphDestroy(g.graph);
    }
  }

  const std::string key;
  const CUstream stream;  // the only stream that records and replays it (a thread's, recycled after it exits)
  std::mutex mu;          // guards everything below (a recycled stream may serve a new thread)
  int attempts = 0;
  bool ready = false, failed = false;
  std::vector<Segment> segments;
  std::vector<CUgraphNode> nodes;  // per launch (null for a host step)
  std::vector<size_t> segment_of;  // per launch: its segment (kernels only)
  std::vector<LaunchRecord> launches;
  std::vector<Patch> patches;
  std::vector<size_t> output_bytes;  // per-call buffers
  std::vector<OutputLayout> outputs;
  std::vector<std::shared_ptr<Buffer>> owned;  // intermediates, reused by every replay
  uint64_t kernels = 0;
};

struct PlanGraphs {
  std::vector<std::shared_ptr<Layout>> layouts;
};

// Device, dtype, shape, strides, offset, 16-byte alignment and aliasing of every input:
// what the recorded kernels and their variants depend on besides the pointers.
const std::string& layout_key(int device, const std::vector<Tensor>& in) {
  // Packed words, not text: a stream of ints per call (an ostringstream also shares the
  // global locale's reference count between threads), into this thread's reused string.
  thread_local std::string k;
  k.clear();
  auto put = [&](int64_t x) { k.append(reinterpret_cast<const char*>(&x), sizeof x); };
  put(device);
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    put(static_cast<int64_t>(t.dtype));
    put(t.offset);
    put(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.buffer ? t.raw() : nullptr) % 16));
    put(static_cast<int64_t>(t.shape.size()));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      put(t.shape[d]);
      put(t.strides[d]);
    }
    int64_t alias = -1;  // the first earlier input with the same buffer
    for (size_t j = 0; j < i && alias < 0; ++j) {
      if (t.buffer && in[j].buffer == t.buffer) alias = static_cast<int64_t>(j);
    }
    put(alias);
  }
  return k;
}

std::shared_ptr<Layout> find_layout(const compiler::Plan& plan, const std::string& key, CUstream st) {
  auto lookup = [&](int& mine) -> std::shared_ptr<Layout> {
    mine = 0;
    if (!plan.gpu_graphs) return nullptr;
    for (auto& l : static_cast<PlanGraphs*>(plan.gpu_graphs.get())->layouts) {
      if (l->stream != st) continue;
      if (l->key == key) return l;
      ++mine;
    }
    return nullptr;
  };
  int mine = 0;
  {
    std::shared_lock<std::shared_mutex> lock(plan.gpu_graphs_mu);  // threads replaying look up at once
    if (auto l = lookup(mine)) return l;
  }
  std::unique_lock<std::shared_mutex> lock(plan.gpu_graphs_mu);
  if (auto l = lookup(mine)) return l;
  if (mine >= kMaxLayouts) return nullptr;
  if (!plan.gpu_graphs) plan.gpu_graphs = std::make_shared<PlanGraphs>();
  auto& all = static_cast<PlanGraphs*>(plan.gpu_graphs.get())->layouts;
  all.push_back(std::make_shared<Layout>(key, st));
  return all.back();
}

bool within(long word, const Buffer& b) {
  const long base = static_cast<long>(reinterpret_cast<uintptr_t>(b.data()));
  return word >= base && word < base + static_cast<long>(b.bytes());
}

// A kernel node for a recorded launch; args holds the address of its parameter.
CUDA_KERNEL_NODE_PARAMS node_params(const LaunchRecord& r, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = r.f;
  p.gridDimX = r.grid;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = r.block;
  p.blockDimY = p.blockDimZ = 1;
  p.sharedMemBytes = r.shared;
  p.kernelParams = args;
  return p;
}

// Turns a recorded run into graphs; false when the run cannot be replayed that way.
bool build(int device, Layout& l, Recording& rec, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
  if (!rec.replayable || rec.launches.size() < graph_min_kernels()) return false;
  // Outputs live in buffers allocated by the run; anything else (an input passed through) replays step by step.
  std::vector<std::shared_ptr<Buffer>> per_call;
  for (auto& t : out) {
    bool ours = false;
    for (auto& b : rec.buffers) ours = ours || b == t.buffer;
    if (!ours) return false;
    int index = -1;
    for (size_t j = 0; j < per_call.size(); ++j) {
      if (per_call[j] == t.buffer) index = static_cast<int>(j);
    }
    if (index < 0) {
      index = static_cast<int>(per_call.size());
      per_call.push_back(t.buffer);
      l.output_bytes.push_back(t.buffer->bytes());
    }
    l.outputs.push_back({index, t.shape, t.strides, t.offset, t.dtype});
  }
  for (auto& b : rec.buffers) {
    bool output = false;
    for (auto& p : per_call) output = output || p == b;
    if (!output) l.owned.push_back(b);
  }
  for (size_t li = 0; li < rec.launches.size(); ++li) {
    const auto& meta = rec.launches[li].meta;
    for (size_t w = 0; w < meta.size(); ++w) {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].buffer && within(meta[w], *in[i].buffer)) {
          l.patches.push_back({li, w, static_cast<int>(i), meta[w] - static_cast<long>(reinterpret_cast<uintptr_t>(in[i].buffer->data()))});
          break;
        }
      }
      for (size_t j = 0; j < per_call.size(); ++j) {
        if (within(meta[w], *per_call[j])) {
          l.patches.push_back({li, w, -static_cast<int>(j) - 1, meta[w] - static_cast<long>(reinterpret_cast<uintptr_t>(per_call[j]->data()))});
        }
      }
    }
  }
  const Driver& d = drv();
  bind(device);
  l.launches = std::move(rec.launches);
  l.nodes.assign(l.launches.size(), nullptr);
  l.segment_of.assign(l.launches.size(), 0);
  for (size_t i = 0; i < l.launches.size(); ++i) {
    if (l.launches[i].host) continue;
    if (i == 0 || l.launches[i - 1].host) {  // a new run of kernels
      l.segments.push_back({nullptr, nullptr, i, i});
      check(d.cuGraphCreate(&l.segments.back().graph, 0), "cuGraphCreate");
    }
    Segment& g = l.segments.back();
    void* args[] = {l.launches[i].meta.data()};
    const CUDA_KERNEL_NODE_PARAMS p = node_params(l.launches[i], args);
    CUgraphNode previous = g.end > g.first ? l.nodes[i - 1] : nullptr;
    check(d.cuGraphAddKernelNode(&l.nodes[i], g.graph, previous ? &previous : nullptr, previous ? 1 : 0, &p),
          "cuGraphAddKernelNode");
    l.segment_of[i] = l.segments.size() - 1;
    g.end = i + 1;
  }
  for (auto& g : l.segments) check(d.cuGraphInstantiateWithFlags(&g.exec, g.graph, 0), "cuGraphInstantiate");
  return true;
}

// Patches this call's buffers into the graph and launches it on this thread's stream.
void replay(int device, Layout& l, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  thread_local std::vector<std::shared_ptr<Buffer>> per_call;  // reused: no allocation a call
  thread_local std::vector<char> changed;
  struct Release {  // on every way out (an allocation can fail): the outputs hold what they need
    std::vector<std::shared_ptr<Buffer>>& v;
    ~Release() { v.clear(); }
  } release{per_call};
  for (size_t bytes : l.output_bytes) per_call.push_back(allocate(device, bytes));
  changed.assign(l.launches.size(), 0);
  for (const Patch& p : l.patches) {
    const Buffer& b = p.operand >= 0 ? *in[static_cast<size_t>(p.operand)].buffer : *per_call[static_cast<size_t>(-p.operand - 1)];
    long& word = l.launches[p.launch].meta[p.word];
    const long value = static_cast<long>(reinterpret_cast<uintptr_t>(b.data())) + p.offset;
    if (word != value) changed[p.launch] = 1;
    word = value;
  }
  const Driver& d = drv();
  for (size_t i = 0; i < l.launches.size(); ++i) {
    if (!changed[i] || l.launches[i].host) continue;
    void* args[] = {l.launches[i].meta.data()};
    const CUDA_KERNEL_NODE_PARAMS p = node_params(l.launches[i], args);
    check(d.cuGraphExecKernelNodeSetParams(l.segments[l.segment_of[i]].exec, l.nodes[i], &p),
          "cuGraphExecKernelNodeSetParams");
  }
  // In the recorded order on this stream: each run of kernels as one graph launch, each host step itself.
  for (size_t i = 0; i < l.launches.size();) {
    if (l.launches[i].host) {
      l.launches[i].host->run(device, l.launches[i].meta);
      ++i;
    } else {
      const Segment& g = l.segments[l.segment_of[i]];
      check(d.cuGraphLaunch(g.exec, l.stream), "cuGraphLaunch");
      i = g.end;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const OutputLayout& o = l.outputs[i];
    Tensor t;
    t.shape = o.shape;
    t.dtype = o.dtype;
    t.buffer = per_call[static_cast<size_t>(o.buffer)];
    t.strides = o.strides;
    t.offset = o.offset;
    out[i] = std::move(t);
  }
  detail::count(detail::counters().kernels_launched, l.kernels);
  g_replays.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

uint64_t graph_replays() { return g_replays.load(std::memory_order_relaxed); }

void run_compiled(int device, const compiler::CompiledCall& call, const std::vector<Tensor>& in,
                  std::vector<Tensor>& out) {
  auto& prim = const_cast<compiler::CompiledCall&>(call);
  int kernels = 0;
  for (auto& step : call.plan().steps) kernels += step.prim->is_view() ? 0 : 1;
  bool eligible = graphs_enabled() && static_cast<size_t>(kernels) >= graph_min_kernels();
  for (auto& t : in) eligible = eligible && !t.donated && (!t.buffer || on_device(t));
  std::shared_ptr<Layout> l = eligible ? find_layout(call.plan(), layout_key(device, in), stream(device)) : nullptr;
  if (!l) {
    prim.eval_cpu(in, out);
    return;
  }
  std::lock_guard<std::mutex> lock(l->mu);
  if (l->ready) {
    replay(device, *l, in, out);
    finish_outputs(device, out);
    return;
  }
  if (l->failed) {
    prim.eval_cpu(in, out);
    return;
  }
  // Record this run (it computes the results as usual), then keep it as a graph if it can be one.
  Recording rec;
  recording() = &rec;
  try {
    prim.eval_cpu(in, out);
  } catch (...) {
    recording() = nullptr;
    throw;
  }
  recording() = nullptr;
  l->kernels = static_cast<uint64_t>(kernels);
  if (build(device, *l, rec, in, out)) {
    l->ready = true;
  } else if (++l->attempts >= kMaxAttempts || (rec.replayable && rec.launches.size() < graph_min_kernels())) {
    l->failed = true;
  }
  if (!l->ready) {  // forget a partial build
    l->patches.clear();
    l->outputs.clear();
    l->output_bytes.clear();
    l->owned.clear();
  }
}

}  // namespace kiln::cuda
