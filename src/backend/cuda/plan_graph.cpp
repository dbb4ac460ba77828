#include "backend/cuda/plan_graph.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <shared_mutex>
#include <string>

#include "backend/cuda/nvrtc.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/struct_launch.h"
#include "backend/cuda/tuning.h"
#include "compile/tier.h"
#include "core/stats.h"

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

constexpr int kMaxLayouts = 4;  // graphs kept per plan and stream; more layouts replay step by step
constexpr int kMaxAttempts = 3;  // recordings spoiled by uploads (constants go up once) before giving up
constexpr size_t kStageBytes =
    size_t{1} << 20;  // per-call operands of a product copied through the graph's own buffers
std::atomic<uint64_t> g_replays{0}, g_host_steps{0}, g_recaptures{0};

bool graphs_enabled() { return tuning().graphs; }

size_t graph_min_kernels() { return static_cast<size_t>(tuning().graph_min_kernels); }

// Where a recorded pointer parameter points: into input `operand`, or (operand < 0) into
// the per-call output buffer -operand - 1, at a byte offset.
struct Patch {
  size_t launch, word;
  int operand;
  long offset;
};

// How an output of the call sits in its per-call buffer, or in the buffer of a donated input
// (`input`: a cache the call updated in place).
struct OutputLayout {
  int buffer;
  int input;
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

// One recorded run on one stream, instantiated as graphs: cuBLASLt products are captured
// into them, and only a product that could not be is run from the host between two graphs.
// Each stream (each calling
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
    // What a lifted kernel's graph owns is freed with it, not after the replays in flight: wait for them.
    if (!lifted_from.empty()) driver()->cuStreamSynchronize(stream);
    for (CUgraph g : lifted_from) driver()->cuGraphDestroy(g);
  }

  const std::string key;
  const CUstream stream;  // the only stream that records and replays it (a thread's, recycled after it exits)
  std::mutex mu;  // guards everything below (a recycled stream may serve a new thread)
  int attempts = 0;
  bool ready = false, failed = false;
  std::vector<Segment> segments;
  std::vector<CUgraphNode> nodes;  // per launch (null for a host step run from the host)
  std::vector<size_t> segment_of;  // per launch in a graph: its segment
  std::vector<char> captured;  // per launch: a host step captured into its segment
  std::vector<char> lifted;  // per captured step: its one kernel is a node of the segment itself
  std::vector<CUgraph> lifted_from;  // their captured graphs, alive for what they own (NCCL's work buffers)
  std::vector<std::vector<std::shared_ptr<Buffer>>> kept;  // per captured step: buffers its graph uses
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
    put(t.donated);  // a donated input may be written in place: a graph recorded so needs one again
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

// The buffer's address as a parameter word holds it.
long address(const Buffer& b) { return static_cast<long>(reinterpret_cast<uintptr_t>(b.data())); }

bool within(long word, const Buffer& b) {
  const long base = address(b);
  return word >= base && word < base + static_cast<long>(b.bytes());
}

// A kernel node for a recorded launch; args holds the address of its parameter.
CUDA_KERNEL_NODE_PARAMS node_params(const LaunchRecord& r, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = r.kernel.fn;
  p.gridDimX = r.grid;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = r.block;
  p.blockDimY = p.blockDimZ = 1;
  p.sharedMemBytes = r.shared;
  p.kernelParams = args;
  return p;
}

// Every parameter word of the launches that points into an input or a per-call output.
std::vector<Patch> find_patches(const std::vector<LaunchRecord>& launches, const std::vector<Tensor>& in,
                                const std::vector<std::shared_ptr<Buffer>>& per_call) {
  std::vector<Patch> patches;
  for (size_t li = 0; li < launches.size(); ++li) {
    const auto& words = launches[li].words;
    for (size_t w = 0; w < words.size(); ++w) {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].buffer && within(words[w], *in[i].buffer)) {
          patches.push_back({li, w, static_cast<int>(i), words[w] - address(*in[i].buffer)});
          break;
        }
      }
      for (size_t j = 0; j < per_call.size(); ++j) {
        if (within(words[w], *per_call[j]))
          patches.push_back({li, w, -static_cast<int>(j) - 1, words[w] - address(*per_call[j])});
      }
    }
  }
  return patches;
}

