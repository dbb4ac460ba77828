// Hostile graphs and files (issue 24, "Hostile input"): each reproducer fails with a
// kiln::Error naming the node or file, and the process carries on.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "common.h"

using namespace kiln;

namespace {

const ExecMode kModes[] = {ExecMode::eager, ExecMode::lazy, ExecMode::compiled};

// The message of the kiln::Error that f throws (a test failure if it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Hostile, ZerosWhoseByteCountWrapsIsAnError) {
  // 2^61 float64 elements: 2^64 bytes wrapped to a 64-byte buffer that zeros wrote past.
  const std::string text =
      "kgraph 1\ngraph g {\n  input x : float32[1]\n  z = zeros() {shape=[2305843009213693952], dtype=float64}\n"
      "  output z\n}\n";
  for (ExecMode m : kModes) {
    std::string e = error_of([&] {
      Executable exe(parse_graph(text, "wrap.kgraph"), m);
      exe.run_typed({{"x", zeros({1})}});
    });
    EXPECT_TRUE(contains(e, "[zeros] shape (2305843009213693952) of float64 is too large")) << e;
  }
}

TEST(Hostile, SymbolBoundsAreBoundedLikeFixedSizes) {
  std::string e = error_of([] {
    parse_graph("kgraph 1\ngraph g {\n  input x : float32[S<=1073741824, T<=1073741824]\n  output x\n}\n", "b.kgraph");
  });
  EXPECT_TRUE(contains(e, "b.kgraph:3:")) << e;
  EXPECT_TRUE(contains(e, "[verify] shape is too large at its symbols' bounds")) << e;
}

TEST(Hostile, SampleInputsTooLargeAreAKilnError) {
  // An unverified graph's input of 2^62 x 4 elements threw std::length_error out of sample_inputs.
  Graph g = parse_graph("kgraph 1\ngraph g {\n  input x : float32[2, 4]\n  output x\n}\n");
  g.nodes[0].type.dims[0] = Dim(int64_t{1} << 62);
  std::string e = error_of([&] { sample_inputs(g); });
  EXPECT_TRUE(contains(e, "[sample_inputs] shape (4611686018427387904,4) of float64 is too large")) << e;
}

TEST(Hostile, SaveParamsOverALoadedFileKeepsItReadable) {
  // save_params truncated the file in place; the next read of a loaded parameter died (SIGBUS).
  std::string path = testing::TempDir() + "hostile_params.safetensors";
  save_params(path, {{"w", arange(4096, float32)}, {"b", ones({16})}});
  auto loaded = load_params(path);
  save_params(path, {{"w", zeros({2})}});
  EXPECT_EQ(loaded.at("w").to_vector<float>()[4095], 4095.f);
  EXPECT_EQ(sum(loaded.at("b")).item<float>(), 16.f);
  // Saving the loaded arrays over their own file works too.
  auto again = load_params(path);
  EXPECT_EQ(again.at("w").to_vector<float>(), (std::vector<float>{0, 0}));
  save_params(path, loaded);
  EXPECT_EQ(load_params(path).at("w").to_vector<float>()[4095], 4095.f);
  EXPECT_EQ(again.at("w").to_vector<float>(), (std::vector<float>{0, 0}));
  std::remove(path.c_str());
}

TEST(Hostile, ParamsFileThatIsAFifoIsRefused) {
  // open() blocked forever waiting for a writer.
  std::string dir = testing::TempDir();
  std::string fifo = dir + "hostile_params.fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string e = error_of([&] { load_params(fifo); });
  EXPECT_TRUE(contains(e, "[load_params] '" + fifo + "' is not a regular file")) << e;
  std::string text = "kgraph 1\nparams \"" + fifo + "\"\ngraph g {\n  param w : float32[2]\n  output w\n}\n";
  e = error_of([&] { Executable exe(parse_graph(text, dir + "fifo.kgraph"), ExecMode::lazy); });
  EXPECT_TRUE(contains(e, "is not a regular file")) << e;
  std::remove(fifo.c_str());
}

TEST(Hostile, IntegerAttributesOutsideIntAreErrors) {
  // Truncated to int: cumsum {axis=4294967296} ran as axis 0, split {sections=4294967297} as 1.
  struct Case {
    const char* node;
    const char* message;
  };
  const Case cases[] = {
      {"y = cumsum(x) {axis=4294967296}", "[cumsum] attribute 'axis' value 4294967296 is out of range"},
      {"y = split(x) {sections=4294967297}", "[split] attribute 'sections' value 4294967297 is out of range"},
      {"y = argmax(x) {axis=-4294967296}", "[argmax] attribute 'axis' value -4294967296 is out of range"},
      {"y = topk(x) {k=4294967298}", "[topk] attribute 'k' value 4294967298 is out of range"},
      {"y = concatenate(x, x) {axis=4294967296}", "[concatenate] attribute 'axis' value 4294967296 is out of range"},
  };
  for (const Case& c : cases) {
    std::string text = std::string("kgraph 1\ngraph g {\n  input x : float32[4]\n  ") + c.node + "\n  output y\n}\n";
    std::string e = error_of([&] { parse_graph(text, "attr.kgraph"); });
    EXPECT_TRUE(contains(e, c.message)) << c.node << ": " << e;
  }
}

