#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "backend/cuda/codegen.h"
#include "backend/cuda/kernels/args.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/struct_launch.h"
#include "compile/codegen_util.h"
#include "core/hash_fields.h"
#include "kiln/device.h"
#include "kiln/error.h"

#ifndef KILN_CUDA_LIBDIR
#define KILN_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

struct Lt {
  bool ok = false;
  std::string why;
#define KILN_LT_FN(name) decltype(&::name) name = nullptr;
#define KILN_LT_FNS                                \
  KILN_LT_FN(cublasLtCreate)                       \
  KILN_LT_FN(cublasLtMatmulDescCreate)             \
  KILN_LT_FN(cublasLtMatmulDescDestroy)            \
  KILN_LT_FN(cublasLtMatmulDescSetAttribute)       \
  KILN_LT_FN(cublasLtMatrixLayoutCreate)           \
  KILN_LT_FN(cublasLtMatrixLayoutDestroy)          \
  KILN_LT_FN(cublasLtMatrixLayoutSetAttribute)     \
  KILN_LT_FN(cublasLtMatmulPreferenceCreate)       \
  KILN_LT_FN(cublasLtMatmulPreferenceDestroy)      \
  KILN_LT_FN(cublasLtMatmulPreferenceSetAttribute) \
  KILN_LT_FN(cublasLtMatmulAlgoGetHeuristic)       \
  KILN_LT_FN(cublasLtMatmul)
  KILN_LT_FNS
#undef KILN_LT_FN
};

const Lt& lt() {
  static const Lt* l = [] {
    auto* r = new Lt;
    void* h = ::dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = ::dlopen(KILN_CUDA_LIBDIR "/libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      r->why = "cuBLASLt (libcublasLt.so.13) could not be loaded";
      return r;
    }
    bool all = true;
#define KILN_LT_FN(name)                                            \
  r->name = reinterpret_cast<decltype(r->name)>(::dlsym(h, #name)); \
  all = all && r->name;
    KILN_LT_FNS
#undef KILN_LT_FN
    r->ok = all;
    if (!all) r->why = "cuBLASLt lacks functions kiln needs";
    return r;
  }();
  return *l;
}

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("matmul", "cuBLASLt ", what, " failed with status ", static_cast<int>(s));
}

cublasLtHandle_t handle(int device) {
  thread_local cublasLtHandle_t handles[16] = {};
  bind(device);
  if (!handles[device]) lt_check(lt().cublasLtCreate(&handles[device]), "create");
  return handles[device];
}

// An operand as cuBLASLt reads it: one batch stride, and an inner matrix that is
// row-major (ld = row stride) or column-major (ld = column stride).
struct Operand {
  Tensor t;
  int64_t batch_stride = 0;
  bool col_major = false;
  int64_t ld = 0;
};

// Strides of t's batch axes against the output's batch shape (0 where broadcast).
Strides batch_strides(const Tensor& t, const Shape& batch) {
  Strides s(batch.size(), 0);
  size_t tb = t.shape.size() - 2, lead = batch.size() - tb;
  for (size_t i = 0; i < tb; ++i) s[lead + i] = t.shape[i] == 1 ? 0 : t.strides[i];
  return s;
}

// One stride that walks every batch in order, if there is one.
bool single_batch_stride(const Shape& batch, const Strides& s, int64_t& out) {
  out = 0;
  int64_t expected = -1;
  bool first = true;
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i] == 1) continue;
    if (first) {
      out = s[i];
      first = false;
    } else if (s[i] != expected) {
      return false;
    }
    expected = s[i] * batch[i];
  }
  return true;
}

