// libFuzzer target for the GGUF reader (tests/llm/exercise.h says what it does per input).
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_test::exercise_gguf(data, size);
  return 0;
}
