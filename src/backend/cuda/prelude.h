// Standard headers for NVRTC (see prelude.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

/* (include name, text) of each standard header the shared kernel headers use. */
const std::vector<std::pair<std::string, std::string>>& prelude_headers();

}  // namespace kiln::cuda
