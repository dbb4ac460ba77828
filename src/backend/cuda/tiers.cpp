// The GPU's interim tier: the interpreter's images and launches, and NVRTC compiles in the
// background (tiers.h).
#include "backend/cuda/tiers.h"

#include <cstdio>
#include <mutex>

#include "backend/cpu/strided.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/precompiled_images.h"
#include "backend/cuda/interp_program.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/struct_launch.h"

namespace kiln::cuda {

bool& background_region() {
  thread_local bool on = false;
  return on;
}

namespace tiering {

cpu::CompilePool& gpu_compile_pool() {
  static cpu::CompilePool* pool = [] {
    (void)driver();  // loaded first: the exit hook of the pool runs before the driver's state goes
    return &cpu::make_process_pool(
        [](const std::string& source, const std::string& device, cpu::detail::ProcessCanceller*, int) {
          // NVRTC runs in this process and cannot be stopped: a cancelled job ends when it is done.
          Kernel k = kernel(std::stoi(device), source, "kiln_kernel", [&] { return source; });
          return cpu::JitKernel{reinterpret_cast<void*>(k.fn), k.module};
        });
  }();
  return *pool;
}

bool take_compiled(const PendingKernel& pending, Kernel* out, int64_t* ready_ns) {
  if (!pending.ticket->done()) return false;
  const cpu::CompileJob& r = pending.ticket->result();
  if (!r.kernel) {
    if (!r.error.empty() && r.error.rfind("cancelled", 0) != 0 && !pending.reported.exchange(true))
      std::fprintf(stderr, "kiln: %s\nkiln: that fused region keeps running through the interpreter\n",
                   r.error.c_str());
    return false;
  }
  out->fn = reinterpret_cast<CUfunction>(r.kernel.fn);
  out->module = std::static_pointer_cast<Module>(r.kernel.library);
  *ready_ns = r.finished_ns;
  return true;
}

}  // namespace tiering

namespace {

// A region's interpreter program, kept in its slots (nullopt: not interpretable).
struct InterpKey {
  bool operator==(const InterpKey&) const = default;
  size_t hash() const { return 0x1e7e; }
};

const std::optional<InterpProgram>& program_of(const compiler::FusedProgram& p) {
  if (const void* k = p.gpu_kernels.find(InterpKey{})) return *static_cast<const std::optional<InterpProgram>*>(k);
  auto made = std::make_shared<const std::optional<InterpProgram>>(interp_program(p));
  p.gpu_kernels.put(InterpKey{}, made);
  return *made;
}

}  // namespace

const Kernel& interp_kernel(int device) {
  static std::mutex mu;  // guards kernels
  static auto* kernels = new std::vector<std::unique_ptr<Kernel>>;  // by device; never freed (used at exit)
  std::lock_guard<std::mutex> lock(mu);
  if (kernels->size() <= static_cast<size_t>(device)) kernels->resize(static_cast<size_t>(device) + 1);
  auto& k = (*kernels)[static_cast<size_t>(device)];
  if (!k) {
    k = std::make_unique<Kernel>();
    const DeviceInfo& info = device_info(device);
    if (const auto* im =
            embedded::precompiled_image(embedded::kInterpKernel, embedded::kInterpSource, info.major, info.minor))
      *k = loaded_image(device, std::string("interp|") + im->arch, embedded::kInterpKernel, im->bytes);
  }
  return *k;
}

bool interpretable(int device, const compiler::FusedProgram& p) {
  return program_of(p).has_value() && interp_kernel(device).fn;
}

bool run_interpreted(int device, const compiler::FusedProgram& p, const Shape& shape,
                     const std::vector<kiln::detail::Tensor>& ins, const std::vector<kiln::detail::Tensor>& outs) {
  const std::optional<InterpProgram>& prog = program_of(p);
  if (!prog) return false;
  const Kernel& k = interp_kernel(device);
  if (!k.fn) return false;
  std::vector<Strides> strides;
  for (auto& o : outs) strides.push_back(o.strides);
  for (auto& t : ins) strides.push_back(kiln::detail::broadcast_strides(t, shape));
  Shape ms = shape;
  kiln::detail::merge_axes_in_place(ms, strides);
  if (ms.size() > static_cast<size_t>(args::kMaxAxes)) return false;
  args::Interp a{};
  a.n = kiln::detail::shape_size(shape);
  a.nd = static_cast<long>(ms.size());
  for (size_t d = 0; d < ms.size(); ++d) a.shape[d] = ms[d];
  a.words = static_cast<long>(prog->words.size());
  for (size_t w = 0; w < prog->words.size(); ++w) a.program[w] = prog->words[w];
  for (size_t o = 0; o < strides.size(); ++o) {
    for (size_t d = 0; d < ms.size(); ++d) a.operand[o].strides[d] = strides[o][d];
    a.operand[o].dtype = prog->dtypes[o];
    a.operand[o].data = data_ptr(o < outs.size() ? outs[o] : ins[o - outs.size()]);
  }
  if (Recording* r = recording()) r->interim = true;
  compiler::note_region(false, 0);
  if (a.n > 0) launch(device, k, grid_for(device, a.n, 256), 256, struct_words(a));
  return true;
}

}  // namespace kiln::cuda