TEST(Hostile, SplitSectionsMustMatchTheNamedOutputs) {
  // 2^31 - 1 sections of an empty axis made 2^31 arrays (4.2 GB) from a 106-byte file.
  std::string text =
      "kgraph 1\ngraph g {\n  input x : float32[0]\n  y = split(x) {sections=2147483647}\n  output y\n}\n";
  std::string e = error_of([&] { parse_graph(text, "split.kgraph"); });
  EXPECT_TRUE(contains(e, "[split] 'sections' is 2147483647 but the node names 1 outputs")) << e;
  // Matching counts still split, an empty axis too.
  Graph ok =
      parse_graph("kgraph 1\ngraph g {\n  input x : float32[0]\n  a, b = split(x) {sections=2}\n  output a, b\n}\n");
  Executable exe(ok, ExecMode::lazy);
  auto out = exe.run_typed({{"x", zeros({0})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].shape(), (Shape{0}));
}

TEST(Hostile, CycleThroughALongChainIsReportedWithoutRecursion) {
  // The cycle reporter recursed once per node: a chain of 150,000 overflowed the stack.
  const int n = 150000;
  std::string text = "kgraph 1\ngraph g {\n  input x : float32[2]\n";
  for (int i = 0; i < n; ++i) text += "  n" + std::to_string(i) + " = negative(n" + std::to_string((i + 1) % n) + ")\n";
  text += "  output n0\n}\n";
  std::string e = error_of([&] { parse_graph(text, "chain.kgraph"); });
  EXPECT_TRUE(contains(e, "chain.kgraph:4:3")) << e;
  EXPECT_TRUE(contains(e, "[verify] cycle: 'n0' depends on itself (n1 <- n0 -> n2 -> n3 -> ")) << e;
  EXPECT_TRUE(contains(e, " -> n9 -> ... (149983 more) -> n149993 -> ")) << e;
  EXPECT_TRUE(contains(e, " -> n149999 -> n0)")) << e;
  EXPECT_LT(e.size(), 400u);
  // A short one names its whole path.
  e = error_of([] {
    parse_graph(
        "kgraph 1\ngraph g {\n  input x : float32[2]\n  a = add(x, b)\n  b = add(c, x)\n  c = add(a, x)\n"
        "  output c\n}\n");
  });
  EXPECT_TRUE(contains(e, "cycle: 'a' depends on itself (b <- a -> c -> a)")) << e;
}

TEST(Hostile, ArenaOfHugeBroadcastOutputsIsAnErrorNotAWrappedLayout) {
  // Broadcast outputs cost nothing to build; four of 2^61 bytes wrapped the arena's offsets.
  std::string text = "kgraph 1\ngraph g {\n  input x : int8[]\n";
  for (int i = 0; i < 4; ++i) text += "  y" + std::to_string(i) + " = broadcast_to(x) {shape=[2305843009213693952]}\n";
  text += "  output y0, y1, y2, y3\n}\n";
  Executable exe(parse_graph(text, "arena.kgraph"), ExecMode::lazy);
  std::string e = error_of([&] { exe.arena_bytes(); });
  EXPECT_TRUE(contains(e, "[run_slots] the outputs at the symbols' bounds do not fit one arena")) << e;
  e = error_of([&] { exe.run_slots({nullptr}, nullptr); });
  EXPECT_TRUE(contains(e, "do not fit one arena")) << e;
}

namespace {

// Graph l (l >= 1) calls graph l-1 twice: as both branches of an If, or as the body of two Whiles.
std::string nested(int depth, bool loops) {
  std::string t = "kgraph 1\n";
  t += "graph g0 {\n  input x : float32[4]\n  y = negative(x)\n  output y\n}\n";
  t += "graph c {\n  input x : float32[4]\n  s = sum(x)\n  z = less(s, s)\n  output z\n}\n";
  for (int l = 1; l <= depth; ++l) {
    std::string in = "g";  // appended, not "g" + ...: GCC 12 warns falsely (-Wrestrict) on that
    in += std::to_string(l - 1);
    t += "graph g" + std::to_string(l) + " {\n  input x : float32[4]\n";
    t += loops ? "  w = while(x) {cond=@c, body=@" + in + "}\n  y = while(w) {cond=@c, body=@" + in + "}\n"
               : "  p = sum(x)\n  y = if(p, x) {then=@" + in + ", else=@" + in + "}\n";
    t += "  output y\n}\n";
  }
  t += "graph main {\n  input x : float32[4]\n  p = sum(x)\n  y = if(p, x) {then=@g" + std::to_string(depth) +
       ", else=@g0}\n";
  t += "  output y\n}\n";
  return t;
}

}  // namespace

TEST(Hostile, NestedControlFlowIsVerifiedOncePerSubgraph) {
  // Both branches of every If were checked at every level: 24 nested Ifs took over 30 s,
  // 20 nested Whiles 18 s. Each subgraph is now checked once per argument signature.
  for (bool loops : {false, true}) {
    const int depth = loops ? 20 : 24;
    auto t0 = std::chrono::steady_clock::now();
    Graph g = parse_graph(nested(depth, loops), "nested.kgraph");
    Executable exe(g, ExecMode::lazy);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0) << loops;
    auto out = exe.run_typed({{"x", array({1.f, 2.f, 3.f, 4.f})}});
    EXPECT_EQ(out[0].shape(), Shape({4}));
  }
}
