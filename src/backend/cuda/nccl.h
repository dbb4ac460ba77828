// NCCL opened with dlopen, as cuBLASLt: nothing is linked, so a machine without it runs
// everything but groups of several GPUs, whose creation says why.
#pragma once

#include <string>

#ifdef KILN_WITH_NCCL
#include <nccl.h>
#endif

namespace kiln::cuda {

/* Why NCCL cannot be used, "" when it can (opens it the first time). */
const std::string& nccl_unavailable_reason();

#ifdef KILN_WITH_NCCL
struct Nccl {
#define KILN_NCCL_FN(name) decltype(&::name) name = nullptr;
#include "backend/cuda/nccl_fns.def"
#undef KILN_NCCL_FN
  int version = 0;  // the loaded library's ncclGetVersion
};

/* The loaded library; throws kiln::Error "[distributed] NCCL is not available: <why>". */
const Nccl& nccl();
/* Throws kiln::Error "[op] NCCL <what> failed: <NCCL's messages>" unless r is ncclSuccess. */
void nccl_check(ncclResult_t r, const char* op, const char* what, ncclComm_t comm = nullptr);
#endif

}  // namespace kiln::cuda