Operand prepare(int device, const Tensor& x, const Shape& batch) {
  const size_t r = x.shape.size();
  const int64_t rows = x.shape[r - 2], cols = x.shape[r - 1];
  const int64_t rs = x.strides[r - 2], cs = x.strides[r - 1];
  Operand op;
  op.t = x;
  bool batch_ok = single_batch_stride(batch, batch_strides(x, batch), op.batch_stride);
  bool row_ok = (cs == 1 || cols == 1) && (rs >= cols || rows == 1);
  bool col_ok = (rs == 1 || rows == 1) && (cs >= rows || cols == 1);
  if (batch_ok && (row_ok || col_ok)) {
    op.col_major = !row_ok;
    op.ld = op.col_major ? std::max<int64_t>(cs, std::max<int64_t>(rows, 1))
                         : std::max<int64_t>(rs, std::max<int64_t>(cols, 1));
    if (rows == 1 && !op.col_major) op.ld = std::max<int64_t>(cols, 1);
    if (cols == 1 && op.col_major) op.ld = std::max<int64_t>(rows, 1);
    return op;
  }
  // Otherwise a row-major copy stacked over the whole batch.
  Shape full = batch;
  full.push_back(rows);
  full.push_back(cols);
  Tensor c(full, x.dtype);
  allocate_output(device, c);
  copy_into(device, x, c);
  op.t = c;
  op.batch_stride = rows * cols;
  op.col_major = false;
  op.ld = std::max<int64_t>(cols, 1);
  return op;
}

cudaDataType_t data_type(Dtype d) {
  switch (d) {
    case float16: return CUDA_R_16F;
    case bfloat16: return CUDA_R_16BF;
    case float64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

void naive_matmul(int device, const Tensor& a, const Tensor& b, Tensor& y, const Shape& batch) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  Strides sa = batch_strides(a, batch), sb = batch_strides(b, batch);
  Shape bs;
  Strides bsa, bsb;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i] == 1) continue;
    bs.push_back(batch[i]);
    bsa.push_back(sa[i]);
    bsb.push_back(sb[i]);
  }
  if (static_cast<int>(bs.size()) > kMaxDims) fail("matmul", "more than ", kMaxDims, " batch axes");
  args::Matmul g{};
  g.total = y.size();
  g.m = M;
  g.n = N;
  g.k = K;
  g.batch_axes = static_cast<long>(bs.size());
  for (size_t d = 0; d < bs.size(); ++d) {
    g.batch_shape[d] = bs[d];
    g.a_batch_strides[d] = bsa[d];
    g.b_batch_strides[d] = bsb[d];
  }
  g.a_row_stride = a.strides[ra - 2];
  g.a_col_stride = a.strides[ra - 1];
  g.b_row_stride = b.strides[rb - 2];
  g.b_col_stride = b.strides[rb - 1];
  g.a = data_ptr(a);
  g.b = data_ptr(b);
  g.y = data_ptr(y);
  launch_struct(device, "backend/cuda/kernels/matmul.cuh", "Matmul",
                std::string("matmul::naive<") + compiler::cpp_type(y.dtype) + ">", g, grid_for(device, y.size(), 128),
                128);
}

std::atomic<uint64_t> g_in_cublaslt{0}, g_declined{0};  // atomic: counted from any thread

// What a cuBLASLt plan depends on besides the pointers: shapes, layouts, dtype, epilogue,
// and how far the pointers are aligned (an algorithm may need up to 256 bytes).
struct ProductSpec {
  int device = 0;
  Dtype dtype = float32;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool a_col = false, b_col = false;  // our A and B read column-major
  int64_t m = 0, n = 0, k = 0, batches = 1, lda = 0, ldb = 0, batch_a = 0, batch_b = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  std::array<long, 4> align{};  // bytes, of the words B, A, Y and bias (cuBLASLt's A, B, D and bias)

  bool operator==(const ProductSpec&) const = default;
  struct Hash {
    size_t operator()(const ProductSpec& s) const {
      return detail::hash_fields(s.device, s.dtype, s.compute, s.a_col, s.b_col, s.m, s.n, s.k, s.batches, s.lda, s.ldb,
                                 s.batch_a, s.batch_b, s.epilogue, s.align[0], s.align[1], s.align[2], s.align[3]);
    }
  };
};

long alignment(long word) { return word == 0 ? 256 : std::min<long>(256, word & -word); }

// Allocations made here are not the recorded run's: the workspace is taken per product.
struct NotRecorded {
  Recording* saved = std::exchange(recording(), nullptr);
  ~NotRecorded() { recording() = saved; }
};

