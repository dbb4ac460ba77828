// Graph builder, verifier, text format round trips and bad input.
#include <cstdio>
#include <fstream>

#include "common.h"

using namespace kiln;
using kiln_test::examples_dir;

TEST(Graph, BuilderVerifiesAndRoundTrips) {
  GraphBuilder b("g");
  auto x = b.input("x", float32, {Dim::sym("S", 16), 4});
  auto w = b.param("w", float32, {4, 3});
  float c[3] = {1.5f, -2.0f, 0.125f};
  auto bias = b.constant("bias", float32, {3}, c);
  auto y = b.op("matmul", {x, w});
  auto z = b.op("add", {y, bias});
  auto parts = b.op_n("split", {z}, 3, {{"axis", int64_t{1}}});
  auto s = b.op("softmax", {z}, {{"axes", std::vector<int64_t>{-1}}});
  b.output({s, parts[1]});
  Graph g = b.build();
  std::string text = print_graph(g);
  Graph back = parse_graph(text, "built.kgraph");
  EXPECT_TRUE(back.same_as(g)) << text;
  EXPECT_EQ(print_graph(back), text);
}

TEST(Graph, ExamplesRoundTrip) {
  for (const auto& name : kiln_test::example_graphs()) {
    Graph g = load_graph(examples_dir() + name);
    std::string text = print_graph(g);
    Graph back = parse_graph(text, name);
    EXPECT_TRUE(back.same_as(g)) << name;
    EXPECT_EQ(print_graph(back), text) << name;
  }
}

TEST(Graph, AttributeAndLiteralKinds) {
  std::string src = R"(kgraph 1
graph g {
  input a : float64[2]
  const c : float64[2] = [0.1, -inf]
  const h : float16[3] = [1.5, nan, 65504]
  const i : int64[2] = [-9223372036854775808, 9223372036854775807]
  const u : uint64[1] = [18446744073709551615]
  const t : bool[2] = [true, 0]
  s = add(a, c) ; m = astype(s) {dtype="float32"}
  output m, h, i, u, t
}
)";
  Graph g = parse_graph(src, "kinds.kgraph");
  Graph back = parse_graph(print_graph(g));
  EXPECT_TRUE(back.same_as(g)) << print_graph(g);
  Executable exe(g, ExecMode::lazy);
  auto out = exe.run_typed({{"a", array(std::vector<double>{1, 2}, {2})}});
  EXPECT_EQ(out[2].to_vector<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(out[3].to_vector<uint64_t>()[0], UINT64_MAX);
  EXPECT_TRUE(std::isnan(out[1].to_vector<float>()[1]));
  EXPECT_EQ(out[1].to_vector<float>()[2], 65504.0f);
}

struct BadCase {
  const char* text;
  const char* where;  // expected "file:line:column"
  const char* what;  // expected part of the message
};

TEST(Graph, BadInputNamesFileLineColumn) {
  const BadCase cases[] = {
      {"kgraph 2\n", "bad.kgraph:1:8", "version"},
      {"kgraph 1\ngraph g {\n  input x : float32[2\n", "bad.kgraph:4:1", "expected"},
      {"kgraph 1\ngraph g {\n  input x : float99[2]\n  output x\n}\n", "bad.kgraph:3:13", "unknown dtype"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  y = frobnicate(x)\n  output y\n}\n", "bad.kgraph:4:3",
       "unknown op 'frobnicate'"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  a = add(x, b)\n  b = add(a, x)\n  output b\n}\n",
       "bad.kgraph:4:3", "cycle"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  a = add(x, q)\n  output a\n}\n", "bad.kgraph:4:3",
       "undefined value 'q'"},
      {"kgraph 1\ngraph g {\n  input x : float32[2, 3]\n  input y : float32[4]\n  z = add(x, y)\n  output z\n}\n",
       "bad.kgraph:5:3", "[add]"},
      {"kgraph 1\ngraph g {\n  input x : float32[6]\n  r = reshape(x) {shape=[4, 2]}\n  output r\n}\n",
       "bad.kgraph:4:3", "reshape"},
      {"kgraph 1\ngraph g {\n  input x : float32[6]\n  r = sum(x) {axes=\"zero\"}\n  output r\n}\n", "bad.kgraph:4:3",
       "must be a list of integers"},
      {"kgraph 1\ngraph g {\n  input x : float32[6]\n  r = sum(x) {axis=0}\n  output r\n}\n", "bad.kgraph:4:3",
       "unknown attribute 'axis'"},
      {"kgraph 1\ngraph g {\n  const c : float32[3] = [1, 2]\n  output c\n}\n", "bad.kgraph:3:26",
       "constant has 2 values"},
      {"kgraph 1\ngraph g {\n  const c : int8[1] = [300]\n  output c\n}\n", "bad.kgraph:3:24", "does not fit"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  output x\n", "bad.kgraph:5:1", "end of file"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  y = add(x, x) {alpha=\"unterminated\n  output y\n}\n",
       "bad.kgraph:4:24", "unterminated string"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  y = if(x, x) {then=@nope, else=@nope}\n  output y\n}\n",
       "bad.kgraph:4:3", "unknown graph @nope"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  $ = x\n}\n", "bad.kgraph:4:3", "unexpected character"},
      {"kgraph 1\ngraph g {\n  input x : float32[2]\n  output nothing\n}\n", "bad.kgraph:4:3", "not defined"},
  };
  for (const auto& c : cases) {
    try {
      parse_graph(c.text, "bad.kgraph");
      ADD_FAILURE() << "no error for:\n" << c.text;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(c.where), std::string::npos) << msg << "\nfor:\n" << c.text;
      EXPECT_NE(msg.find(c.what), std::string::npos) << msg << "\nfor:\n" << c.text;
    }
  }
}

TEST(Graph, IfBranchesMustAgree) {
  std::string src = R"(kgraph 1
graph a {
  input v : float32[2]
  output v
}
graph b {
  input v : float32[2]
  s = sum(v)
  output s
}
graph main {
  input c : bool[]
  input x : float32[2]
  y = if(c, x) {then=@a, else=@b}
  output y
}
)";
  try {
    parse_graph(src, "if.kgraph");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("if.kgraph:14:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("branches disagree"), std::string::npos) << e.what();
  }
}

TEST(Graph, EveryPrefixOfAnExampleFailsCleanly) {
  std::ifstream f(examples_dir() + "control.kgraph");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (size_t n = 0; n < text.size(); n += 7) {
    try {
      parse_graph(text.substr(0, n), "cut.kgraph");
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.kgraph:", 0), 0u) << e.what();
    }
  }
}

TEST(Params, SaveLoadMmap) {
  std::string path = testing::TempDir() + "/p.safetensors";
  std::map<std::string, Array> p{{"a", array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
                                 {"b.bias", array(std::vector<int16_t>{-7, 8}, {2})},
                                 {"h", astype(array(std::vector<float>{0.5f, 1.5f}, {2}), float16)}};
  save_params(path, p);
  auto back = load_params(path);
  ASSERT_EQ(back.size(), 3u);
  for (const auto& [k, v] : p) EXPECT_EQ(kiln_test::rel_diff(back.at(k), v), 0.0) << k;
  EXPECT_EQ(back.at("h").dtype(), float16);

  // Truncations and corruptions are errors naming the file, never crashes.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t n : {size_t{0}, size_t{5}, size_t{8}, size_t{40}, bytes.size() - 1}) {
    std::string cut = testing::TempDir() + "/cut.safetensors";
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    try {
      load_params(cut);
      ADD_FAILURE() << "no error at " << n << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.safetensors"), std::string::npos) << e.what();
    }
  }
}
