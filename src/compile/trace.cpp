#include "compile/trace.h"

#include <atomic>
#include <unordered_map>

#include "core/node.h"
#include "core/stats.h"
#include "kiln/eval.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/cuda.h"
#endif

namespace kiln::compiler {

namespace {

std::atomic<uint64_t> g_next_trace_id{1};  // atomic: unique ids for traces on any thread

// Sets this thread's trace id for a scope and restores the previous one.
class TraceScope {
 public:
  explicit TraceScope(uint64_t id) : previous_(detail::current_trace_id()) { detail::set_current_trace_id(id); }
  ~TraceScope() { detail::set_current_trace_id(previous_); }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  uint64_t previous_;
};

Array placeholder(const Array& like, uint64_t trace_id) {
  auto node = std::make_shared<detail::Node>();
  node->shape = like.shape();
  node->dtype = like.dtype();
  node->device = like.device();
  node->trace_id = trace_id;  // no producer and never ready: evaluation refuses it
  return Array(std::move(node));
}

// Walks the traced outputs and builds the graph, inputs before users.
class GraphBuilder {
 public:
  // display: expand every unevaluated node and never evaluate leaves (for DOT output).
  GraphBuilder(uint64_t trace_id, const std::vector<Array>& placeholders, const std::vector<Array>& actual,
               bool display = false)
      : trace_id_(trace_id), actual_(actual), display_(display) {
    for (size_t i = 0; i < placeholders.size(); ++i) {
      int v = add_value(placeholders[i].shape(), placeholders[i].dtype());
      g_.values[static_cast<size_t>(v)].input_index = static_cast<int>(i);
      g_.inputs.push_back(v);
      node_value_[placeholders[i].node().get()] = v;
    }
  }

  Graph build(const std::vector<Array>& outputs) {
    for (auto& o : outputs) {
      if (!o.valid()) fail("compile", "the function returned an empty Array handle");
      g_.outputs.push_back(visit(o.node()));
    }
    return std::move(g_);
  }

 private:
  int add_value(const Shape& shape, Dtype dtype) {
    Value v;
    v.shape = shape;
    v.dtype = dtype;
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size()) - 1;
  }

  // Value id for a node, adding the nodes it depends on first (iteratively).
  int visit(const std::shared_ptr<detail::Node>& root) {
    struct Frame {
      std::shared_ptr<detail::Node> node;
      std::shared_ptr<detail::Producer> producer;
      size_t next;
    };
    std::vector<Frame> stack;
    auto enter = [&](const std::shared_ptr<detail::Node>& n) -> bool {
      if (node_value_.count(n.get())) return false;
      auto p = (display_ || n->trace_id == trace_id_) ? n->pending_producer() : nullptr;
      if (p && producer_node_.count(p.get())) {
        node_value_[n.get()] = value_of_output(p.get(), n->output_index);
        return false;
      }
      if (!p) {
        node_value_[n.get()] = add_constant(n);
        return false;
      }
      stack.push_back({n, std::move(p), 0});
      return true;
    };
    enter(root);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.producer->inputs.size()) {
        auto in = f.producer->inputs[f.next++].node();
        enter(in);
        continue;
      }
      add_node(f.producer.get());
      node_value_[f.node.get()] = value_of_output(f.producer.get(), f.node->output_index);
      stack.pop_back();
    }
    return node_value_.at(root.get());
  }

  void add_node(detail::Producer* p) {
    if (producer_node_.count(p)) return;
    GNode gn;
    gn.prim = p->prim;
    for (auto& in : p->inputs) gn.inputs.push_back(node_value_.at(in.node().get()));
    for (auto& r : p->results) gn.outputs.push_back(add_value(r.shape, r.dtype));
    producer_node_[p] = static_cast<int>(g_.nodes.size());
    g_.nodes.push_back(std::move(gn));
  }

  int value_of_output(detail::Producer* p, int index) {
    return g_.nodes[static_cast<size_t>(producer_node_.at(p))].outputs[static_cast<size_t>(index)];
  }

  int add_constant(const std::shared_ptr<detail::Node>& n) {
    if (display_) {
      int v = add_value(n->shape, n->dtype);
      g_.values[static_cast<size_t>(v)].constant = detail::Tensor();
      return v;
    }
    for (auto& a : actual_) {
      if (a.node() == n) {
        fail("compile",
             "an array passed as an input is also captured by the function; use the input argument "
             "inside the function instead");
      }
    }
    Array a(n);
    {
      TraceScope outside(0);  // a captured lazy array is evaluated as an ordinary array
      a.eval();
    }
    int v = add_value(n->shape, n->dtype);
    g_.values[static_cast<size_t>(v)].constant = a.tensor();
#ifdef KILN_WITH_CUDA
    // Passes read one-element constants on the host (merging, no-op removal).
    if (a.size() <= 1) g_.values[static_cast<size_t>(v)].constant = cuda::to_host(a.tensor());
#endif
    return v;
  }

  uint64_t trace_id_;
  const std::vector<Array>& actual_;
  bool display_;
  Graph g_;
  std::unordered_map<const detail::Node*, int> node_value_;
  std::unordered_map<const detail::Producer*, int> producer_node_;
};

}  // namespace

Graph graph_of(const std::vector<Array>& outputs) {
  std::vector<Array> none;
  return GraphBuilder(0, none, none, /*display=*/true).build(outputs);
}

bool tracing() { return detail::current_trace_id() != 0; }

Graph trace(const Function& fn, const std::vector<Array>& inputs) {
  uint64_t id = g_next_trace_id.fetch_add(1);
  detail::count(detail::counters().traces);
  std::vector<Array> placeholders;
  placeholders.reserve(inputs.size());
  for (auto& a : inputs) placeholders.push_back(placeholder(a, id));
  std::vector<Array> outputs;
  {
    TraceScope scope(id);
    outputs = fn(placeholders);
  }
  return GraphBuilder(id, placeholders, inputs).build(outputs);
}

}  // namespace kiln::compiler
