#include "backend/cuda/precompiled_images.h"

namespace kiln::cuda::embedded {

const PrecompiledImage* precompiled_image(const std::string& name, const std::string& source, int major, int minor) {
  const PrecompiledImage* best = nullptr;
  const int have = major * 10 + minor;
  auto capability = [](const PrecompiledImage& im) { return im.major * 10 + im.minor; };
  for (size_t i = 0; i < precompiled_image_count; ++i) {
    const PrecompiledImage& im = precompiled_images[i];
    if (name != im.name || source != im.source) continue;
    const bool runs = im.ptx ? capability(im) <= have : im.major == major && im.minor <= minor;
    if (!runs) continue;
    if (!best || (best->ptx && !im.ptx) || (best->ptx == im.ptx && capability(im) > capability(*best))) best = &im;
  }
  return best;
}

}  // namespace kiln::cuda::embedded
