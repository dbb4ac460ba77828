// Sharding arrays over a group, and the column- and row-parallel linear layers built from it.
#include "kiln/distributed.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::distributed {

Array shard(const Array& x, const Group& group, int axis) {
  const int rank = x.ndim();
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) fail("shard", "axis ", axis, " is out of range for an array of rank ", rank);
  const int64_t length = x.shape(ax), n = group.size();
  if (length % n != 0) fail("shard", "axis ", axis, " of length ", length, " does not divide over ", n, " ranks");
  if (n == 1) return x;
  const int64_t part = length / n;
  Shape start(static_cast<size_t>(rank), 0), stop = x.shape();
  start[static_cast<size_t>(ax)] = part * group.rank();
  stop[static_cast<size_t>(ax)] = part * (group.rank() + 1);
  return slice(x, start, stop);
}

Array Linear::product(const Array& x) const {
  return quantized() ? quantized_matmul(x, w, *scales, *biases, true, group_size, bits, activations)
                     : matmul(x, transpose(w));
}

Array Linear::operator()(const Array& x) const {
  const Array y = product(x);
  return bias ? y + *bias : y;
}

AllToShardedLinear::AllToShardedLinear(const Linear& whole, const Group& group) : local_(whole) {
  // Whole rows of W, and of the scales and biases of a quantized W.
  local_.w = shard(whole.w, group, 0);
  if (whole.quantized()) {
    local_.scales = shard(*whole.scales, group, 0);
    local_.biases = shard(*whole.biases, group, 0);
  }
  if (whole.bias) local_.bias = shard(*whole.bias, group, 0);
}

ShardedToAllLinear::ShardedToAllLinear(const Linear& whole, const Group& group) : local_(whole), group_(group) {
  // Columns of W; quantized, whole groups of columns: the packed words and the groups' scales and biases.
  if (whole.quantized()) {
    const int64_t groups = whole.scales->shape(-1);
    if (groups % group.size() != 0)
      fail("ShardedToAllLinear", "the ", groups, " groups of ", whole.group_size, " input features do not divide over ",
           group.size(), " ranks");
    local_.scales = shard(*whole.scales, group, 1);
    local_.biases = shard(*whole.biases, group, 1);
  }
  local_.w = shard(whole.w, group, 1);
}

Array ShardedToAllLinear::operator()(const Array& x) const {
  const Array y = all_sum(local_.product(x), group_);  // the bias once, after the ranks' partial sums
  return local_.bias ? y + *local_.bias : y;
}

}  // namespace kiln::distributed
