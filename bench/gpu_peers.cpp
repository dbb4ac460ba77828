// kiln's side of the GPU peers benchmark (bench/run_gpu_peers.sh runs it next to
// bench/gpu_peers.py, which times the same workloads in PyTorch eager, torch.compile and
// jax.jit; bench/summarize_gpu_peers.py merges both). docs/benchmarks.md, "GPU peers".
//
// Workloads (the definitions are mirrored exactly in bench/gpu_peers.py; keep them in step):
//   gelu       x: (64M,)               0.5*x*(1 + tanh(0.7978845608028654*(x + 0.044715*x*x*x)))
//   swiglu     a, b: (16384, 4096)     a * sigmoid(a) * b                      (silu(a) * b)
//   rmsnorm    x: (16384, 4096), w: (4096,)
//                                      x * rsqrt(mean(x*x, -1, keepdims) + 1e-6) * w
//   softmax    x: (16384, 4096)        softmax over the last axis (each library's softmax op)
//   layernorm  x: (16384, 4096), g, b: (4096,)
//                                      m = mean(x, -1, keepdims); d = x - m
//                                      d * rsqrt(mean(d*d, -1, keepdims) + 1e-5) * g + b
//   chain10    x: (64M,)               y = sin(x); y = y*1.5; y = y + x; y = sin(y); y = y*x;
//                                      y = y + 0.25; y = sin(y); y = y*2.0; y = y + x; y = sin(y)
//                                      (10 ops: 4 sin, 3 multiply, 3 add)
//   sum        x: (64M,)               sum of every element (one value)
//   colsum     x: (16384, 4096)        sum over the first axis (4096 values)
//   argmax     x: (64, 1M)             index of the largest element of each row
//   scale_bias x: (16384, 4096), w, b: (4096,)
//                                      x * w + b
//   batch_bias x: (64, 256, 4096), b: (64, 1, 4096)
//                                      x + b
//   transpose  x: (16384, 4096)        x transposed, as a new row-major (4096, 16384) array
//   transpose_add  x: (16384, 4096), y: (4096, 16384)
//                                      transpose(x) + y
//   transpose_bias x: (16384, 4096), b: (16384,)
//                                      transpose(x) + b
//   strided_mul    x: (16384, 8192)     x[:, 0::2] * x[:, 1::2]  (even columns times odd ones)
// each in float32 and bfloat16 (Python float constants: they never widen the dtype), on
// fresh inputs uniform in [-3, 3] (made on the host, uploaded, cast on the device; not
// timed). Fewest bytes that must move: gelu, softmax, chain10, transpose: 2n; swiglu,
// transpose_add, strided_mul: 3n; transpose_bias 2n + 16384; rmsnorm 2n + 4096; layernorm, scale_bias: 2n + 2*4096;
// batch_bias 2n + 64*4096; sum, argmax n; colsum n + 4096 (elements times the dtype's size; argmax's 64 int32 indices
// left out).
//
// Timing: CUDA events recorded on kiln's own stream for this thread (cuda::stream(0)), one
// pair around each repetition, the repetitions enqueued back to back and synchronized
// once at the end; the median over the repetitions. One repetition is the compiled call
// plus the evaluation of its outputs: kiln's eval without its final cuStreamSynchronize
// (the same kernel launches on the caller's stream; `launch` below). async_eval cannot be
// timed this way because it evaluates on a worker thread with a stream of its own.
// kiln_eval_wall_ms is the same call with the public, synchronous eval, timed on the host.
// The copy ceiling is cuMemcpyDtoDAsync of 256 MiB timed the same way, counted as
// 2 x 256 MiB moved, measured before and after the workloads (the larger is the ceiling).
//
// Also measured (separate records):
//   host_call    host time of one compiled call of a 32-op elementwise function on 1k
//                float32 elements plus the launch of its kernels, calls back to back with a
//                device synchronization every 64 calls (not timed); median per call. Also
//                with eval, with async_eval, a two-kernel plan replayed as a CUDA graph,
//                and calls per second from 1 and 2 threads that share one input (with
//                the cross-stream waits that took).
//                host_call_mlp: the same launch time (and with new input buffers each call) of
//                a compiled MLP with matrix products, gelu_tanh(x @ W1 + b1) @ W2 + b2, bfloat16,
//                x (8, 512), W1 (512, 2048), W2 (2048, 512); no target.
//   compile_latency  first call (compiled call + eval) of a fresh 10-op function (chain10
//                on 1k float32) in a new process of this executable (--latency-child):
//                with an empty KILN_CACHE_DIR (cold) and again with the same directory
//                (warm disk cache); 3 pairs.
//   matmul_epilogue  gelu(x @ W + b) compiled against the bare matmul x @ W, bfloat16,
//                4096 x 4096 x 4096, interleaved repetitions.
//   llm          kiln's language-model ops on Llama-3-8B shapes, bfloat16 (llm_cases below;
//                mirrored in bench/gpu_peers.py): quantized_matmul with 4-bit group-64
//                weights, decode (x of 1 or 8 rows) and prefill (512 rows, beside kiln's
//                bfloat16 matmul on the dequantized weights: cuBLASLt), decode and causal
//                prefill attention (32 query heads, 8 key/value heads, head dim 128), rope
//                and rms_norm. Each eager op (kiln_ms) and the op as a one-op compiled
//                function (kiln_compiled_ms), CUDA events around each repetition, after a
//                read of 256 MiB outside the events that leaves the op's inputs out of L2
//                (L2Flush). Bytes: every input read once and the output written once;
//                flop for the prefill product and the causal prefill attention. Each result
//                checked against the same computation in float32 plain ops.
//
// Usage: gpu_peers [--out FILE] [--reps N] [--sections peers,host,latency,matmul,llm]
//                  [--workloads gelu,...] [--dtypes float32,bfloat16] [--scale K]
//                  [--cols C] [--cpu-dry-run]
//   The copy ceiling runs first whatever the sections; --sections copy runs it alone (the
//   GPU roofline of bench/run_llm_peers.sh). --scale K divides the large sizes by K (quick
//   runs); --cols C sets the row length of the 2-D workloads (4096), with 64M / C rows (the
//   same bytes); --cpu-dry-run runs everything on the CPU with host timers and --scale 256
//   unless given (tests the harness where there is no GPU; its numbers mean nothing).
// Exit status: 0 when every section ran, 1 when some measurement failed (the JSON still
// holds the others and an "error" for each failure), 2 on bad arguments, 77 when there is
// no usable CUDA device (the JSON then holds only that reason).
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <kiln/kiln.h>

#include "workloads.h"

#include "backend/cuda/nvrtc.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/streams.h"
#include "core/config.h"
#include "core/node.h"

namespace {

using kiln::Array;
using kiln::Device;
using kiln::Dtype;
using kiln::Shape;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;
using Clock = std::chrono::steady_clock;

// ---- options ----------------------------------------------------------------------
struct Options {
  std::string out = "gpu_peers_kiln.json";
  int reps = 20;
  int64_t scale = 0;  // 0: 1 on the GPU, 256 for --cpu-dry-run
  int64_t cols = 4096;  // the row length of the 2-D workloads
  bool cpu = false;
  bool latency_child = false;
  std::vector<std::string> sections = {"peers", "host", "latency", "matmul", "llm"};
  std::vector<std::string> workloads;  // empty: all
  std::vector<std::string> dtypes = {"float32", "bfloat16"};
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// ---- a minimal JSON writer ----------------------------------------------------------
std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}
std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}
std::string jlist(const std::vector<double>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + jnum(v[i]);
  return o + "]";
}

