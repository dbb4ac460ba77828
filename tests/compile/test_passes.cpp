// Each graph pass on a small traced graph: what it changes and what it must leave.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "compile/fused.h"
#include "compile/plan.h"
#include "compile/row_fused.h"
#include "compile/trace.h"
#include "core/node.h"
#include "ops/creation.h"
#include "ops/distributed.h"
#include "ops/layout.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/sort.h"
#include "ops/views.h"
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
        Array b = in[1] + 0;  // integer plus zero
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
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{log(in[0]) + log2(in[0]), sum(in[0], {0}) + max(in[0], {0})};
      },
      {x4()});
  size_t before = g.nodes.size();
  EXPECT_FALSE(run_pass(g, make_cse()));
  EXPECT_EQ(g.nodes.size(), before);
}

namespace {

using PrimPtr = std::shared_ptr<Primitive>;

// Two nodes of `a` and `b` on the same input; true when cse merged them.
bool cse_merges(PrimPtr a, PrimPtr b) {
  compiler::Graph g;
  g.values.resize(3);
  g.values[0].input_index = 0;
  g.inputs = {0};
  g.nodes = {{std::move(a), {0}, {1}}, {std::move(b), {0}, {2}}};
  g.outputs = {1, 2};
  return make_cse()->run(g);
}

// For every primitive of the op registry: two instances that differ in one attribute, for
// each attribute (CSE must keep them apart), or an empty list for a primitive without
// attributes (two instances must merge).
std::map<OpKind, std::vector<std::pair<PrimPtr, PrimPtr>>> attribute_pairs() {
  using MA = MatmulEpilogue::Activation;
  auto fused = [] { return std::make_shared<Fused>(std::make_shared<FusedProgram>()); };
  auto row_fused = [] { return std::make_shared<RowFused>(std::make_shared<RowProgram>()); };
  auto call = [] { return std::make_shared<CompiledCall>(std::make_shared<Plan>()); };
  auto args = [](int64_t start, int64_t stop, int64_t step) { return std::vector<SliceArg>{{start, stop, step}}; };
  const std::vector<distributed::Group> cpu_ranks = {distributed::Group::local({Device::cpu()})[0],
                                                     distributed::Group::local({Device::cpu()})[0]};
  const std::vector<distributed::Group> pair = distributed::Group::local({Device::cpu(), Device::cpu()});
  std::map<OpKind, std::vector<std::pair<PrimPtr, PrimPtr>>> m = {
#define KILN_UNARY(F, n, ...) {OpKind::F, {}},
#define KILN_BINARY(F, n, ...) {OpKind::F, {}},
#define KILN_REDUCE(F, n)                                                                                             \
  {OpKind::F,                                                                                                         \
   {{std::make_shared<Reduce<math::F>>(std::vector<int>{0}), std::make_shared<Reduce<math::F>>(std::vector<int>{1})}, \
    {std::make_shared<Reduce<math::F>>(std::vector<int>{0}, false),                                                   \
     std::make_shared<Reduce<math::F>>(std::vector<int>{0}, true)}}},
#include "ops/op_table.def"
      {OpKind::Where, {}},
      {OpKind::Copy, {}},
      {OpKind::Matmul, {}},
      {OpKind::AsType, {{std::make_shared<AsType>(float32), std::make_shared<AsType>(float64)}}},
      {OpKind::Full, {{std::make_shared<Full>(Shape{2}), std::make_shared<Full>(Shape{3})}}},
      {OpKind::Arange,
       {{std::make_shared<Arange>(0, 1, 4), std::make_shared<Arange>(1, 1, 4)},
        {std::make_shared<Arange>(0, 1, 4), std::make_shared<Arange>(0, 2, 4)},
        {std::make_shared<Arange>(0, 1, 4), std::make_shared<Arange>(0, 1, 5)},
        {std::make_shared<Arange>(0, 1, 4, 3.0), std::make_shared<Arange>(0, 1, 4, 3.5)}}},
      {OpKind::AxisSize,
       {{std::make_shared<AxisSize>(std::vector<int>{0}, 0), std::make_shared<AxisSize>(std::vector<int>{1}, 0)},
        {std::make_shared<AxisSize>(std::vector<int>{0}, 0), std::make_shared<AxisSize>(std::vector<int>{0}, 1)}}},
      {OpKind::ArgMax, {{std::make_shared<ArgMax>(0), std::make_shared<ArgMax>(1)}}},
      {OpKind::ArgMin, {{std::make_shared<ArgMin>(0), std::make_shared<ArgMin>(1)}}},
      {OpKind::CumSum,
       {{std::make_shared<CumSum>(0, false, true), std::make_shared<CumSum>(1, false, true)},
        {std::make_shared<CumSum>(0, false, true), std::make_shared<CumSum>(0, true, true)},
        {std::make_shared<CumSum>(0, false, true), std::make_shared<CumSum>(0, false, false)}}},
      {OpKind::MatmulEpilogue,
       {{std::make_shared<MatmulEpilogue>(MA::none), std::make_shared<MatmulEpilogue>(MA::gelu)},
        {std::make_shared<MatmulEpilogue>(MA::gelu), std::make_shared<MatmulEpilogue>(MA::gelu_tanh)}}},
      {OpKind::Reshape, {{std::make_shared<Reshape>(Shape{4}), std::make_shared<Reshape>(Shape{2, 2})}}},
      {OpKind::Transpose,
       {{std::make_shared<Transpose>(std::vector<int>{0, 1}), std::make_shared<Transpose>(std::vector<int>{1, 0})}}},
      {OpKind::BroadcastTo, {{std::make_shared<BroadcastTo>(Shape{2, 4}), std::make_shared<BroadcastTo>(Shape{3, 4})}}},
      {OpKind::Slice,
       {{std::make_shared<Slice>(args(0, 2, 1)), std::make_shared<Slice>(args(1, 2, 1))},
        {std::make_shared<Slice>(args(0, 2, 1)), std::make_shared<Slice>(args(0, 3, 1))},
        {std::make_shared<Slice>(args(0, 2, 1)), std::make_shared<Slice>(args(0, 2, 2))}}},
      {OpKind::Squeeze,
       {{std::make_shared<Squeeze>(std::vector<int>{0}), std::make_shared<Squeeze>(std::vector<int>{1})}}},
      {OpKind::ExpandDims,
       {{std::make_shared<ExpandDims>(std::vector<int>{0}), std::make_shared<ExpandDims>(std::vector<int>{1})}}},
      {OpKind::Concatenate, {{std::make_shared<Concatenate>(0), std::make_shared<Concatenate>(1)}}},
      {OpKind::Pad,
       {{std::make_shared<Pad>(std::vector<std::pair<int64_t, int64_t>>{{1, 0}}, 0.0),
         std::make_shared<Pad>(std::vector<std::pair<int64_t, int64_t>>{{0, 1}}, 0.0)},
        {std::make_shared<Pad>(std::vector<std::pair<int64_t, int64_t>>{{1, 0}}, 0.0),
         std::make_shared<Pad>(std::vector<std::pair<int64_t, int64_t>>{{1, 0}}, -0.0)}}},
      {OpKind::SliceUpdate,
       {{std::make_shared<SliceUpdate>(args(0, 2, 1)), std::make_shared<SliceUpdate>(args(1, 2, 1))},
        {std::make_shared<SliceUpdate>(args(0, 2, 1)), std::make_shared<SliceUpdate>(args(0, 3, 1))},
        {std::make_shared<SliceUpdate>(args(0, 2, 1)), std::make_shared<SliceUpdate>(args(0, 2, 2))}}},
      {OpKind::Take, {{std::make_shared<Take>(0), std::make_shared<Take>(1)}}},
      {OpKind::TakeAlongAxis, {{std::make_shared<TakeAlongAxis>(0), std::make_shared<TakeAlongAxis>(1)}}},
      {OpKind::Quantize,
       {{std::make_shared<Quantize>(QuantParams{64, 4}), std::make_shared<Quantize>(QuantParams{32, 4})},
        {std::make_shared<Quantize>(QuantParams{64, 4}), std::make_shared<Quantize>(QuantParams{64, 8})}}},
      {OpKind::Dequantize,
       {{std::make_shared<Dequantize>(QuantParams{64, 4}), std::make_shared<Dequantize>(QuantParams{128, 4})},
        {std::make_shared<Dequantize>(QuantParams{64, 4}), std::make_shared<Dequantize>(QuantParams{64, 2})}}},
      {OpKind::QuantizedMatmul,
       {{std::make_shared<QuantizedMatmul>(QuantParams{64, 4}, true),
         std::make_shared<QuantizedMatmul>(QuantParams{32, 4}, true)},
        {std::make_shared<QuantizedMatmul>(QuantParams{64, 4}, true),
         std::make_shared<QuantizedMatmul>(QuantParams{64, 3}, true)},
        {std::make_shared<QuantizedMatmul>(QuantParams{64, 4}, true),
         std::make_shared<QuantizedMatmul>(QuantParams{64, 4}, false)}}},
      {OpKind::FusedQuantizedMatmul,
       {{std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-6f, false)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{32, 4}, true, 1e-5f, false)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, false, 1e-5f, false)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, std::nullopt, false)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, true)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false, true)},
        {std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false),
         std::make_shared<FusedQuantizedMatmul>(QuantParams{64, 4}, true, 1e-5f, false, false,
                                                QmmActivations::int16)}}},
      {OpKind::RmsNorm,
       {{std::make_shared<RmsNorm>(1e-5f, true), std::make_shared<RmsNorm>(1e-6f, true)},
        {std::make_shared<RmsNorm>(1e-5f, true), std::make_shared<RmsNorm>(1e-5f, false)}}},
      {OpKind::LayerNorm,
       {{std::make_shared<LayerNorm>(1e-5f, true, true), std::make_shared<LayerNorm>(1e-6f, true, true)},
        {std::make_shared<LayerNorm>(1e-5f, true, true), std::make_shared<LayerNorm>(1e-5f, false, true)},
        {std::make_shared<LayerNorm>(1e-5f, true, true), std::make_shared<LayerNorm>(1e-5f, true, false)}}},
      {OpKind::Rope,
       {{std::make_shared<Rope>(8, false, 1e4f, 1.0f, false), std::make_shared<Rope>(4, false, 1e4f, 1.0f, false)},
        {std::make_shared<Rope>(8, false, 1e4f, 1.0f, false), std::make_shared<Rope>(8, true, 1e4f, 1.0f, false)},
        {std::make_shared<Rope>(8, false, 1e4f, 1.0f, false), std::make_shared<Rope>(8, false, 5e5f, 1.0f, false)},
        {std::make_shared<Rope>(8, false, 1e4f, 1.0f, false), std::make_shared<Rope>(8, false, 1e4f, 0.5f, false)},
        {std::make_shared<Rope>(8, false, std::nullopt, 1.0f, true),
         std::make_shared<Rope>(8, false, 1e4f, 1.0f, true)}}},
      {OpKind::ScaledDotProductAttention,
       {{std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::none, false, false),
         std::make_shared<ScaledDotProductAttention>(0.25f, ScaledDotProductAttention::Mask::none, false, false)},
        {std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::keep, false, false),
         std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::additive, false, false)},
        {std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::none, false, false),
         std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::none, true, false)},
        {std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::none, false, false),
         std::make_shared<ScaledDotProductAttention>(0.5f, ScaledDotProductAttention::Mask::none, false, true)}}},
      {OpKind::DynamicSliceUpdate,
       {{std::make_shared<DynamicSliceUpdate>(std::vector<int>{2}),
         std::make_shared<DynamicSliceUpdate>(std::vector<int>{1})}}},
      {OpKind::CacheAttention,
       {{std::make_shared<CacheAttention>(0.5f, false, nullptr),
         std::make_shared<CacheAttention>(0.25f, false, nullptr)},
        {std::make_shared<CacheAttention>(0.5f, false, nullptr), std::make_shared<CacheAttention>(0.5f, true, nullptr)},
        {std::make_shared<CacheAttention>(0.5f, false, nullptr),
         std::make_shared<CacheAttention>(0.5f, false, std::make_shared<Rope>(8, false, 1e4f, 1.0f, false))}}},
      {OpKind::RandomBits,
       {{std::make_shared<RandomBits>(Shape{2}, false), std::make_shared<RandomBits>(Shape{3}, false)},
        {std::make_shared<RandomBits>(Shape{2}, false), std::make_shared<RandomBits>(Shape{2}, true)}}},
      {OpKind::Sort, {}},
      {OpKind::ArgSort, {}},
      {OpKind::Partition, {{std::make_shared<Partition>(0), std::make_shared<Partition>(1)}}},
      {OpKind::ArgPartition, {{std::make_shared<ArgPartition>(0), std::make_shared<ArgPartition>(1)}}},
      {OpKind::TopK, {{std::make_shared<TopK>(1), std::make_shared<TopK>(2)}}},
      // A collective's attribute is its group: two groups of one rank each, and two ranks of one group.
      {OpKind::AllSum,
       {{std::make_shared<AllSum>(cpu_ranks[0]), std::make_shared<AllSum>(cpu_ranks[1])},
        {std::make_shared<AllSum>(pair[0]), std::make_shared<AllSum>(pair[1])}}},
      {OpKind::AllGather, {{std::make_shared<AllGather>(cpu_ranks[0]), std::make_shared<AllGather>(cpu_ranks[1])}}},
      {OpKind::ReduceScatter,
       {{std::make_shared<ReduceScatter>(cpu_ranks[0]), std::make_shared<ReduceScatter>(cpu_ranks[1])}}},
      // The fused kinds' one attribute is the program they run.
      {OpKind::Fused, {{fused(), fused()}}},
      {OpKind::RowFused, {{row_fused(), row_fused()}}},
      {OpKind::CompiledCall, {{call(), call()}}},
  };
  return m;
}

