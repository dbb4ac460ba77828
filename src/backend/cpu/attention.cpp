// CPU kernel for scaled_dot_product_attention, flash style: a task per (batch row,
// key/value head, tile of query rows) holds the scores of all the query heads that
// share that key/value head against one block of keys at a time, with a running
// max and sum per query (online softmax), so K and V are read once per task and
// no score matrix is stored. Sums in float32; built for AVX2 where the CPU has it.
#include <cmath>
#include <limits>

#include "backend/cpu/copy.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/nn.h"

namespace kiln {

using detail::Tensor;

namespace {

constexpr int64_t kKeyBlock = 64;  // keys scored at once
constexpr int64_t kTileQueries = 64;  // queries (heads x rows) per task, at most

/* max that propagates NaN (from q, k or an additive mask) into the softmax. */
inline float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

/* o[q] = o[q] * c[q] + sum_j p[q][j] * v[j] for NQ outputs at once (queries that share these n
   rows v of width w), 16 values of each held in registers across the rows, then 8, then one:
   a row of v is read once for all the queries. */
template <int NQ>
[[gnu::always_inline]] inline void add_weighted_rows_n(float* const* o, const float* c, const float* const* p,
                                                       const float* v, int64_t n, int64_t w) {
  using detail::f32x8;
  f32x8 x0, x1;
  int64_t e0 = 0;
  for (; e0 + 16 <= w; e0 += 16) {
    f32x8 r[NQ][2];
    for (int q = 0; q < NQ; ++q) {
      for (int k = 0; k < 2; ++k) {
        detail::load8(r[q][k], o[q] + e0 + 8 * k);
        r[q][k] *= c[q];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      detail::load8(x0, v + j * w + e0);
      detail::load8(x1, v + j * w + e0 + 8);
      for (int q = 0; q < NQ; ++q) {
        const float pj = p[q][j];
        r[q][0] += pj * x0;
        r[q][1] += pj * x1;
      }
    }
    for (int q = 0; q < NQ; ++q) {
      for (int k = 0; k < 2; ++k) detail::store8(o[q] + e0 + 8 * k, r[q][k]);
    }
  }
  for (; e0 + 8 <= w; e0 += 8) {
    f32x8 r[NQ];
    for (int q = 0; q < NQ; ++q) {
      detail::load8(r[q], o[q] + e0);
      r[q] *= c[q];
    }
    for (int64_t j = 0; j < n; ++j) {
      detail::load8(x0, v + j * w + e0);
      for (int q = 0; q < NQ; ++q) r[q] += p[q][j] * x0;
    }
    for (int q = 0; q < NQ; ++q) detail::store8(o[q] + e0, r[q]);
  }
  for (; e0 < w; ++e0) {
    for (int q = 0; q < NQ; ++q) {
      float r = o[q][e0] * c[q];
      for (int64_t j = 0; j < n; ++j) r += p[q][j] * v[j * w + e0];
      o[q][e0] = r;
    }
  }
}

template <class T>
struct AttentionArgs {
  const T* q;  // row-major [B, Hq, Lq, D]
  std::vector<const T*> k, v;  // per batch row: row-major [Hkv, Lk, D] (and Dv)
  T* out;  // row-major [B, Hq, Lq, Dv]
  int64_t batch, hq, hkv, lq, lk, d, dv;
  int64_t rows_per_tile;  // query rows of one head per task
  float scale;
  bool causal;
  ScaledDotProductAttention::Mask mask_kind;
  const void* mask;  // bool or T elements, strides broadcast to [B, Hq, Lq, Lk]
  Strides mask_strides;
  const int32_t* key_lengths;  // null when not given
};

/* The converted rows [j0, j0 + n) of a [L, width] matrix of T, or the rows themselves for float. */
template <class T>
[[gnu::always_inline]] inline const float* float_rows(const T* base, int64_t j0, int64_t n, int64_t width,
                                                      std::vector<float>& buf) {
  if constexpr (std::is_same_v<T, float>) {
    return base + j0 * width;
  } else {
    buf.resize(static_cast<size_t>(n * width));
    const T* src = base + j0 * width;
    for (int64_t i = 0; i < n * width; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(src[i]);
    return buf.data();
  }
}

template <class T>
[[gnu::always_inline]] inline void attention_task(const AttentionArgs<T>& a, int64_t task) {
  const int64_t tiles = (a.lq + a.rows_per_tile - 1) / a.rows_per_tile;
  const int64_t b = task / (a.hkv * tiles), hk = task / tiles % a.hkv, row0 = task % tiles * a.rows_per_tile;
  const int64_t rows = std::min(a.rows_per_tile, a.lq - row0), group = a.hq / a.hkv, nq = group * rows;
  const int64_t valid = a.key_lengths ? std::clamp<int64_t>(a.key_lengths[b], 0, a.lk) : a.lk;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Query n of the tile is head hk * group + n / rows, row row0 + n % rows.
  std::vector<float> qf(static_cast<size_t>(nq * a.d)), acc(static_cast<size_t>(nq * a.dv), 0.0f);
  std::vector<float> m(static_cast<size_t>(nq), neg_inf), l(static_cast<size_t>(nq), 0.0f);
  std::vector<int64_t> limit(static_cast<size_t>(nq));
  int64_t keys = 0;
  for (int64_t n = 0; n < nq; ++n) {
    const int64_t h = hk * group + n / rows, i = row0 + n % rows;
    const T* src = a.q + ((b * a.hq + h) * a.lq + i) * a.d;
    for (int64_t e = 0; e < a.d; ++e) qf[static_cast<size_t>(n * a.d + e)] = static_cast<float>(src[e]) * a.scale;
    limit[static_cast<size_t>(n)] = a.causal ? std::clamp<int64_t>(i + valid - a.lq + 1, 0, valid) : valid;
    keys = std::max(keys, limit[static_cast<size_t>(n)]);
  }
  const T* kbase = a.k[static_cast<size_t>(b)] + hk * a.lk * a.d;
  const T* vbase = a.v[static_cast<size_t>(b)] + hk * a.lk * a.dv;
  // Each query's scores of a block (then their exponentials), and which queries saw a key.
  std::vector<float> kbuf, vbuf, scores(static_cast<size_t>(nq * kKeyBlock)), correction(static_cast<size_t>(nq));
  std::vector<int64_t> seen;
  for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
    const int64_t jn = std::min(kKeyBlock, keys - j0);
    const float* kb = float_rows(kbase, j0, jn, a.d, kbuf);
    const float* vb = float_rows(vbase, j0, jn, a.dv, vbuf);
    seen.clear();
    for (int64_t n = 0; n < nq; ++n) {
      const int64_t h = hk * group + n / rows, i = row0 + n % rows;
      const float* qn = qf.data() + n * a.d;
      const int64_t lim = limit[static_cast<size_t>(n)];
      float* s = scores.data() + n * kKeyBlock;
      float block_max = neg_inf;
      for (int64_t j = 0; j < jn; ++j) {
        float dot = detail::dot_lanes(qn, kb + j * a.d, a.d);
        if (j0 + j >= lim) dot = neg_inf;
        if (a.mask_kind != ScaledDotProductAttention::Mask::none) {
          const int64_t at =
              b * a.mask_strides[0] + h * a.mask_strides[1] + i * a.mask_strides[2] + (j0 + j) * a.mask_strides[3];
          if (a.mask_kind == ScaledDotProductAttention::Mask::keep) {
            if (!static_cast<const bool*>(a.mask)[at]) dot = neg_inf;
          } else {
            dot += static_cast<float>(static_cast<const T*>(a.mask)[at]);
          }
        }
        s[j] = dot;
        block_max = nan_max(block_max, dot);
      }
      float& mn = m[static_cast<size_t>(n)];
      const float next = nan_max(mn, block_max);
      if (next == neg_inf) continue;  // nothing seen yet
      const float c = math::exp_f32(mn - next);
      for (int64_t j = 0; j < jn; ++j) s[j] = math::exp_f32(s[j] - next);
      float sum = 0;
      for (int64_t j = 0; j < jn; ++j) sum += s[j];
      l[static_cast<size_t>(n)] = l[static_cast<size_t>(n)] * c + sum;
      correction[static_cast<size_t>(n)] = c;
      mn = next;
      seen.push_back(n);
    }
    // The block's values for up to four queries a pass, each row of v read once for them.
    for (size_t g = 0; g < seen.size(); g += 4) {
      float* o[4];
      const float* p[4];
      float c[4];
      const size_t count = std::min<size_t>(4, seen.size() - g);
      for (size_t u = 0; u < count; ++u) {
        const int64_t n = seen[g + u];
        o[u] = acc.data() + n * a.dv;
        p[u] = scores.data() + n * kKeyBlock;
        c[u] = correction[static_cast<size_t>(n)];
      }
      switch (count) {
        case 4: add_weighted_rows_n<4>(o, c, p, vb, jn, a.dv); break;
        case 3: add_weighted_rows_n<3>(o, c, p, vb, jn, a.dv); break;
        case 2: add_weighted_rows_n<2>(o, c, p, vb, jn, a.dv); break;
        default: add_weighted_rows_n<1>(o, c, p, vb, jn, a.dv);
      }
    }
  }
  for (int64_t n = 0; n < nq; ++n) {
    const int64_t h = hk * group + n / rows, i = row0 + n % rows;
    T* dst = a.out + ((b * a.hq + h) * a.lq + i) * a.dv;
    const float ln = l[static_cast<size_t>(n)];
    const float inv = ln > 0 ? 1.0f / ln : 0.0f;  // a query that sees no key gives zeros
    for (int64_t e = 0; e < a.dv; ++e) dst[e] = static_cast<T>(acc[static_cast<size_t>(n * a.dv + e)] * inv);
  }
}

template <class T>
__attribute__((target("avx2,fma"))) void attention_tasks_avx2(const AttentionArgs<T>& a, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) attention_task(a, t);
}
template <class T>
void attention_tasks_plain(const AttentionArgs<T>& a, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) attention_task(a, t);
}

/* What one attention run reads: q, each batch row's keys and values (views of one array's
   rows, or the row's own cache), and the mask and key lengths where given. */
struct AttentionInputs {
  Tensor q;  // row-major [B, Hq, Lq, D]
  std::vector<Tensor> k, v;  // per batch row: row-major [1, Hkv, Lk, D] (and Dv)
  float scale = 1;
  bool causal = false;
  ScaledDotProductAttention::Mask mask_kind = ScaledDotProductAttention::Mask::none;
  Tensor mask;
  Strides mask_strides = Strides(4, 0);
  std::vector<int32_t> lengths;  // empty: every key
};

void attend(const AttentionInputs& in, Tensor& y) {
  y.allocate();
  if (y.size() == 0) return;
  const Tensor& q = in.q;
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  detail::dispatch_float(q.dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, double>) {
      AttentionArgs<T> a{};
      a.q = q.data<T>();
      for (size_t b = 0; b < in.k.size(); ++b) {
        a.k.push_back(in.k[b].data<T>());
        a.v.push_back(in.v[b].data<T>());
      }
      a.out = y.data<T>();
      a.batch = q.shape[0], a.hq = q.shape[1], a.lq = q.shape[2], a.d = q.shape[3];
      a.hkv = in.k[0].shape[1], a.lk = in.k[0].shape[2], a.dv = in.v[0].shape[3];
      a.rows_per_tile = std::max<int64_t>(1, kTileQueries / (a.hq / a.hkv));
      a.scale = in.scale, a.causal = in.causal;
      a.mask_kind = in.mask_kind;
      a.mask = in.mask_kind != ScaledDotProductAttention::Mask::none ? in.mask.raw() : nullptr;
      a.mask_strides = in.mask_strides;
      a.key_lengths = in.lengths.empty() ? nullptr : in.lengths.data();
      const int64_t tasks = a.batch * a.hkv * ((a.lq + a.rows_per_tile - 1) / a.rows_per_tile);
      detail::parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
        if (avx2)
          attention_tasks_avx2(a, t0, t1);
        else
          attention_tasks_plain(a, t0, t1);
      });
    }
  });
}

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  AttentionInputs a;
  a.q = detail::row_major(in[0]);
  const Tensor k = detail::row_major(in[1]), v = detail::row_major(in[2]);
  for (int64_t b = 0; b < k.shape[0]; ++b) {  // batch row b of k and v
    a.k.push_back(detail::view(k, {1, k.shape[1], k.shape[2], k.shape[3]}, k.strides, k.offset + b * k.strides[0]));
    a.v.push_back(detail::view(v, {1, v.shape[1], v.shape[2], v.shape[3]}, v.strides, v.offset + b * v.strides[0]));
  }
  a.scale = scale_, a.causal = causal_, a.mask_kind = mask_;
  size_t next = 3;
  if (mask_ != Mask::none) {
    a.mask = in[next++];
    a.mask_strides = detail::broadcast_strides(a.mask, {a.q.shape[0], a.q.shape[1], a.q.shape[2], k.shape[2]});
  }
  if (has_key_lengths_) a.lengths = detail::elements_as<int32_t>(in[next]);
  attend(a, out[0]);
}