struct Record {
  std::vector<std::pair<std::string, std::string>> kv;  // key, JSON value
  Record& str(const std::string& k, const std::string& v) { return set(k, jstr(v)); }
  Record& num(const std::string& k, double v) { return set(k, jnum(v)); }
  Record& list(const std::string& k, const std::vector<double>& v) { return set(k, jlist(v)); }
  Record& raw(const std::string& k, const std::string& v) { return set(k, v); }
  Record& set(const std::string& k, const std::string& v) {
    for (auto& p : kv)
      if (p.first == k) {
        p.second = v;
        return *this;
      }
    kv.emplace_back(k, v);
    return *this;
  }
  std::string dump(const char* indent) const {
    std::string o = "{";
    for (size_t i = 0; i < kv.size(); ++i) o += (i ? ", " : "") + jstr(kv[i].first) + ": " + kv[i].second;
    (void)indent;
    return o + "}";
  }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// ---- workloads (mirrored in bench/gpu_peers.py) --------------------------------------
// GELU is kiln's gelu_tanh op (the formula of bench::gelu_ops), here and in the matmul epilogue.
Array bench_gelu(const Array& x) { return kiln::gelu_tanh(x); }
using bench::chain10;
using bench::layernorm;
using bench::softmax_rows;
using bench::swiglu;
Array rmsnorm(const Array& x, const Array& w) { return bench::rmsnorm(x, w, 1e-6f); }
using bench::graph32;
Array matmul_gelu(const Array& x, const Array& w, const Array& b) { return bench_gelu(kiln::matmul(x, w) + b); }
Array mlp(const Array& x, const Array& w1, const Array& b1, const Array& w2, const Array& b2) {
  return kiln::matmul(bench_gelu(kiln::matmul(x, w1) + b1), w2) + b2;
}

struct Workload {
  std::string name;
  std::vector<Shape> shapes;  // inputs
  Fn fn;
  int64_t min_elems;  // fewest elements that must move (read + written)
  std::vector<Shape> check_shapes = {};  // the sanity check's inputs (empty: 8 rows of each 2-D input)
};

std::vector<Workload> workloads(int64_t scale, int64_t cols) {
  const int64_t n = (int64_t{1} << 26) / scale;  // 64M
  const int64_t rows = std::max<int64_t>(n / cols, 1);
  const int64_t m = rows * cols;
  auto one = [](Array a) { return std::vector<Array>{std::move(a)}; };
  return {
      {"gelu", {{n}}, [=](const std::vector<Array>& in) { return one(bench_gelu(in[0])); }, 2 * n},
      {"swiglu",
       {{rows, cols}, {rows, cols}},
       [=](const std::vector<Array>& in) { return one(swiglu(in[0], in[1])); },
       3 * m},
      {"rmsnorm",
       {{rows, cols}, {cols}},
       [=](const std::vector<Array>& in) { return one(rmsnorm(in[0], in[1])); },
       2 * m + cols},
      {"softmax", {{rows, cols}}, [=](const std::vector<Array>& in) { return one(softmax_rows(in[0])); }, 2 * m},
      {"layernorm",
       {{rows, cols}, {cols}, {cols}},
       [=](const std::vector<Array>& in) { return one(layernorm(in[0], in[1], in[2])); },
       2 * m + 2 * cols},
      {"chain10", {{n}}, [=](const std::vector<Array>& in) { return one(chain10(in[0])); }, 2 * n},
      {"sum", {{n}}, [=](const std::vector<Array>& in) { return one(kiln::sum(in[0])); }, n},
      {"colsum", {{rows, cols}}, [=](const std::vector<Array>& in) { return one(kiln::sum(in[0], {0})); }, m + cols},
      {"argmax", {{64, n / 64}}, [=](const std::vector<Array>& in) { return one(kiln::argmax(in[0], -1)); }, n},
      {"transpose",
       {{rows, cols}},
       [=](const std::vector<Array>& in) { return one(kiln::copy(kiln::transpose(in[0]))); },
       2 * m},
      {"scale_bias",
       {{rows, cols}, {cols}, {cols}},
       [=](const std::vector<Array>& in) { return one(in[0] * in[1] + in[2]); },
       2 * m + 2 * cols},
      {"batch_bias",
       {{64, rows / 64, cols}, {64, 1, cols}},
       [=](const std::vector<Array>& in) { return one(in[0] + in[1]); },
       2 * m + 64 * cols,
       {{4, 8, 96}, {4, 1, 96}}},
      {"transpose_add",
       {{rows, cols}, {cols, rows}},
       [=](const std::vector<Array>& in) { return one(kiln::transpose(in[0]) + in[1]); },
       3 * m,
       {{72, 40}, {40, 72}}},
      {"transpose_bias",
       {{rows, cols}, {rows}},
       [=](const std::vector<Array>& in) { return one(kiln::transpose(in[0]) + in[1]); },
       2 * m + rows,
       {{72, 40}, {72}}},
      {"strided_mul",
       {{rows, 2 * cols}},
       [=](const std::vector<Array>& in) {
         const Array& x = in[0];
         return one(kiln::slice(x, {0, 0}, x.shape(), {1, 2}) * kiln::slice(x, {0, 1}, x.shape(), {1, 2}));
       },
       3 * m},
  };
}

// ---- inputs -------------------------------------------------------------------------
int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// splitmix64 to floats uniform in [lo, hi): fast enough for 64M values per input.
std::vector<float> host_uniform(int64_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  const float span = hi - lo;
  for (auto& x : v) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = lo + span * static_cast<float>(static_cast<double>(z >> 40) * 0x1.0p-24);
  }
  return v;
}

uint64_t g_seed = 1;

// An evaluated array on `dev`, uniform in [lo, hi), in `dtype` (cast on the device).
Array random_on(const Shape& shape, Dtype dtype, Device dev, float lo = -3.0f, float hi = 3.0f) {
  Array a = kiln::array(host_uniform(numel(shape), g_seed++, lo, hi), shape);
  if (dev.type == Device::Type::cuda) a = kiln::to(a, dev);
  if (dtype != kiln::float32) a = kiln::astype(a, dtype);
  kiln::eval({a});
  return a;
}

// ---- launching and timing -------------------------------------------------------------
// kiln's eval without the final stream synchronization: materializes the pending nodes in
// post order on this thread, which launches their kernels on this thread's stream.
void launch(const std::vector<Array>& roots) {
  using kiln::detail::Node;
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::function<void(const std::shared_ptr<Node>&)> visit = [&](const std::shared_ptr<Node>& n) {
    if (!n || !seen.insert(n.get()).second) return;
    auto p = n->pending_producer();
    if (!p) return;
    for (auto& in : p->inputs) visit(in.node());
    order.push_back(n);
  };
  for (auto& r : roots) visit(r.node());
  for (auto& n : order) n->materialize();
}

using ElapsedFn = CUresult (*)(float*, CUevent, CUevent);

// cuEventElapsedTime is not among the driver functions kiln resolves; resolved here the same
// way (the CUDA 13 ABI first, whose _v2 has the same signature, then CUDA 12's, then by name).
ElapsedFn resolve_elapsed(std::string& why) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why = "libcuda.so.1 could not be loaded";
    return nullptr;
  }
  using GetProc = decltype(&::cuGetProcAddress);
  if (auto get = reinterpret_cast<GetProc>(::dlsym(lib, "cuGetProcAddress_v2"))) {
    for (int version : {13000, 12000}) {
      void* p = nullptr;
      CUdriverProcAddressQueryResult q{};
      if (get("cuEventElapsedTime", &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && p)
        return reinterpret_cast<ElapsedFn>(p);
    }
  }
  for (const char* name : {"cuEventElapsedTime_v2", "cuEventElapsedTime"})
    if (void* p = ::dlsym(lib, name)) return reinterpret_cast<ElapsedFn>(p);
  why = "cuEventElapsedTime was not found in the driver";
  return nullptr;
}

struct Timer {
  bool gpu = false;
  int device = 0;
  ElapsedFn elapsed = nullptr;

