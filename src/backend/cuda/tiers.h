// Tiers on the GPU (docs/codegen.md, "Tiers"): while NVRTC compiles a fused elementwise
// region's kernel on a background pool, the region runs through the precompiled interpreter
// (kernels/interp.cuh); once the kernel is ready the region launches it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compile_pool.h"
#include "backend/cuda/nvrtc.h"
#include "compile/fused.h"
#include "compile/kernel_slots.h"
#include "compile/tier.h"
#include "core/tensor.h"

namespace kiln::cuda {

/* Thrown by a region's kernel lookup under the background policy when the kernel is not ready:
   nothing has been launched, and the caller runs the region through the interpreter. */
struct KernelPending {};

/* Whether the fused region running on this thread asks for its kernels in the background
   (KernelPending) rather than waiting for NVRTC. */
bool& background_region();

/* The kernel of `make_source()` for a region's slot `key` when it is ready: in the program's
   slots, in memory or on disk, or compiled by the background compile that the slots hold for
   it; else queues that compile and throws KernelPending. `ready_ns`: when it became ready. */
template <class Key, class MakeSource>
Kernel background_kernel(int device, const compiler::KernelSlots& slots, const Key& key, const MakeSource& make_source,
                         int64_t* ready_ns);

/* The interpreter's kernel for the device; empty where kiln has no image the device runs. */
const Kernel& interp_kernel(int device);

/* Whether the interpreter takes the region p on the device (its ops and dtypes; an image). */
bool interpretable(int device, const compiler::FusedProgram& p);
/* Runs the region p (outputs allocated, exactly `shape`; inputs broadcast to it) through the
   interpreter; false where it cannot (an op or dtype it lacks, axes past args::kMaxAxes that
   do not merge, no image for the device). Marks a recording under way as interim: a CUDA graph
   is made only of a call whose regions all ran their kernels. */
bool run_interpreted(int device, const compiler::FusedProgram& p, const Shape& shape,
                     const std::vector<detail::Tensor>& ins, const std::vector<detail::Tensor>& outs);

namespace tiering {

// A background compile a program's slots hold for one of its kernels.
template <class Key>
struct PendingKey {
  Key key;
  bool operator==(const PendingKey&) const = default;
  size_t hash() const { return key.hash() * 31 + 7; }
};
struct PendingKernel {
  std::shared_ptr<cpu::CompileTicket> ticket;
  mutable std::atomic<bool> reported{false};  // a rejected source is said once
};
/* The GPU's compile pool (NVRTC; each job's symbol is its device). */
cpu::CompilePool& gpu_compile_pool();
/* The finished ticket's kernel, or false (its error said once on stderr). */
bool take_compiled(const PendingKernel& pending, Kernel* out, int64_t* ready_ns);

}  // namespace tiering

template <class Key, class MakeSource>
Kernel background_kernel(int device, const compiler::KernelSlots& slots, const Key& key, const MakeSource& make_source,
                         int64_t* ready_ns) {
  const tiering::PendingKey<Key> pending{key};
  Kernel k;
  if (const void* p = slots.find(pending)) {
    if (!tiering::take_compiled(*static_cast<const tiering::PendingKernel*>(p), &k, ready_ns)) throw KernelPending{};
    return k;
  }
  const std::string source = make_source();
  if (cached_kernel(device, "kiln_kernel", source, &k)) {
    *ready_ns = compiler::now_ns();  // a previous process compiled it
    return k;
  }
  // A full queue gives no ticket: the next call asks again.
  if (auto t = tiering::gpu_compile_pool().request(source, std::to_string(device))) {
    auto entry = std::make_shared<tiering::PendingKernel>();
    entry->ticket = std::move(t);
    slots.put(pending, std::move(entry));
  }
  throw KernelPending{};
}

}  // namespace kiln::cuda
