// Executable: the three modes agree on every example graph; parameters, the three
// run forms, handles and feeds, asynchronous commits, threads, devices.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common.h"
#include "reference.h"

using namespace kiln;
using kiln_test::load_example;
using kiln_test::rel_diff;

namespace {

const ExecMode kModes[] = {ExecMode::eager, ExecMode::lazy, ExecMode::compiled};

Graph accumulator() {
  // s_next = s * decay + x: recurrent state for feeds.
  return parse_graph(R"(kgraph 1
graph acc {
  input x : float32[3]
  input s : float32[3]
  const decay : float32[] = 0.5
  d = multiply(s, decay)
  s_next = add(d, x)
  total = sum(s_next)
  output s_next, total
}
)",
                     "acc.kgraph");
}

}  // namespace

TEST(Executable, ModesAgreeOnEveryExample) {
  for (const auto& name : kiln_test::example_graphs()) {
    Graph g = load_graph(kiln_test::examples_dir() + name);
    auto inputs = sample_inputs(g, 7);
    std::vector<Array> ref;
    for (ExecMode m : kModes) {
      auto exe = load_example(name, m);
      auto out = exe->run_typed(inputs);
      auto again = exe->run_typed(inputs);  // compiled: the replay, not the trace
      ASSERT_EQ(out.size(), g.outputs.size());
      if (ref.empty()) ref = out;
      for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_LE(rel_diff(out[i], ref[i]), 1e-5) << name << " output " << i << " mode " << exec_mode_name(m);
        EXPECT_EQ(rel_diff(again[i], out[i]), 0.0) << name << " output " << i << " mode " << exec_mode_name(m);
      }
    }
  }
}

TEST(Executable, ControlFlowComputesWhatItSays) {
  for (ExecMode m : kModes) {
    auto exe = load_example("control.kgraph", m);
    for (std::vector<float> x : {std::vector<float>{3, -4, 1, 2}, std::vector<float>{-3, -4, -1, 2},
                                 std::vector<float>{0.1f, 0.2f, 0.3f, 0.1f}}) {
      std::vector<float> v = x;
      int steps = 0;
      auto norm2 = [&] { return v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]; };
      while (norm2() > 0.01f) {
        for (auto& e : v) e *= 0.5f;
        ++steps;
      }
      float total = v[0] + v[1] + v[2] + v[3];
      auto out = exe->run_typed({{"x", array(x, {4})}});
      auto got = out[0].to_vector<float>();
      for (int i = 0; i < 4; ++i) {
        float want = total > 0 ? std::exp(v[i]) : -std::fabs(v[i]);
        EXPECT_NEAR(got[i], want, 1e-6) << exec_mode_name(m);
      }
      EXPECT_EQ(out[1].item<int32_t>(), steps) << exec_mode_name(m);
    }
    // The example shows its loop on the inputs `kiln run` gives it.
    auto sample = exe->run_typed(sample_inputs(exe->graph()));
    EXPECT_GE(sample[1].item<int32_t>(), 2) << exec_mode_name(m);
  }
}

TEST(Executable, EndlessWhileFailsSoonInEveryMode) {
  Graph g = parse_graph(R"(kgraph 1
graph forever {
  input n : int32[]
  const t : bool[] = 1
  output t
}
graph step {
  input n : int32[]
  const one : int32[] = 1
  m = add(n, one)
  output m
}
graph main {
  input n : int32[]
  r = while(n) {cond=@forever, body=@step}
  output r
}
)");
  for (ExecMode m : kModes) {
    Executable exe(g, m, kiln_test::test_device());
    auto t0 = std::chrono::steady_clock::now();
    kt::expect_error(
        [&] {
          exe.run_typed({{"n", array(int32_t{0})}});
        },
        "<text>:15:3: node 'r' (while): [while] did not finish within max_iters=65536 iterations (the "
        "default; give max_iters for a longer loop)");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0) << exec_mode_name(m);
  }
}

TEST(Executable, KilnModeEnvironment) {
  setenv("KILN_MODE", "eager", 1);
  EXPECT_EQ(default_exec_mode(), ExecMode::eager);
  setenv("KILN_MODE", "lazy", 1);
  EXPECT_EQ(default_exec_mode(), ExecMode::lazy);
  setenv("KILN_MODE", "no_fuse", 1);  // compiled, with a compile that does not fuse
  EXPECT_EQ(default_exec_mode(), ExecMode::compiled);
  setenv("KILN_MODE", "fast", 1);
  EXPECT_THROW(default_exec_mode(), Error);
  unsetenv("KILN_MODE");
  EXPECT_EQ(default_exec_mode(), ExecMode::compiled);
  EXPECT_THROW(exec_mode_from_name("fast"), Error);
}

