// Groups and collectives (docs/distributed.md). On the CPU, in every build: the group of one rank
// and groups of threads against float64 references, compiled against eager, the .kgraph
// spelling, sharded linear layers and bad input. With two GPUs or more (else skipped, saying so):
// NCCL groups of one thread per GPU, eager and captured in compiled calls' CUDA graphs, and of one
// process per GPU meeting through a file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "kiln/random.h"
#include "reference.h"
#include "runtime/ops.h"
#include "spawn_self.h"
#ifdef KILN_TEST_CUDA
#include "backend/cuda/plan_graph.h"
#endif

using namespace kiln;
using distributed::Group;

namespace {

const std::vector<Dtype> kDtypes = {float16, bfloat16, float32, float64, int32, int64};

// Runs fn(r) on a thread per rank; a rank's exception fails the test with its message.
// With `groups`, a rank that throws aborts its group, so the others fail too instead of waiting.
void on_ranks(int n, const std::function<void(int)>& fn, const std::vector<Group>* groups = nullptr) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        if (groups) (*groups)[static_cast<size_t>(r)].abort(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<size_t>(r)].empty())
      ADD_FAILURE() << "rank " << r << ": " << errors[static_cast<size_t>(r)];
}

// Each rank's values: never all zeros, rank-dependent, exactly representable in the dtype.
std::vector<double> rank_values(const Shape& shape, Dtype d, int rank) {
  return kt::random_values(kt::numel(shape), d, 1000 + static_cast<uint64_t>(rank), -4, 4);
}

// What each collective gives on `rank`, from every rank's values (row-major `shape`), in float64.
std::vector<double> sum_of(const std::vector<std::vector<double>>& v) {
  std::vector<double> s(v[0].size(), 0.0);
  for (const auto& x : v)
    for (size_t i = 0; i < s.size(); ++i) s[i] += x[i];
  return s;
}
std::vector<double> gathered(const std::vector<std::vector<double>>& v, const Shape& shape, int axis) {
  // Row-major over (outer, ranks, part along axis and inner).
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis); i < shape.size(); ++i) inner *= shape[i];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (const auto& x : v) out.insert(out.end(), x.begin() + o * inner, x.begin() + (o + 1) * inner);
  return out;
}
std::vector<double> scattered(const std::vector<std::vector<double>>& v, int rank) {
  const std::vector<double> s = sum_of(v);
  const size_t part = s.size() / v.size();
  return {s.begin() + static_cast<std::ptrdiff_t>(part * static_cast<size_t>(rank)),
          s.begin() + static_cast<std::ptrdiff_t>(part * static_cast<size_t>(rank + 1))};
}

// The values in `layout` on `device`: a strided view there too.
Array placed(const std::vector<double>& values, const Shape& shape, Dtype d, kt::Layout layout, Device device) {
  if (device.type == Device::Type::cpu) return kt::with_layout(values, shape, d, layout);
  const Array x = kt::from_values(values, shape, d);
  if (layout == kt::Layout::contiguous) return to(x, device);
  if (layout == kt::Layout::transposed) return transpose(to(copy(transpose(x)), device));
  Shape wide = shape;  // every other element of a wider array
  wide.back() *= 2;
  const Array doubled = to(copy(reshape(stack({x, zeros_like(x)}, -1), wide)), device);
  std::vector<SliceArg> args(shape.size());
  args.back().step = 2;
  return slice(doubled, args);
}

