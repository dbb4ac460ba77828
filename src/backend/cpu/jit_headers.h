// Headers that generated kernel source may include, embedded into the library at build time
// (see embed_jit_headers.cmake) so that an installed kiln needs no source tree.
#pragma once

#include <cstddef>

namespace kiln::cpu::detail {

struct EmbeddedHeader {
  const char* path;  // as generated source includes it, e.g. "kiln/half.h"
  const char* text;  // the file's contents
};

extern const EmbeddedHeader embedded_headers[];
extern const size_t embedded_header_count;

/* NVRTC's stand-ins for the standard headers the embedded ones include (it has no C++
   library), by the name they replace, e.g. "cmath": for NVRTC alone, never the CPU JIT. */
extern const EmbeddedHeader nvrtc_std_headers[];
extern const size_t nvrtc_std_header_count;

}  // namespace kiln::cpu::detail
