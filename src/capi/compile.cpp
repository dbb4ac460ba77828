// C API: compiled closures, the compile mode and the fused-kernel policy.
#include <cstring>
#include <sstream>

#include "capi/capi.h"
#include "kiln/compile.h"

using namespace kiln;
using namespace kiln::capi;

namespace {

// kiln::compile over another closure; the compiled function's std::function
// holds a reference to it, so the inner payload lives as long as the cache.
class CompiledClosure final : public Closure {
 public:
  explicit CompiledClosure(CompiledFunction f) : f_(std::move(f)) {}
  std::vector<Array> call(const std::vector<Array>& inputs) const override { return f_(inputs); }

 private:
  CompiledFunction f_;
};

}  // namespace

static_assert(KILN_FUSED_KERNELS_BACKGROUND == static_cast<int>(FusedKernels::background) &&
                  KILN_FUSED_KERNELS_WAIT == static_cast<int>(FusedKernels::wait) &&
                  KILN_FUSED_KERNELS_OFF == static_cast<int>(FusedKernels::off),
              "kiln_fused_kernels and kiln::FusedKernels disagree");

extern "C" {

int kiln_compile(kiln_closure* out, const kiln_closure fn, bool shapeless) {
  return kiln_compile_named(out, fn, nullptr, shapeless);
}

int kiln_compile_named(kiln_closure* out, const kiln_closure fn, const char* name, bool shapeless) {
  return guard([&] {
    check_out("kiln_compile", out);
    std::shared_ptr<const Closure> inner = get("kiln_compile", fn);
    CompileOptions options;
    options.shapeless = shapeless;
    if (name) options.name = name;
    CompiledFunction f =
        kiln::compile([inner](const std::vector<Array>& inputs) { return inner->call(inputs); }, options);
    std::shared_ptr<const Closure> c = std::make_shared<const CompiledClosure>(std::move(f));
    if (*out)
      (*out)->c = std::move(c);
    else
      *out = new kiln_closure_s{std::move(c)};
  });
}

int kiln_export_to_dot(char** out, const kiln_vector_array outputs) {
  return guard([&] {
    check_out("kiln_export_to_dot", out);
    std::ostringstream os;
    export_to_dot(os, get("kiln_export_to_dot", outputs));
    *out = c_string(os.str());
  });
}

int kiln_set_compile_mode(kiln_compile_mode mode) {
  return guard([&] {
    int m = enum_value(mode);
    if (m < KILN_COMPILE_DISABLED || m > KILN_COMPILE_ENABLED) fail("kiln_set_compile_mode", "invalid mode ", m);
    set_compile_mode(static_cast<CompileMode>(m));
  });
}

int kiln_get_compile_mode(kiln_compile_mode* out) {
  return guard([&] {
    check_out("kiln_get_compile_mode", out);
    *out = static_cast<kiln_compile_mode>(compile_mode());
  });
}

int kiln_set_fused_kernels(kiln_fused_kernels policy) {
  return guard([&] {
    int p = enum_value(policy);
    if (p < KILN_FUSED_KERNELS_BACKGROUND || p > KILN_FUSED_KERNELS_OFF) {
      fail("kiln_set_fused_kernels", "invalid policy ", p, " (0 background, 1 wait, 2 off)");
    }
    set_fused_kernels(static_cast<FusedKernels>(p));
  });
}

int kiln_get_fused_kernels(kiln_fused_kernels* out) {
  return guard([&] {
    check_out("kiln_get_fused_kernels", out);
    *out = static_cast<kiln_fused_kernels>(fused_kernels());
  });
}

}  // extern "C"