// Streams a primitive's print() into a failure message.
struct Printed {
  const Primitive& p;
};
std::ostream& operator<<(std::ostream& os, const Printed& x) {
  x.p.print(os);
  return os;
}

}  // namespace

TEST(Passes, CseKeepsEveryPrimitiveWithDifferentAttributes) {
  auto pairs = attribute_pairs();
  for (const OpTraits& t : op_registry()) {
    if (!t.primitive) continue;
    auto it = std::find_if(pairs.begin(), pairs.end(),
                           [&](const auto& p) { return std::string(op_name(p.first)) == t.name; });
    if (it == pairs.end()) {
      ADD_FAILURE() << "primitive '" << t.name << "' has no attribute pairs in this test";
      continue;
    }
    for (auto& [a, b] : it->second) {
      EXPECT_EQ(a->kind(), it->first);
      EXPECT_FALSE(cse_merges(a, b)) << t.name << ": " << Printed{*a} << " and " << Printed{*b} << " merged";
      EXPECT_TRUE(cse_merges(a, a)) << t.name << ": " << Printed{*a} << " not merged with itself";
    }
  }
}

TEST(Passes, CseMergesCollectivesOfOneGroupOnly) {
  const distributed::Group g1 = distributed::Group::local({Device::cpu()})[0],
                           g2 = distributed::Group::local({Device::cpu()})[0];
  auto sums = [&](const distributed::Group& a, const distributed::Group& b) {
    compiler::Graph g =
        traced([&](const std::vector<Array>& in) { return std::vector<Array>{all_sum(in[0], a) + all_sum(in[0], b)}; },
               {kiln::to(x4(), Device::cpu())});  // on the groups' device, whatever the tests' device
    run_pass(g, make_cse());
    return count_kind(g, OpKind::AllSum);
  };
  EXPECT_EQ(sums(g1, g2), 2u);  // two groups: two collectives, even on the same input
  EXPECT_EQ(sums(g1, g1), 1u);
}

