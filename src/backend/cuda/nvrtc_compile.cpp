// Loading and running NVRTC (nvrtc_compile.h).
#include "backend/cuda/nvrtc_compile.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <memory>
#include <type_traits>

#include "backend/cpu/jit_headers.h"
#include "kiln/error.h"

#ifndef KILN_CUDA_LIBDIR
#define KILN_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {

namespace {

struct Nvrtc {
  bool ok = false;
  std::string why;
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
  decltype(&::nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  std::string identity;  // NVRTC's version, part of the disk-cache key
};

// Opens a toolkit library by soname, then from the toolkit kiln was built against.
void* open_toolkit_library(const char* soname) {
  void* h = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = ::dlopen((std::string(KILN_CUDA_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  return h;
}

const Nvrtc& nvrtc() {
  static const Nvrtc* n = [] {
    auto* r = new Nvrtc;
    void* h = open_toolkit_library("libnvrtc.so.13");
    if (!h) h = open_toolkit_library("libnvrtc.so");
    if (!h) {
      r->why = "NVRTC (libnvrtc.so.13) could not be loaded";
      return r;
    }
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      all = all && fn;
    };
    sym(r->version, "nvrtcVersion");
    sym(r->create, "nvrtcCreateProgram");
    sym(r->compile, "nvrtcCompileProgram");
    sym(r->log_size, "nvrtcGetProgramLogSize");
    sym(r->log, "nvrtcGetProgramLog");
    sym(r->cubin_size, "nvrtcGetCUBINSize");
    sym(r->cubin, "nvrtcGetCUBIN");
    sym(r->ptx_size, "nvrtcGetPTXSize");
    sym(r->ptx, "nvrtcGetPTX");
    sym(r->destroy, "nvrtcDestroyProgram");
    sym(r->error_string, "nvrtcGetErrorString");
    if (!all) {
      r->why = "NVRTC lacks functions kiln needs";
      return r;
    }
    int major = 0, minor = 0;
    r->version(&major, &minor);
    r->identity = "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
    r->ok = true;
    return r;
  }();
  return *n;
}

}  // namespace

bool nvrtc_loaded(std::string* why) {
  if (why) *why = nvrtc().why;
  return nvrtc().ok;
}

const std::string& nvrtc_identity() { return nvrtc().identity; }

const NvrtcHeaders& nvrtc_headers() {
  static const NvrtcHeaders h = [] {
    NvrtcHeaders r;
    auto add = [&](const cpu::detail::EmbeddedHeader* files, size_t count) {
      for (size_t i = 0; i < count; ++i) {
        r.names.push_back(files[i].path);
        r.texts.push_back(files[i].text);
      }
    };
    add(cpu::detail::nvrtc_std_headers, cpu::detail::nvrtc_std_header_count);
    add(cpu::detail::embedded_headers, cpu::detail::embedded_header_count);
    return r;
  }();
  return h;
}

std::vector<std::string> nvrtc_options(const std::string& arch, bool fmad) {
  return {"--gpu-architecture=" + arch,          "-std=c++20",           "-default-device",
          fmad ? "--fmad=true" : "--fmad=false", "-DKILN_HD=__device__", "-DKILN_CUDA_DEVICE=1"};
}

std::string nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch, bool fmad) {
  const Nvrtc& n = nvrtc();
  if (!n.ok) fail("cuda", n.why);
  const NvrtcHeaders& h = nvrtc_headers();
  std::vector<const char*> names, texts;
  for (size_t i = 0; i < h.names.size(); ++i) {
    names.push_back(h.names[i].c_str());
    texts.push_back(h.texts[i].c_str());
  }
  nvrtcProgram prog;
  nvrtcResult r = n.create(&prog, source.c_str(), (name + ".cu").c_str(), static_cast<int>(names.size()), texts.data(),
                           names.data());
  if (r != NVRTC_SUCCESS) fail("cuda", "nvrtcCreateProgram: ", n.error_string(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtc().destroy(p); });
  auto opts = nvrtc_options(arch, fmad);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  r = n.compile(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    n.log_size(prog, &size);
    std::string log(size, '\0');
    n.log(prog, log.data());
    fail("cuda", "NVRTC rejected kernel '", name, "' (", n.error_string(r), "):\n", log, "\n--- source ---\n", source);
  }
  const bool ptx = arch.rfind("compute_", 0) == 0;
  size_t size = 0;
  ptx ? n.ptx_size(prog, &size) : n.cubin_size(prog, &size);
  std::string image(size, '\0');
  ptx ? n.ptx(prog, image.data()) : n.cubin(prog, image.data());
  return image;
}

}  // namespace kiln::cuda