// Every collective of every rank against the references: groups[r] on devices[r], in each dtype and layout.
void check_collectives(const std::vector<Group>& groups, const std::vector<Device>& devices, const Shape& shape,
                       const std::vector<Dtype>& dtypes) {
  const int n = static_cast<int>(groups.size());
  for (Dtype d : dtypes) {
    for (kt::Layout layout : {kt::Layout::contiguous, kt::Layout::transposed, kt::Layout::strided}) {
      std::vector<std::vector<double>> v;
      for (int r = 0; r < n; ++r) v.push_back(rank_values(shape, d, r));
      if (is_floating(d) && kt::numel(shape) > 2) {  // NaN and infinity go through the sum
        v[0][0] = NAN;
        v[static_cast<size_t>(n - 1)][1] = INFINITY;
      }
      on_ranks(n, [&](int r) {
        const std::string ctx =
            std::string(dtype_name(d)) + " " + kt::layout_name(layout) + " rank " + std::to_string(r);
        const Array x = placed(v[static_cast<size_t>(r)], shape, d, layout, devices[static_cast<size_t>(r)]);
        const Group& g = groups[static_cast<size_t>(r)];
        // Sums may round after each rank's addend (NCCL's ring does): within rounding of the
        // addends' size (n of at most 4), not of a result that cancels to near zero.
        const double addends = 4.0 * n;
        kt::expect_close(all_sum(x, g), sum_of(v), "all_sum " + ctx, 1.0, addends);
        for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
          const Array y = all_gather(x, g, axis);
          Shape want = shape;
          want[static_cast<size_t>(axis)] *= n;
          EXPECT_EQ(y.shape(), want) << ctx;
          kt::expect_close(y, gathered(v, shape, axis), "all_gather axis " + std::to_string(axis) + " " + ctx);
        }
        const Array z = reduce_scatter(x, g);
        EXPECT_EQ(z.shape(0), shape[0] / n) << ctx;
        kt::expect_close(z, scattered(v, r), "reduce_scatter " + ctx, 1.0, addends);
      });
    }
  }
}

// Groups of CPU threads: their inputs are made on the default device, which stays the CPU for
// these tests also under KILN_TEST_DEVICE=cuda (the GPU tests below name their devices).
class Distributed : public ::testing::Test {
  kt::DefaultDevice on_cpu_;
};

}  // namespace

