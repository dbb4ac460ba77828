// Active extent: which ops keep rows apart (so only the live rows are computed) and
// which force the fallback; in both cases the live rows equal a full run's.
#include "common.h"

using namespace kiln;
using kiln_test::rel_diff;

namespace {

struct OpCase {
  const char* body;  // uses x : float32[S<=8, 4, 6], t : int32[S<=8], p : float32[6, 6]; defines y
  bool safe;
};

// One line per op family; `safe` documents whether the extent can skip dead rows.
const OpCase kCases[] = {
    {"y = exp(x)", true},
    {"y = add(x, p3)", true},  // broadcast from a rank-lower operand
    {"y = add(x, x)", true},
    {"y = where(xb, x, p3)", true},
    {"y = sum(x) {axes=[2]}", true},
    {"y = softmax(x) {axes=[-1]}", true},
    {"y = mean(x) {axes=[1, 2], keepdims=true}", true},
    {"y = matmul(x, p)", true},  // rows times a weight
    {"y = reshape(x) {shape=[8, 24]}", true},  // leading axis kept
    {"y = transpose(x) {perm=[0, 2, 1]}", true},
    {"y = cumsum(x) {axis=0}", true},  // a forward scan only looks back
    {"y = take(p, t) {axis=0}", true},  // an embedding lookup
    {"y = slice(x) {axes=[2], start=[1], stop=[4]}", true},
    {"y = pad(x) {widths=[0, 0, 1, 1, 0, 0]}", true},
    {"s0, s1 = split(x) {axis=2, sections=2}\n  y = concatenate(s1, s0) {axis=2}", true},
    {"y = sum(x) {axes=[0]}", false},  // reduces over rows
    {"y = sum(x)", false},
    {"y = cumsum(x) {axis=0, reverse=true}", false},
    {"xt = transpose(x) {perm=[2, 1, 0]}\n  y = transpose(xt) {perm=[2, 1, 0]}", false},
    {"y = reshape(x) {shape=[-1]}", false},
    {"xr = reshape(x) {shape=[8, 24]}\n  xt = transpose(xr)\n  y = matmul(xr, xt)", false},  // attention-like
    {"y = slice(x) {axes=[0], start=[1], stop=[8]}", false},
    {"y = pad(x) {widths=[1, 0, 0, 0, 0, 0]}", false},
    {"y = argmax(x)", false},
    {"y = take(x, t) {axis=0}", false},
};

Graph case_graph(const OpCase& c) {
  std::string text = std::string("kgraph 1\ngraph g {\n  input x : float32[S<=8, 4, 6]\n  input t : int32[S<=8]\n") +
                     "  param p : float32[6, 6]\n  const p3 : float32[4, 6] = 0.5\n  const zero : float32[] = 0\n" +
                     "  xb = greater(x, zero)\n  " + c.body + "\n  output y\n}\n";
  return parse_graph(text, "case.kgraph");
}

std::map<std::string, Array> case_inputs(uint64_t seed) {
  std::map<std::string, Array> in;
  std::vector<float> x(8 * 4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i + seed));
  in["x"] = array(x, {8, 4, 6});
  in["t"] = array(std::vector<int32_t>{5, 0, 3, 1, 2, 4, 0, 1}, {8});
  return in;
}

}  // namespace

TEST(ActiveExtent, WhichOpsKeepRowsApart) {
  std::vector<float> p(36);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (const auto& c : kCases) {
    Graph g = case_graph(c);
    for (ExecMode m : {ExecMode::eager, ExecMode::lazy, ExecMode::compiled}) {
      Executable exe(g, m, kiln_test::test_device());
      exe.set_param("p", p.data(), p.size());
      std::string blocker = exe.extent_blocker({{"x", {8, 4, 6}}, {"t", {8}}});
      EXPECT_EQ(blocker.empty(), c.safe) << c.body << "\n" << blocker;
      auto in = case_inputs(3);
      auto full = exe.run_typed(in);
      for (int64_t n : {0, 3, 8}) {
        RunOptions opt;
        opt.active_extent = n;
        auto part = exe.run_typed(in, opt);
        Array want = full[0];
        if (want.ndim() > 0 && want.shape(0) == 8) want = slice(want, {SliceArg{0, n, 1}});
        if (c.safe) {
          EXPECT_LE(rel_diff(part[0], want), 1e-6) << c.body << " n=" << n << " " << exec_mode_name(m);
        } else if (part[0].shape() == want.shape()) {
          EXPECT_EQ(rel_diff(part[0], want), 0.0) << c.body << " n=" << n << " " << exec_mode_name(m);
        }
      }
    }
  }
}

TEST(ActiveExtent, DecoderFallsBackAndStaysExact) {
  auto exe = kiln_test::load_example("decoder.kgraph", ExecMode::compiled);
  std::string why = exe->extent_blocker({{"x", {16, 64}}});
  // Heads move ahead of the rows (and q @ k^T then reads every row).
  EXPECT_NE(why.find("decoder.kgraph:39:3: node 'q' (transpose)"), std::string::npos) << why;
  auto in = sample_inputs(exe->graph(), 2, 16);
  auto full = exe->run_typed(in);
  RunOptions opt;
  opt.active_extent = 5;
  auto part = exe->run_typed(in, opt);
  EXPECT_EQ(rel_diff(part[0], slice(full[0], {SliceArg{0, 5, 1}})), 0.0);
}

TEST(ActiveExtent, MlpSkipsDeadRows) {
  auto exe = kiln_test::load_example("mlp.kgraph", ExecMode::compiled);
  EXPECT_EQ(exe->extent_blocker({{"x", {32, 8}}}), "");
  auto in = sample_inputs(exe->graph(), 4, 32);
  auto full = exe->run_typed(in);
  RunOptions opt;
  opt.active_extent = 7;
  auto part = exe->run_typed(in, opt);
  ASSERT_EQ(part[0].shape(), (Shape{7, 4}));
  EXPECT_LE(rel_diff(part[0], slice(full[0], {SliceArg{0, 7, 1}})), 1e-6);
  EXPECT_EQ(rel_diff(part[1], slice(full[1], {SliceArg{0, 7, 1}})), 0.0);
  // run_slots writes only the live rows of a row output.
  std::vector<uint8_t> arena(exe->arena_bytes());
  auto x = in.at("x").to_vector<float>();
  exe->run_slots({x.data()}, arena.data(), opt);
  const OutputSlot& s = exe->output_slot(0);
  EXPECT_LE(rel_diff(array(arena.data() + s.offset, {7, 4}, float32), slice(full[0], {SliceArg{0, 7, 1}})), 1e-6);
  opt.active_extent = 33;
  EXPECT_THROW(exe->run_typed(in, opt), Error);
}
