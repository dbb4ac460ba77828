// Each graph pass on a small traced graph: what it changes and what it must leave.
#include <gtest/gtest.h>

#include "compile/fused.h"
#include "compile/row_fused.h"
#include "compile/trace.h"
#include "passes/pass.h"
#include "reference.h"

using namespace kiln;
using namespace kiln::compiler;

namespace {

compiler::Graph traced(const Function& fn, const std::vector<Array>& inputs) { return trace(fn, inputs); }

std::vector<std::string> op_names(const compiler::Graph& g) {
  std::vector<std::string> names;
  for (auto& n : g.nodes) names.push_back(n.prim->name());
  return names;
}

size_t count_kind(const compiler::Graph& g, OpKind k) {
  size_t c = 0;
  for (auto& n : g.nodes) c += n.prim->kind() == k ? 1 : 0;
  return c;
}

// Runs one pass, then dce so that bypassed nodes disappear, and checks the graph.
bool run_pass(compiler::Graph& g, std::unique_ptr<Pass> pass) {
  bool changed = pass->run(g);
  make_dce()->run(g);
  verify(g, pass->name());
  return changed;
}

Array x4() { return kt::from_values({1, 2, 3, 4}, {4}, float32); }

}  // namespace

TEST(Passes, RemoveNoopsDropsIdentityWork) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array a = reshape(in[0], {4}) * 1.0f;  // same-shape reshape, multiply by one
        Array b = in[1] + 0;                   // integer plus zero
        return std::vector<Array>{a / 1.0f, b, in[0] + 0.0f};
      },
      {x4(), kt::from_values({1, 2, 3, 4}, {4}, int32)});
  EXPECT_TRUE(run_pass(g, make_remove_noops({})));
  // x + 0.0 stays: for floats it is not the identity (-0 + 0 is +0).
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"add"}));
  EXPECT_EQ(g.outputs[0], g.inputs[0]);
  EXPECT_EQ(g.outputs[1], g.inputs[1]);
}

TEST(Passes, RemoveNoopsKeepsShapeChecksWhenShapeless) {
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{reshape(in[0], {4})}; },
                   {reshape(x4(), {2, 2})});
  EXPECT_FALSE(run_pass(g, make_remove_noops({.shapeless = true})));
  EXPECT_EQ(count_kind(g, OpKind::Reshape), 1u);
}

TEST(Passes, MergeConstantsThenCseMergesEqualWork) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array a = in[0] * 2.0f, b = in[0] * 2.0f;  // two equal scalar constants, two equal multiplies
        return std::vector<Array>{a + b};
      },
      {x4()});
  EXPECT_EQ(count_kind(g, OpKind::Multiply), 2u);
  EXPECT_TRUE(run_pass(g, make_merge_constants()));
  EXPECT_TRUE(run_pass(g, make_cse()));
  EXPECT_EQ(count_kind(g, OpKind::Multiply), 1u);
  const GNode& add = g.nodes.back();
  EXPECT_EQ(add.inputs[0], add.inputs[1]);
}

TEST(Passes, CseNeverMergesDifferentOps) {
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{log(in[0]) + log2(in[0]), sum(in[0], {0}) + max(in[0], {0})}; },
                   {x4()});
  size_t before = g.nodes.size();
  EXPECT_FALSE(run_pass(g, make_cse()));
  EXPECT_EQ(g.nodes.size(), before);
}

TEST(Passes, DceRemovesUnusedNodes) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array unused = exp(in[0]) * 3.0f;
        (void)unused;
        return std::vector<Array>{sin(in[0])};
      },
      {x4()});
  // Unused arrays are never reached from the outputs, so build one by hand.
  GNode dead = g.nodes[0];
  dead.outputs = {static_cast<int>(g.values.size())};
  g.values.push_back(g.values[static_cast<size_t>(g.nodes[0].outputs[0])]);
  g.nodes.push_back(dead);
  EXPECT_TRUE(make_dce()->run(g));
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"sin"}));
}