TEST(Passes, CseMergesPrimitivesWithoutAttributes) {
  EXPECT_TRUE(cse_merges(std::make_shared<Unary<math::Exp>>(), std::make_shared<Unary<math::Exp>>()));
  EXPECT_TRUE(cse_merges(std::make_shared<Binary<math::Add>>(), std::make_shared<Binary<math::Add>>()));
  EXPECT_TRUE(cse_merges(std::make_shared<Where>(), std::make_shared<Where>()));
  EXPECT_TRUE(cse_merges(std::make_shared<Copy>(), std::make_shared<Copy>()));
  EXPECT_TRUE(cse_merges(std::make_shared<Matmul>(), std::make_shared<Matmul>()));
  EXPECT_TRUE(cse_merges(std::make_shared<AsType>(float16), std::make_shared<AsType>(float16)));
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
        Array small = exp(in[1]) * 2.0f;  // shape (4,)
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
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{sum(in[0] * 2.0f, {0}), sum(in[1] * 2.0f, {1})};
      },
      {reshape(kt::from_values(kt::random_values(12, float32, 6), {12}, float32), {3, 4}), reshape(x4(), {4, 1})});
  EXPECT_FALSE(run_pass(g, make_fuse_reductions()));
}

namespace {

Array rnd(const Shape& s, Dtype d, uint64_t seed) {
  return kt::from_values(kt::random_values(kt::numel(s), d, seed), s, d);
}

std::vector<MatmulEpilogue::Activation> epilogue_activations(const compiler::Graph& g) {
  std::vector<MatmulEpilogue::Activation> acts;
  for (auto& n : g.nodes) {
    if (n.prim->kind() == OpKind::MatmulEpilogue)
      acts.push_back(static_cast<const MatmulEpilogue&>(*n.prim).activation());
  }
  return acts;
}

}  // namespace