class PlannedProduct;
std::shared_ptr<PlannedProduct> planned(const ProductSpec& s, const std::vector<long>& words);

// A product planned once (descriptors, layouts, algorithm) and run for any pointers aligned
// as planned: later products of the same kind on this thread skip the heuristic, and a
// compiled call's graph captures it (or runs it between its graph launches).
class PlannedProduct final : public HostStep {
 public:
  // words: the pointers of B, A, Y and the bias (0 without one), as the run will pass them.
  PlannedProduct(const ProductSpec& s, const std::vector<long>& words) : spec_(s), bias_(words[3]) {
    try {
      plan();
    } catch (...) {
      release();  // no destructor runs for a constructor that throws
      throw;
    }
  }

  ~PlannedProduct() override { release(); }

  bool found = false;  // cuBLASLt has an algorithm for it

  void run(int device, const std::vector<long>& words) override {
    if (PlannedProduct* other = replanned(words)) return other->run(device, words);
    NotRecorded not_recorded;
    auto workspace = allocate(device, std::max<size_t>(workspace_, 1));
    lt_check(issue(device, words, workspace->data()), "matmul");
    // The workspace returns to this stream's pool; later work on the stream runs after this product.
  }

  CUgraph capture(int device, const std::vector<long>& words, std::vector<std::shared_ptr<Buffer>>& keep) override {
    if (PlannedProduct* other = replanned(words)) return other->capture(device, words, keep);
    NotRecorded not_recorded;
    auto workspace = allocate(device, std::max<size_t>(workspace_, 1));  // before the capture: no allocation in it
    const Driver& d = drv();
    CUstream st = stream(device);
    if (d.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return nullptr;
    cublasStatus_t issued = CUBLAS_STATUS_EXECUTION_FAILED;
    try {
      issued = issue(device, words, workspace->data());
    } catch (const Error&) {  // not captured: run from the host, where the error is raised
    }
    CUgraph g = nullptr;
    const CUresult ended = d.cuStreamEndCapture(st, &g);  // always: the stream must leave capture
    if (issued != CUBLAS_STATUS_SUCCESS || ended != CUDA_SUCCESS || !g) {
      if (g) d.cuGraphDestroy(g);
      return nullptr;
    }
    keep.push_back(std::move(workspace));  // the graph's launches use it on every replay
    return g;
  }

 private:
  // Descriptors, layouts and the heuristic's algorithm (found stays false where it has none).
  void plan() {
    const Lt& L = lt();
    const ProductSpec& s = spec_;
    lt_check(L.cublasLtMatmulDescCreate(&desc_, s.compute, s.dtype == float64 ? CUDA_R_64F : CUDA_R_32F), "descriptor");
    cublasOperation_t ta = s.b_col ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.a_col ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(L.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    lt_check(L.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      // cuBLASLt's D is our Y^T (N x M, column-major): its rows are Y's columns, so the bias
      // vector (one value per row of D) is indexed by Y's last axis. Its dtype defaults to
      // D's (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE unset), its batch stride to 0 (one vector
      // for every batch). The pointer is set before the heuristic, which checks its alignment.
      const void* bias = reinterpret_cast<const void*>(bias_);
      if (L.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue) !=
              CUBLAS_STATUS_SUCCESS ||
          L.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) !=
              CUBLAS_STATUS_SUCCESS) {
        return;
      }
    }
    // Stored shapes, column-major: our B is (N x K) when row-major, else (K x N) transposed.
    const uint64_t M = static_cast<uint64_t>(s.m), N = static_cast<uint64_t>(s.n), K = static_cast<uint64_t>(s.k);
    if (s.b_col)
      layout(la_, K, N, s.ldb, s.batch_b);
    else
      layout(la_, N, K, s.ldb, s.batch_b);
    if (s.a_col)
      layout(lb_, M, K, s.lda, s.batch_a);
    else
      layout(lb_, K, M, s.lda, s.batch_a);
    layout(lc_, N, M, s.n, s.m * s.n);
    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(L.cublasLtMatmulPreferenceCreate(&pref), "preference");
    struct DestroyPreference {
      cublasLtMatmulPreference_t p;
      ~DestroyPreference() { lt().cublasLtMatmulPreferenceDestroy(p); }
    } destroy_preference{pref};
    constexpr uint64_t kWorkspace = uint64_t{32} << 20;
    lt_check(L.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                    sizeof kWorkspace),
             "workspace");
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      const uint32_t bytes = static_cast<uint32_t>(s.align[i == 3 ? 2 : i]);  // C is D
      lt_check(L.cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &bytes, sizeof bytes), "alignment");
    }
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t hs =
        L.cublasLtMatmulAlgoGetHeuristic(handle(s.device), desc_, la_, lb_, lc_, lc_, pref, 1, &result, &count);
    if (s.epilogue == CUBLASLT_EPILOGUE_DEFAULT) lt_check(hs, "heuristic");
    found = hs == CUBLAS_STATUS_SUCCESS && count > 0;
    algo_ = result.algo;
    workspace_ = result.workspaceSize;
  }

  void release() {
    const Lt& L = lt();
    if (la_) L.cublasLtMatrixLayoutDestroy(la_);
    if (lb_) L.cublasLtMatrixLayoutDestroy(lb_);
    if (lc_) L.cublasLtMatrixLayoutDestroy(lc_);
    if (desc_) L.cublasLtMatmulDescDestroy(desc_);
  }

  // A plan for these pointers where they are less aligned than this one was planned for
  // (a replay's new pointers); null where this one serves.
  PlannedProduct* replanned(const std::vector<long>& words) const {
    for (size_t i = 0; i < 4; ++i) {
      if (alignment(words[i]) >= spec_.align[i]) continue;
      ProductSpec s = spec_;
      for (size_t j = 0; j < 4; ++j) s.align[j] = alignment(words[j]);
      auto other = planned(s, words);  // held by this thread's cache
      if (!other->found) fail("matmul", "cuBLASLt has no algorithm for this product at these alignments");
      return other.get();
    }
    return nullptr;
  }

  // The product on this thread's stream, with the bias pointer set into the descriptor.
  cublasStatus_t issue(int device, const std::vector<long>& words, void* workspace) {
    const Lt& L = lt();
    std::lock_guard<std::mutex> lock(mu_);  // the bias pointer lives in the descriptor
    if (words[3] != bias_) {
      const void* bias = reinterpret_cast<const void*>(words[3]);
      lt_check(L.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "bias");
      bias_ = words[3];
    }
    const float alpha32 = 1, beta32 = 0;
    const double alpha64 = 1, beta64 = 0;
    const bool f64 = spec_.dtype == float64;
    const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
    auto ptr = [&](size_t i) { return reinterpret_cast<void*>(words[i]); };
    return L.cublasLtMatmul(handle(device), desc_, alpha, ptr(0), la_, ptr(1), lb_, beta, ptr(2), lc_, ptr(2), lc_,
                            &algo_, workspace, workspace_, stream(device));
  }

  void layout(cublasLtMatrixLayout_t& l, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch_stride) {
    const Lt& L = lt();
    lt_check(L.cublasLtMatrixLayoutCreate(&l, data_type(spec_.dtype), rows, cols, ld), "layout");
    const int32_t count = static_cast<int32_t>(spec_.batches);
    lt_check(L.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch");
    lt_check(L.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                sizeof batch_stride),
             "batch stride");
  }

  const ProductSpec spec_;
  long bias_ = 0;  // the bias pointer the descriptor holds
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
  std::mutex mu_;
};

