// Executable on a GPU (Device::cuda(0)): device handles are uploaded once and stay on the
// device, feeds keep outputs there (no host round trip), run and run_slots download only
// their outputs, and every example graph gives the CPU's results in every mode. Without
// a GPU every test skips. Transfers are counted by kiln's host_to_device_copies and
// device_to_host_copies counters (src/core/stats.h; bumped by the CUDA runtime).
#include <cmath>

#include "common.h"
#include "core/buffer.h"
#include "core/stats.h"
#include "core/tensor.h"

using namespace kiln;
using kiln_test::load_example;
using kiln_test::rel_diff;

namespace {

const Device gpu = Device::cuda(0);
const ExecMode kModes[] = {ExecMode::eager, ExecMode::lazy, ExecMode::compiled};

// The process's default device stays the CPU here (also under KILN_TEST_DEVICE=cuda), so
// the CPU references run on the CPU and the GPU executables must place their own data.
class CudaExecutable : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available())
      GTEST_SKIP() << "no CUDA device (kiln::cuda_available() is false): Executable GPU tests skipped";
    saved_ = default_device();
    set_default_device(Device::cpu());
  }
  void TearDown() override {
    if (cuda_available()) set_default_device(saved_);
  }

 private:
  Device saved_;
};

uint64_t uploads() { return detail::counters().host_to_device_copies.load(); }
uint64_t downloads() { return detail::counters().device_to_host_copies.load(); }

// Whether a's data lives on the GPU (evaluates it; reads no data).
bool on_gpu(const Array& a) {
  a.eval();
  return a.device() == gpu && a.tensor().buffer && !a.tensor().buffer->on_host();
}

const detail::Buffer* buffer_of(const Array& a) {
  a.eval();
  return a.tensor().buffer.get();
}

// h_next = tanh(h @ w + x): recurrent state, with ops that create no scalars, so every
// transfer the counters see belongs to the executable.
Graph rnn() {
  return parse_graph(R"(kgraph 1
graph rnn {
  input x : float32[4, 8]
  input h : float32[4, 8]
  param w : float32[8, 8]
  hw = matmul(h, w)
  z = add(hw, x)
  h_next = tanh(z)
  output h_next
}
)",
                     "rnn.kgraph");
}

std::vector<float> values(size_t n, float scale, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * static_cast<float>(i) + phase);
  return v;
}

// tanh(h @ w + x) in double, row-major 4x8 and 8x8.
std::vector<float> rnn_step(const std::vector<float>& h, const std::vector<float>& w, const std::vector<float>& x) {
  std::vector<float> out(32);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) {
      double acc = x[static_cast<size_t>(r * 8 + c)];
      for (int k = 0; k < 8; ++k) acc += double(h[static_cast<size_t>(r * 8 + k)]) * w[static_cast<size_t>(k * 8 + c)];
      out[static_cast<size_t>(r * 8 + c)] = static_cast<float>(std::tanh(acc));
    }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST_F(CudaExecutable, ExamplesMatchTheCpuInEveryMode) {
  for (const auto& name : kiln_test::example_graphs()) {
    Graph g = load_graph(kiln_test::examples_dir() + name);
    auto inputs = sample_inputs(g, 7);  // host arrays: the GPU executable uploads them
    auto ref = load_example(name, ExecMode::lazy, Device::cpu())->run_typed(inputs);
    for (ExecMode m : kModes) {
      auto exe = load_example(name, m, gpu);
      EXPECT_EQ(exe->device(), gpu);
      auto out = exe->run_typed(inputs);
      auto again = exe->run_typed(inputs);  // compiled: the replay, not the trace
      ASSERT_EQ(out.size(), ref.size()) << name;
      for (size_t i = 0; i < out.size(); ++i) {
        std::string what = name + " output " + g.outputs[i] + " mode " + exec_mode_name(m);
        EXPECT_TRUE(on_gpu(out[i])) << what << ": run_typed's outputs stay on the executable's device";
        EXPECT_LE(rel_diff(out[i], ref[i]), is_floating(ref[i].dtype()) ? 1e-4 : 0.0) << what;
        EXPECT_EQ(rel_diff(again[i], out[i]), 0.0) << what;
      }
    }
  }
}