TEST(Passes, MatmulEpilogueTakesBiasAndGelu) {
  using Act = MatmulEpilogue::Activation;
  compiler::Graph g = traced(
      [](const std::vector<Array>& in) {
        Array x = in[0], w = in[1], b = in[2], b2 = in[3];
        return std::vector<Array>{matmul(x, w) + b, gelu_tanh(matmul(x, w) * 1.0f + b),  // the multiply stays
                                  gelu(b2 + matmul(transpose(x, {0, 2, 1}), w)), gelu_tanh(matmul(x, w) + b2)};
      },
      {rnd({2, 3, 3}, float32, 1), rnd({3, 5}, float32, 2), rnd({5}, float32, 3), rnd({1, 5}, float32, 4)});
  EXPECT_TRUE(run_pass(g, make_fuse_matmul_epilogue()));
  // CSE has not run: each matmul is its own node. The second one feeds a multiply.
  EXPECT_EQ(count_kind(g, OpKind::MatmulEpilogue), 3u);
  EXPECT_EQ(count_kind(g, OpKind::Matmul), 1u);
  EXPECT_EQ(count_kind(g, OpKind::Add), 1u);
  EXPECT_EQ(count_kind(g, OpKind::GeluTanh), 1u);
  EXPECT_EQ(count_kind(g, OpKind::Gelu), 0u);
  auto acts = epilogue_activations(g);
  std::sort(acts.begin(), acts.end());
  EXPECT_EQ(acts, (std::vector<Act>{Act::none, Act::gelu, Act::gelu_tanh}));
  for (auto& n : g.nodes) {
    if (n.prim->kind() == OpKind::MatmulEpilogue) {
      EXPECT_EQ(n.inputs.size(), 3u);
    }
  }
}