  void sync() const {
    if (gpu) kiln::cuda::synchronize(device);
  }
  // Milliseconds per repetition. bodies[j] runs in the j-th slot of each round; rounds are
  // enqueued back to back, each body between its own pair of events on kiln's stream.
  std::vector<std::vector<double>> time(int rounds, const std::vector<std::function<void()>>& bodies) const {
    std::vector<std::vector<double>> ms(bodies.size());
    if (!gpu) {
      for (int r = 0; r < rounds; ++r)
        for (size_t j = 0; j < bodies.size(); ++j) {
          auto t0 = Clock::now();
          bodies[j]();
          ms[j].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
      return ms;
    }
    const auto& d = kiln::cuda::drv();
    CUstream st = kiln::cuda::stream(device);
    std::vector<CUevent> ev(2 * static_cast<size_t>(rounds) * bodies.size(), nullptr);
    for (auto& e : ev) kiln::cuda::check(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    struct Destroy {
      std::vector<CUevent>& ev;
      ~Destroy() {
        for (auto e : ev)
          if (e) kiln::cuda::drv().cuEventDestroy(e);
      }
    } destroy{ev};
    size_t k = 0;
    for (int r = 0; r < rounds; ++r)
      for (size_t j = 0; j < bodies.size(); ++j) {
        kiln::cuda::check(d.cuEventRecord(ev[k++], st), "cuEventRecord");
        bodies[j]();
        kiln::cuda::check(d.cuEventRecord(ev[k++], st), "cuEventRecord");
      }
    kiln::cuda::check(d.cuStreamSynchronize(st), "cuStreamSynchronize");
    k = 0;
    for (int r = 0; r < rounds; ++r)
      for (size_t j = 0; j < bodies.size(); ++j) {
        float t = 0;
        kiln::cuda::check(elapsed(&t, ev[k], ev[k + 1]), "cuEventElapsedTime");
        k += 2;
        ms[j].push_back(t);
      }
    return ms;
  }
  std::vector<double> time(int reps, const std::function<void()>& body) const {
    return time(reps, std::vector{body})[0];
  }
};

// ---- the report ---------------------------------------------------------------------
struct Report {
  std::string path;
  Record meta;
  std::vector<Record> records;
  std::vector<std::string> errors;
  void write() const {
    std::ofstream f(path);
    f << "{\n";
    for (auto& [k, v] : meta.kv) f << "  " << jstr(k) << ": " << v << ",\n";
    f << "  \"errors\": [";
    for (size_t i = 0; i < errors.size(); ++i) f << (i ? ", " : "") << jstr(errors[i]);
    f << "],\n  \"records\": [";
    for (size_t i = 0; i < records.size(); ++i) f << (i ? ",\n    " : "\n    ") << records[i].dump("    ");
    f << "\n  ]\n}\n";
    if (!f) std::fprintf(stderr, "gpu_peers: could not write %s\n", path.c_str());
  }
  void fail(Record& r, const std::string& what, const std::string& msg) {
    std::string m = what + ": " + msg;
    std::fprintf(stderr, "gpu_peers: %s\n", m.c_str());
    r.str("error", m);
    errors.push_back(m);
  }
};

double tbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e12; }

// Microseconds of each of `calls` calls of call(i) (a compiled call) plus the launch of its
// kernels, with a device synchronization every sync_every calls outside the timed region.
template <class Call>
std::vector<double> launch_times(const Timer& timer, int calls, int sync_every, Call&& call) {
  std::vector<double> t;
  t.reserve(calls);
  for (int i = 0; i < calls; ++i) {
    auto t0 = Clock::now();
    launch(call(i));
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if ((i + 1) % sync_every == 0) timer.sync();
  }
  timer.sync();
  return t;
}

// A second, evaluated copy of x on dev: calls that alternate between the two get a new input
// pointer each time.
Array copy_on(const Array& x, Device dev) {
  Array c = kiln::to(kiln::to(x, Device::cpu()), dev);
  c.eval();
  return c;
}

// ---- sections -------------------------------------------------------------------------
// Device-to-device copy of 256 MiB (64M float32), bytes counted 2 x 256 MiB.
double copy_ceiling(const Timer& timer, int reps, int64_t scale, Record& rec) {
  const size_t bytes = (size_t{1} << 28) / static_cast<size_t>(scale);
  double ms = kNaN;
  if (timer.gpu) {
    const auto& d = kiln::cuda::drv();
    kiln::cuda::bind(timer.device);
    CUstream st = kiln::cuda::stream(timer.device);
    CUdeviceptr src = 0, dst = 0;
    kiln::cuda::check(d.cuMemAlloc(&src, bytes), "cuMemAlloc");
    struct Free {
      CUdeviceptr& a;
      CUdeviceptr& b;
      ~Free() {
        if (a) kiln::cuda::drv().cuMemFree(a);
        if (b) kiln::cuda::drv().cuMemFree(b);
      }
    } free_them{src, dst};
    kiln::cuda::check(d.cuMemAlloc(&dst, bytes), "cuMemAlloc");
    kiln::cuda::check(d.cuMemsetD8Async(src, 1, bytes, st), "cuMemsetD8Async");
    kiln::cuda::check(d.cuMemsetD8Async(dst, 2, bytes, st), "cuMemsetD8Async");
    auto body = [&] { kiln::cuda::check(d.cuMemcpyDtoDAsync(dst, src, bytes, st), "cuMemcpyDtoDAsync"); };
    for (int i = 0; i < 3; ++i) body();
    ms = median(timer.time(reps, body));
  } else {
    std::vector<char> a(bytes, 1), b(bytes, 2);
    ms = median(timer.time(reps, [&] { std::memcpy(b.data(), a.data(), bytes); }));
  }
  double t = tbps(2.0 * static_cast<double>(bytes), ms);
  rec.num("copy_bytes", 2.0 * static_cast<double>(bytes)).num("copy_ms", ms).num("copy_TBps", t);
  std::printf("copy ceiling: %zu MiB D2D in %.4f ms = %.3f TB/s (read + write)\n", bytes >> 20, ms, t);
  std::fflush(stdout);
  return t;
}

// Largest |a - b| and largest |b| over two arrays (on any device), as doubles.
std::pair<double, double> max_err(const Array& a, const Array& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double e = 0, m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    e = std::max(e, std::fabs(x[i] - y[i]));
    m = std::max(m, std::fabs(y[i]));
  }
  if (x.size() != y.size()) e = kNaN;
  return {e, m};
}