TEST_F(CudaExecutable, DeviceHandlesAreUploadedOnceAndFeedsStayOnTheDevice) {
  auto w = values(64, 0.4f, 0.1f), x = values(32, 0.5f, 1.3f), h0 = values(32, 0.8f, 2.0f);
  for (ExecMode m : kModes) {
    Executable exe(rnn(), m, gpu);
    uint64_t up = uploads();
    exe.set_param("w", w.data(), w.size());
    EXPECT_EQ(uploads() - up, 1u) << "set_param uploads the parameter once";
    up = uploads();
    HandleId hx = exe.device_handle(array(x, {4, 8}));
    EXPECT_EQ(uploads() - up, 1u) << "device_handle uploads its value once";
    HandleId hh = exe.device_handle(array(h0, {4, 8}));
    EXPECT_EQ(uploads() - up, 2u);
    Array xv = exe.read_handle(hx);
    ASSERT_TRUE(on_gpu(xv)) << exec_mode_name(m);
    const detail::Buffer* x_buf = buffer_of(xv);
    ASSERT_TRUE(on_gpu(exe.read_handle(hh)));
    exe.bind_input("x", hx);
    exe.bind_input("h", hh);
    exe.feed(0, hh);

    std::vector<float> want = rnn_step(h0, w, x);
    exe.run_typed({});  // compiled mode traces here
    uint64_t up0 = uploads(), down0 = downloads();
    for (int step = 1; step <= 6; ++step) {
      want = rnn_step(want, w, x);
      auto out = exe.run_typed({});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(on_gpu(out[0])) << exec_mode_name(m) << " step " << step;
      EXPECT_EQ(buffer_of(exe.read_handle(hh)), buffer_of(out[0]))
          << exec_mode_name(m) << ": the fed handle holds the output itself, not a copy";
    }
    EXPECT_EQ(uploads() - up0, 0u) << exec_mode_name(m) << ": a run uploaded something (a handle again?)";
    EXPECT_EQ(downloads() - down0, 0u) << exec_mode_name(m) << ": a run or a feed went through the host";
    EXPECT_EQ(buffer_of(exe.read_handle(hx)), x_buf) << exec_mode_name(m) << ": the bound handle was copied";
    EXPECT_LE(max_abs_diff(exe.read_handle(hh).to_vector<float>(), want), 1e-5) << exec_mode_name(m);

    // The same runs on the CPU executable leave the same state.
    Executable cpu(rnn(), m, Device::cpu());
    cpu.set_param("w", w.data(), w.size());
    HandleId cx = cpu.device_handle(array(x, {4, 8})), ch = cpu.device_handle(array(h0, {4, 8}));
    cpu.bind_input("x", cx);
    cpu.bind_input("h", ch);
    cpu.feed(0, ch);
    for (int step = 0; step <= 6; ++step) cpu.run_typed({});
    EXPECT_FALSE(on_gpu(cpu.read_handle(ch)));
    EXPECT_LE(rel_diff(exe.read_handle(hh), cpu.read_handle(ch)), 1e-5) << exec_mode_name(m);

    // write_handle replaces a device handle's value with one upload.
    up = uploads();
    exe.write_handle(hh, array(h0, {4, 8}));
    EXPECT_EQ(uploads() - up, 1u);
    EXPECT_TRUE(on_gpu(exe.read_handle(hh)));
    EXPECT_LE(max_abs_diff(exe.run_typed({})[0].to_vector<float>(), rnn_step(h0, w, x)), 1e-5) << exec_mode_name(m);
  }
}

TEST_F(CudaExecutable, FeedsThroughCommitsStayOnTheDevice) {
  auto w = values(64, 0.4f, 0.3f), x = values(32, 0.5f, 0.7f), h0 = values(32, 0.8f, 1.1f);
  for (ExecMode m : kModes) {
    Executable exe(rnn(), m, gpu);
    exe.set_param("w", w.data(), w.size());
    HandleId hx = exe.device_handle(array(x, {4, 8}));
    HandleId hh = exe.device_handle(array(h0, {4, 8}));
    exe.bind_input("x", hx);
    exe.bind_input("h", hh);
    exe.feed(0, hh);
    exe.run_typed({});  // traces in compiled mode
    std::vector<float> want = rnn_step(h0, w, x);
    uint64_t up0 = uploads(), down0 = downloads();
    for (int k = 0; k < 4; ++k) {
      exe.commit_no_wait({});
      want = rnn_step(want, w, x);
    }
    auto res = exe.sync_pending();
    EXPECT_EQ(uploads() - up0, 0u) << exec_mode_name(m);
    EXPECT_EQ(downloads() - down0, 0u) << exec_mode_name(m);
    ASSERT_EQ(res.size(), 4u);
    EXPECT_TRUE(on_gpu(res.back()[0])) << exec_mode_name(m);
    EXPECT_EQ(buffer_of(exe.read_handle(hh)), buffer_of(res.back()[0])) << exec_mode_name(m);
    EXPECT_LE(max_abs_diff(res.back()[0].to_vector<float>(), want), 1e-5) << exec_mode_name(m);
  }
}