TEST(Passes, MatmulEpilogueLeavesOtherShapesUsesAndDtypes) {
  using Act = MatmulEpilogue::Activation;
  Array x = rnd({4, 3}, float32, 5), w = rnd({3, 6}, float32, 6);
  auto untouched = [&](const Function& fn, const std::vector<Array>& extra, const char* what) {
    std::vector<Array> in = {x, w};
    in.insert(in.end(), extra.begin(), extra.end());
    compiler::Graph g = traced(fn, in);
    EXPECT_FALSE(run_pass(g, make_fuse_matmul_epilogue())) << what;
    EXPECT_EQ(count_kind(g, OpKind::MatmulEpilogue), 0u) << what;
  };
  // The product is also returned, or read by another op.
  untouched(
      [](auto& in) {
        Array p = matmul(in[0], in[1]);
        return std::vector<Array>{p + in[2], p};
      },
      {rnd({6}, float32, 7)}, "product returned");
  untouched(
      [](auto& in) {
        Array p = matmul(in[0], in[1]);
        return std::vector<Array>{gelu(p + in[2]) * sum(p)};
      },
      {rnd({6}, float32, 8)}, "product read twice");
  // Biases that are not a vector along the last axis.
  untouched([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; }, {rnd({4, 1}, float32, 9)},
            "column");
  untouched([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; }, {rnd({4, 6}, float32, 10)},
            "full");
  untouched([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; }, {rnd({}, float32, 11)},
            "scalar");
  untouched([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; }, {rnd({2, 1, 6}, float32, 12)},
            "bias that broadcasts the product");
  // A bias of another dtype (the add casts the product), and integer products.
  untouched([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; }, {rnd({6}, float64, 13)},
            "float64 bias");
  compiler::Graph gi = traced([](auto& in) { return std::vector<Array>{matmul(in[0], in[1]) + in[2]}; },
                              {rnd({4, 3}, int32, 14), rnd({3, 6}, int32, 15), rnd({6}, int32, 16)});
  EXPECT_FALSE(run_pass(gi, make_fuse_matmul_epilogue()));
  // A sum read elsewhere keeps its gelu outside: the epilogue takes the bias only.
  compiler::Graph g = traced(
      [](auto& in) {
        Array s = matmul(in[0], in[1]) + in[2];
        return std::vector<Array>{gelu_tanh(s), s};
      },
      {x, w, rnd({6}, float32, 17)});
  EXPECT_TRUE(run_pass(g, make_fuse_matmul_epilogue()));
  EXPECT_EQ(epilogue_activations(g), (std::vector<Act>{Act::none}));
  EXPECT_EQ(count_kind(g, OpKind::GeluTanh), 1u);
}