void run_peers(const Options& opt, const Timer& timer, Device dev, Report& rep, double ceiling) {
  const int64_t scale = opt.scale;
  for (const Workload& w : workloads(scale, opt.cols)) {
    if (!opt.workloads.empty() && !has(opt.workloads, w.name)) continue;
    for (const std::string& dname : opt.dtypes) {
      Dtype dt = dname == "bfloat16" ? kiln::bfloat16 : dname == "float16" ? kiln::float16 : kiln::float32;
      Record r;
      r.str("section", "peers").str("workload", w.name).str("dtype", dname);
      std::string shapes;
      for (auto& s : w.shapes) {
        shapes += shapes.empty() ? "" : " ";
        shapes += kiln::detail::shape_str(s);
      }
      r.str("shapes", shapes);
      const double bytes = static_cast<double>(w.min_elems) * kiln::size_of(dt);
      r.num("bytes", bytes).num("copy_ceiling_TBps", ceiling);
      if (w.name == "gelu") r.str("kiln_gelu", "op gelu_tanh");
      try {
        std::vector<Array> in;
        for (auto& s : w.shapes) in.push_back(random_on(s, dt, dev));
        kiln::CompiledFunction cf = kiln::compile(w.fn, {.name = w.name});
        for (int i = 0; i < 5; ++i) kiln::eval(cf(in));  // trace, compile the kernels, warm the allocator
        {
          auto out = cf(in);
          kiln::eval(out);
          if (out[0].device() != dev) throw std::runtime_error("the compiled output is on " + out[0].device().str());
          const Dtype want = w.name == "argmax" ? kiln::int32 : dt;  // indices
          if (out[0].dtype() != want)
            throw std::runtime_error(std::string("the output dtype is ") + kiln::dtype_name(out[0].dtype()));
        }
        auto ms = timer.time(opt.reps, [&] { launch(cf(in)); });
        double kms = median(ms);
        r.num("kiln_ms", kms).num("kiln_min_ms", *std::min_element(ms.begin(), ms.end()));
        r.num("kiln_TBps", tbps(bytes, kms)).num("kiln_fraction_of_copy", tbps(bytes, kms) / ceiling);
        r.list("kiln_ms_all", ms);
        // The public synchronous eval, host-timed (includes the launch and the wait).
        std::vector<double> wall;
        for (int i = 0; i < std::max(5, opt.reps / 2); ++i) {
          auto t0 = Clock::now();
          kiln::eval(cf(in));
          wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        r.num("kiln_eval_wall_ms", median(wall));
        // kiln eager (one kernel per op), for scale.
        for (int i = 0; i < 2; ++i) kiln::eval(w.fn(in));
        double eager = median(timer.time(std::max(5, opt.reps / 2), [&] { launch(w.fn(in)); }));
        r.num("kiln_eager_ms", eager);
        std::printf("%-10s %-9s kiln %8.4f ms  %6.3f TB/s  %.3f of copy  (eval wall %.4f ms, eager %.4f ms)\n",
                    w.name.c_str(), dname.c_str(), kms, tbps(bytes, kms), tbps(bytes, kms) / ceiling, median(wall),
                    eager);
        std::fflush(stdout);
        in.clear();
        // Sanity check on a small slice of the problem: compiled on `dev` against eager on the CPU.
        std::vector<Array> small_dev, small_cpu;
        for (size_t k = 0; k < w.shapes.size(); ++k) {
          Shape t = w.shapes[k];
          if (!w.check_shapes.empty())
            t = w.check_shapes[k];
          else if (t.size() == 2)
            t[0] = 8;
          else if (t[0] > (1 << 20))
            t[0] = 32768;  // the 64M flat inputs (not a row's weights)
          Array h = kiln::array(host_uniform(numel(t), g_seed++, -3.0f, 3.0f), t);
          Array c = dt == kiln::float32 ? h : kiln::astype(h, dt);
          c.eval();
          small_cpu.push_back(c);
          small_dev.push_back(dev.type == Device::Type::cuda ? kiln::to(c, dev) : c);
        }
        auto [e, m] = max_err(cf(small_dev)[0], w.fn(small_cpu)[0]);
        r.num("check_max_abs_err_vs_cpu_eager", e).num("check_max_abs_ref", m);
      } catch (const std::exception& e) {
        rep.fail(r, w.name + " " + dname, e.what());
      }
      rep.records.push_back(r);
      rep.write();
      if (timer.gpu) kiln::cuda::trim_memory_cache();
    }
  }
}

void run_host_call(const Timer& timer, Device dev, Report& rep) {
  Record r;
  r.str("section", "host_call").str("workload", "host_call_32op").str("dtype", "float32");
  r.num("elements", 1000).num("target_us", 5.0);
  try {
    Array x = random_on({1000}, kiln::float32, dev), y = random_on({1000}, kiln::float32, dev);
    kiln::CompiledFunction f = kiln::compile(
        [](const std::vector<Array>& in) { return std::vector<Array>{graph32(in[0], in[1])}; }, {.name = "graph32"});
    for (int i = 0; i < 200; ++i) kiln::eval(f({x, y}));
    const int calls = timer.gpu ? 20000 : 2000, sync_every = 64;
    Array x2 = copy_on(x, dev);
    auto times = [&](const kiln::CompiledFunction& fn, bool alternate = false) {
      return launch_times(timer, calls, sync_every, [&](int i) { return fn({alternate && i % 2 ? x2 : x, y}); });
    };
    times(f);  // warms up the same loop; dropped
    std::vector<double> us = times(f);
    double med = median(us);
    r.num("kiln_us", med).num("kiln_p10_us", quantile(us, 0.1)).num("kiln_p90_us", quantile(us, 0.9));
    const double alternating = median(times(f, true));
    r.num("kiln_new_input_us", alternating);
    r.num("calls", calls).num("sync_every", sync_every);
    r.raw("kiln_meets_target", med <= 5.0 ? "true" : "false");
    // The public API: synchronous eval per call (includes the round trip to the device).
    std::vector<double> ev;
    for (int i = 0; i < 2000; ++i) {
      auto t0 = Clock::now();
      kiln::eval(f({x, y}));
      ev.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    r.num("kiln_eval_us", median(ev));
    // The public asynchronous API: async_eval per call, and every 64 calls an eval of
    // those 64 outputs; the median per call, and the loop's wall time per call (what a
    // stream of calls sustains, every result computed).
    std::vector<double> as;
    std::vector<Array> window;
    auto loop0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
      auto t0 = Clock::now();
      std::vector<Array> out = f({x, y});
      kiln::async_eval(out);
      as.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      window.push_back(out[0]);
      if (window.size() == static_cast<size_t>(sync_every) || i + 1 == calls) {
        kiln::eval(window);
        window.clear();
      }
    }
    const double loop_us = std::chrono::duration<double, std::micro>(Clock::now() - loop0).count() / calls;
    r.num("kiln_async_eval_us", median(as)).num("kiln_async_eval_p90_us", quantile(as, 0.9));
    r.num("kiln_async_eval_loop_us", loop_us);
    std::printf(
        "host call, 32 ops on 1k float32: %.2f us per call (target 5; p90 %.2f); with eval %.2f us; "
        "async_eval %.2f us (p90 %.2f), %.2f us a call over the loop\n",
        med, quantile(us, 0.9), median(ev), median(as), quantile(as, 0.9), loop_us);
    std::printf("  calls alternating between two input buffers: %.2f us per call\n", alternating);
    // A plan of two kernels (the 32 ops, then a sum feeding a last elementwise step): its
    // calls replay one CUDA graph with new buffers patched in.
    kiln::CompiledFunction g = kiln::compile([](const std::vector<Array>& in) {
      Array a = graph32(in[0], in[1]);
      return std::vector<Array>{a * kiln::sum(a) + in[1]};
    });
    for (int i = 0; i < 200; ++i) kiln::eval(g({x, y}));
    std::vector<double> gu = times(g);
    r.num("kiln_graph_us", median(gu));
    std::printf("  a two-kernel plan replayed as a graph: %.2f us per call\n", median(gu));
    // One and two threads calling with eval, every call reading x, uploaded by this thread:
    // the one-kernel function, then the two-kernel one (graph replays).
    for (auto [name, fn] : {std::pair<std::string, kiln::CompiledFunction*>{"", &f}, {"_graph", &g}}) {
      for (int threads : {1, 2}) {
        const size_t waits0 = timer.gpu ? kiln::cuda::input_stream_waits() : 0;
        auto t0 = Clock::now();
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, values = host_uniform(1000, g_seed++, -3.0f, 3.0f)] {
            Array mine = kiln::array(values, {1000});
            if (dev.type == Device::Type::cuda) mine = kiln::to(mine, dev);  // on this thread's stream
            for (int i = 0; i < calls; ++i) kiln::eval((*fn)({x, mine}));
          });
        }
        for (auto& th : pool) th.join();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        const std::string k = "kiln_threads" + std::to_string(threads) + name;
        r.num(k + "_calls_per_s", threads * calls / s);
        if (timer.gpu) r.num(k + "_input_stream_waits", static_cast<double>(kiln::cuda::input_stream_waits() - waits0));
        std::printf("  %d thread(s) with eval, a shared input%s: %.0f calls/s\n", threads,
                    name.empty() ? "" : ", two kernels", threads * calls / s);
      }
    }
  } catch (const std::exception& e) {
    rep.fail(r, "host_call", e.what());
  }
  rep.records.push_back(r);
  rep.write();
}

