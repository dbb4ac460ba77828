// kiln's configuration: the KILN_* environment variables it reads, each with its type,
// default and help (declared in src/core/config.def; `kiln info` prints them all).
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct ConfigKnob {
  std::string name;  // "KILN_NUM_THREADS"
  std::string type;  // flag, integer, power of two, choice, text or path
  std::string accepts;  // what a value may be, in words
  std::string fallback;  // the default
  std::string value;  // as set in the environment; empty when unset
  std::string problem;  // why `value` is not accepted; empty when it is
  std::string help;
};

/* Every KILN_* variable kiln reads, with its value now. */
std::vector<ConfigKnob> config_knobs();
/* Throws kiln::Error naming the first KILN_* variable whose value is not accepted. kiln
   also throws it where it reads the variable. */
void check_config();
/* KILN_* variables set in the environment that kiln does not read (a typo, or a knob
   since removed), each as NAME=value. */
std::vector<std::string> unknown_config_variables();

}  // namespace kiln