TEST(Passes, PipelineForEachMode) {
  EXPECT_TRUE(make_pipeline(CompileMode::disabled, {}).empty());
  EXPECT_TRUE(make_pipeline(CompileMode::no_simplify, {}).empty());
  std::vector<std::string> no_fuse, all;
  for (auto& p : make_pipeline(CompileMode::no_fuse, {})) no_fuse.push_back(p->name());
  for (auto& p : make_pipeline(CompileMode::enabled, {})) all.push_back(p->name());
  EXPECT_EQ(no_fuse, (std::vector<std::string>{"remove_noops", "fold_shapes", "merge_constants", "cse", "dce"}));
  EXPECT_EQ(all, (std::vector<std::string>{"remove_noops", "fold_shapes", "merge_constants", "cse", "dce",
                                           "fuse_matmul_epilogue", "fuse_quantized_matmul", "fuse_reductions",
                                           "fuse_elementwise", "dce"}));
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

// Builds with assertions (no NDEBUG: scripts/test's ASan build) verify the graph after every
// pass of run_pipeline: an output no node writes, which no pass mends, fails after the first.
TEST(Passes, BuildsWithAssertionsVerifyAfterEveryPass) {
#ifdef NDEBUG
  GTEST_SKIP() << "NDEBUG: run_pipeline verifies only in builds with assertions (scripts/test's ASan build)";
#else
  compiler::Graph g = traced([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0])}; }, {x4()});
  g.values.push_back(g.values[static_cast<size_t>(g.outputs[0])]);  // written by no node
  g.outputs.push_back(static_cast<int>(g.values.size()) - 1);
  try {
    run_pipeline(g, CompileMode::enabled, {});
    FAIL() << "run_pipeline did not verify the graph";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("after pass 'remove_noops'"), std::string::npos) << what;
    EXPECT_NE(what.find("is never written"), std::string::npos) << what;
  }
#endif
}

// A fused plan keeps registers only for what its steps touch (every call allocates and
// clears them), and outputs named twice or passed through still come back whole.
TEST(Passes, LoweredPlanNumbersOnlyTheValuesItsStepsTouch) {
  Array x = rnd({5, 3}, float32, 31), y = rnd({5, 3}, float32, 32);
  auto fn = [](const std::vector<Array>& in) {
    Array a = in[0] + in[1], b = in[0] * in[1];
    for (int i = 0; i < 4; ++i) a = maximum(a * b + 0.5f, in[0]) - b;
    return std::vector<Array>{a, in[1], a};
  };
  compiler::Graph g = traced(fn, {x, y});
  const size_t traced_values = g.values.size();
  run_pipeline(g, CompileMode::enabled, {});
  auto plan = lower(g, false);
  ASSERT_EQ(plan->steps.size(), 1u);  // one fused kernel
  // x, y, the scalar constants and the fused result.
  EXPECT_EQ(plan->num_values, 2 + plan->constants.size() + plan->steps[0].outputs.size());
  EXPECT_GT(traced_values, 20u);
  for (auto& step : plan->steps) {
    for (int v : step.inputs) EXPECT_LT(static_cast<size_t>(v), plan->num_values);
  }
  eval({x, y});
  auto out = plan->run({x.node()->tensor, y.node()->tensor});
  auto want = fn({x, y});
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    Array got = Array::from_tensor(out[i], Device::cpu());
    EXPECT_EQ(got.to_vector<float>(), want[i].to_vector<float>()) << "output " << i;
  }
}