TEST(Passes, FoldShapesTurnsAxisSizeIntoAConstant) {
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{mean(in[0], {1})}; },
                   {reshape(kt::from_values(kt::random_values(6, float32, 1), {6}, float32), {2, 3})});
  EXPECT_EQ(count_kind(g, OpKind::AxisSize), 1u);
  EXPECT_TRUE(run_pass(g, make_fold_shapes()));
  EXPECT_EQ(count_kind(g, OpKind::AxisSize), 0u);
}

TEST(Passes, ElementwiseFusionBuildsOneRegionWithSeveralOutputs) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array a = exp(in[0]);
        Array b = a * in[1];  // broadcast (4,) * (3,4)
        Array c = b + 1.0f;
        return std::vector<Array>{c, a};
      },
      {reshape(kt::from_values(kt::random_values(12, float32, 2), {12}, float32), {3, 4}), x4()});
  EXPECT_TRUE(run_pass(g, make_fuse_elementwise({})));
  // Reshape (a view) stays; exp, multiply and add become one node with two outputs.
  ASSERT_EQ(count_kind(g, OpKind::Fused), 1u);
  for (auto& n : g.nodes) {
    if (n.prim->kind() != OpKind::Fused) continue;
    EXPECT_EQ(n.outputs.size(), 2u);
    EXPECT_EQ(static_cast<const Fused&>(*n.prim).program().ops.size(), 3u + 3u);  // x, w, 1.0 + 3 ops
  }
}

TEST(Passes, ElementwiseFusionLeavesDifferentShapesApart) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array small = exp(in[1]) * 2.0f;         // shape (4,)
        return std::vector<Array>{sin(in[0]) + small};  // shape (3,4)
      },
      {reshape(kt::from_values(kt::random_values(12, float32, 3), {12}, float32), {3, 4}), x4()});
  EXPECT_TRUE(run_pass(g, make_fuse_elementwise({})));
  EXPECT_EQ(count_kind(g, OpKind::Fused), 2u);
}

TEST(Passes, ReductionFusionMakesOneRowKernelForRmsNorm) {
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array x = in[0];
        return std::vector<Array>{x * rsqrt(mean(x * x, {-1}, true) + 1e-6f) * in[1]};
      },
      {reshape(kt::from_values(kt::random_values(24, float32, 4), {24}, float32), {3, 8}),
       kt::from_values(kt::random_values(8, float32, 5), {8}, float32)});
  run_pass(g, make_fold_shapes());
  EXPECT_TRUE(run_pass(g, make_fuse_reductions()));
  ASSERT_EQ(count_kind(g, OpKind::RowFused), 1u);
  EXPECT_EQ(count_kind(g, OpKind::Sum), 0u);
  EXPECT_EQ(count_kind(g, OpKind::Multiply), 0u);
}

TEST(Passes, ReductionFusionSkipsLeadingAxesAndSizeOneAxes) {
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * 2.0f, {0}), sum(in[1] * 2.0f, {1})}; },
                   {reshape(kt::from_values(kt::random_values(12, float32, 6), {12}, float32), {3, 4}),
                    reshape(x4(), {4, 1})});
  EXPECT_FALSE(run_pass(g, make_fuse_reductions()));
}

TEST(Passes, PipelineForEachMode) {
  EXPECT_TRUE(make_pipeline(CompileMode::disabled, {}).empty());
  EXPECT_TRUE(make_pipeline(CompileMode::no_simplify, {}).empty());
  std::vector<std::string> no_fuse, all;
  for (auto& p : make_pipeline(CompileMode::no_fuse, {})) no_fuse.push_back(p->name());
  for (auto& p : make_pipeline(CompileMode::enabled, {})) all.push_back(p->name());
  EXPECT_EQ(no_fuse, (std::vector<std::string>{"remove_noops", "fold_shapes", "merge_constants", "cse", "dce"}));
  EXPECT_EQ(all, (std::vector<std::string>{"remove_noops", "fold_shapes", "merge_constants", "cse", "dce",
                                           "fuse_reductions", "fuse_elementwise", "dce"}));
}

TEST(Passes, VerifierNamesThePass) {
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0])}; }, {x4()});
  g.nodes[0].inputs[0] = 99;
  try {
    verify(g, "broken_pass");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after pass 'broken_pass'"), std::string::npos) << e.what();
  }
}
