// CPU kernels for sorting and selection along the last axis: a task of rows per thread,
// each row copied out (with its positions) and NaN set apart, then the numbers ordered by
// the standard algorithms (a full sort, nth_element, or partial_sort's heap for a few
// largest) with plain comparisons.
#include <algorithm>
#include <utility>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/common/order_key.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/reduce.h"
#include "core/thread_pool.h"
#include "ops/sort.h"

namespace kiln {

namespace {

using detail::Tensor;

template <class A>
inline bool is_nan(A v) {
  if constexpr (math::is_float_v<A>)
    return v != v;
  else
    return false;
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
    if (is_nan(v) == nan_first)
      out[front++] = wrap(v, i);
    else
      out[--back] = wrap(v, i);
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

/* Rows at least this long of 1- to 4-byte types sort by radix (sort_positions). */
constexpr int64_t kRadixMin = 256;

/* Positions of the row of n elements in ascending order, stable: an LSD radix sort of the
   order keys (backend/common/order_key.h), 11 bits a pass, skipping a pass whose digit
   every key shares. keys, keys2 and pos2 are scratch of n each. */
template <class T>
void sort_positions(const T* src, int64_t n, uint32_t* keys, uint32_t* keys2, int32_t* pos, int32_t* pos2) {
  constexpr int kDigit = 11, kBins = 1 << kDigit, kPasses = 3;
  std::vector<int64_t> count(kPasses * kBins, 0);
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = order::key(src[i]);
    pos[i] = static_cast<int32_t>(i);
    for (int p = 0; p < kPasses; ++p) ++count[static_cast<size_t>(p * kBins + (keys[i] >> (p * kDigit) & (kBins - 1)))];
  }
  for (int p = 0; p < kPasses; ++p) {
    int64_t* c = count.data() + p * kBins;
    if (*std::max_element(c, c + kBins) == n) continue;  // one digit for all: order unchanged
    int64_t at = 0;
    for (int d = 0; d < kBins; ++d) at += std::exchange(c[d], at);  // counts to start positions
    for (int64_t i = 0; i < n; ++i) {
      const int64_t to = c[keys[i] >> (p * kDigit) & (kBins - 1)]++;
      keys2[to] = keys[i];
      pos2[to] = pos[i];
    }
    std::copy(keys2, keys2 + n, keys);
    std::copy(pos2, pos2 + n, pos);
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
  const bool radix = sizeof(T) <= 4 && n >= kRadixMin && (kind == OpKind::Sort || kind == OpKind::ArgSort);
  detail::parallel_for(rows, std::max<int64_t>(1, (1 << 15) / n), [&](int64_t b, int64_t e) {
    cpu::Scratch<A> vals(values_only && !radix ? n : 0);
    cpu::Scratch<Entry<A>> row(values_only || radix ? 0 : n);
    cpu::Scratch<uint32_t> keys(radix ? 2 * n : 0);
    cpu::Scratch<int32_t> pos(radix ? 2 * n : 0);
    for (int64_t r = b; r < e; ++r) {
      const T* src = x + r * n;
      if (radix) {
        int32_t* order = kind == OpKind::ArgSort ? index + r * n : pos.data() + n;
        sort_positions(src, n, keys.data(), keys.data() + n, order, pos.data());
        if (kind == OpKind::Sort) {
          for (int64_t i = 0; i < n; ++i) values[r * n + i] = src[order[i]];  // the values' own bits (-0 stays)
        }
        continue;
      }
      if (values_only) {
        A* v = vals.data();
        const int64_t m = n - set_nan_apart<A>(src, n, false, v, [](A a, int64_t) { return a; });
        if (kind == OpKind::Sort)
          std::sort(v, v + m);
        else if (k < m)
          std::nth_element(v, v + k, v + m);  // else kth is a NaN, already in place
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
        if (kind == OpKind::ArgSort)
          std::sort(en, en + m, ascending<A>);
        else if (k < m)
          std::nth_element(en, en + k, en + m, ascending<A>);
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
    // A partition's kth may count from the end of the row (ops_sort.cpp, check_kth).
    const int64_t k = k_ < 0 && kind() != OpKind::TopK ? k_ + n : k_;
    select_rows<T>(kind(), k, rows.data<T>(), x.size() / n, n, out);
  });
}

}  // namespace kiln