TEST_F(CudaExecutable, HostHandlesAreUploadedOnEveryRun) {
  auto w = values(64, 0.4f, 0.5f), h0 = values(32, 0.8f, 0.9f);
  std::vector<float> xs = values(32, 0.5f, 0.2f);
  for (ExecMode m : kModes) {
    Executable exe(rnn(), m, gpu);
    exe.set_param("w", w.data(), w.size());
    HandleId hx = exe.host_handle(xs.data(), {4, 8}, float32);
    exe.bind_input("x", hx);
    exe.bind_input("h", exe.device_handle(array(h0, {4, 8})));
    exe.run_typed({});  // traces in compiled mode
    uint64_t up0 = uploads();
    auto out = exe.run_typed({});
    EXPECT_EQ(uploads() - up0, 1u) << exec_mode_name(m) << ": one upload, the host handle's memory";
    EXPECT_TRUE(on_gpu(out[0]));
    EXPECT_LE(max_abs_diff(out[0].to_vector<float>(), rnn_step(h0, w, xs)), 1e-5) << exec_mode_name(m);
    xs[0] += 2.0f;  // read again on the next run
    out = exe.run_typed({});
    EXPECT_LE(max_abs_diff(out[0].to_vector<float>(), rnn_step(h0, w, xs)), 1e-5) << exec_mode_name(m);
    xs[0] -= 2.0f;
    // A host handle as a feed target receives a copy of the device output.
    std::vector<float> state(32, 0.0f);
    HandleId hs = exe.host_handle(state.data(), {4, 8}, float32);
    exe.feed(0, hs);
    uint64_t down0 = downloads();
    out = exe.run_typed({});
    EXPECT_EQ(downloads() - down0, 1u) << exec_mode_name(m);
    EXPECT_EQ(state, out[0].to_vector<float>()) << exec_mode_name(m);
    exe.clear_feeds();
  }
}

TEST_F(CudaExecutable, RunAndRunSlotsDownloadOnlyTheOutputs) {
  for (ExecMode m : kModes) {
    auto exe = load_example("mlp.kgraph", m, gpu);
    auto cpu = load_example("mlp.kgraph", m, Device::cpu());
    auto in = sample_inputs(exe->graph(), 3, 32);  // at the bound: the shapes run_slots uses
    std::vector<float> x = in.at("x").to_vector<float>();
    std::map<std::string, HostTensor> host_in = {{"x", HostTensor{{32, 8}, x}}};
    exe->run(host_in);  // traces in compiled mode
    uint64_t down0 = downloads();
    auto typed = exe->run_typed(in);
    EXPECT_EQ(downloads() - down0, 0u) << exec_mode_name(m) << ": run_typed keeps its outputs on the device";
    down0 = downloads();
    auto got = exe->run(host_in);
    EXPECT_EQ(downloads() - down0, 2u) << exec_mode_name(m) << ": run downloads its two outputs, nothing else";
    auto want = cpu->run(host_in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape, want[i].shape);
      double tol = i == 0 ? 1e-5 : 0.0;  // probabilities; argmax indices are exact
      double d = got[i].data.size() == want[i].data.size() ? 0 : INFINITY;
      for (size_t k = 0; k < got[i].data.size() && k < want[i].data.size(); ++k)
        d = std::max(d, double(std::fabs(got[i].data[k] - want[i].data[k])));
      EXPECT_LE(d, tol) << exec_mode_name(m) << " output " << i;
    }
    std::vector<uint8_t> arena(exe->arena_bytes());
    down0 = downloads();
    exe->run_slots({x.data()}, arena.data());
    EXPECT_EQ(downloads() - down0, 2u) << exec_mode_name(m) << ": run_slots downloads its two outputs, nothing else";
    for (size_t i = 0; i < typed.size(); ++i) {
      const OutputSlot& s = exe->output_slot(i);
      EXPECT_EQ(rel_diff(array(arena.data() + s.offset, s.shape, s.dtype), typed[i]), 0.0) << exec_mode_name(m);
    }
  }
}

TEST_F(CudaExecutable, ParametersAndConstantsLiveOnTheDevice) {
  // Graph outputs that are a parameter and a constant themselves show where they live.
  Graph g = parse_graph(R"(kgraph 1
graph g {
  input x : float32[2]
  param p : float32[2]
  const c : float32[2] = [1.5, -2]
  y = add(x, p)
  output y, p, c
}
)");
  for (ExecMode m : kModes) {
    Executable exe(g, m, gpu);
    float p[2] = {0.25f, 4.0f};
    exe.set_param("p", p, 2);
    auto out = exe.run_typed({{"x", array({1.0f, 2.0f})}});
    for (const Array& o : out) EXPECT_TRUE(on_gpu(o)) << exec_mode_name(m);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1.25f, 6.0f}));
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{0.25f, 4.0f}));
    EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
    // A CPU executable given GPU arrays runs on the CPU.
    Executable cpu(g, m, Device::cpu());
    cpu.set_param("p", p, 2);
    auto c = cpu.run_typed({{"x", to(array({1.0f, 2.0f}), gpu)}});
    for (const Array& o : c) EXPECT_FALSE(on_gpu(o)) << exec_mode_name(m);
    EXPECT_EQ(c[0].to_vector<float>(), (std::vector<float>{1.25f, 6.0f}));
  }
}