bool in_graph(const Layout& l, size_t i) { return !l.launches[i].host || l.captured[i]; }

// A kernel launch copying `bytes` from src to dst, and the words of its source and destination.
LaunchRecord copy_launch(int device, long bytes, long src, long dst) {
  static const std::string source = struct_kernel_source("backend/cuda/kernels/copy.cuh", "CopyBytes", "copy::bytes");
  LaunchRecord r;
  r.kernel = kernel(device, source, "kiln_kernel", [] { return source; });
  r.block = 256;
  r.grid = grid_for(device, (bytes + 15) / 16, r.block);
  r.words = struct_words(args::CopyBytes{bytes, reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst)});
  return r;
}
constexpr size_t kCopySource = offsetof(args::CopyBytes, from) / sizeof(long);
constexpr size_t kCopyDestination = offsetof(args::CopyBytes, to) / sizeof(long);

// A captured product keeps the pointers it was captured with. Where it reads an input or
// writes an output of at most kStageBytes, it is pointed at a buffer of the graph's own
// instead, with a copy from the input at the start (or to the output right after it) whose
// pointer is patched each call. A larger input (weights, passed again each call) stays
// patched: the product is captured again only when it moves. Kernels reading a small input
// that several launches share read the graph's copy too.
void stage_products(int device, Layout& l, const std::vector<Tensor>& in,
                    const std::vector<std::shared_ptr<Buffer>>& per_call) {
  auto& patches = l.patches;
  auto& launches = l.launches;
  auto buffer = [&](int operand) -> const Buffer& {
    return operand >= 0 ? *in[static_cast<size_t>(operand)].buffer : *per_call[static_cast<size_t>(-operand - 1)];
  };
  std::map<int, std::set<size_t>> users;  // launches reading or writing each operand
  for (auto& p : patches) users[p.operand].insert(p.launch);
  std::map<int, long> stage;  // operand -> its buffer in the graph
  std::vector<LaunchRecord> first;  // copies of inputs, run first
  std::vector<Patch> first_patches;  // their sources
  std::vector<std::vector<LaunchRecord>> after(launches.size());  // copies to outputs, after their product
  std::vector<std::vector<Patch>> after_patches(launches.size());  // their destinations (launch: among them)
  std::vector<char> staged(patches.size(), 0);
  auto stageable =
      [&](const Patch& p) {  // an output only where no other launch uses it; never a donated input (written in place)
        const size_t bytes = buffer(p.operand).bytes();
        return bytes > 0 && bytes <= kStageBytes &&
               (p.operand >= 0 ? !in[static_cast<size_t>(p.operand)].donated : users[p.operand].size() == 1);
      };
  for (size_t li = 0; li < launches.size(); ++li) {
    const bool host = launches[li].host != nullptr;
    bool captures = true;  // a product writing an output it cannot stage runs from the host: nothing to stage
    for (auto& p : patches) captures = captures && (p.launch != li || p.operand >= 0 || stageable(p));
    if (host && !captures) continue;
    for (size_t k = 0; k < patches.size(); ++k) {
      const Patch& p = patches[k];
      if (p.launch != li || !stageable(p)) continue;
      // A kernel reads a small input from the graph's copy when other launches read it too
      // (a token's position, read by every layer): one pointer to patch a call, not one each.
      if (!host && (p.operand < 0 || users[p.operand].size() < 2)) continue;
      const size_t bytes = buffer(p.operand).bytes();
      auto [at, fresh] = stage.try_emplace(p.operand, 0);
      if (fresh) {
        const Buffer& b = buffer(p.operand);
        l.owned.push_back(allocate(device, bytes));
        at->second = address(*l.owned.back());
        if (p.operand >= 0) {  // the copy's source is the call's input
          first_patches.push_back({first.size(), kCopySource, p.operand, 0});
          first.push_back(copy_launch(device, static_cast<long>(bytes), address(b), at->second));
        } else {  // its destination is the call's output
          after_patches[li].push_back({after[li].size(), kCopyDestination, p.operand, 0});
          after[li].push_back(copy_launch(device, static_cast<long>(bytes), at->second, address(b)));
        }
      }
      launches[li].words[p.word] = at->second + p.offset;
      staged[k] = 1;
    }
  }
  if (stage.empty()) return;
  // The input copies first, then every launch followed by the copies of what it wrote.
  std::vector<LaunchRecord> all(std::make_move_iterator(first.begin()), std::make_move_iterator(first.end()));
  std::vector<Patch> renumbered = first_patches;
  std::vector<size_t> index(launches.size());
  for (size_t li = 0; li < launches.size(); ++li) {
    index[li] = all.size();
    all.push_back(std::move(launches[li]));
    for (Patch p : after_patches[li]) {
      p.launch += all.size();
      renumbered.push_back(p);
    }
    for (auto& c : after[li]) all.push_back(std::move(c));
  }
  for (size_t k = 0; k < patches.size(); ++k) {
    if (staged[k]) continue;
    Patch p = patches[k];
    p.launch = index[p.launch];
    renumbered.push_back(p);
  }
  launches = std::move(all);
  patches = std::move(renumbered);
}