TEST(Executable, ParamsTypedAndFloat) {
  auto g = parse_graph(R"(kgraph 1
graph g {
  input x : float16[2]
  param w : float16[2]
  y = multiply(x, w)
  output y
}
)");
  Executable exe(g, ExecMode::compiled, kiln_test::test_device());
  EXPECT_THROW(exe.run_typed({{"x", astype(array({1.0f, 2.0f}), float16)}}), Error);  // w not set
  float wf[2] = {0.5f, 3.0f};
  exe.set_param("w", wf, 2);
  auto y = exe.run_typed({{"x", astype(array({1.0f, 2.0f}), float16)}});
  EXPECT_EQ(y[0].dtype(), float16);
  EXPECT_EQ(y[0].to_vector<float>(), (std::vector<float>{0.5f, 6.0f}));
  float16_t raw[2] = {float16_t(2.0f), float16_t(-1.0f)};
  exe.set_param_typed("w", raw, sizeof raw, float16);
  EXPECT_EQ(exe.run_typed({{"x", astype(array({1.0f, 2.0f}), float16)}})[0].to_vector<float>(),
            (std::vector<float>{2.0f, -2.0f}));
  EXPECT_THROW(exe.set_param_typed("w", wf, sizeof wf, float32), Error);  // no widening
  EXPECT_THROW(exe.set_param_typed("w", raw, 2, float16), Error);  // wrong size
  EXPECT_THROW(exe.set_param("nope", wf, 2), Error);
  // run() converts float32 in and out; run_typed insists on the declared dtype.
  auto r = exe.run({{"x", HostTensor{{2}, {1.0f, 4.0f}}}});
  EXPECT_EQ(r[0].data, (std::vector<float>{2.0f, -4.0f}));
  EXPECT_THROW(exe.run_typed({{"x", array({1.0f, 2.0f})}}), Error);
}

TEST(Executable, InputChecks) {
  auto exe = load_example("mlp.kgraph", ExecMode::lazy);
  EXPECT_THROW(exe->run_typed({}), Error);  // missing
  EXPECT_THROW(exe->run_typed({{"x", zeros({4, 9})}}), Error);  // fixed dim
  EXPECT_THROW(exe->run_typed({{"x", zeros({33, 8})}}), Error);  // above bound
  EXPECT_THROW(exe->run_typed({{"x", zeros({4, 8})}, {"extra", zeros({1})}}), Error);  // unknown
  EXPECT_NO_THROW(exe->run_typed({{"x", zeros({5, 8})}}));
}

TEST(Executable, SlotsMatchRun) {
  for (ExecMode m : kModes) {
    auto exe = load_example("mlp.kgraph", m);
    auto in = sample_inputs(exe->graph(), 3, 32);  // at the bound: the shapes run_slots uses
    auto ref = exe->run_typed(in);
    std::vector<uint8_t> arena(exe->arena_bytes());
    auto x = in.at("x").to_vector<float>();
    exe->run_slots({x.data()}, arena.data());
    for (size_t i = 0; i < ref.size(); ++i) {
      const OutputSlot& s = exe->output_slot(i);
      EXPECT_EQ(s.offset % 64, 0u);
      EXPECT_EQ(s.shape, ref[i].shape());
      EXPECT_EQ(rel_diff(array(arena.data() + s.offset, s.shape, s.dtype), ref[i]), 0.0);
    }
  }
  auto unbounded = parse_graph("kgraph 1\ngraph g {\n input x : float32[N]\n y = exp(x)\n output y\n}\n");
  Executable exe(unbounded, ExecMode::lazy);
  EXPECT_THROW(exe.arena_bytes(), Error);
}

