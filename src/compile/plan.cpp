#include "compile/plan.h"

#include <algorithm>
#include <map>

#include "core/checked.h"
#include "core/node.h"
#include "core/stats.h"
#include "compile/tier.h"

namespace kiln::compiler {

using detail::Tensor;

std::shared_ptr<const Plan> lower(const Graph& g, bool shapeless) {
  auto plan = std::make_shared<Plan>();
  plan->shapeless = shapeless;
  // Register slots only for the values the plan touches, numbered densely: fusion leaves
  // most traced values unused, and every call allocates and clears its registers.
  std::vector<int> slots(g.values.size(), -1);
  auto slot = [&](int v) {
    int& s = slots[static_cast<size_t>(v)];
    if (s < 0) {
      s = static_cast<int>(plan->shapes.size());
      plan->shapes.push_back(g.values[static_cast<size_t>(v)].shape);
      plan->dtypes.push_back(g.values[static_cast<size_t>(v)].dtype);
    }
    return s;
  };
  auto slots_of = [&](const std::vector<int>& values) {
    std::vector<int> out;
    for (int v : values) out.push_back(slot(v));
    return out;
  };
  std::vector<int> last_use(g.values.size(), -1);
  std::vector<bool> needed(g.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int v : g.nodes[n].inputs) {
      last_use[static_cast<size_t>(v)] = static_cast<int>(n);
      needed[static_cast<size_t>(v)] = true;
    }
  }
  std::vector<bool> is_output(g.values.size(), false);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = needed[static_cast<size_t>(v)] = true;
  plan->inputs = slots_of(g.inputs);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].is_constant() && needed[v])
      plan->constants.emplace_back(slot(static_cast<int>(v)), *g.values[v].constant);
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Step s{g.nodes[n].prim, slots_of(g.nodes[n].inputs), slots_of(g.nodes[n].outputs), {}};
    plan->kernels += s.prim->is_view() ? 0 : 1;
    plan->steps.push_back(std::move(s));
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (last_use[v] >= 0 && !is_output[v])
      plan->steps[static_cast<size_t>(last_use[v])].release.push_back(slot(static_cast<int>(v)));
  }
  plan->outputs = slots_of(g.outputs);
  // Outputs never read by a step and not inputs or constants would be unwritten: the verifier forbids that.
  plan->num_values = plan->shapes.size();
  return plan;
}

std::vector<Shape> Plan::output_shapes(const std::vector<Shape>& input_shapes) const {
  std::vector<Shape> out;
  if (!shapeless) {
    for (int v : outputs) out.push_back(shapes[static_cast<size_t>(v)]);
    return out;
  }
  std::vector<Shape> s = shapes;
  for (size_t i = 0; i < inputs.size(); ++i) s[static_cast<size_t>(inputs[i])] = input_shapes[i];
  for (auto& step : steps) {
    std::vector<Shape> in;
    for (int v : step.inputs) in.push_back(s[static_cast<size_t>(v)]);
    std::vector<Shape> o;
    try {
      o = step.prim->output_shapes(in);
    } catch (const Error& e) {  // the usual cause: a size the function wrote, which the trace kept
      throw Error(std::string(e.what()) +
                  " (a shapeless function replays the sizes its trace fixed, such as a reshape target or "
                  "topk's k; derive them from the inputs' shapes, or give reshape -1)");
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) s[static_cast<size_t>(step.outputs[i])] = std::move(o[i]);
  }
  for (int v : outputs) out.push_back(s[static_cast<size_t>(v)]);
  return out;
}