// rms_norm read only by a quantized product, and an add of a same-shaped tensor reading only
// the product, join it in one FusedQuantizedMatmul; a norm with a second reader, an add that
// broadcasts, and (for the norm) untransposed weights are left alone. Compiled equals eager.
TEST(Passes, NormAndResidualIntoQuantizedMatmul) {
  Array w = rnd({64, 64}, float32, 5), nw = rnd({64}, float32, 6), x = rnd({3, 64}, float32, 7);
  Array r = rnd({3, 64}, float32, 8), row = rnd({64}, float32, 9);
  auto [packed, scales, biases] = quantize(w, 32, 4);
  auto [packed_t, scales_t, biases_t] = quantize(transpose(w), 32, 4);
  auto f = [&](const std::vector<Array>& in) {
    Array h = rms_norm(in[0], nw, 1e-5f), h2 = rms_norm(in[0] * 2.0f, nw, 1e-5f);
    return std::vector<Array>{
        in[1] + quantized_matmul(h, packed, scales, biases, true, 32, 4),  // norm and add
        quantized_matmul(h2, packed, scales, biases, true, 32, 4) + sum(h2),  // h2 read twice
        quantized_matmul(rms_norm(in[0], nw, 1e-5f), packed_t, scales_t, biases_t, false, 32, 4) + row};
  };
  compiler::Graph g = traced(f, {x, r});
  EXPECT_TRUE(run_pass(g, make_fuse_quantized_matmul()));
  EXPECT_EQ(count_kind(g, OpKind::FusedQuantizedMatmul), 1u);
  EXPECT_EQ(count_kind(g, OpKind::RmsNorm), 2u);
  EXPECT_EQ(count_kind(g, OpKind::QuantizedMatmul), 2u);
  EXPECT_EQ(count_kind(g, OpKind::Add), 2u);
  const std::vector<Array> eager = f({x, r}), compiled = compile(f)({x, r});
  for (size_t i = 0; i < eager.size(); ++i) {
    const auto e = eager[i].to_vector<float>(), c = compiled[i].to_vector<float>();
    ASSERT_EQ(e.size(), c.size());
    for (size_t j = 0; j < e.size(); ++j) EXPECT_NEAR(c[j], e[j], 1e-4f * (1.0f + std::fabs(e[j]))) << i << ", " << j;
  }
}

// silu(gate) * up over the two halves of a stacked product (a gated feed-forward) joins the
// product too, with its norm; a gate read elsewhere, halves that are not halves, and a gate
// without its sigmoid are left alone. Compiled equals eager, and so do the GPU's kernels
// (CudaLlm tests).
TEST(Passes, GatedUnitIntoQuantizedMatmul) {
  Array w = rnd({128, 64}, float32, 15), nw = rnd({64}, float32, 16), x = rnd({2, 64}, float32, 17);
  auto [packed, scales, biases] = quantize(w, 32, 4);
  auto product = [&](const Array& h) { return quantized_matmul(h, packed, scales, biases, true, 32, 4); };
  auto half = [](const Array& y, int64_t from, int64_t to) { return slice(y, {0, from}, {y.shape(0), to}); };
  auto f = [&](const std::vector<Array>& in) {
    const Array y1 = product(rms_norm(in[0], nw, 1e-5f));
    const Array g1 = half(y1, 0, 64), u1 = half(y1, 64, 128);
    const Array fused = u1 * (g1 * sigmoid(g1));  // either order of each multiply
    const Array y2 = product(in[0] * 2.0f);
    const Array g2 = half(y2, 0, 64);
    const Array read_twice = g2 * sigmoid(g2) * half(y2, 64, 128) + sum(g2);
    const Array y3 = product(in[0] * 3.0f);
    const Array g3 = half(y3, 0, 63);
    const Array not_halves = g3 * sigmoid(g3) * half(y3, 64, 127);
    const Array y4 = product(in[0] * 4.0f);
    const Array no_sigmoid = half(y4, 0, 64) * tanh(half(y4, 0, 64)) * half(y4, 64, 128);
    return std::vector<Array>{fused, read_twice, not_halves, no_sigmoid};
  };
  compiler::Graph g = traced(f, {x});
  EXPECT_TRUE(run_pass(g, make_fuse_quantized_matmul()));
  EXPECT_EQ(count_kind(g, OpKind::FusedQuantizedMatmul), 1u);
  EXPECT_EQ(count_kind(g, OpKind::QuantizedMatmul), 3u);
  EXPECT_EQ(count_kind(g, OpKind::Sigmoid), 2u);
  EXPECT_EQ(count_kind(g, OpKind::RmsNorm), 0u);
  const std::vector<Array> eager = f({x}), compiled = compile(f)({x});
  for (size_t i = 0; i < eager.size(); ++i) {
    const auto e = eager[i].to_vector<float>(), c = compiled[i].to_vector<float>();
    ASSERT_EQ(e.size(), c.size());
    for (size_t j = 0; j < e.size(); ++j) EXPECT_NEAR(c[j], e[j], 1e-4f * (1.0f + std::fabs(e[j]))) << i << ", " << j;
  }
}