// The host time of a small compiled MLP with matrix products, timed like host_call_32op's
// kiln_us (the peers: bench/gpu_peers.py host_mlp_torch, host_mlp_jax).
void run_host_mlp(const Timer& timer, Device dev, Report& rep) {
  const int64_t m = 8, k = 512, hidden = 2048;
  Record r;
  r.str("section", "host_call").str("workload", "host_call_mlp").str("dtype", "bfloat16");
  r.num("m", m).num("k", k).num("hidden", hidden);
  // bench/run_host_path.sh runs this section on bench/null_cuda, which has no cuBLASLt: there
  // the matrix products cannot run, and a failure would end that script (a note, no error).
  if (timer.gpu && kiln::cuda::device_info(timer.device).name == "null device (no kernels run)") {
    r.str("skipped", "bench/null_cuda: no cuBLASLt for the matrix products");
    std::printf("host call, MLP: skipped on bench/null_cuda (no cuBLASLt)\n");
    rep.records.push_back(r);
    rep.write();
    return;
  }
  try {
    auto input = [&](const Shape& s) { return random_on(s, kiln::bfloat16, dev, -1.0f, 1.0f); };
    Array x = input({m, k}), w1 = input({k, hidden}), b1 = input({hidden}), w2 = input({hidden, k}), b2 = input({k});
    Array x2 = copy_on(x, dev);
    kiln::CompiledFunction f = kiln::compile(
        [](const std::vector<Array>& in) { return std::vector<Array>{mlp(in[0], in[1], in[2], in[3], in[4])}; },
        {.name = "mlp"});
    for (int i = 0; i < 200; ++i) kiln::eval(f({x, w1, b1, w2, b2}));
    const int calls = timer.gpu ? 5000 : 500, sync_every = 64;
    std::vector<double> us = launch_times(timer, calls, sync_every, [&](int) { return f({x, w1, b1, w2, b2}); });
    const double med = median(us), p90 = quantile(us, 0.9);
    r.num("kiln_us", med).num("kiln_p10_us", quantile(us, 0.1)).num("kiln_p90_us", p90);
    const double alternating = median(launch_times(timer, calls, sync_every, [&](int i) {
      return f({i % 2 ? x2 : x, w1, b1, w2, b2});
    }));
    r.num("kiln_new_input_us", alternating);
    r.num("calls", calls).num("sync_every", sync_every);
    std::printf(
        "host call, MLP gelu_tanh(x @ W1 + b1) @ W2 + b2, %lldx%lldx%lld bfloat16: %.2f us per call (p90 %.2f); "
        "new input buffers each call %.2f us\n",
        static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(hidden), med, p90, alternating);
  } catch (const std::exception& e) {
    rep.fail(r, "host_call_mlp", e.what());
  }
  rep.records.push_back(r);
  rep.write();
}