// This thread's plans by spec (a program has few distinct products; the cache is emptied
// if it ever holds many).
std::shared_ptr<PlannedProduct> planned(const ProductSpec& s, const std::vector<long>& words) {
  constexpr size_t kMostPlans = 256;
  thread_local std::unordered_map<ProductSpec, std::shared_ptr<PlannedProduct>, ProductSpec::Hash> plans;
  if (auto it = plans.find(s); it != plans.end()) return it->second;
  auto p = std::make_shared<PlannedProduct>(s, words);
  if (plans.size() >= kMostPlans) plans.clear();
  plans.emplace(s, p);
  return p;
}

// y = a @ b; with `bias` (packed, y's dtype, on the device) cuBLASLt's epilogue adds it to
// each column of y and, with `gelu`, applies GELU. False (nothing done) when an epilogue was
// asked for and cuBLASLt cannot run it.
bool product(int device, const Tensor& a, const Tensor& b, Tensor& y, const Tensor* bias, bool gelu) {
  if (y.size() == 0) return true;
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  Shape batch(y.shape.begin(), y.shape.end() - 2);
  Dtype d = y.dtype;
  const bool lt_type = d == float16 || d == bfloat16 || d == float32 || d == float64;
  if (bias && (K == 0 || !lt_type)) return false;
  if (K == 0) {
    not_replayable();
    check(drv().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(y.raw()), 0, static_cast<size_t>(y.size()) * y.itemsize(),
                                stream(device)),
          "cuMemsetD8Async");
    return true;
  }
  if (!lt_type) {
    naive_matmul(device, a, b, y, batch);
    return true;
  }
  if (!lt().ok) fail("matmul", lt().why);
  Operand A = prepare(device, a, batch), B = prepare(device, b, batch);
  // Row-major Y = A B is column-major Y^T = B^T A^T: cuBLASLt's first operand is our B.
  ProductSpec s;
  s.device = device;
  s.dtype = d;
  if (d == float64)
    s.compute = CUBLAS_COMPUTE_64F;
  else if (d == float32 && cuda_matmul_allow_tf32())
    s.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  s.a_col = A.col_major;
  s.b_col = B.col_major;
  s.m = M;
  s.n = N;
  s.k = K;
  s.batches = detail::shape_size(batch);
  s.lda = A.ld;
  s.ldb = B.ld;
  s.batch_a = A.batch_stride;
  s.batch_b = B.batch_stride;
  if (bias) s.epilogue = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const std::vector<long> words = {ptr_bits(B.t), ptr_bits(A.t), ptr_bits(y), bias ? ptr_bits(*bias) : 0};
  for (size_t i = 0; i < 4; ++i) s.align[i] = alignment(words[i]);
  std::shared_ptr<PlannedProduct> plan = planned(s, words);
  if (!plan->found) {
    if (bias) return false;
    fail("matmul", "cuBLASLt has no algorithm for this product");
  }
  // Recorded as a host step: a graph replay runs it between its graph launches.
  if (Recording* r = recording()) r->launches.push_back({Kernel{}, 0, 0, 0, words, plan});
  plan->run(device, words);
  return true;
}

}  // namespace