TEST(Executable, HostAndDeviceHandles) {
  for (ExecMode m : kModes) {
    Executable exe(accumulator(), m, kiln_test::test_device());
    float xs[3] = {1, 2, 3};
    HandleId hx = exe.host_handle(xs, {3}, float32);
    HandleId hs = exe.device_handle(zeros({3}));
    exe.bind_input("x", hx);
    exe.bind_input("s", hs);
    auto out = exe.run_typed({});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
    xs[0] = 10;  // the host handle is read again on every run
    out = exe.run_typed({});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{10, 2, 3}));
    // Passing an input explicitly wins over its binding.
    out = exe.run_typed({{"x", array({0.0f, 0.0f, 1.0f})}});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{0, 0, 1}));
  }
}

TEST(Executable, FeedsCarryStateWithoutTheHost) {
  for (ExecMode m : kModes) {
    Executable exe(accumulator(), m, kiln_test::test_device());
    HandleId hs = exe.device_handle(zeros({3}));
    exe.bind_input("s", hs);
    exe.feed(0, hs);
    std::vector<float> s(3, 0.0f);
    for (int step = 0; step < 5; ++step) {
      std::vector<float> x = {1.0f * step, 1.0f, -2.0f};
      exe.run_typed({{"x", array(x, {3})}});
      for (int i = 0; i < 3; ++i) s[i] = s[i] * 0.5f + x[i];
      EXPECT_EQ(exe.read_handle(hs).to_vector<float>(), s) << exec_mode_name(m) << " step " << step;
    }
    // A host handle as the feed target receives a copy.
    float host_state[3] = {0, 0, 0};
    HandleId hh = exe.host_handle(host_state, {3}, float32);
    exe.clear_feeds();
    exe.feed(0, hh);
    exe.run_typed({{"x", array({1.0f, 1.0f, 1.0f})}});
    EXPECT_EQ(host_state[0], s[0] * 0.5f + 1.0f);
  }
}

TEST(Executable, AsyncCommitsAndPipelining) {
  for (ExecMode m : kModes) {
    for (const char* name : {"mlp.kgraph", "control.kgraph"}) {
      auto exe = load_example(name, m);
      std::vector<std::map<std::string, Array>> sets;
      std::vector<std::vector<Array>> ref;
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        sets.push_back(sample_inputs(exe->graph(), seed));
        ref.push_back(exe->run_typed(sets.back()));
      }
      for (const auto& s : sets) exe->commit_no_wait(s);
      auto got = exe->sync_pending();
      auto piped = exe->run_pipelined(sets);
      ASSERT_EQ(got.size(), sets.size());
      ASSERT_EQ(piped.size(), sets.size());
      for (size_t k = 0; k < sets.size(); ++k)
        for (size_t i = 0; i < ref[k].size(); ++i) {
          EXPECT_EQ(rel_diff(got[k][i], ref[k][i]), 0.0) << name << " " << exec_mode_name(m);
          EXPECT_EQ(rel_diff(piped[k][i], ref[k][i]), 0.0) << name << " " << exec_mode_name(m);
        }
    }
    // Feeds through commits: each commit sees the state the previous one left.
    Executable acc(accumulator(), m, kiln_test::test_device());
    HandleId hs = acc.device_handle(zeros({3}));
    acc.bind_input("s", hs);
    acc.feed(0, hs);
    for (int k = 0; k < 4; ++k) acc.commit_no_wait({{"x", array({1.0f, 1.0f, 1.0f})}});
    auto res = acc.sync_pending();
    EXPECT_FLOAT_EQ(res.back()[0].to_vector<float>()[0], 1.875f) << exec_mode_name(m);
  }
}

TEST(Executable, AsyncErrorsSurfaceAtSync) {
  auto exe = load_example("mlp.kgraph", ExecMode::lazy);
  EXPECT_THROW(exe->commit_no_wait({{"x", zeros({4, 3})}}), Error);  // checked at commit
  // Eager mode and control flow run commits on a task; their inputs are still checked at commit.
  for (ExecMode m : kModes) {
    auto ctl = load_example("control.kgraph", m);
    EXPECT_THROW(ctl->commit_no_wait({{"x", zeros({5})}}), Error) << exec_mode_name(m);
    EXPECT_THROW(ctl->commit_no_wait({{"x", zeros({4}, int32)}}), Error) << exec_mode_name(m);
    auto mlp = load_example("mlp.kgraph", m);
    EXPECT_THROW(mlp->commit_no_wait({{"x", zeros({4, 8}, float64)}}), Error) << exec_mode_name(m);
  }
  // What fails while running still surfaces at sync.
  Executable ctl(load_graph(kiln_test::examples_dir() + "control.kgraph"), ExecMode::eager, kiln_test::test_device());
  ctl.commit_no_wait({{"x", array({1.f, 2.f, 3.f, 4.f})}}, RunOptions{.active_extent = 2});
  EXPECT_THROW(ctl.sync_pending(), Error);
  EXPECT_TRUE(ctl.sync_pending().empty());
}