// The node of a captured graph that is one kernel launch and nothing else; null otherwise.
CUgraphNode single_kernel(CUgraph g) {
  const Driver& d = drv();
  size_t count = 0;
  if (d.cuGraphGetNodes(g, nullptr, &count) != CUDA_SUCCESS || count != 1) return nullptr;
  CUgraphNode node = nullptr;
  CUgraphNodeType type{};
  if (d.cuGraphGetNodes(g, &node, &count) != CUDA_SUCCESS || d.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS ||
      type != CU_GRAPH_NODE_TYPE_KERNEL)
    return nullptr;
  return node;
}

// Turns a recorded run into graphs; false when the run cannot be replayed that way.
bool build(int device, Layout& l, Recording& rec, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
  if (!rec.replayable || rec.launches.size() < graph_min_kernels()) return false;
  // Outputs live in buffers allocated by the run or in donated inputs updated in place;
  // anything else (an input passed through) replays step by step.
  std::vector<std::shared_ptr<Buffer>> per_call;
  for (auto& t : out) {
    bool ours = false;
    for (auto& b : rec.buffers) ours = ours || b == t.buffer;
    if (!ours) {
      int input = -1;
      for (size_t i = 0; i < in.size() && input < 0; ++i) {
        if (in[i].donated && in[i].buffer == t.buffer) input = static_cast<int>(i);
      }
      if (input < 0) return false;
      l.outputs.push_back({-1, input, t.shape, t.strides, t.offset, t.dtype});
      continue;
    }
    int index = -1;
    for (size_t j = 0; j < per_call.size(); ++j) {
      if (per_call[j] == t.buffer) index = static_cast<int>(j);
    }
    if (index < 0) {
      index = static_cast<int>(per_call.size());
      per_call.push_back(t.buffer);
      l.output_bytes.push_back(t.buffer->bytes());
    }
    l.outputs.push_back({index, -1, t.shape, t.strides, t.offset, t.dtype});
  }
  for (auto& b : rec.buffers) {
    bool output = false;
    for (auto& p : per_call) output = output || p == b;
    if (!output) l.owned.push_back(b);
  }
  l.launches = std::move(rec.launches);
  l.patches = find_patches(l.launches, in, per_call);
  stage_products(device, l, in, per_call);
  const Driver& d = drv();
  bind(device);
  const size_t n = l.launches.size();
  l.nodes.assign(n, nullptr);
  l.segment_of.assign(n, 0);
  l.captured.assign(n, 0);
  l.kept.assign(n, {});
  std::vector<CUgraph> children(n, nullptr);
  std::vector<char> movable(n, 0);  // per host step: a pointer of it may move from call to call
  // Programmatic dependent launch: compute capability 9.0 and a driver with edge data.
  const bool overlap = tuning().graph_overlap && d.cuGraphAddDependencies && device_info(device).major >= 9;
  for (size_t i = 0; i < n; ++i) {
    if (!l.launches[i].host) continue;
    bool writes_output = false;  // an output is new each call: it would be captured again every call
    bool patched = false;  // reads or writes a buffer that may move between calls
    for (auto& p : l.patches) {
      writes_output = writes_output || (p.launch == i && p.operand < 0);
      patched = patched || p.launch == i;
    }
    movable[i] = patched;
    if (writes_output || (patched && !l.launches[i].host->recapturable())) continue;
    children[i] = l.launches[i].host->capture(device, l.launches[i].words, l.kept[i]);
    l.captured[i] = children[i] != nullptr;
  }
  // The segments' graphs: with `lift`, a captured step of one kernel (a cuBLASLt product, an
  // NCCL collective) that no replay captures again is a kernel node of its segment rather than a
  // child graph, so that the kernel after it can start early. False when a segment does not
  // instantiate that way.
  auto make_segments = [&](bool lift) {
    l.lifted.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      if (!in_graph(l, i)) continue;
      if (i == 0 || !in_graph(l, i - 1)) {  // a new run of graph nodes
        l.segments.push_back({nullptr, nullptr, i, i});
        check(d.cuGraphCreate(&l.segments.back().graph, 0), "cuGraphCreate");
      }
      Segment& g = l.segments.back();
      CUgraphNode previous = g.end > g.first ? l.nodes[i - 1] : nullptr;
      const CUgraphNode only = lift && children[i] && !movable[i] ? single_kernel(children[i]) : nullptr;
      CUDA_KERNEL_NODE_PARAMS lifted{};
      if (only && d.cuGraphKernelNodeGetParams(only, &lifted) == CUDA_SUCCESS &&
          d.cuGraphAddKernelNode(&l.nodes[i], g.graph, previous ? &previous : nullptr, previous ? 1 : 0, &lifted) ==
              CUDA_SUCCESS) {
        check(d.cuGraphKernelNodeCopyAttributes(l.nodes[i], only), "cuGraphKernelNodeCopyAttributes");
        l.lifted[i] = 1;
      } else if (children[i]) {
        check(d.cuGraphAddChildGraphNode(&l.nodes[i], g.graph, previous ? &previous : nullptr, previous ? 1 : 0,
                                         children[i]),  // copies the child graph
              "cuGraphAddChildGraphNode");
      } else {
        // A kernel that waits for its inputs itself starts once every block of the kernel ahead
        // has let it (or ended): its launch and first reads overlap the kernel ahead.
        const bool programmatic = previous && overlap && (!l.launches[i - 1].host || l.lifted[i - 1]) &&
                                  l.launches[i].kernel.waits_for_inputs;
        const CUgraphNode* after = previous && !programmatic ? &previous : nullptr;
        void* args[] = {l.launches[i].words.data()};
        const CUDA_KERNEL_NODE_PARAMS p = node_params(l.launches[i], args);
        check(d.cuGraphAddKernelNode(&l.nodes[i], g.graph, after, after ? 1 : 0, &p), "cuGraphAddKernelNode");
        if (programmatic) {
          CUgraphEdgeData edge{};
          edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
          edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
          check(d.cuGraphAddDependencies(g.graph, &previous, &l.nodes[i], &edge, 1), "cuGraphAddDependencies");
        }
      }
      l.segment_of[i] = l.segments.size() - 1;
      g.end = i + 1;
    }
    for (auto& g : l.segments) {
      const CUresult r = d.cuGraphInstantiateWithFlags(&g.exec, g.graph, 0);
      if (r == CUDA_SUCCESS) continue;
      if (lift) return false;
      check(r, "cuGraphInstantiate");
    }
    return true;
  };
  if (!make_segments(overlap)) {
    for (auto& g : l.segments) {
      if (g.exec) d.cuGraphExecDestroy(g.exec);
      d.cuGraphDestroy(g.graph);
    }
    l.segments.clear();
    make_segments(false);
  }
  // A lifted kernel's captured graph stays alive for what it owns (NCCL's work buffers); a child
  // graph was copied into its segment.
  for (size_t i = 0; i < n; ++i) {
    if (!children[i]) continue;
    if (l.lifted[i])
      l.lifted_from.push_back(children[i]);
    else
      d.cuGraphDestroy(children[i]);
  }
  return true;
}

