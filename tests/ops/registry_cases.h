// Checks a per-op test table against the op registry's rows of one category, so that a
// new row cannot go untested and a stale case cannot linger.
#pragma once

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>

#include "ops/op_traits.h"

namespace kt {

/* cases: the table (each with .name); known(name): whether the suite's registry lookup has it. */
template <class Cases, class Known>
void expect_cases_match_registry(const Cases& cases, kiln::OpCategory category, Known known, const char* file) {
  std::set<std::string> cased;
  for (const auto& c : cases) {
    cased.insert(c.name);
    EXPECT_TRUE(known(c.name)) << file << " has a case for '" << c.name << "', which has no row of this kind";
  }
  for (const kiln::OpTraits& t : kiln::op_registry())
    if (t.category == category) {
      EXPECT_TRUE(cased.count(t.name)) << "op '" << t.name << "' has no reference in " << file;
    }
}

}  // namespace kt