void matmul(int device, const Tensor& a, const Tensor& b, Tensor& y) { product(device, a, b, y, nullptr, false); }

bool matmul_bias(int device, const Tensor& a, const Tensor& b, const Tensor& bias, bool gelu, Tensor& y) {
  const int64_t n = y.shape.empty() ? 1 : y.shape.back();
  if (bias.dtype != y.dtype || bias.size() != n || (n > 1 && bias.shape.back() != n)) {
    fail("matmul", "epilogue bias must hold one value per column");
  }
  // cuBLASLt reads the bias packed; a strided, broadcast or oddly aligned one is copied (n values).
  Tensor packed = bias;
  int64_t step = 1;
  for (size_t i = 0; i < bias.shape.size(); ++i) {
    if (bias.shape[i] != 1) step = bias.strides[i];
  }
  if ((n > 1 && step != 1) || reinterpret_cast<uintptr_t>(bias.raw()) % 16 != 0) {
    packed = Tensor(bias.shape, bias.dtype);
    allocate_output(device, packed);
    copy_into(device, bias, packed);
  }
  bool done = product(device, a, b, y, &packed, gelu);
  (done ? g_in_cublaslt : g_declined).fetch_add(1, std::memory_order_relaxed);
  return done;
}

EpilogueStats matmul_epilogue_stats() { return {g_in_cublaslt.load(), g_declined.load()}; }

}  // namespace kiln::cuda
