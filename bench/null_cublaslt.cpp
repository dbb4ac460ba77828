// A stand-in for libcublasLt.so.13 beside the null driver (null_cuda.cpp): every call succeeds and
// no product runs, so models whose products go to cuBLASLt (bfloat16 weights, prefill) run their
// host path without a GPU too. Only the functions kiln loads (backend/cuda/gemm.cpp).
#include <cublasLt.h>

namespace {
int g_handle;  // every opaque handle points here
template <class T>
cublasStatus_t give(T* out) {
  *out = reinterpret_cast<T>(&g_handle);
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

extern "C" {
cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { return give(h); }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t, cudaDataType_t) {
  return give(d);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                                              size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType, uint64_t, uint64_t, int64_t) {
  return give(l);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void*,
                                                size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) { return give(p); }
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t* results,
                                              int* count) {
  *results = {};
  results->state = CUBLAS_STATUS_SUCCESS;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                              const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t,
                              void*, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
}
