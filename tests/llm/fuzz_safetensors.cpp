// libFuzzer target for the safetensors checkpoint reader (tests/llm/exercise.h).
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_test::exercise_safetensors(data, size);
  return 0;
}
