// CPU kernels for sorting and selection along the last axis: a task of rows per thread,
// each row copied out (with its positions) and NaN set apart, then the numbers ordered by
// the standard algorithms (a full sort, nth_element, or partial_sort's heap for a few
// largest) with plain comparisons.
#include <algorithm>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/reduce.h"
#include "core/thread_pool.h"
#include "ops/sort.h"

namespace kiln {

namespace {

using detail::Tensor;

template <class A>
inline bool is_nan(A v) {
  if constexpr (math::is_float_v<A>) return v != v;
  else return false;
}

template <class A>
struct Entry {
  A v;
  int32_t i;
};

// Numbers by value, then position: a total order, so the unstable algorithms give the
// stable result. NaN never reaches these: it is set apart first.
template <class A>
inline bool ascending(const Entry<A>& x, const Entry<A>& y) {
  return x.v < y.v || (x.v == y.v && x.i < y.i);
}
template <class A>
inline bool descending(const Entry<A>& x, const Entry<A>& y) {
  return x.v > y.v || (x.v == y.v && x.i < y.i);
}

/* Fills out[0, n) with the row (`wrap` makes an element of a value and its position): NaN
   at the front in position order when nan_first, else numbers at the front and NaN at the
   back in position order. Returns the count of NaN. */
template <class A, class T, class Out, class Wrap>
int64_t set_nan_apart(const T* src, int64_t n, bool nan_first, Out* out, Wrap&& wrap) {
  int64_t front = 0, back = n;
  for (int64_t i = 0; i < n; ++i) {
    const A v = static_cast<A>(src[i]);
    if (is_nan(v) == nan_first) out[front++] = wrap(v, i);
    else out[--back] = wrap(v, i);
  }
  if (!nan_first) std::reverse(out + back, out + n);  // NaN was written backwards
  return nan_first ? front : n - back;
}

/* The k largest of [first, last) at its front, largest first: a heap of k for few, else
   a partition and a sort of its front. */
template <class A>
void largest(Entry<A>* first, Entry<A>* last, int64_t k) {
  Entry<A>* mid = first + k;
  if (k * 8 < last - first) {
    std::partial_sort(first, mid, last, descending<A>);
  } else {
    std::nth_element(first, mid, last, descending<A>);
    std::sort(first, mid, descending<A>);
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
    cpu::Scratch<A> vals(values_only ? n : 0);
    cpu::Scratch<Entry<A>> row(values_only ? 0 : n);
    for (int64_t r = b; r < e; ++r) {
      const T* src = x + r * n;
      if (values_only) {
        A* v = vals.data();
        const int64_t m = n - set_nan_apart<A>(src, n, false, v, [](A a, int64_t) { return a; });
        if (kind == OpKind::Sort) std::sort(v, v + m);
        else if (k < m) std::nth_element(v, v + k, v + m);  // else kth is a NaN, already in place
        for (int64_t i = 0; i < n; ++i) values[r * n + i] = static_cast<T>(v[i]);
        continue;
      }
      Entry<A>* en = row.data();
      auto wrap = [](A a, int64_t i) { return Entry<A>{a, static_cast<int32_t>(i)}; };
      if (kind == OpKind::TopK) {
        // NaN counts as largest: those first, then the largest numbers.
        const int64_t nans = set_nan_apart<A>(src, n, true, en, wrap);
        if (k > nans) largest(en + nans, en + n, k - nans);
      } else {
        const int64_t m = n - set_nan_apart<A>(src, n, false, en, wrap);
        if (kind == OpKind::ArgSort) std::sort(en, en + m, ascending<A>);
        else if (k < m) std::nth_element(en, en + k, en + m, ascending<A>);
      }
      for (int64_t i = 0; i < width; ++i) {
        if (values) values[r * width + i] = static_cast<T>(en[i].v);
        index[r * width + i] = en[i].i;
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