TEST_F(Distributed, GroupOfOneRankCopies) {
  const Group g;
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.id(), 0u);
  EXPECT_FALSE(g.device().has_value());
  EXPECT_TRUE(Group::find(0) == g);
  check_collectives({g}, {Device::cpu()}, {4, 3}, kDtypes);
  check_collectives(Group::local({Device::cpu()}), {Device::cpu()}, {2, 3, 2}, {float32});
  // Edge shapes: a scalar sum, empty arrays.
  EXPECT_EQ(all_sum(array(2.5f)).item<float>(), 2.5f);
  EXPECT_EQ(all_sum(zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(all_gather(zeros({0, 3}), g, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(reduce_scatter(zeros({0})).shape(), (Shape{0}));
}

TEST_F(Distributed, ThreadGroupsAgainstReference) {
  for (int n : {2, 3, 4}) {
    const std::vector<Group> groups = Group::local(std::vector<Device>(static_cast<size_t>(n), Device::cpu()));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(groups[static_cast<size_t>(r)].rank(), r);
      EXPECT_EQ(groups[static_cast<size_t>(r)].size(), n);
      EXPECT_EQ(groups[static_cast<size_t>(r)].device(), Device::cpu());
    }
    check_collectives(groups, std::vector<Device>(static_cast<size_t>(n), Device::cpu()),
                      {static_cast<int64_t>(2 * n), 3}, kDtypes);
    check_collectives(groups, std::vector<Device>(static_cast<size_t>(n), Device::cpu()),
                      {static_cast<int64_t>(n), 1, 5}, {float32});
  }
}

TEST_F(Distributed, CompiledEqualsEager) {
  const std::vector<Group> groups = Group::local({Device::cpu(), Device::cpu()});
  auto program = [](const Group& g) {
    return [g](const std::vector<Array>& in) {
      const Array s = all_sum(in[0] * in[0] + 1.0f, g);
      return std::vector<Array>{s * 0.5f, all_gather(s, g, 1), reduce_scatter(exp(in[0]), g)};
    };
  };
  on_ranks(2, [&](int r) {
    const Group& g = groups[static_cast<size_t>(r)];
    CompiledFunction f = compile(program(g));
    for (int call = 0; call < 3; ++call) {  // the first traces, the others replay
      const Array x = kt::from_values(rank_values({4, 3}, float32, 10 * call + r), {4, 3}, float32);
      const std::vector<Array> eager = program(g)({x});
      const std::vector<Array> compiled = f({x});
      ASSERT_EQ(compiled.size(), eager.size());
      for (size_t i = 0; i < eager.size(); ++i)
        EXPECT_EQ(compiled[i].to_vector<float>(), eager[i].to_vector<float>()) << "output " << i << " call " << call;
    }
  });
}

TEST_F(Distributed, RanksThatDisagreeFailAndTheGroupGoesOn) {
  const std::vector<Group> groups = Group::local({Device::cpu(), Device::cpu()});
  std::vector<std::string> errors(2);
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r) {
    t.emplace_back([&, r] {
      try {
        all_sum(zeros({3 + r}), groups[static_cast<size_t>(r)]).eval();
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& th : t) th.join();
  const std::string want =
      "[all_sum] the ranks of a group called different collectives: rank 0 all_sum of (3) float32, rank 1 all_sum of "
      "(4) "
      "float32";
  EXPECT_EQ(errors[0], want);
  EXPECT_EQ(errors[1], want);
  on_ranks(2, [&](int r) {
    EXPECT_EQ(all_sum(ones({2}), groups[static_cast<size_t>(r)]).to_vector<float>(), (std::vector<float>{2, 2}));
  });
}

// After one collective together, the last rank fails before its next one and aborts the group:
// every other rank, waiting in an all_sum for it, stops waiting (no one waits for ever) and every
// later collective throws the reason. On the CPU the waiting ranks throw it too; an NCCL rank is
// waiting on its GPU, where the aborted kernel just ends (its result is undefined).
void expect_abort_ends_the_waits(const std::vector<Device>& devices, bool waiters_throw) {
  const std::vector<Group> groups = Group::local(devices);
  const int n = static_cast<int>(devices.size());
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      const Group& g = groups[static_cast<size_t>(r)];
      try {
        all_sum(to(ones({8}), devices[static_cast<size_t>(r)]), g).eval();  // NCCL connects its ranks here
        if (r == n - 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others are waiting by now
          g.abort("rank " + std::to_string(r) + " failed: out of memory");
          return;
        }
        all_sum(to(ones({1024}), devices[static_cast<size_t>(r)]), g).eval();
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& th : t) th.join();
  const std::string why = "rank " + std::to_string(n - 1) + " failed: out of memory";
  for (int r = 0; r + 1 < n; ++r) {
    if (waiters_throw || !errors[static_cast<size_t>(r)].empty()) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], "[all_sum] the group was aborted: " + why);
    }
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(groups[static_cast<size_t>(r)].aborted(), why);
    kt::expect_error(
        [&] { all_gather(to(ones({2}), devices[static_cast<size_t>(r)]), groups[static_cast<size_t>(r)]).eval(); },
        "[all_gather] the group was aborted: " + why);
  }
  groups[0].abort("a second reason");  // the first one stays
  EXPECT_EQ(groups[1].aborted(), why);
}

TEST_F(Distributed, ARankThatFailsAbortsTheGroupAndTheOthersStopWaiting) {
  expect_abort_ends_the_waits({Device::cpu(), Device::cpu()}, true);
  expect_abort_ends_the_waits({Device::cpu(), Device::cpu(), Device::cpu()}, true);
  // Nothing waits in a group of one rank: abort leaves it working.
  const Group one;
  one.abort("never mind");
  EXPECT_EQ(one.aborted(), "");
  EXPECT_EQ(all_sum(ones({2}), one).to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST_F(Distributed, IdsNameLiveRanks) {
  const std::vector<Group> a = Group::local({Device::cpu(), Device::cpu()});
  const Group b = Group::local({Device::cpu()})[0];
  EXPECT_NE(a[0].id(), a[1].id());
  EXPECT_NE(a[0].id(), b.id());
  EXPECT_NE(a[0].id(), 0u);
  EXPECT_TRUE(Group::find(a[1].id()) == a[1]);
  EXPECT_FALSE(a[0] == a[1]);
  uint64_t gone = 0;
  { gone = Group::local({Device::cpu()})[0].id(); }
  kt::expect_error([&] { Group::find(gone); }, "[distributed] no group has id " + std::to_string(gone) +
                                                   " in this process (0 is the group of one rank)");
}

TEST_F(Distributed, KgraphNamesTheGroupById) {
  const std::vector<Group> groups = Group::local({Device::cpu(), Device::cpu()});
  const Array x = kt::from_values({1, 2, 3, 4}, {2, 2}, float32);
  on_ranks(2, [&](int r) {
    const int64_t id = static_cast<int64_t>(groups[static_cast<size_t>(r)].id());
    const Array s = runtime::apply_op("all_sum", {x}, {{"group", id}}, 1)[0];
    EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
    const Array g = runtime::apply_op("all_gather", {x}, {{"group", id}, {"axis", int64_t{1}}}, 1)[0];
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
    const Array z = runtime::apply_op("reduce_scatter", {x}, {{"group", id}}, 1)[0];
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2 * (1.0f + 2 * r), 2 * (2.0f + 2 * r)}));
  });
  EXPECT_EQ(runtime::apply_op("all_sum", {x}, {}, 1)[0].to_vector<float>(), x.to_vector<float>());  // group 0: one rank
  kt::expect_error(
      [&] {
        runtime::apply_op("all_sum", {x}, {{"group", int64_t{987654321}}}, 1);
      },
      "[distributed] no group has id 987654321 in this process (0 is the group of one rank)");
}

