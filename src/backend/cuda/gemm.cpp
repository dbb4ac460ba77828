#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <atomic>

#include "backend/cuda/codegen.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/runtime.h"
#include "compile/codegen_util.h"
#include "kiln/device.h"
#include "kiln/error.h"

#ifndef KILN_CUDA_LIBDIR
#define KILN_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {

using detail::Tensor;

namespace {

struct Lt {
  bool ok = false;
  std::string why;
#define KILN_LT_FN(name) decltype(&::name) name = nullptr;
#define KILN_LT_FNS                               \
  KILN_LT_FN(cublasLtCreate)                      \
  KILN_LT_FN(cublasLtMatmulDescCreate)            \
  KILN_LT_FN(cublasLtMatmulDescDestroy)           \
  KILN_LT_FN(cublasLtMatmulDescSetAttribute)      \
  KILN_LT_FN(cublasLtMatrixLayoutCreate)          \
  KILN_LT_FN(cublasLtMatrixLayoutDestroy)         \
  KILN_LT_FN(cublasLtMatrixLayoutSetAttribute)    \
  KILN_LT_FN(cublasLtMatmulPreferenceCreate)      \
  KILN_LT_FN(cublasLtMatmulPreferenceDestroy)     \
  KILN_LT_FN(cublasLtMatmulPreferenceSetAttribute) \
  KILN_LT_FN(cublasLtMatmulAlgoGetHeuristic)      \
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
#define KILN_LT_FN(name)                                                     \
  r->name = reinterpret_cast<decltype(r->name)>(::dlsym(h, #name));          \
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
    op.ld = op.col_major ? std::max<int64_t>(cs, std::max<int64_t>(rows, 1)) : std::max<int64_t>(rs, std::max<int64_t>(cols, 1));
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
  std::vector<long> meta(36, 0);
  meta[0] = y.size();
  meta[1] = M;
  meta[2] = N;
  meta[3] = K;
  meta[4] = static_cast<long>(bs.size());
  for (size_t d = 0; d < bs.size(); ++d) {
    meta[5 + d] = bs[d];
    meta[13 + d] = bsa[d];
    meta[21 + d] = bsb[d];
  }
  meta[29] = a.strides[ra - 2];
  meta[30] = a.strides[ra - 1];
  meta[31] = b.strides[rb - 2];
  meta[32] = b.strides[rb - 1];
  meta[33] = static_cast<long>(reinterpret_cast<uintptr_t>(a.raw()));
  meta[34] = static_cast<long>(reinterpret_cast<uintptr_t>(b.raw()));
  meta[35] = static_cast<long>(reinterpret_cast<uintptr_t>(y.raw()));
  std::string src = instantiate(std::string("kiln_matmul<") + compiler::cpp_type(y.dtype) + ">", 36);
  CUfunction f = kernel(device, src, "kiln_kernel", [&] { return src; });
  void* args[] = {meta.data()};
  launch(device, f, grid_for(device, y.size(), 128), 128, args);
}

std::atomic<uint64_t> g_in_cublaslt{0}, g_declined{0};  // atomic: counted from any thread

// y = a @ b; with `bias` (packed, y's dtype, on the device) cuBLASLt's epilogue adds it to
// each column of y and, with `gelu`, applies GELU. False (nothing done) when an epilogue was
// asked for and cuBLASLt cannot run it.
bool product(int device, const Tensor& a, const Tensor& b, Tensor& y, const Tensor* bias, bool gelu) {
  if (y.size() == 0) return true;
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  Shape batch(y.shape.begin(), y.shape.end() - 2);
  const int64_t batches = detail::shape_size(batch);
  CUstream st = stream(device);
  Dtype d = y.dtype;
  const bool lt_type = d == float16 || d == bfloat16 || d == float32 || d == float64;
  if (bias && (K == 0 || !lt_type)) return false;
  if (K == 0) {
    check(drv().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(y.raw()), 0, static_cast<size_t>(y.size()) * y.itemsize(), st),
          "cuMemsetD8Async");
    return true;
  }
  if (!lt_type) {
    naive_matmul(device, a, b, y, batch);
    return true;
  }
  const Lt& L = lt();
  if (!L.ok) fail("matmul", L.why);
  Operand A = prepare(device, a, batch), B = prepare(device, b, batch);
  // Row-major Y = A B is column-major Y^T = B^T A^T: cuBLASLt's first operand is our B.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  if (d == float64) {
    compute = CUBLAS_COMPUTE_64F;
    scale = CUDA_R_64F;
  } else if (d == float32 && cuda_matmul_allow_tf32()) {
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  cudaDataType_t dt = data_type(d);
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Cleanup {
    const Lt& L;
    cublasLtMatmulDesc_t& desc;
    cublasLtMatrixLayout_t &la, &lb, &lc;
    cublasLtMatmulPreference_t& pref;
    ~Cleanup() {
      if (pref) L.cublasLtMatmulPreferenceDestroy(pref);
      if (la) L.cublasLtMatrixLayoutDestroy(la);
      if (lb) L.cublasLtMatrixLayoutDestroy(lb);
      if (lc) L.cublasLtMatrixLayoutDestroy(lc);
      if (desc) L.cublasLtMatmulDescDestroy(desc);
    }
  } cleanup{L, desc, la, lb, lc, pref};
  lt_check(L.cublasLtMatmulDescCreate(&desc, compute, scale), "descriptor");
  cublasOperation_t ta = B.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = A.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_check(L.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  lt_check(L.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (bias) {
    // cuBLASLt's D is our Y^T (N x M, column-major): its rows are Y's columns, so the bias
    // vector (one value per row of D) is indexed by Y's last axis. Its dtype defaults to
    // D's (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE unset), its batch stride to 0 (one vector
    // for every batch). The pointer is set before the heuristic, which checks its alignment.
    uint32_t epilogue = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    const void* bias_ptr = bias->raw();
    if (L.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) !=
            CUBLAS_STATUS_SUCCESS ||
        L.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr) !=
            CUBLAS_STATUS_SUCCESS) {
      return false;
    }
  }
  // Stored shapes, column-major: our B is (N x K) when row-major, else (K x N) transposed.
  auto layout = [&](cublasLtMatrixLayout_t& l, uint64_t rows, uint64_t cols, int64_t ld, int64_t bstride) {
    lt_check(L.cublasLtMatrixLayoutCreate(&l, dt, rows, cols, ld), "layout");
    int32_t count = static_cast<int32_t>(batches);
    lt_check(L.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch");
    lt_check(L.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &bstride, sizeof bstride),
             "batch stride");
  };
  if (B.col_major) layout(la, static_cast<uint64_t>(K), static_cast<uint64_t>(N), B.ld, B.batch_stride);
  else layout(la, static_cast<uint64_t>(N), static_cast<uint64_t>(K), B.ld, B.batch_stride);
  if (A.col_major) layout(lb, static_cast<uint64_t>(M), static_cast<uint64_t>(K), A.ld, A.batch_stride);
  else layout(lb, static_cast<uint64_t>(K), static_cast<uint64_t>(M), A.ld, A.batch_stride);
  layout(lc, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N, M * N);
  constexpr size_t kWorkspace = size_t{32} << 20;
  lt_check(L.cublasLtMatmulPreferenceCreate(&pref), "preference");
  uint64_t ws = kWorkspace;
  lt_check(L.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "workspace");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasLtHandle_t h = handle(device);
  cublasStatus_t hs = L.cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &result, &found);
  if (bias && (hs != CUBLAS_STATUS_SUCCESS || found == 0)) return false;
  lt_check(hs, "heuristic");
  if (found == 0) fail("matmul", "cuBLASLt has no algorithm for this product");
  auto workspace = allocate(device, std::max<size_t>(result.workspaceSize, 1));
  float alpha32 = 1, beta32 = 0;
  double alpha64 = 1, beta64 = 0;
  const void* alpha = d == float64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = d == float64 ? static_cast<const void*>(&beta64) : &beta32;
  lt_check(L.cublasLtMatmul(h, desc, alpha, B.t.raw(), la, A.t.raw(), lb, beta, y.raw(), lc, y.raw(), lc, &result.algo,
                            workspace->data(), result.workspaceSize, st),
           "matmul");
  // The workspace returns to this stream's pool; later work on the stream runs after this product.
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
