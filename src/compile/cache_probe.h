// Internal views of the compile caches, for tests of the threading contract: they
// show that freed functions drop their entries and that caches stay bounded.
#pragma once

#include <cstddef>

#include "kiln/compile.h"

namespace kiln::compiler {

/* Cache entries alive in the process: every compiled function's, plus any that a
   waiting caller still holds for a moment. */
size_t live_cache_entries();
/* Entries in f's cache now (0 for an empty handle). */
size_t cache_size(const CompiledFunction& f);

}  // namespace kiln::compiler
