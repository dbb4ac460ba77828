// The configuration registry: every KILN_* environment variable is a row of config.def,
// and kiln reads them only through these functions (typed, checked, with the default).
#pragma once

#include <string>
#include <vector>

namespace kiln::config {

enum class Knob {
#define KILN_KNOB(id, ...) id,
#include "core/config.def"
#undef KILN_KNOB
};

enum class Type { flag, integer, power_of_two, choice, text, path };

struct Spec {
  const char* name;  // "KILN_NUM_THREADS"
  Type type;
  const char* fallback;  // the default, as it would be written in the environment
  long lo, hi;  // integer and power_of_two: the accepted range
  const char* choices;  // choice: "a|b|c"
  const char* help;
};

/* Every knob, in the order of config.def. */
const std::vector<Spec>& specs();
const Spec& spec(Knob k);

/* The knob's value: the default when unset or empty. A value the knob does not accept
   throws kiln::Error "[config] KILN_NUM_THREADS='abc' is not accepted: <what it accepts>". */
bool flag(Knob k);
long integer(Knob k);  // integer and power_of_two knobs
std::string choice(Knob k);  // one of the choices
std::string text(Knob k);  // text and path knobs

/* What the knob accepts, in words ("an integer from 0 to 4096"). */
std::string accepts(const Spec& s);
/* Why `value` is not accepted by s; empty when it is. */
std::string problem(const Spec& s, const std::string& value);
/* The variable as set in the environment (empty when unset). */
std::string raw(const Spec& s);

/* A variable that is not kiln's own (HOME, TMPDIR); empty when unset. */
std::string system_variable(const char* name);

}  // namespace kiln::config