void CacheAttention::check_positions(const Shape& keys, int64_t capacity, const Tensor& positions) {
  const std::vector<int32_t> pos = detail::elements_as<int32_t>(positions);
  for (size_t b = 0; b < pos.size(); ++b) {
    if (pos[b] < 0 || pos[b] + keys[2] > capacity) {
      fail("cache_attention", "position ", pos[b], " of batch row ", b, " puts ", keys[2],
           " keys outside caches of capacity ", capacity);
    }
  }
}

/* The parts one after another: q and the keys rotated, each row's keys and values written into
   its caches, then the attention over them. */
void CacheAttention::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const size_t first = first_cache(), batch = static_cast<size_t>(in[0].shape[0]);
  const Shape& keys_shape = in[1].shape;
  check_positions(keys_shape, in[first].shape[2], in[3]);
  auto rotated = [&](const Tensor& x) {
    if (!rope_) return x;
    std::vector<Tensor> y{Tensor(x.shape, x.dtype)};
    rope_->eval_cpu(rope_->inputs(x, in[3], in[first - 1]), y);  // frequencies, if any, just before the caches
    return y[0];
  };
  const Tensor keys = rotated(in[1]);
  const std::vector<int32_t> pos = detail::elements_as<int32_t>(in[3]);
  for (size_t i = 0; i < 2 * batch; ++i) {
    const Tensor& u = i < batch ? keys : in[2];  // keys for the first B caches, then values
    const int64_t b = static_cast<int64_t>(i % batch);
    Tensor& y = out[1 + i];
    detail::start_from(in[first + i], y);
    const Shape rows{1, u.shape[1], u.shape[2], u.shape[3]};
    Tensor region = detail::view(y, rows, y.strides, y.offset + pos[static_cast<size_t>(b)] * y.strides[2]);
    detail::copy_elements(detail::view(u, rows, u.strides, u.offset + b * u.strides[0]), region);
  }
  AttentionInputs a;
  a.q = detail::row_major(rotated(in[0]));
  for (size_t b = 0; b < batch; ++b) {
    a.k.push_back(detail::row_major(out[1 + b]));
    a.v.push_back(detail::row_major(out[1 + batch + b]));
  }
  a.scale = scale_, a.causal = causal_;
  for (int32_t p : pos) a.lengths.push_back(p + static_cast<int32_t>(keys_shape[2]));
  attend(a, out[0]);
}

}  // namespace kiln
