#include "backend/cuda/nccl.h"

#include <dlfcn.h>

#include "core/config.h"
#include "kiln/error.h"

#ifndef KILN_CUDA_LIBDIR
#define KILN_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {

#ifdef KILN_WITH_NCCL

namespace {

struct Loaded {
  Nccl lib;
  std::string why;  // "" when lib is usable
};

const Loaded& loaded() {
  static const Loaded* l = [] {
    auto* r = new Loaded;  // never destroyed: groups may be released during static teardown
    const std::string named = config::text(config::Knob::nccl_library);
    void* h = nullptr;
    if (!named.empty()) {
      h = ::dlopen(named.c_str(), RTLD_NOW | RTLD_LOCAL);
    } else {
      h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
      if (!h) h = ::dlopen(KILN_CUDA_LIBDIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
      r->why = named.empty() ? "libnccl.so.2 could not be loaded (nor " KILN_CUDA_LIBDIR "/libnccl.so.2)"
                             : "KILN_NCCL_LIBRARY=" + named + " could not be loaded";
      return r;
    }
    bool all = true;
#define KILN_NCCL_FN(name)                                                  \
  r->lib.name = reinterpret_cast<decltype(r->lib.name)>(::dlsym(h, #name)); \
  all = all && r->lib.name;
#include "backend/cuda/nccl_fns.def"
#undef KILN_NCCL_FN
    if (!all) {
      r->why = "the NCCL library lacks functions kiln needs (NCCL 2.13 or newer)";
      return r;
    }
    if (r->lib.ncclGetVersion(&r->lib.version) != ncclSuccess || r->lib.version < 21300)
      r->why = "NCCL " + std::to_string(r->lib.version) + " is too old (kiln needs 2.13 or newer)";
    return r;
  }();
  return *l;
}

}  // namespace

const std::string& nccl_unavailable_reason() { return loaded().why; }

const Nccl& nccl() {
  const Loaded& l = loaded();
  if (!l.why.empty()) fail("distributed", "NCCL is not available: ", l.why);
  return l.lib;
}

void nccl_check(ncclResult_t r, const char* op, const char* what, ncclComm_t comm) {
  if (r == ncclSuccess) return;
  const Nccl& n = nccl();
  const char* last = n.ncclGetLastError(comm);
  fail(op, "NCCL ", what, " failed: ", n.ncclGetErrorString(r), last && *last ? std::string(" (") + last + ")" : "");
}

#else

const std::string& nccl_unavailable_reason() {
  static const std::string why =
      "kiln was built without NCCL's header (nccl.h was not found beside the CUDA toolkit's)";
  return why;
}

#endif

}  // namespace kiln::cuda