// The child: prints one line "LATENCY first_call_ms=... second_call_us=... compiles=... disk_loads=...".
int latency_child(bool cpu) {
  if (kiln::config::text(kiln::config::Knob::cache_dir).empty()) {
    std::fprintf(stderr, "gpu_peers --latency-child: KILN_CACHE_DIR is not set\n");
    return 2;
  }
  try {
    Device dev = cpu ? Device::cpu() : Device::cuda(0);
    if (!cpu && !kiln::cuda_available()) {
      std::fprintf(stderr, "gpu_peers --latency-child: no CUDA device (%s)\n",
                   kiln::cuda::unavailable_reason().c_str());
      return 77;
    }
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.001f - 0.5f;
    Array x = kiln::array(v, {1000});
    if (!cpu) x = kiln::to(x, dev);
    x.eval();
    // Touch the device, the context, NVRTC and an eager kernel first, so that the first
    // compiled call pays only for compiling (process and driver start are not counted).
    kiln::eval({kiln::exp(x + 1.0f)});
    kiln::cuda::NvrtcStats s0{};
    if (!cpu) s0 = kiln::cuda::nvrtc_stats();
    auto f = kiln::compile([](const std::vector<Array>& in) { return std::vector<Array>{chain10(in[0])}; },
                           {.name = "chain10_latency"});
    auto t0 = Clock::now();
    Array y = f({x})[0];
    y.eval();
    auto t1 = Clock::now();
    Array z = f({x})[0];
    z.eval();
    auto t2 = Clock::now();
    kiln::cuda::NvrtcStats s1{};
    if (!cpu) s1 = kiln::cuda::nvrtc_stats();
    if (y.to_vector<float>() != z.to_vector<float>()) {
      std::fprintf(stderr, "gpu_peers --latency-child: first and second calls disagree\n");
      return 1;
    }
    std::printf("LATENCY first_call_ms=%.4f second_call_us=%.3f compiles=%llu disk_loads=%llu\n",
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::micro>(t2 - t1).count(),
                static_cast<unsigned long long>(s1.compiles - s0.compiles),
                static_cast<unsigned long long>(s1.disk_loads - s0.disk_loads));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_peers --latency-child: %s\n", e.what());
    return 1;
  }
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

void run_latency(const Options& opt, Report& rep) {
  Record r;
  r.str("section", "compile_latency").str("workload", "compile_latency_chain10").str("dtype", "float32");
  r.num("elements", 1000).num("target_cold_ms", 100).num("target_warm_disk_ms", 5);
  try {
    std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<double> cold, warm, cold_compiles, warm_compiles, warm_disk_loads;
    for (int pair = 0; pair < 3; ++pair) {
      char tmpl[] = "/tmp/kiln-gpu-peers-cache-XXXXXX";
      if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
      std::string dir = tmpl;
      for (int run = 0; run < 2; ++run) {
        std::string cmd = "KILN_CACHE_DIR=" + shell_quote(dir) + " " + shell_quote(exe) + " --latency-child" +
                          (opt.cpu ? " --cpu-dry-run" : "");
        FILE* p = ::popen(cmd.c_str(), "r");
        if (!p) throw std::runtime_error("popen failed");
        std::string outp;
        char buf[512];
        while (std::fgets(buf, sizeof buf, p)) outp += buf;
        int st = ::pclose(p);
        double ms = 0, us = 0;
        unsigned long long compiles = 0, loads = 0;
        auto pos = outp.find("LATENCY ");
        if (st != 0 || pos == std::string::npos ||
            std::sscanf(outp.c_str() + pos,
                        "LATENCY first_call_ms=%lf second_call_us=%lf compiles=%llu disk_loads=%llu", &ms, &us,
                        &compiles, &loads) != 4) {
          std::filesystem::remove_all(dir);
          throw std::runtime_error("the child process failed (status " + std::to_string(st) + "): " + outp);
        }
        (run == 0 ? cold : warm).push_back(ms);
        (run == 0 ? cold_compiles : warm_compiles).push_back(static_cast<double>(compiles));
        if (run == 1) warm_disk_loads.push_back(static_cast<double>(loads));
        std::printf("first call, %s: %.2f ms (second call %.1f us; NVRTC compiles %llu, disk loads %llu)\n",
                    run == 0 ? "cold" : "warm disk cache, new process", ms, us, compiles, loads);
        std::fflush(stdout);
      }
      std::filesystem::remove_all(dir);
    }
    double c = median(cold), w = median(warm);
    r.num("cold_ms", c).num("warm_disk_ms", w).list("cold_runs_ms", cold).list("warm_disk_runs_ms", warm);
    r.list("cold_nvrtc_compiles", cold_compiles).list("warm_nvrtc_compiles", warm_compiles);
    r.list("warm_disk_loads", warm_disk_loads);
    r.raw("cold_meets_target", c <= 100 ? "true" : "false").raw("warm_meets_target", w <= 5 ? "true" : "false");
  } catch (const std::exception& e) {
    rep.fail(r, "compile_latency", e.what());
  }
  rep.records.push_back(r);
  rep.write();
}

void run_matmul(const Options& opt, const Timer& timer, Device dev, Report& rep) {
  const int64_t n = 4096 / std::min<int64_t>(opt.scale, 16);
  Record r;
  r.str("section", "matmul_epilogue").str("workload", "matmul_gelu").str("dtype", "bfloat16");
  r.num("m", n).num("n", n).num("k", n).num("target_ratio", 1.05);
  r.str("kiln_gelu", "op gelu_tanh");
  try {
    Array x = random_on({n, n}, kiln::bfloat16, dev, -1.0f, 1.0f);
    Array w = random_on({n, n}, kiln::bfloat16, dev, -1.0f, 1.0f);
    Array b = random_on({n}, kiln::bfloat16, dev, -1.0f, 1.0f);
    kiln::CompiledFunction f =
        kiln::compile([](const std::vector<Array>& in) { return std::vector<Array>{matmul_gelu(in[0], in[1], in[2])}; },
                      {.name = "matmul_gelu"});
    for (int i = 0; i < 3; ++i) {
      kiln::eval(f({x, w, b}));
      kiln::eval({kiln::matmul(x, w)});
    }
    const int rounds = std::max(10, opt.reps);
    auto ms = timer.time(rounds, {[&] { launch({kiln::matmul(x, w)}); }, [&] { launch(f({x, w, b})); }});
    double mm = median(ms[0]), fused = median(ms[1]);
    double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    r.num("kiln_matmul_ms", mm).num("kiln_compiled_ms", fused).num("kiln_ratio", fused / mm);
    r.num("kiln_matmul_TFLOPs", flop / (mm * 1e-3) / 1e12).num("kiln_compiled_TFLOPs", flop / (fused * 1e-3) / 1e12);
    r.raw("kiln_meets_target", fused / mm <= 1.05 ? "true" : "false");
    std::printf(
        "matmul %lld^3 bfloat16: bare %.4f ms (%.0f TFLOP/s), gelu(x @ W + b) compiled %.4f ms: ratio %.3f "
        "(target <= 1.05)\n",
        static_cast<long long>(n), mm, flop / (mm * 1e-3) / 1e12, fused, fused / mm);
  } catch (const std::exception& e) {
    rep.fail(r, "matmul_epilogue", e.what());
  }
  rep.records.push_back(r);
  rep.write();
}

// ---- the llm section: kiln's language-model ops, each next to its limit ----------------
// Shapes of Llama-3-8B (mirrored in bench/gpu_peers.py llm_cases; keep them in step), all
// bfloat16, divided by llm_divisor(--scale) in quick and dry runs.
constexpr int kGroup = 64, kBits = 4;
constexpr float kRopeBase = 500000.0f;  // Llama 3's rope_theta
constexpr float kNormEps = 1e-5f;
constexpr double kTargetOfMatmul = 0.60;  // the prefill product's throughput over cuBLASLt's (issue 26)

// The largest power of two <= min(scale, 16): every dimension below stays a whole number of
// quantization groups.
int64_t llm_divisor(int64_t scale) {
  int64_t d = 1;
  while (d * 2 <= std::min<int64_t>(scale, 16)) d *= 2;
  return d;
}

// A float32 constant on `like`'s device.
Array constant_like(const std::vector<float>& v, const Shape& shape, const Array& like) {
  Array a = kiln::array(v, shape);
  return like.device().type == Device::Type::cuda ? kiln::to(a, like.device()) : a;
}

Array f32(const Array& a) { return kiln::astype(a, kiln::float32); }

// The references: each op in float32 written with plain ops (no fused language-model kernel).
// x @ dequantize(w)^T, the weights expanded to float32.
Array qmm_reference(const std::vector<Array>& in) {
  return kiln::matmul(f32(in[0]), kiln::transpose(kiln::dequantize(in[1], f32(in[2]), f32(in[3]), kGroup, kBits)));
}

// softmax(q k^T * scale + causal mask) v, the query heads of one key/value head as one matrix.
Array sdpa_reference(const Array& q, const Array& k, const Array& v, float scale, bool causal) {
  const Shape& qs = q.shape();
  const int64_t b = qs[0], hq = qs[1], lq = qs[2], d = qs[3], hkv = k.shape()[1], lk = k.shape()[2], g = hq / hkv;
  Array scores =
      kiln::matmul(kiln::reshape(f32(q), {b, hkv, g * lq, d}), kiln::transpose(f32(k), {0, 1, 3, 2})) * scale;
  if (causal) {  // query l sees keys j <= l + (lk - lq)
    std::vector<float> mask(static_cast<size_t>(g * lq * lk));
    for (int64_t r = 0; r < g * lq; ++r)
      for (int64_t j = 0; j < lk; ++j)
        mask[static_cast<size_t>(r * lk + j)] = j <= r % lq + (lk - lq) ? 0.0f : -INFINITY;
    scores = scores + constant_like(mask, {g * lq, lk}, q);
  }
  return kiln::reshape(kiln::matmul(kiln::softmax(scores, {-1}), f32(v)), {b, hq, lq, d});
}

// Rotary embedding of the halves (x[i], x[i + D/2]) at positions offset + l, frequencies base^(-2i/D).
Array rope_reference(const Array& x, float base, int64_t offset) {
  const Shape& s = x.shape();
  const int64_t len = s[2], d = s[3], half = d / 2;
  std::vector<float> c(static_cast<size_t>(len * half)), sn(c.size());
  for (int64_t l = 0; l < len; ++l)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(offset + l) * std::pow(static_cast<double>(base), -2.0 * i / d);
      c[static_cast<size_t>(l * half + i)] = static_cast<float>(std::cos(angle));
      sn[static_cast<size_t>(l * half + i)] = static_cast<float>(std::sin(angle));
    }
  Array cs = constant_like(c, {len, half}, x), si = constant_like(sn, {len, half}, x), xf = f32(x);
  Array x1 = kiln::slice(xf, {0, 0, 0, 0}, {s[0], s[1], len, half});
  Array x2 = kiln::slice(xf, {0, 0, 0, half}, {s[0], s[1], len, d});
  return kiln::concatenate({x1 * cs - x2 * si, x1 * si + x2 * cs}, -1);
}

using LlmFn = std::function<Array(const std::vector<Array>&)>;

struct LlmCase {
  std::string name;  // the workload's name, the same in bench/gpu_peers.py
  std::function<std::vector<Array>()> inputs;  // evaluated, on the device
  LlmFn op, reference;
  std::string reference_text;
  double flop = 0;  // > 0: bound by arithmetic (TFLOP/s), else by the bytes it moves
  bool vs_matmul = false;  // also time kiln's bfloat16 matmul on the dequantized weights (cuBLASLt)
};