TEST_F(Distributed, BadGroupsAndInputs) {
  kt::expect_error([] { Group::local({}); }, "[distributed] a group needs at least one device");
  kt::expect_error(
      [] {
        Group::local({Device::cpu(), Device::cuda(0)});
      },
      "[distributed] the ranks of a group are all on the CPU or all on CUDA devices, not cpu and cuda:0");
  kt::expect_error(
      [] {
        Group::local({Device::cuda(0), Device::cuda(0)});
      },
      "[distributed] ranks 0 and 1 are both on cuda:0 (one rank per GPU)");
  kt::expect_error([] { Group::join({}, 0, 2, Device::cpu()); },
                   "[distributed] groups over processes run on CUDA devices (NCCL), not cpu; threads of one process on "
                   "the CPU use Group::local");
  kt::expect_error([] { Group::join({}, 2, 2, Device::cuda(0)); },
                   "[distributed] rank 2 is not a rank of a group of 2");
  const std::vector<Group> pair = Group::local({Device::cpu(), Device::cpu()});
  kt::expect_error(
      [] {
        all_sum(array({true, false}));
      },
      "[all_sum] dtype bool is not supported (float16, bfloat16, float32, float64, int32, int64)");
  kt::expect_error([] { all_gather(astype(ones({2}), uint8)); },
                   "[all_gather] dtype uint8 is not supported (float16, bfloat16, float32, float64, int32, int64)");
  kt::expect_error([] { all_gather(array(1.0f)); }, "[all_gather] x must have at least one axis");
  kt::expect_error([] { reduce_scatter(array(1.0f)); }, "[reduce_scatter] x must have at least one axis");
  kt::expect_error(
      [] {
        all_gather(ones({2, 2}), {}, 2);
      },
      "[all_gather] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { reduce_scatter(ones({3}), pair[0]); },
                   "[reduce_scatter] axis 0 of length 3 does not divide over 2 ranks");
  kt::expect_error(
      [&] {
        distributed::shard(ones({3, 2}), pair[1], 0);
      },
      "[shard] axis 0 of length 3 does not divide over 2 ranks");
  kt::expect_error([&] { distributed::shard(ones({2}), pair[1], 1); },
                   "[shard] axis 1 is out of range for an array of rank 1");
  if (cuda_device_count() > 0) {
    kt::expect_error([&] { all_sum(to(ones({2}), Device::cuda(0)), pair[0]); },
                     "[all_sum] x is on cuda:0, but rank 0 of the group is on cpu");
  }
}