// Products with integer activations join their norm and residual only with weights held on a
// GPU and up to 8 rows of x (decode), where the GPU's integer product takes them; with weights on
// the host, or more rows, the ops stay apart. Compiled equals eager either way.
TEST(Passes, IntegerActivationsJoinForDecodeRowsOnAGpu) {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_available()) devices.push_back(Device::cuda(0));
  for (const Device& dev : devices) {
    Array w = to(rnd({64, 64}, float32, 25), dev), nw = to(rnd({64}, float32, 26), dev);
    auto [packed, scales, biases] = quantize(w, 32, 4);
    kiln::eval({packed, scales, biases});
    for (int64_t rows : {1, 8, 9}) {
      Array x = to(rnd({rows, 64}, float32, 27), dev), r = to(rnd({rows, 64}, float32, 28), dev);
      auto f = [&](const std::vector<Array>& in) {
        return std::vector<Array>{in[1] + quantized_matmul(rms_norm(in[0], nw, 1e-5f), packed, scales, biases, true, 32,
                                                           4, QmmActivations::int8)};
      };
      const bool joins = dev.type != Device::Type::cpu && rows <= 8;
      compiler::Graph g = traced(f, {x, r});
      EXPECT_EQ(run_pass(g, make_fuse_quantized_matmul()), joins) << rows;
      EXPECT_EQ(count_kind(g, OpKind::FusedQuantizedMatmul), joins ? 1u : 0u) << rows;
      const auto e = f({x, r})[0].to_vector<float>(), c = compile(f)({x, r})[0].to_vector<float>();
      ASSERT_EQ(e.size(), c.size());
      for (size_t j = 0; j < e.size(); ++j)
        EXPECT_NEAR(c[j], e[j], 1e-4f * (1.0f + std::fabs(e[j]))) << rows << ", " << j;
    }
  }
}

TEST(Passes, FusedRegionsAreCapped) {
  // One region of a 400-op chain took g++ 85 s (200 ops: 22 s, 64: 6 s); regions of at most
  // kMaxFusedOps ops keep compile time linear in the chain's length. The same holds for the
  // elementwise prologue that reduction fusion takes in.
  const int n = 200;
  auto chain = [n](const std::vector<Array>& in) {
    Array x = in[0];
    for (int i = 0; i < n; ++i) x = i % 2 ? exp(x) : sin(x);
    return std::vector<Array>{x, sum(x * 2.0f, {-1})};
  };
  compiler::Graph g = traced(chain, {x4()});
  run_pipeline(g, CompileMode::enabled, {});
  size_t regions = 0, ops = 0;
  for (auto& node : g.nodes) {
    size_t k = 0;
    if (node.prim->kind() == OpKind::Fused) {
      for (auto& op : static_cast<const Fused&>(*node.prim).program().ops) k += op.prim ? 1 : 0;
    } else if (node.prim->kind() == OpKind::RowFused) {
      for (auto& op : static_cast<const RowFused&>(*node.prim).program().ops) k += op.prim ? 1 : 0;
    } else {
      continue;
    }
    EXPECT_LE(k, kMaxFusedOps);
    ++regions;
    ops += k;
  }
  EXPECT_GE(regions, static_cast<size_t>((n + 2 + kMaxFusedOps - 1) / kMaxFusedOps));
  EXPECT_EQ(ops, static_cast<size_t>(n + 2));  // every op is in some region
  Array x = x4();
  auto f = compile(chain);
  auto got = f({x});
  auto want = chain({x});
  for (size_t i = 0; i < got.size(); ++i) kt::expect_close(got[i], want[i].to_vector<double>(), "capped chain", 4);
}