std::vector<LlmCase> llm_cases(int64_t scale, Device dev) {
  const int64_t dv = llm_divisor(scale);
  auto bf16 = [dev](const Shape& s) { return random_on(s, kiln::bfloat16, dev, -1.0f, 1.0f); };
  // x (m, k) against 4-bit group-64 weights quantized from random bfloat16 (n, k).
  auto qmm = [&](const std::string& name, int64_t m, int64_t n, int64_t k,
                 kiln::QmmActivations act = kiln::QmmActivations::exact) {
    n /= dv;
    k /= dv;
    LlmCase c{.name = name};
    c.inputs = [=] {
      auto [w, s, b] = kiln::quantize(bf16({n, k}), kGroup, kBits);
      kiln::eval({w, s, b});
      return std::vector<Array>{bf16({m, k}), w, s, b};
    };
    c.op = [act](const std::vector<Array>& in) {
      return kiln::quantized_matmul(in[0], in[1], in[2], in[3], true, kGroup, kBits, act);
    };
    c.reference = qmm_reference;
    c.reference_text = "float32 x @ dequantize(w)^T";
    return c;
  };
  LlmCase prefill = qmm("qmm_prefill512_14336x4096", 512 / dv, 14336, 4096);
  prefill.flop = 2.0 * static_cast<double>(512 / dv) * static_cast<double>(14336 / dv) * static_cast<double>(4096 / dv);
  prefill.vs_matmul = true;
  const int64_t hq = 32, hkv = 8, hd = 128, ctx = 4096 / dv, prompt = 512 / dv;
  const float sdpa_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto sdpa = [&](const std::string& name, int64_t lq, int64_t lk, bool causal) {
    LlmCase c{.name = name};
    c.inputs = [=] {
      return std::vector<Array>{bf16({1, hq, lq, hd}), bf16({1, hkv, lk, hd}), bf16({1, hkv, lk, hd})};
    };
    c.op = [=](const std::vector<Array>& in) {
      return kiln::scaled_dot_product_attention(in[0], in[1], in[2], sdpa_scale, std::nullopt, causal);
    };
    c.reference = [=](const std::vector<Array>& in) { return sdpa_reference(in[0], in[1], in[2], sdpa_scale, causal); };
    c.reference_text = "float32 softmax(q k^T * scale" + std::string(causal ? " + causal mask" : "") + ") v";
    // Two products of lq x lk x hd a head; causal: the visible half.
    if (causal) c.flop = 2.0 * 2.0 * static_cast<double>(lq * lk * hd * hq) / 2.0;
    return c;
  };
  std::vector<LlmCase> cases = {
      qmm("qmm_decode_4096x4096", 1, 4096, 4096),  // the q and o projections of one token
      qmm("qmm_decode_14336x4096", 1, 14336, 4096),  // gate or up
      qmm("qmm_decode_28672x4096", 1, 28672, 4096),  // gate and up as one product
      qmm("qmm_decode_4096x14336", 1, 4096, 14336),  // down
      qmm("qmm_decode_128256x4096", 1, 128256, 4096),  // the vocabulary's logits
      qmm("qmm_decode8_14336x4096", 8, 14336, 4096),  // gate or up for 8 sequences at once
      qmm("qmm_decode32_14336x4096", 32, 14336, 4096),  // ... for 32
      qmm("qmm_decode64_14336x4096", 64, 14336, 4096),  // ... for 64
      // The same with x rounded to integer blocks (QmmActivations): dp2a (int16) and dp4a (int8).
      qmm("qmm_decode_int16_4096x4096", 1, 4096, 4096, kiln::QmmActivations::int16),
      qmm("qmm_decode_int16_14336x4096", 1, 14336, 4096, kiln::QmmActivations::int16),
      qmm("qmm_decode_int16_4096x14336", 1, 4096, 14336, kiln::QmmActivations::int16),
      qmm("qmm_decode_int16_128256x4096", 1, 128256, 4096, kiln::QmmActivations::int16),
      qmm("qmm_decode_int8_14336x4096", 1, 14336, 4096, kiln::QmmActivations::int8),
      qmm("qmm_decode_int8_128256x4096", 1, 128256, 4096, kiln::QmmActivations::int8),
      qmm("qmm_decode8_int16_14336x4096", 8, 14336, 4096, kiln::QmmActivations::int16),
      prefill,  // gate or up for a 512-token prompt
      sdpa("sdpa_decode_4096", 1, ctx, false),  // one token against 4096 cached
      sdpa("sdpa_prefill_512_causal", prompt, prompt, true),
  };
  LlmCase rope{.name = "rope_32x512x128"};
  rope.inputs = [=] { return std::vector<Array>{bf16({1, hq, prompt, hd})}; };
  rope.op = [](const std::vector<Array>& in) {
    return kiln::rope(in[0], static_cast<int>(in[0].shape()[3]), false, kRopeBase, 1.0f, 0);
  };
  rope.reference = [](const std::vector<Array>& in) { return rope_reference(in[0], kRopeBase, 0); };
  rope.reference_text = "float32 x * cos + rotate_half(x) * sin";
  cases.push_back(rope);
  LlmCase norm{.name = "rms_norm_512x4096"};
  norm.inputs = [=] { return std::vector<Array>{bf16({prompt, 4096}), bf16({4096})}; };
  norm.op = [](const std::vector<Array>& in) { return kiln::rms_norm(in[0], in[1], kNormEps); };
  norm.reference = [](const std::vector<Array>& in) { return bench::rmsnorm(f32(in[0]), f32(in[1]), kNormEps); };
  norm.reference_text = "float32 x * rsqrt(mean(x*x) + eps) * w";
  cases.push_back(norm);
  return cases;
}

// Reads 256 MiB (a sum) before a timed repetition, outside its events, so that the op's inputs
// come from device memory and not from the L2 cache (50 MB on an H100, 60 on an H200; most
// of these ops' inputs would fit), as in a model whose layers stream their weights. A read
// leaves no dirty lines for the op to write back. It also keeps the GPU busy while the host
// launches the op, so the events time the op's kernels, not its launch.
struct L2Flush {
  Array buf;
  void operator()() const { launch({kiln::sum(buf)}); }
};

// Milliseconds per repetition of each body, each after a flush (the bodies interleaved).
std::vector<std::vector<double>> time_cold(const Timer& timer, int reps, const L2Flush& flush,
                                           const std::vector<std::function<void()>>& bodies) {
  std::vector<std::function<void()>> slots;
  for (auto& b : bodies) {
    slots.push_back(flush);
    slots.push_back(b);
  }
  auto ms = timer.time(reps, slots);
  std::vector<std::vector<double>> out;
  for (size_t j = 1; j < ms.size(); j += 2) out.push_back(std::move(ms[j]));
  return out;
}

