// CPU kernels for sorting and selection along the last axis: a task of rows per thread,
// each row copied out with its positions and ordered by the standard algorithms (a full
// sort, nth_element, or partial_sort's heap for a few largest).
#include <algorithm>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/copy.h"
#include "core/thread_pool.h"
#include "ops/sort.h"

namespace kiln {

namespace {

using detail::Tensor;

/* numpy.sort's order: NaN after every number. */
template <class A>
inline bool before(A a, A b) {
  if constexpr (math::is_float_v<A>) return a < b || (b != b && a == a);
  else return a < b;
}

template <class A>
struct Entry {
  A v;
  int32_t i;
};

// Value order, then position: a total order, so the unstable algorithms give the stable result.
template <class A>
inline bool ascending(const Entry<A>& x, const Entry<A>& y) {
  return before(x.v, y.v) || (!before(y.v, x.v) && x.i < y.i);
}
template <class A>
inline bool descending(const Entry<A>& x, const Entry<A>& y) {
  return before(y.v, x.v) || (!before(x.v, y.v) && x.i < y.i);
}

/* The k first entries of the row in descending order: a heap of k for few, else a
   partition and a sort of its front. */
template <class A>
void largest(std::vector<Entry<A>>& row, int64_t k) {
  auto mid = row.begin() + k;
  if (k * 8 < static_cast<int64_t>(row.size())) {
    std::partial_sort(row.begin(), mid, row.end(), descending<A>);
  } else {
    std::nth_element(row.begin(), mid, row.end(), descending<A>);
    std::sort(row.begin(), mid, descending<A>);
  }
}

/* Rows of n contiguous elements at x into the outputs of the kind's shape. */
template <class T>
void select_rows(OpKind kind, int64_t k, const T* x, int64_t rows, int64_t n, std::vector<Tensor>& out) {
  using A = math::compute_t<T>;
  const bool values_only = kind == OpKind::Sort || kind == OpKind::Partition;
  T* values = values_only || kind == OpKind::TopK ? out[0].data<T>() : nullptr;
  int32_t* index = kind == OpKind::TopK ? out[1].data<int32_t>() : values_only ? nullptr : out[0].data<int32_t>();
  const int64_t width = kind == OpKind::TopK ? k : n;  // of an output row
  detail::parallel_for(rows, std::max<int64_t>(1, (1 << 15) / n), [&](int64_t b, int64_t e) {
    std::vector<A> vals(values_only ? static_cast<size_t>(n) : 0);
    std::vector<Entry<A>> row(values_only ? 0 : static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      const T* src = x + r * n;
      if (values_only) {
        for (int64_t i = 0; i < n; ++i) vals[static_cast<size_t>(i)] = static_cast<A>(src[i]);
        if (kind == OpKind::Sort) std::sort(vals.begin(), vals.end(), before<A>);
        else std::nth_element(vals.begin(), vals.begin() + k, vals.end(), before<A>);
        for (int64_t i = 0; i < n; ++i) values[r * n + i] = static_cast<T>(vals[static_cast<size_t>(i)]);
        continue;
      }
      for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = {static_cast<A>(src[i]), static_cast<int32_t>(i)};
      if (kind == OpKind::ArgSort) std::sort(row.begin(), row.end(), ascending<A>);
      else if (kind == OpKind::ArgPartition) std::nth_element(row.begin(), row.begin() + k, row.end(), ascending<A>);
      else largest(row, k);
      for (int64_t i = 0; i < width; ++i) {
        const Entry<A>& en = row[static_cast<size_t>(i)];
        if (values) values[r * width + i] = static_cast<T>(en.v);
        index[r * width + i] = en.i;
      }
    }
  });
}

}  // namespace

void Selection::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  for (auto& o : out) o.allocate();
  const Tensor& x = in[0];
  const int64_t n = x.shape.back();
  if (x.size() == 0 || out[0].size() == 0) return;
  Tensor rows = x;
  if (!x.row_contiguous()) {  // a moved axis or a strided view: rows made contiguous first
    rows = Tensor(x.shape, x.dtype);
    rows.allocate();
    detail::copy_convert(x, rows);
  }
  detail::dispatch_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    select_rows<T>(kind(), k_, rows.data<T>(), x.size() / n, n, out);
  });
}

}  // namespace kiln