// The whole layer against each rank's shard: column-parallel results gathered along the last axis,
// row-parallel results from this rank's input features, dense and quantized.
TEST_F(Distributed, ShardedLinearLayersEqualTheWholeLayer) {
  const int64_t out = 8, in = 128;
  const Array w = kt::from_values(kt::random_values(out * in, float32, 7, -0.5, 0.5), {out, in}, float32);
  const Array b = kt::from_values(kt::random_values(out, float32, 8), {out}, float32);
  const Array x = kt::from_values(kt::random_values(3 * in, float32, 9, -1, 1), {3, in}, float32);
  distributed::Linear dense{w, std::nullopt, std::nullopt, 0, 0, b};
  auto [qw, qs, qb] = quantize(w, 32, 4);
  distributed::Linear quantized{qw, qs, qb, 32, 4, b};
  for (const distributed::Linear* whole : {&dense, &quantized}) {
    const std::vector<float> want = (*whole)(x).to_vector<float>();
    for (int n : {2, 4}) {
      const std::vector<Group> groups = Group::local(std::vector<Device>(static_cast<size_t>(n), Device::cpu()));
      on_ranks(n, [&](int r) {
        const Group& g = groups[static_cast<size_t>(r)];
        const distributed::AllToShardedLinear column(*whole, g);
        EXPECT_EQ(column.local().w.shape(0), out / n);
        const std::vector<float> c = all_gather(column(x), g, -1).to_vector<float>();
        const distributed::ShardedToAllLinear row(*whole, g);
        const std::vector<float> s = row(distributed::shard(x, g, -1)).to_vector<float>();
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(c[i], want[i], 1e-5) << "column-parallel, " << n << " ranks, element " << i;
          EXPECT_NEAR(s[i], want[i], 1e-4)
              << "row-parallel, " << n << " ranks, element " << i;  // sums in another order
        }
      });
    }
  }
  const std::vector<Group> three = Group::local({Device::cpu(), Device::cpu(), Device::cpu()});
  kt::expect_error([&] { distributed::ShardedToAllLinear(quantized, three[0]); },
                   "[ShardedToAllLinear] the 4 groups of 32 input features do not divide over 3 ranks");
  kt::expect_error([&] { distributed::AllToShardedLinear(dense, three[0]); },
                   "[shard] axis 0 of length 8 does not divide over 3 ranks");
}

// A machine without NCCL hears so when it makes a group of several GPUs (a child process, since
// the library is opened once per process).
TEST_F(Distributed, MissingNcclIsNamedWhenAGroupIsMade) {
  const pid_t pid =
      kt::spawn_self("Distributed.DISABLED_MissingNcclChild", {"KILN_NCCL_LIBRARY=/nonexistent/libnccl.so.2"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kt::wait_exit_code(pid), 0);
}

TEST_F(Distributed, DISABLED_MissingNcclChild) {
#if KILN_TEST_NCCL
  const std::string want =
      "[distributed] NCCL is not available: KILN_NCCL_LIBRARY=/nonexistent/libnccl.so.2 could not be loaded";
#elif defined(KILN_TEST_CUDA)
  const std::string want =
      "[distributed] NCCL is not available: kiln was built without NCCL's header (nccl.h was not found beside the CUDA "
      "toolkit's)";
#else
  const std::string want = "[distributed] kiln was built without the CUDA backend: a group on cuda:0 cannot be made";
#endif
  kt::expect_error([] { Group::local({Device::cuda(0), Device::cuda(1)}); }, want);
#if defined(KILN_TEST_CUDA)
  kt::expect_error([] { Group::unique_id(); }, want);
#endif
}

// ---- two GPUs or more ----

namespace {

class DistributedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() < 2)
      GTEST_SKIP() << "NCCL groups need 2 GPUs or more; " << cuda_device_count() << " visible: multi-GPU tests skipped";
    if (const std::string why = distributed::nccl_unavailable_reason(); !why.empty())
      GTEST_SKIP() << "NCCL is not available (" << why << "): multi-GPU tests skipped";
  }
  static std::vector<Device> gpus() {
    std::vector<Device> d;
    for (int i = 0; i < cuda_device_count(); ++i) d.push_back(Device::cuda(i));
    return d;
  }
};

}  // namespace

