// A stand-in for libcuda.so.1 that runs no kernels: one "device" (sm_90, 132 SMs) whose
// memory is host memory. With it on LD_LIBRARY_PATH, kiln's own share of a GPU call's
// host time (tracing, caches, allocation, argument packing) can be profiled on a machine
// without a GPU. Results computed through it are meaningless; only timings are of use,
// and, with KILN_NULL_CUDA_LOG=<file>, the list of launches (a hash of the module's image,
// grid, block, shared bytes and the parameter's first word) and of cross-stream waits
// ("wait"), to compare two builds.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string_view>

namespace {

int g_handle;  // every opaque handle points here

template <class T>
T handle() {
  return reinterpret_cast<T>(&g_handle);
}

CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult driver_version(int* v) { return *v = 13000, CUDA_SUCCESS; }
CUresult device_count(int* n) { return *n = 1, CUDA_SUCCESS; }
CUresult device_get(CUdevice* d, int) { return *d = 0, CUDA_SUCCESS; }
CUresult device_attribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR               ? 9
       : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR             ? 0
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT                 ? 132
       : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN    ? 232448
       : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR ? 233472
       : a == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR       ? 2048
       : a == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE                        ? 52428800
                                                                       : 0;
  return CUDA_SUCCESS;
}
CUresult device_name(char* name, int len, CUdevice) {
  std::strncpy(name, "null device (no kernels run)", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult ctx_retain(CUcontext* c, CUdevice) { return *c = handle<CUcontext>(), CUDA_SUCCESS; }
CUresult ctx_set(CUcontext) { return CUDA_SUCCESS; }
CUresult no_op() { return CUDA_SUCCESS; }
CUresult error_string(CUresult, const char** s) { return *s = "null driver", CUDA_SUCCESS; }
CUresult mem_alloc(CUdeviceptr* p, size_t bytes) {
  void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0, bytes);  // what "kernels" leave is then the same from run to run
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult mem_free(CUdeviceptr p) { return std::free(reinterpret_cast<void*>(p)), CUDA_SUCCESS; }
CUresult mem_info(size_t* free_bytes, size_t* total) {
  *free_bytes = *total = size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult total_mem(size_t* total, CUdevice) { return *total = size_t{80} << 30, CUDA_SUCCESS; }
CUresult htod(CUdeviceptr d, const void* h, size_t n, CUstream) {
  return std::memcpy(reinterpret_cast<void*>(d), h, n), CUDA_SUCCESS;
}
CUresult dtoh(void* h, CUdeviceptr d, size_t n, CUstream) {
  return std::memcpy(h, reinterpret_cast<void*>(d), n), CUDA_SUCCESS;
}
CUresult dtod(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  return std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n), CUDA_SUCCESS;
}
CUresult memset8(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  return std::memset(reinterpret_cast<void*>(d), v, n), CUDA_SUCCESS;
}
// Streams must differ: kiln orders work across them by their handles.
CUresult stream_create(CUstream* s, unsigned) { return *s = reinterpret_cast<CUstream>(new int), CUDA_SUCCESS; }
CUresult event_create(CUevent* e, unsigned) { return *e = handle<CUevent>(), CUDA_SUCCESS; }
CUresult elapsed(float* ms, CUevent, CUevent) { return *ms = 0.0f, CUDA_SUCCESS; }
std::mutex g_mu;  // serializes the launch log

// The image's length: a cubin (ELF) ends with its section header table, PTX with a NUL.
size_t image_bytes(const void* image) {
  const auto* p = static_cast<const unsigned char*>(image);
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return std::strlen(static_cast<const char*>(image));
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&shentsize, p + 0x3a, 2);
  std::memcpy(&shnum, p + 0x3c, 2);
  return static_cast<size_t>(shoff) + size_t{shentsize} * shnum;
}

// A module is named by a hash of its image, and so is its function, so a log of launches
// says which kernel ran.
CUresult module_load(CUmodule* m, const void* image) {
  const size_t h = std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(image), image_bytes(image)));
  *m = reinterpret_cast<CUmodule>(h | 1);  // never null
  return CUDA_SUCCESS;
}
CUresult module_function(CUfunction* f, CUmodule m, const char*) {
  return *f = reinterpret_cast<CUfunction>(m), CUDA_SUCCESS;
}