// Captures product i again with its new pointers into its node of the instantiated graph.
void recapture(int device, Layout& l, size_t i) {
  std::vector<std::shared_ptr<Buffer>> keep;
  CUgraph g = l.launches[i].host->capture(device, l.launches[i].words, keep);
  if (!g) fail("cuda", "a compiled call's matrix product could not be captured again with its new operands");
  const CUresult r = drv().cuGraphExecChildGraphNodeSetParams(l.segments[l.segment_of[i]].exec, l.nodes[i], g);
  drv().cuGraphDestroy(g);
  check(r, "cuGraphExecChildGraphNodeSetParams");
  l.kept[i] = std::move(keep);  // the old workspace goes back to this stream's pool, after the graphs using it
  g_recaptures.fetch_add(1, std::memory_order_relaxed);
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
    const Buffer& b =
        p.operand >= 0 ? *in[static_cast<size_t>(p.operand)].buffer : *per_call[static_cast<size_t>(-p.operand - 1)];
    long& word = l.launches[p.launch].words[p.word];
    const long value = address(b) + p.offset;
    if (word != value) changed[p.launch] = 1;
    word = value;
  }
  const Driver& d = drv();
  for (size_t i = 0; i < l.launches.size(); ++i) {
    if (!changed[i] || (l.launches[i].host && !l.captured[i])) continue;
    if (l.launches[i].host) {
      recapture(device, l, i);
      continue;
    }
    void* args[] = {l.launches[i].words.data()};
    const CUDA_KERNEL_NODE_PARAMS p = node_params(l.launches[i], args);
    check(d.cuGraphExecKernelNodeSetParams(l.segments[l.segment_of[i]].exec, l.nodes[i], &p),
          "cuGraphExecKernelNodeSetParams");
  }
  // In the recorded order on this stream: each segment as one graph launch, each host step itself.
  for (size_t i = 0; i < l.launches.size();) {
    if (!in_graph(l, i)) {
      l.launches[i].host->run(device, l.launches[i].words);
      g_host_steps.fetch_add(1, std::memory_order_relaxed);
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
    t.buffer = o.input >= 0 ? in[static_cast<size_t>(o.input)].buffer : per_call[static_cast<size_t>(o.buffer)];
    t.strides = o.strides;
    t.offset = o.offset;
    out[i] = std::move(t);
  }
  detail::count(detail::counters().kernels_launched, l.kernels);
  g_replays.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

uint64_t graph_replays() { return g_replays.load(std::memory_order_relaxed); }
GraphStepStats graph_step_stats() {
  return {g_host_steps.load(std::memory_order_relaxed), g_recaptures.load(std::memory_order_relaxed)};
}

void run_compiled(int device, const compiler::CompiledCall& call, const std::vector<Tensor>& in,
                  std::vector<Tensor>& out) {
  auto& prim = const_cast<compiler::CompiledCall&>(call);
  const size_t kernels = call.plan().kernels;
  bool eligible = graphs_enabled() && kernels >= graph_min_kernels();
  for (auto& t : in) eligible = eligible && (!t.buffer || on_device(t));
  std::shared_ptr<Layout> l = eligible ? find_layout(call.plan(), layout_key(device, in), stream(device)) : nullptr;
  if (!l) {
    prim.eval_cpu(in, out);
    return;
  }
  std::lock_guard<std::mutex> lock(l->mu);
  if (l->ready) {
    replay(device, *l, in, out);
    finish_outputs(device, out);
    compiler::count_call(call.plan(), compiler::TierRecord{});  // graphs are made of fused runs only
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
  l->kernels = kernels;
  // An interim run is not kept: the next run records the region's kernel once it is ready.
  if (rec.interim) return;
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