TEST_F(DistributedGpu, CollectivesOneThreadPerGpuAgainstHost) {
  const std::vector<Device> devices = gpus();
  const std::vector<Group> groups = Group::local(devices);
  const int64_t n = static_cast<int64_t>(devices.size());
  check_collectives(groups, devices, {2 * n, 3}, kDtypes);
  check_collectives(groups, devices, {n * 512, 1024}, {float32, bfloat16});  // long enough for NCCL's bulk algorithms
}

TEST_F(DistributedGpu, CompiledCallsCaptureCollectivesInTheirGraphs) {
  const std::vector<Device> devices = gpus();
  const std::vector<Group> groups = Group::local(devices);
  const int n = static_cast<int>(devices.size());
  auto program = [](const Group& g) {
    return [g](const std::vector<Array>& in) {
      const Array s = all_sum(in[0] * in[0] + 1.0f, g);
      return std::vector<Array>{s * 0.5f + sum(all_gather(exp(in[0]), g, 1), {1}, true), reduce_scatter(s - 1.0f, g)};
    };
  };
  // Fused kernels first: a call that runs a region through the interim tier is not made a graph.
  const FusedKernels policy = fused_kernels();
  set_fused_kernels(FusedKernels::wait);
  struct Restore {
    FusedKernels p;
    ~Restore() { set_fused_kernels(p); }
  } restore{policy};
  for (Dtype d : {float32, float16, bfloat16}) {
#ifdef KILN_TEST_CUDA
    const uint64_t replays = cuda::graph_replays(), host_steps = cuda::graph_step_stats().host_steps;
#endif
    on_ranks(
        n,
        [&](int r) {
          const Group& g = groups[static_cast<size_t>(r)];
          CompiledFunction f = compile(program(g));
          for (int call = 0; call < 5; ++call) {  // new inputs each call: the graph's copies take them
            const Shape shape{static_cast<int64_t>(4 * n), 64};
            const Array x =
                to(kt::from_values(rank_values(shape, d, 10 * call + r), shape, d), devices[static_cast<size_t>(r)]);
            const std::vector<Array> eager = program(g)({x});
            const std::vector<Array> compiled = f({x});
            for (size_t i = 0; i < eager.size(); ++i)
              kt::expect_close(compiled[i], eager[i].to_vector<double>(),
                               std::string(dtype_name(d)) + " output " + std::to_string(i));
          }
        },
        &groups);
#ifdef KILN_TEST_CUDA
    // The first call's recording may not become a graph (measured on two H200s: NCCL's first
    // collective on a communicator sets itself up outside the stream); the second's does.
    EXPECT_GE(cuda::graph_replays() - replays, static_cast<uint64_t>(3 * n)) << dtype_name(d);
    EXPECT_EQ(cuda::graph_step_stats().host_steps, host_steps) << "a collective ran from the host, not in its graph";
#endif
  }
}