FILE* launch_log() {
  static FILE* f = [] {
    const char* path = std::getenv("KILN_NULL_CUDA_LOG");
    return path ? std::fopen(path, "w") : nullptr;
  }();
  return f;
}
CUresult launch(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned shared,
                CUstream, void** params, void**) {
  if (FILE* log = launch_log()) {
    long first = 0;
    if (params && params[0]) std::memcpy(&first, params[0], sizeof first);
    std::lock_guard<std::mutex> lock(g_mu);
    std::fprintf(log, "%zx %u %u %u %ld\n", reinterpret_cast<size_t>(f), gx, bx, shared, first);
  }
  return CUDA_SUCCESS;
}
CUresult stream_wait(CUstream, CUevent, unsigned) {
  if (FILE* log = launch_log()) {
    std::lock_guard<std::mutex> lock(g_mu);
    std::fprintf(log, "wait\n");
  }
  return CUDA_SUCCESS;
}
CUresult occupancy(int* blocks, CUfunction, int, size_t) { return *blocks = 4, CUDA_SUCCESS; }
CUresult graph_create(CUgraph* g, unsigned) { return *g = handle<CUgraph>(), CUDA_SUCCESS; }
CUresult graph_add_kernel(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*) {
  return *n = handle<CUgraphNode>(), CUDA_SUCCESS;
}
CUresult graph_instantiate(CUgraphExec* e, CUgraph, unsigned long long) {
  return *e = handle<CUgraphExec>(), CUDA_SUCCESS;
}
CUresult graph_add_child(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t, CUgraph) {
  return *n = handle<CUgraphNode>(), CUDA_SUCCESS;
}
CUresult end_capture(CUstream, CUgraph* g) { return *g = handle<CUgraph>(), CUDA_SUCCESS; }
CUresult not_supported() { return CUDA_ERROR_NOT_SUPPORTED; }  // a captured graph's nodes: none to look at

struct Entry {
  std::string_view name;
  void* fn;
};
#define KILN_NULL(name, fn) \
  Entry { #name, reinterpret_cast < void*>(&fn) }
const Entry kEntries[] = {
    KILN_NULL(cuInit, init),
    KILN_NULL(cuDriverGetVersion, driver_version),
    KILN_NULL(cuDeviceGetCount, device_count),
    KILN_NULL(cuDeviceGet, device_get),
    KILN_NULL(cuDeviceGetAttribute, device_attribute),
    KILN_NULL(cuDeviceTotalMem, total_mem),
    KILN_NULL(cuDeviceGetName, device_name),
    KILN_NULL(cuDevicePrimaryCtxRetain, ctx_retain),
    KILN_NULL(cuCtxSetCurrent, ctx_set),
    KILN_NULL(cuCtxSynchronize, no_op),
    KILN_NULL(cuGetErrorString, error_string),
    KILN_NULL(cuMemAlloc, mem_alloc),
    KILN_NULL(cuMemFree, mem_free),
    KILN_NULL(cuMemGetInfo, mem_info),
    KILN_NULL(cuMemcpyHtoDAsync, htod),
    KILN_NULL(cuMemcpyDtoHAsync, dtoh),
    KILN_NULL(cuMemcpyDtoDAsync, dtod),
    KILN_NULL(cuMemsetD8Async, memset8),
    KILN_NULL(cuStreamCreate, stream_create),
    KILN_NULL(cuStreamSynchronize, no_op),
    KILN_NULL(cuStreamWaitEvent, stream_wait),
    KILN_NULL(cuEventCreate, event_create),
    KILN_NULL(cuEventRecord, no_op),
    KILN_NULL(cuEventDestroy, no_op),
    KILN_NULL(cuEventElapsedTime, elapsed),
    KILN_NULL(cuModuleLoadData, module_load),
    KILN_NULL(cuModuleGetFunction, module_function),
    KILN_NULL(cuModuleUnload, no_op),
    KILN_NULL(cuFuncGetAttribute, not_supported),
    KILN_NULL(cuFuncSetAttribute, no_op),
    KILN_NULL(cuLaunchKernel, launch),
    KILN_NULL(cuOccupancyMaxActiveBlocksPerMultiprocessor, occupancy),
    KILN_NULL(cuGraphCreate, graph_create),
    KILN_NULL(cuGraphAddKernelNode, graph_add_kernel),
    KILN_NULL(cuGraphInstantiateWithFlags, graph_instantiate),
    KILN_NULL(cuGraphExecKernelNodeSetParams, no_op),
    KILN_NULL(cuGraphLaunch, no_op),
    KILN_NULL(cuGraphExecDestroy, no_op),
    KILN_NULL(cuGraphDestroy, no_op),
    KILN_NULL(cuGraphAddChildGraphNode, graph_add_child),
    KILN_NULL(cuGraphExecChildGraphNodeSetParams, no_op),
    KILN_NULL(cuGraphGetNodes, not_supported),
    KILN_NULL(cuGraphNodeGetType, not_supported),
    KILN_NULL(cuGraphKernelNodeGetParams, not_supported),
    KILN_NULL(cuGraphKernelNodeCopyAttributes, not_supported),
    KILN_NULL(cuStreamBeginCapture, no_op),
    KILN_NULL(cuStreamEndCapture, end_capture),
};

}  // namespace

// Functions that take arguments are called through a no_op taking none: the x86-64 and
// AArch64 calling conventions leave unread arguments harmless.
extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult* status) {
  for (const Entry& e : kEntries) {
    if (e.name == symbol) {
      *fn = e.fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *fn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