namespace {
/* How many references hold a register's buffer when only the plan does: a donated input is
   also held by its (unreachable) node and the call's input list. */
long sole_holders(const Tensor& t) { return t.donated ? 3 : 1; }

/* Whether slot v is read for the last time by `step` (once) and nothing outside the plan
   holds its buffer, so the step may write into it. */
bool dies_at(const Step& step, int v, const std::vector<Tensor>& regs) {
  if (std::count(step.inputs.begin(), step.inputs.end(), v) != 1) return false;
  if (std::find(step.release.begin(), step.release.end(), v) == step.release.end()) return false;
  const Tensor& t = regs[static_cast<size_t>(v)];
  return t.buffer && t.buffer.use_count() == sole_holders(t);
}
}  // namespace

std::vector<Tensor> Plan::run(const std::vector<Tensor>& in) const {
  Device device = detail::device_of(in);  // a plan runs where its inputs are
  std::vector<Tensor> regs(num_values);
  for (size_t i = 0; i < inputs.size(); ++i) regs[static_cast<size_t>(inputs[i])] = in[i];
  for (auto& [v, t] : constants) regs[static_cast<size_t>(v)] = t;
  // Buffers of dead intermediates that nobody else holds, by size, for later outputs to take.
  std::multimap<size_t, std::shared_ptr<detail::Buffer>> free_buffers;
  std::vector<Tensor> step_in, step_out;
  for (auto& step : steps) {
    step_in.clear();
    std::vector<Shape> in_shapes;
    for (size_t j = 0; j < step.inputs.size(); ++j) {
      const int v = step.inputs[j];
      // Kernels never overwrite their inputs, but for an in-place op's input that dies here.
      const bool in_place = step.prim->may_write_into(j) && dies_at(step, v, regs);
      step_in.push_back(regs[static_cast<size_t>(v)]);
      step_in.back().donated = in_place;
      if (shapeless) in_shapes.push_back(step_in.back().shape);
    }
    std::vector<Shape> out_shapes;
    if (shapeless) {
      out_shapes = step.prim->output_shapes(in_shapes);
      // A replay's shapes are new: checked as a node's are, before any size product.
      for (size_t i = 0; i < out_shapes.size(); ++i)
        detail::check_shape(step.prim->name(), out_shapes[i], dtypes[static_cast<size_t>(step.outputs[i])]);
    }
    step_out.clear();
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      size_t v = static_cast<size_t>(step.outputs[i]);
      step_out.emplace_back(shapeless ? out_shapes[i] : shapes[v], dtypes[v]);
      if (step.prim->is_view()) continue;
      size_t bytes = static_cast<size_t>(step_out.back().size()) * step_out.back().itemsize();  // checked above
      auto it = free_buffers.lower_bound(bytes);
      if (it != free_buffers.end() && it->first <= bytes + bytes / 4 + 64) {
        step_out.back().buffer = std::move(it->second);
        step_out.back().donated = true;
        free_buffers.erase(it);
      }
    }
    detail::run_primitive(device, *step.prim, step_in, step_out);
    if (!step.prim->is_view()) detail::count(detail::counters().kernels_launched);
    for (size_t i = 0; i < step.outputs.size(); ++i)
      regs[static_cast<size_t>(step.outputs[i])] = std::move(step_out[i]);
    step_in.clear();
    for (int v : step.release) {
      auto& buf = regs[static_cast<size_t>(v)].buffer;
      if (buf && buf.use_count() == sole_holders(regs[static_cast<size_t>(v)])) {
        size_t bytes = buf->bytes();
        free_buffers.emplace(bytes, std::move(buf));
      }
      regs[static_cast<size_t>(v)] = Tensor();
    }
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& t = regs[static_cast<size_t>(outputs[i])];
    // Registers die here: the last mention of a slot moves it out instead of copying.
    bool again = std::find(outputs.begin() + static_cast<long>(i) + 1, outputs.end(), outputs[i]) != outputs.end();
    out.push_back(again ? t : std::move(t));
  }
  return out;
}

void CompiledCall::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  TierRecord record;
  std::vector<Tensor> results;
  {
    TierScope scope(&record);
    results = plan_->run(in);
  }
  count_call(*plan_, record);
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
}

}  // namespace kiln::compiler