// C++ scalars and the constants of softmax and random draws land on their array's GPU, not on
// the default device: with cuda:0 the default, arrays on every GPU take them (rank 1 had failed
// with "arrays are on different devices", leaving rank 0 waiting in its all_sum).
TEST_F(DistributedGpu, ScalarsJoinTheirArraysGpuWhateverTheDefaultDevice) {
  const kt::DefaultDevice on_gpu0(Device::cuda(0));
  const Device other = Device::cuda(1);
  const std::vector<double> v = kt::random_values(6, float32, 5, -2, 2);
  const Array x = to(kt::from_values(v, {2, 3}, float32), other);
  for (const Array& y :
       {x * 2.0f, 2.0f * x, x + 1, softmax(x, {1}), random::uniform({4}, to(random::key(3), other), float32)}) {
    EXPECT_EQ(y.device(), other);
    y.eval();
  }
  const std::vector<double> got = (x * 2.0f - 1).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(v[i]) * 2.0f - 1.0f) << i;
}

TEST_F(DistributedGpu, ARankThatFailsAbortsTheNcclGroupAndTheOthersStopWaiting) {
  expect_abort_ends_the_waits(gpus(), false);
}

TEST_F(DistributedGpu, InputOnAnotherDeviceIsAnError) {
  const std::vector<Group> groups = Group::local(gpus());
  kt::expect_error([&] { all_sum(to(ones({2}), Device::cuda(1)), groups[0]); },
                   "[all_sum] x is on cuda:1, but rank 0 of the group is on cuda:0");
}

// One process per GPU: this binary again, once per rank, the ranks meeting through a file. A child
// finds the folder by its parent's pid and takes the lowest rank no other child has claimed.
std::filesystem::path rendezvous_dir(pid_t parent) {
  return std::filesystem::temp_directory_path() / ("kiln-rendezvous-" + std::to_string(parent));
}

TEST_F(DistributedGpu, OneProcessPerGpuThroughARendezvousFile) {
  const int n = cuda_device_count();
  const std::filesystem::path dir = rendezvous_dir(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    children.push_back(kt::spawn_self("DistributedGpu.DISABLED_RankProcess", {}));
    ASSERT_GT(children.back(), 0);
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(kt::wait_exit_code(children[static_cast<size_t>(r)]), 0) << "child " << r;
  std::filesystem::remove_all(dir);
}

TEST_F(DistributedGpu, DISABLED_RankProcess) {
  const std::filesystem::path dir = rendezvous_dir(::getppid());
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "run by OneProcessPerGpuThroughARendezvousFile";
  const int n = cuda_device_count();
  int rank = 0, claim = -1;
  while (rank < n &&
         (claim = ::open((dir / ("rank-" + std::to_string(rank))).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600)) < 0)
    ++rank;
  ASSERT_LT(rank, n) << "every rank was claimed";
  ::close(claim);
  const Group g = Group::join(distributed::rendezvous((dir / "id").string(), rank), rank, n, Device::cuda(rank));
  EXPECT_EQ(g.rank(), rank);
  EXPECT_EQ(g.size(), n);
  const Shape shape{static_cast<int64_t>(2 * n), 5};
  std::vector<std::vector<double>> v;
  for (int r = 0; r < n; ++r) v.push_back(rank_values(shape, float32, r));
  const Array x = to(kt::from_values(v[static_cast<size_t>(rank)], shape, float32), Device::cuda(rank));
  kt::expect_close(all_sum(x, g), sum_of(v), "all_sum");
  kt::expect_close(all_gather(x, g, 1), gathered(v, shape, 1), "all_gather");
  CompiledFunction f =
      compile([g](const std::vector<Array>& in) { return std::vector<Array>{reduce_scatter(in[0] * 2.0f, g)}; });
  for (int call = 0; call < 3; ++call) {
    std::vector<double> want = scattered(v, rank);
    for (double& w : want) w *= 2;
    kt::expect_close(f({x})[0], want, "compiled reduce_scatter, call " + std::to_string(call));
  }
}