TEST(Executable, ThreadsOnSeparateAndSharedExecutables) {
  for (ExecMode m : kModes) {
    auto shared = load_example("decoder.kgraph", m);
    auto in = sample_inputs(shared->graph(), 5);
    auto ref = shared->run_typed(in);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        std::unique_ptr<Executable> own;
        if (t % 2) own = load_example("decoder.kgraph", m);
        Executable& exe = own ? *own : *shared;
        for (int i = 0; i < 5; ++i) {
          auto out = exe.run_typed(in);
          if (rel_diff(out[0], ref[0]) > 1e-6) ++bad;
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0) << exec_mode_name(m);
  }
}

TEST(Executable, CudaNeedsAGpu) {
  Graph g = load_graph(kiln_test::examples_dir() + "mlp.kgraph");
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Executable exe(g, ExecMode::lazy, Device::cuda(0));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reports no GPU"), std::string::npos) << e.what();
  }
}

TEST(Executable, BundledParamsAreMapped) {
  auto exe = load_example("decoder.kgraph", ExecMode::compiled);
  EXPECT_TRUE(exe->has_param("w_q"));
  auto file = load_params(kiln_test::examples_dir() + "decoder.safetensors");
  auto fresh = sample_params(exe->graph());
  for (const auto& [k, v] : fresh)
    EXPECT_EQ(rel_diff(file.at(k), v), 0.0) << k << " (regenerate with kiln init-params)";
}

TEST(Executable, SymbolBoundIsSharedBetweenInputs) {
  // docs/executable.md's pattern: the bound written on x holds for t too.
  const char* text = R"(kgraph 1
graph main {
  input x : float32[S<=64, 64]
  input t : int32[S]
  f = astype(t) {dtype=float32}
  c = expand_dims(f) {axis=1}
  y = add(x, c)
  output y
}
)";
  Graph g = parse_graph(text, "shared.kgraph");
  EXPECT_EQ(g.symbol_bounds().at("S"), 64);
  auto in = sample_inputs(g, 1, 100);
  EXPECT_EQ(in.at("t").shape(), Shape({64}));
  for (ExecMode m : kModes) {
    Executable exe(g, m, kiln_test::test_device());
    EXPECT_EQ(exe.run_typed(in)[0].shape(), Shape({64, 64})) << exec_mode_name(m);
    EXPECT_THROW(exe.run_typed({{"x", zeros({65, 64})}, {"t", zeros({65}, int32)}}), Error);
    EXPECT_EQ(exe.output_slot(0).shape, Shape({64, 64}));
  }
  std::string two = text;
  two.replace(two.find("int32[S]"), 8, "int32[S<=32]");
  kt::expect_error([&] { parse_graph(two, "two.kgraph"); },
                   "two.kgraph: [verify] symbol S is bounded by 64 at input 'x' but by 32 at input 't'");
}

