// NVRTC itself: loaded with dlopen, handed every embedded header, run with kiln's options.
// Shared by the run-time module cache (nvrtc.cpp) and the build-time tool that precompiles
// the elementwise interpreter (build/precompile_interp.cpp), so both compile alike.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

/* Whether NVRTC could be loaded; `why` says why not. */
bool nvrtc_loaded(std::string* why = nullptr);
/* "nvrtc <major>.<minor>", part of every cache key. */
const std::string& nvrtc_identity();
/* The options of every kernel for `arch` ("sm_90", or "compute_90" for PTX). No contraction
   into FMAs unless `fmad`, as on the CPU, so results stay within rounding of the CPU's. */
std::vector<std::string> nvrtc_options(const std::string& arch, bool fmad);
/* A cubin of `source` (a PTX text where `arch` is virtual, "compute_XY"). Throws kiln::Error
   ("[cuda] NVRTC rejected kernel ...") with NVRTC's log. */
std::string nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch, bool fmad);
/* Every header generated source may include, by include name: NVRTC's standard headers and
   the embedded files. */
struct NvrtcHeaders {
  std::vector<std::string> names, texts;
};
const NvrtcHeaders& nvrtc_headers();

}  // namespace kiln::cuda
