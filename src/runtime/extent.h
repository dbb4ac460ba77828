// Active extent: decides from shapes whether the first n rows of a bucket can be
// computed alone (every op keeps row i of its outputs a function of row i of its
// row-carrying inputs), and which reshape targets must follow the live rows.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "runtime/interp.h"

namespace kiln::runtime {

struct ExtentAnalysis {
  std::string blocker;  // "" when safe, else where and why rows mix
  std::set<const GraphNode*> follow_rows;  // reshape/broadcast_to targets to adjust
  std::vector<bool> output_rows;  // outputs whose leading axis is the row axis
};

/* inputs: the graph's inputs at bucket shapes (placeholders are fine); rows[i]: input i
   carries rows; bucket: their leading size. leaf resolves params and constants. */
ExtentAnalysis analyze_extent(const Graph& file, const std::vector<Array>& inputs, const std::vector<bool>& rows,
                              int64_t bucket, const std::function<Array(const GraphNode&)>& leaf);

/* True when the extent analysis knows how `op` treats rows (from its registry category
   or a rule of its own); tests check this for every op kgraph can spell. */
bool has_extent_rule(const std::string& op);

}  // namespace kiln::runtime