void run_llm(const Options& opt, const Timer& timer, Device dev, Report& rep, double ceiling) {
  const L2Flush flush{random_on({(int64_t{1} << 26) / opt.scale}, kiln::float32, dev)};
  for (const LlmCase& c : llm_cases(opt.scale, dev)) {
    if (!opt.workloads.empty() && !has(opt.workloads, c.name)) continue;
    Record r;
    r.str("section", "llm").str("workload", c.name).str("dtype", "bfloat16");
    try {
      const std::vector<Array> in = c.inputs();
      std::string shapes;
      double bytes = 0;
      for (auto& a : in) {
        shapes += (shapes.empty() ? "" : " ") + kiln::detail::shape_str(a.shape());
        bytes += static_cast<double>(a.nbytes());
      }
      Array out = c.op(in);
      out.eval();
      bytes += static_cast<double>(out.nbytes());  // the fewest bytes: every input read once, the output written once
      r.str("shapes", shapes).num("bytes", bytes).num("flop", c.flop).num("copy_ceiling_TBps", ceiling);
      kiln::CompiledFunction cf = kiln::compile(
          [op = c.op](const std::vector<Array>& x) { return std::vector<Array>{op(x)}; }, {.name = c.name});
      std::vector<std::function<void()>> bodies = {[&] { launch({c.op(in)}); }, [&] { launch(cf(in)); }};
      Array wdq;  // vs_matmul: the dequantized bfloat16 weights, (n, k)
      if (c.vs_matmul) {
        wdq = kiln::dequantize(in[1], in[2], in[3], kGroup, kBits);
        wdq.eval();
        bodies.push_back([&] { launch({kiln::matmul(in[0], kiln::transpose(wdq))}); });
      }
      for (int i = 0; i < 3; ++i)
        for (auto& b : bodies) b();
      timer.sync();
      auto ms = time_cold(timer, opt.reps, flush, bodies);
      const double kms = median(ms[0]), cms = median(ms[1]);
      r.num("kiln_ms", kms)
          .num("kiln_min_ms", *std::min_element(ms[0].begin(), ms[0].end()))
          .list("kiln_ms_all", ms[0]);
      r.num("kiln_compiled_ms", cms);
      char limit[160];
      if (c.flop > 0) {
        r.num("kiln_TFLOPs", c.flop / (kms * 1e-3) / 1e12);
        std::snprintf(limit, sizeof limit, "%7.1f TFLOP/s", c.flop / (kms * 1e-3) / 1e12);
      } else {
        r.num("kiln_TBps", tbps(bytes, kms)).num("kiln_fraction_of_copy", tbps(bytes, kms) / ceiling);
        std::snprintf(limit, sizeof limit, "%6.3f TB/s  %.3f of copy", tbps(bytes, kms), tbps(bytes, kms) / ceiling);
      }
      std::printf("%-26s kiln %8.4f ms  %s  (compiled %.4f ms)\n", c.name.c_str(), kms, limit, cms);
      if (c.vs_matmul) {
        const double mm = median(ms[2]);
        r.num("kiln_matmul_ms", mm).num("kiln_matmul_TFLOPs", c.flop / (mm * 1e-3) / 1e12);
        r.num("kiln_fraction_of_matmul", mm / kms).num("target_fraction_of_matmul", kTargetOfMatmul);
        r.raw("kiln_meets_target", mm / kms >= kTargetOfMatmul ? "true" : "false");
        std::printf(
            "%-26s bfloat16 matmul on the dequantized weights %.4f ms (%.1f TFLOP/s): the 4-bit product runs at "
            "%.3f of it (target >= %.2f)\n",
            "", mm, c.flop / (mm * 1e-3) / 1e12, mm / kms, kTargetOfMatmul);
      }
      std::fflush(stdout);
      auto [e, m] = max_err(out, c.reference(in));
      r.num("check_max_abs_err", e).num("check_max_abs_ref", m).str("check_reference", c.reference_text);
    } catch (const std::exception& e) {
      rep.fail(r, c.name, e.what());
    }
    rep.records.push_back(r);
    rep.write();
    if (timer.gpu) kiln::cuda::trim_memory_cache();
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: gpu_peers [--out FILE] [--reps N] [--sections peers,host,latency,matmul,llm]\n"
               "                 [--workloads gelu,swiglu,...,qmm_decode_4096x4096,...,rms_norm_512x4096]\n"
               "                 [--dtypes float32,bfloat16] [--scale K] [--cols C] [--cpu-dry-run]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_peers: %s needs a value\n", a.c_str());
        std::exit(usage());
      }
      return argv[++i];
    };
    if (a == "--out")
      opt.out = next();
    else if (a == "--reps")
      opt.reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--scale")
      opt.scale = std::max<int64_t>(1, std::atoll(next().c_str()));
    else if (a == "--cols")
      opt.cols = std::max<int64_t>(1, std::atoll(next().c_str()));
    else if (a == "--sections")
      opt.sections = split_list(next());
    else if (a == "--workloads")
      opt.workloads = split_list(next());
    else if (a == "--dtypes")
      opt.dtypes = split_list(next());
    else if (a == "--cpu-dry-run")
      opt.cpu = true;
    else if (a == "--latency-child")
      opt.latency_child = true;
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "gpu_peers: unknown argument %s\n", a.c_str());
      return usage();
    }
  }
  if (opt.latency_child) return latency_child(opt.cpu);
  if (opt.scale == 0) opt.scale = opt.cpu ? 256 : 1;
  for (auto& d : opt.dtypes)
    if (d != "float32" && d != "bfloat16" && d != "float16") {
      std::fprintf(stderr, "gpu_peers: unsupported dtype %s\n", d.c_str());
      return usage();
    }

  Report rep;
  rep.path = opt.out;
  rep.meta.str("harness", "kiln bench/gpu_peers.cpp").str("date", today());
  rep.meta.num("reps", opt.reps)
      .num("scale", static_cast<double>(opt.scale))
      .num("cols", static_cast<double>(opt.cols));
  rep.meta.str("timing", opt.cpu ? "host steady_clock (CPU dry run: numbers mean nothing)"
                                 : "CUDA events on kiln's stream, back to back, median");
  Timer timer;
  Device dev = Device::cpu();
  if (opt.cpu) {
    rep.meta.str("device", "cpu (dry run)");
  } else {
    if (!kiln::cuda_available()) {
      std::string why = "no CUDA device (" + kiln::cuda::unavailable_reason() + "): nothing measured";
      std::fprintf(stderr, "gpu_peers: %s\n", why.c_str());
      rep.meta.str("device", "none");
      rep.errors.push_back(why);
      rep.write();
      return 77;
    }
    if (!kiln::cuda::nvrtc_available()) {
      std::string why = "NVRTC could not be loaded: kiln cannot compile GPU kernels; nothing measured";
      std::fprintf(stderr, "gpu_peers: %s\n", why.c_str());
      rep.errors.push_back(why);
      rep.write();
      return 77;
    }
    std::string why;
    timer.elapsed = resolve_elapsed(why);
    if (!timer.elapsed) {
      std::fprintf(stderr, "gpu_peers: cannot time with CUDA events: %s\n", why.c_str());
      rep.errors.push_back("cannot time with CUDA events: " + why);
      rep.write();
      return 1;
    }
    timer.gpu = true;
    dev = Device::cuda(0);
    const auto& info = kiln::cuda::device_info(0);
    int drv_version = 0;
    kiln::cuda::drv().cuDriverGetVersion(&drv_version);
    rep.meta.str("device", info.name).str("arch", info.arch()).num("sms", info.sms);
    rep.meta.num("cuda_driver_version", drv_version);
    std::printf("gpu_peers on %s (%s, %d SMs), driver API %d, %d reps\n", info.name.c_str(), info.arch().c_str(),
                info.sms, drv_version, opt.reps);
  }
  const std::string cache = kiln::config::text(kiln::config::Knob::cache_dir);
  rep.meta.str("kiln_cache_dir", cache.empty() ? "(default)" : cache);
  rep.write();

  Record copy_before, copy_after;
  double ceiling = kNaN;
  try {
    ceiling = copy_ceiling(timer, opt.reps, opt.scale, copy_before);
  } catch (const std::exception& e) {
    rep.errors.push_back(std::string("copy ceiling: ") + e.what());
    std::fprintf(stderr, "gpu_peers: copy ceiling: %s\n", e.what());
  }
  rep.meta.raw("copy_before", copy_before.dump(""));
  rep.meta.num("copy_ceiling_TBps", ceiling);
  rep.write();

  if (has(opt.sections, "peers")) run_peers(opt, timer, dev, rep, ceiling);
  if (has(opt.sections, "peers")) {
    // Again after the workloads; the merge script takes the faster of the two as the ceiling
    // (the records' own kiln_fraction_of_copy use the first).
    try {
      copy_ceiling(timer, opt.reps, opt.scale, copy_after);
      rep.meta.raw("copy_after", copy_after.dump(""));
    } catch (const std::exception& e) {
      rep.errors.push_back(std::string("copy ceiling (after): ") + e.what());
    }
    rep.write();
  }
  if (has(opt.sections, "host")) {
    run_host_call(timer, dev, rep);
    run_host_mlp(timer, dev, rep);
  }
  if (has(opt.sections, "latency")) run_latency(opt, rep);
  if (has(opt.sections, "matmul")) run_matmul(opt, timer, dev, rep);
  if (has(opt.sections, "llm")) run_llm(opt, timer, dev, rep, ceiling);
  rep.write();
  std::printf("wrote %s (%zu records, %zu errors)\n", opt.out.c_str(), rep.records.size(), rep.errors.size());
  return rep.errors.empty() ? 0 : 1;
}