TEST(Executable, ModesAgreeWhenControlFlowPassesAConstantThrough) {
  // An If branch returning its argument, and a While that runs zero times, hand the next
  // stretch of nodes the constant it also reads (compiled mode refused that).
  const char* graphs[] = {R"(kgraph 1
graph same {
  input a : float32[4]
  input b : float32[4]
  output a, b
}
graph flip {
  input a : float32[4]
  input b : float32[4]
  c = negative(a)
  output c, b
}
graph main {
  input x : float32[4]
  input p : bool[]
  const k : float32[4] = 2
  r, s = if(p, x, k) {then=@same, else=@flip}
  u = add(s, k)
  output r, u
}
)",
                          R"(kgraph 1
graph never {
  input a : float32[4]
  input n : int32[]
  const zero : int32[] = 0
  g = less(n, zero)
  output g
}
graph step {
  input a : float32[4]
  input n : int32[]
  const one : int32[] = 1
  a2 = add(a, a)
  n2 = add(n, one)
  output a2, n2
}
graph main {
  input x : float32[4]
  const z : int32[] = 0
  r, s = while(x, z) {cond=@never, body=@step, max_iters=10}
  u = multiply(s, z)
  v = add(r, x)
  output v, u
}
)"};
  for (const char* text : graphs) {
    Graph g = parse_graph(text);
    for (bool p : {true, false}) {
      std::map<std::string, Array> in{{"x", array({1.f, -2.f, 3.f, 0.5f})}};
      if (g.inputs().size() == 2) in["p"] = array(p);
      std::vector<Array> ref;
      for (ExecMode m : kModes) {
        Executable exe(g, m, kiln_test::test_device());
        std::vector<Array> out;
        ASSERT_NO_THROW(out = exe.run_typed(in)) << exec_mode_name(m);
        auto again = exe.run_typed(in);
        if (ref.empty()) ref = out;
        for (size_t i = 0; i < out.size(); ++i) {
          EXPECT_EQ(rel_diff(out[i], ref[i]), 0.0) << exec_mode_name(m) << " output " << i;
          EXPECT_EQ(rel_diff(again[i], ref[i]), 0.0) << exec_mode_name(m) << " output " << i;
        }
      }
    }
  }
}

TEST(Executable, MessagesNameWhatIsWrong) {
  // A missing params file: as the graph wrote it, and the absolute path it resolved to.
  Graph g = parse_graph(
      "kgraph 1\nparams \"nope.safetensors\"\ngraph g {\n  input x : float32[2]\n"
      "  param w : float32[2]\n  y = add(x, w)\n  output y\n}\n",
      "sub/p.kgraph");
  const std::string abs = std::filesystem::absolute("sub/nope.safetensors").lexically_normal().string();
  kt::expect_error([&] { Executable exe(g, ExecMode::lazy); },
                   "[executable] params \"nope.safetensors\" of sub/p.kgraph: [load_params] cannot open '" + abs +
                       "': No such file or directory");
  EXPECT_EQ(params_path(g), abs);
  // A wrong count for set_param is set_param's error, naming the parameter.
  auto exe = load_example("mlp.kgraph", ExecMode::lazy);
  std::vector<float> v(5);
  kt::expect_error([&] { exe->set_param("b1", v.data(), v.size()); },
                   "[set_param] parameter 'b1' (16) holds 16 values, given 5");
  EXPECT_EQ(exe->param("b1").shape(), Shape({16}));
  kt::expect_error([&] { exe->param("nope"); }, "[param] the graph has no parameter 'nope'");
  // No GPU: why.
  if (cuda_device_count() == 0) {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  } else {
    EXPECT_EQ(cuda_unavailable_reason(), "");
  }
}

TEST(Executable, WarmCompileTracesBeforeTheFirstRun) {
  // Compiled mode traces on the first run of each signature; warm_compile does it ahead,
  // so the first run only replays, and feeds keep their state.
  Executable acc(accumulator(), ExecMode::compiled, kiln_test::test_device());
  HandleId hs = acc.device_handle(array({1.f, 2.f, 3.f}));
  acc.bind_input("s", hs);
  acc.feed(0, hs);
  reset_stats();
  acc.warm_compile();
  EXPECT_GT(stats().traces, 0u);
  EXPECT_EQ(acc.read_handle(hs).to_vector<float>(), std::vector<float>({1.f, 2.f, 3.f}));
  reset_stats();
  auto out = acc.run_typed({{"x", array({1.f, 1.f, 1.f})}});
  EXPECT_EQ(stats().traces, 0u);
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>({1.5f, 2.f, 2.5f}));
  // Symbols without a bound need a shape; other modes have nothing to compile.
  Executable unbounded(parse_graph("kgraph 1\ngraph g {\n  input x : float32[N]\n  y = exp(x)\n  output y\n}\n"),
                       ExecMode::compiled);
  kt::expect_error([&] { unbounded.warm_compile(); },
                   "[warm_compile] input 'x' dimension N has no bound; give its shape");
  reset_stats();
  unbounded.warm_compile({{"x", {5}}});
  EXPECT_GT(stats().traces, 0u);
  kt::expect_error([&] { unbounded.warm_compile({{"y", {5}}}); }, "[warm_compile] the graph has no input 'y'");
  Executable lazy(accumulator(), ExecMode::lazy);
  reset_stats();
  lazy.warm_compile();
  EXPECT_EQ(stats().traces, 0u);
}
