// CPU kernels for affine quantization (MLX's format): quantize, dequantize and
// quantized_matmul. Packed rows are a bit stream of `bits`-bit values from the low
// bits of the first uint32 up. The decode product (few rows, weights [N, K], 2, 4
// or 8 bits) reads each packed weight once with AVX2 where the CPU has it; other
// cases dequantize tiles of the weights into float32 and use sgemm. Products with
// int8 activations are in quantized_int8.cpp.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/common/math.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/quantized_int8.h"
#include "core/thread_pool.h"
#include "ops/nn.h"
#include "ops/quant_tiles.h"

namespace kiln {

using detail::Tensor;

namespace {

/* Value i of a packed row. */
inline uint32_t unpack_one(const uint32_t* row, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const int shift = static_cast<int>(bit & 31);
  uint64_t v = row[bit >> 5];
  if (shift + bits > 32) v |= static_cast<uint64_t>(row[(bit >> 5) + 1]) << 32;
  return static_cast<uint32_t>(v >> shift) & ((1u << bits) - 1);
}

/* Values [i0, i0 + n) of a packed row, dequantized in float32 with per-group scales and biases. */
void dequantize_run(const uint32_t* row, int64_t i0, int64_t n, const QuantParams& q, const float* scales,
                    const float* biases, float* out) {
  for (int64_t i = i0; i < i0 + n; ++i) {
    const int64_t g = i / q.group_size;
    out[i - i0] = scales[g] * static_cast<float>(unpack_one(row, i, q.bits)) + biases[g];
  }
}

/* The scales and biases (any float dtype) as float32 rows: read in place when they already are
   (a model converts them once at load), else converted, which costs a pass over all of them. */
class FloatRows {
  std::vector<float> scales_copy_, biases_copy_;  // declared first: the pointers below may point here
  static const float* view(const Tensor& t, std::vector<float>& copy) {
    if (t.dtype == float32 && t.row_contiguous()) return t.data<float>();
    copy = detail::to_floats(t);
    return copy.data();
  }

 public:
  FloatRows(const Tensor& s, const Tensor& b) : scales(view(s, scales_copy_)), biases(view(b, biases_copy_)) {}
  const float* scales;
  const float* biases;
};

/* q for the same weights in row order. */
QuantParams rows_of(QuantParams q) {
  q.tiled = false;
  return q;
}

/* in with the packed weights, scales and biases at in[at..at + 2] back in row order. */
std::vector<Tensor> in_row_order(const char* op, std::vector<Tensor> in, size_t at, const QuantParams& q) {
  quant_tiles::permute(op, row_major(in[at]), row_major(in[at + 1]), row_major(in[at + 2]), q.group_size, false, in[at],
                       in[at + 1], in[at + 2]);
  return in;
}

}  // namespace

// ---- quantize ------------------------------------------------------------------------
void Quantize::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  for (auto& o : out) o.allocate();
  const std::vector<float> w = detail::to_floats(in[0]);
  const int64_t k = in[0].shape.back(), rows = k ? in[0].size() / k : 0;
  const int64_t words = k * q_.bits / 32, groups = k / q_.group_size;
  const int gs = q_.group_size, bits = q_.bits;
  const float n_bins = static_cast<float>((1 << bits) - 1);
  uint32_t* packed = out[0].data<uint32_t>();
  std::vector<float> s(static_cast<size_t>(rows * groups)), b(s.size());
  detail::parallel_for(rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint32_t* prow = packed + r * words;
      std::fill(prow, prow + words, 0u);
      for (int64_t g = 0; g < groups; ++g) {
        const float* x = w.data() + r * k + g * gs;
        float hi = x[0], lo = x[0];
        for (int i = 1; i < gs; ++i) hi = std::max(hi, x[i]), lo = std::min(lo, x[i]);
        // As MLX: the end of larger magnitude is represented exactly (q = 0 or n_bins).
        const bool low_edge = std::fabs(lo) > std::fabs(hi);
        float scale = std::max((hi - lo) / n_bins, 1e-7f);
        scale = low_edge ? scale : -scale;
        const float edge = low_edge ? lo : hi;
        const float q0 = std::nearbyint(edge / scale);
        float bias = 0;
        if (q0 != 0) scale = edge / q0, bias = edge;
        s[static_cast<size_t>(r * groups + g)] = scale;
        b[static_cast<size_t>(r * groups + g)] = bias;
        for (int i = 0; i < gs; ++i) {
          const float v = std::min(std::max(std::nearbyint((x[i] - bias) / scale), 0.0f), n_bins);
          const uint64_t qv = static_cast<uint64_t>(v);
          const int64_t bit = (g * gs + i) * bits;
          const int shift = static_cast<int>(bit & 31);
          prow[bit >> 5] |= static_cast<uint32_t>(qv << shift);
          if (shift + bits > 32) prow[(bit >> 5) + 1] |= static_cast<uint32_t>(qv >> (32 - shift));
        }
      }
    }
  });
  for (int o = 1; o < 3; ++o) {
    Tensor src(out[o].shape, float32);
    const auto& v = o == 1 ? s : b;
    src.buffer = detail::Buffer::borrow(const_cast<float*>(v.data()), v.size() * sizeof(float));
    detail::copy_convert(src, out[o]);
  }
}

// ---- dequantize ------------------------------------------------------------------------
void Dequantize::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (q_.tiled) return Dequantize(rows_of(q_)).eval_cpu(in_row_order("dequantize", in, 0, q_), out);
  Tensor& y = out[0];
  y.allocate();
  const Tensor w = detail::row_major(in[0]);
  const FloatRows sb(in[1], in[2]);
  const int64_t k = y.shape.back(), rows = k ? y.size() / k : 0;
  const int64_t words = w.shape.back(), groups = k / q_.group_size;
  const QuantParams q = q_;
  detail::dispatch_float(y.dtype, [&](auto z) {
    using T = decltype(z);
    T* yp = y.data<T>();
    detail::parallel_for(rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint32_t* row = w.data<uint32_t>() + r * words;
        const float* s = sb.scales + r * groups;
        const float* b = sb.biases + r * groups;
        for (int64_t i = 0; i < k; ++i) {
          const int64_t g = i / q.group_size;
          // Rounded to T after the product and after the sum, as MLX computes in T.
          const float scaled =
              static_cast<float>(static_cast<T>(s[g] * static_cast<float>(unpack_one(row, i, q.bits))));
          yp[r * k + i] = static_cast<T>(scaled + b[g]);
        }
      }
    });
  });
}

// ---- quantized_matmul --------------------------------------------------------------------
namespace {

/* The operands of one product, x as float32 rows. */
struct QmmProblem {
  const float* x;  // [M, K]
  const uint32_t* w;
  const float* scales;  // [rows of w, groups]
  const float* biases;
  int64_t m, n, k, words;  // words: packed words per row of w
  QuantParams q;
  float* y;  // [M, N]
};

/* x @ dequantize(w)^T one output column at a time: each weight row dequantized once into a
   float buffer, then dotted with every row of x. Any bits, any CPU. */
void gemv_generic(const QmmProblem& p) {
  const int64_t groups = p.k / p.q.group_size;
  detail::parallel_for(p.n, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(p.k, 1)), [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(p.k));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_run(p.w + n * p.words, 0, p.k, p.q, p.scales + n * groups, p.biases + n * groups, row.data());
      for (int64_t m = 0; m < p.m; ++m) {
        p.y[m * p.n + n] = detail::dot_lanes(p.x + m * p.k, row.data(), p.k);
      }
    }
  });
}

bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Decode product for B in {2, 4, 8}: 8 packed words (one AVX2 register) at a time. Value t
   of word j lands in lane j, so x is stored permuted (xp) to match; each lane sums the
   products of its word, and the lanes are scaled by their word's group scale. Value t is
   taken in place (word & (mask << B*t), exact in float) against x pre-scaled by 2^-B*t, which
   saves the shift; the top value is shifted down instead (it would read as negative). The
   biases multiply per-group sums of x (xsum). Rows [m0, m0 + MR) of x against NR rows of w
   at once (x loaded once for them), outputs [n0, n1) with n1 - n0 a multiple of NR. */
template <int B, int MR, int NR, class S>
__attribute__((target("avx2,fma"))) void gemv_avx2_rows(const QmmProblem& p, const S* scales, const S* biases,
                                                        const float* xp, const float* xsum, int64_t m0, int64_t n0,
                                                        int64_t n1) {
  constexpr int V = 32 / B;  // values per word
  const int64_t groups = p.k / p.q.group_size;
  const int64_t words_per_group = p.q.group_size * B / 32;
  for (int64_t n = n0; n < n1; n += NR) {
    __m256 acc[NR][MR];
    for (int c = 0; c < NR; ++c) {
      for (int r = 0; r < MR; ++r) acc[c][r] = _mm256_setzero_ps();
    }
    for (int64_t blk = 0; blk < p.words / 8; ++blk) {
      __m256i wv[NR];
      __m256 part[NR][MR];
      for (int c = 0; c < NR; ++c) {
        const uint32_t* src = p.w + (n + c) * p.words + blk * 8;
        // The next tile's rows, fetched while this one computes (as the int8 kernel does).
        _mm_prefetch(reinterpret_cast<const char*>(src + NR * p.words), _MM_HINT_T0);
        wv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        for (int r = 0; r < MR; ++r) part[c][r] = _mm256_setzero_ps();
      }
      const float* xb = xp + blk * 8 * V;
#pragma GCC unroll 16
      for (int t = 0; t < V; ++t) {
        __m256 xv[MR];
        for (int r = 0; r < MR; ++r) xv[r] = _mm256_loadu_ps(xb + (m0 + r) * p.k + t * 8);
        for (int c = 0; c < NR; ++c) {
          const __m256i qi = t == V - 1 ? _mm256_srli_epi32(wv[c], B * (V - 1))
                                        : _mm256_and_si256(wv[c], _mm256_set1_epi32(((1 << B) - 1) << (B * t)));
          const __m256 qf = _mm256_cvtepi32_ps(qi);
          for (int r = 0; r < MR; ++r) part[c][r] = _mm256_fmadd_ps(qf, xv[r], part[c][r]);
        }
      }
      const int64_t w0 = blk * 8;
      for (int c = 0; c < NR; ++c) {
        const S* s = scales + (n + c) * groups;
        __m256 sv;
        if (words_per_group >= 8) {
          sv = _mm256_set1_ps(static_cast<float>(s[w0 / words_per_group]));
        } else {
          alignas(32) float lanes[8];
          for (int j = 0; j < 8; ++j) lanes[j] = static_cast<float>(s[(w0 + j) / words_per_group]);
          sv = _mm256_load_ps(lanes);
        }
        for (int r = 0; r < MR; ++r) acc[c][r] = _mm256_fmadd_ps(part[c][r], sv, acc[c][r]);
      }
    }
    for (int c = 0; c < NR; ++c) {
      const S* b = biases + (n + c) * groups;
      for (int r = 0; r < MR; ++r) {
        float bias = 0;
        for (int64_t g = 0; g < groups; ++g) bias += static_cast<float>(b[g]) * xsum[(m0 + r) * groups + g];
        p.y[(m0 + r) * p.n + n + c] = hsum(acc[c][r]) + bias;
      }
    }
  }
}

/* Rows [m0, m0 + MR) of x against outputs [n0, n1): NR weight rows at a time, then the rest. */
template <int B, int MR, class S>
void gemv_avx2_block(const QmmProblem& p, const S* scales, const S* biases, const float* xp, const float* xsum,
                     int64_t m0, int64_t n0, int64_t n1) {
  constexpr int NR = MR == 1 ? 4 : MR == 2 ? 2 : 1;
  const int64_t paired = n0 + (n1 - n0) / NR * NR;
  gemv_avx2_rows<B, MR, NR>(p, scales, biases, xp, xsum, m0, n0, paired);
  if (paired < n1) gemv_avx2_rows<B, MR, 1>(p, scales, biases, xp, xsum, m0, paired, n1);
}

/* The decode product with the scales and biases read as stored (S: float or bfloat16), each
   converted as its group is reached (a pass converting them all took 15-27% of the product). */
template <int B, class S>
void gemv_avx2(const QmmProblem& p, const S* scales, const S* biases) {
  constexpr int V = 32 / B;
  const int64_t groups = p.k / p.q.group_size;
  // x permuted within blocks of 8 words, xp[blk*8V + t*8 + j] = x[blk*8V + j*V + t], and
  // scaled by 2^-B*t for every value t but the top one.
  std::vector<float> xp(static_cast<size_t>(p.m * p.k)), xsum(static_cast<size_t>(p.m * groups));
  for (int64_t m = 0; m < p.m; ++m) {
    const float* x = p.x + m * p.k;
    float* o = xp.data() + m * p.k;
    for (int64_t base = 0; base < p.k; base += 8 * V) {
      for (int t = 0; t < V; ++t) {
        const float f = t == V - 1 ? 1.0f : std::ldexp(1.0f, -B * t);
        for (int j = 0; j < 8; ++j) o[base + t * 8 + j] = x[base + j * V + t] * f;
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      float sum = 0;
      for (int64_t i = 0; i < p.q.group_size; ++i) sum += x[g * p.q.group_size + i];
      xsum[static_cast<size_t>(m * groups + g)] = sum;
    }
  }
  detail::parallel_for(p.n, std::max<int64_t>(2, (1 << 15) / std::max<int64_t>(p.k * p.m, 1)),
                       [&](int64_t n0, int64_t n1) {
                         int64_t m = 0;
                         const float *xs = xp.data(), *sums = xsum.data();
                         for (; m + 4 <= p.m; m += 4) gemv_avx2_block<B, 4>(p, scales, biases, xs, sums, m, n0, n1);
                         switch (p.m - m) {
                           case 3: gemv_avx2_block<B, 3>(p, scales, biases, xs, sums, m, n0, n1); break;
                           case 2: gemv_avx2_block<B, 2>(p, scales, biases, xs, sums, m, n0, n1); break;
                           case 1: gemv_avx2_block<B, 1>(p, scales, biases, xs, sums, m, n0, n1); break;
                           default: break;
                         }
                       });
}

/* Many rows: tiles of the weights dequantized to float32 in parallel, each multiplied by sgemm. */
void gemm_tiled(const QmmProblem& p, bool transpose) {
  const int64_t groups_per_row = (transpose ? p.k : p.n) / p.q.group_size;
  const int64_t tile = std::max<int64_t>(p.q.group_size, 256);
  std::vector<float> buf(static_cast<size_t>(std::min(tile, p.n) * p.k));
  for (int64_t n0 = 0; n0 < p.n; n0 += tile) {
    const int64_t nt = std::min(tile, p.n - n0);
    if (transpose) {  // rows n0 .. n0 + nt of w [N, K]
      detail::parallel_for(nt, 1, [&](int64_t a, int64_t e) {
        for (int64_t r = a; r < e; ++r) {
          const int64_t n = n0 + r;
          dequantize_run(p.w + n * p.words, 0, p.k, p.q, p.scales + n * groups_per_row, p.biases + n * groups_per_row,
                         buf.data() + r * p.k);
        }
      });
    } else {  // columns n0 .. n0 + nt of every row of w [K, N]
      detail::parallel_for(p.k, 16, [&](int64_t a, int64_t e) {
        for (int64_t r = a; r < e; ++r) {
          dequantize_run(p.w + r * p.words, n0, nt, p.q, p.scales + r * groups_per_row, p.biases + r * groups_per_row,
                         buf.data() + r * nt);
        }
      });
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose ? CblasTrans : CblasNoTrans, static_cast<int>(p.m),
                static_cast<int>(nt), static_cast<int>(p.k), 1.0f, p.x, static_cast<int>(p.k), buf.data(),
                static_cast<int>(transpose ? p.k : nt), 0.0f, p.y + n0, static_cast<int>(p.n));
  }
}

}  // namespace

void QuantizedMatmul::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (q_.tiled)  // tile order is the GPU's; here the weights go back to row order first
    return QuantizedMatmul(rows_of(q_), transpose_, activations_)
        .eval_cpu(in_row_order("quantized_matmul", in, 1, q_), out);
  Tensor& y = out[0];
  y.allocate();
  const Tensor w = detail::row_major(in[1]);
  const int64_t k = in[0].shape.back(), n = y.shape.back();
  const int64_t m = n ? y.size() / n : 0;
  if (m == 0 || n == 0) return;
  std::vector<float> yf;
  float* yp = y.dtype == float32 ? y.data<float>() : (yf.resize(static_cast<size_t>(m * n)), yf.data());
  if (k == 0) {
    std::fill(yp, yp + m * n, 0.0f);
  } else if (activations_ != QmmActivations::exact) {
    const std::vector<float> x = detail::to_floats(in[0]);
    detail::quantized_matmul_integer(x.data(), m, k, w.data<uint32_t>(), n, in[2], in[3], q_, activations_, yp);
  } else {
    const std::vector<float> x = detail::to_floats(in[0]);
    QmmProblem p{x.data(), w.data<uint32_t>(), nullptr, nullptr, m, n, k, w.shape.back(), q_, yp};
    const bool decode = transpose_ && m <= kDecodeRows;
    const bool simd =
        decode && p.words % 8 == 0 && cpu_has_avx2_fma() && (q_.bits == 2 || q_.bits == 4 || q_.bits == 8);
    auto gemv = [&](auto* s, auto* b) {
      if (q_.bits == 4)
        gemv_avx2<4>(p, s, b);
      else if (q_.bits == 8)
        gemv_avx2<8>(p, s, b);
      else
        gemv_avx2<2>(p, s, b);
    };
    // bfloat16 scales are read in place (a shift makes each a float); float16 ones are converted
    // in one F16C pass (one at a time in software took twice as long as the product).
    const bool bf16 =
        in[2].dtype == bfloat16 && in[3].dtype == bfloat16 && in[2].row_contiguous() && in[3].row_contiguous();
    if (simd && bf16) {
      gemv(in[2].data<bfloat16_t>(), in[3].data<bfloat16_t>());
    } else if (simd) {
      const FloatRows sb(in[2], in[3]);
      gemv(sb.scales, sb.biases);
    } else {
      const FloatRows sb(in[2], in[3]);
      p.scales = sb.scales;
      p.biases = sb.biases;
      if (decode)
        gemv_generic(p);
      else
        gemm_tiled(p, transpose_);
    }
  }
  if (!yf.empty()) {
    Tensor src(y.shape, float32);
    src.buffer = detail::Buffer::borrow(yf.data(), yf.size() * sizeof(float));
    detail::copy_convert(src, y);
  }
}

void FusedQuantizedMatmul::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  std::vector<Tensor> x{in[0]};
  if (norm_eps_) {
    x[0] = Tensor(in[0].shape, in[0].dtype);
    RmsNorm(*norm_eps_, true).eval_cpu({in[0], in[1]}, x);
  }
  const size_t w = packed_at();
  if (glu_) {  // the whole product, then silu(gate) * up with each op's rounding
    Shape full_shape = out[0].shape;
    full_shape.back() *= 2;
    std::vector<Tensor> full{Tensor(full_shape, out[0].dtype)};
    QuantizedMatmul(q_, transpose_, activations_).eval_cpu({x[0], in[w], in[w + 1], in[w + 2]}, full);
    Tensor& y = out[0];
    y.allocate();
    const int64_t f = y.shape.back(), rows = f ? y.size() / f : 0;
    detail::dispatch_float(y.dtype, [&](auto z) {
      using T = decltype(z);
      const T* p = full[0].data<T>();
      T* yp = y.data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < f; ++i) yp[r * f + i] = math::silu_times(p[r * 2 * f + i], p[r * 2 * f + f + i]);
    });
    return;
  }
  QuantizedMatmul(q_, transpose_, activations_).eval_cpu({x[0], in[w], in[w + 1], in[w + 2]}, out);
  if (addend_) {  // rounded after the product and after the sum, as the separate ops round
    Tensor& y = out[0];
    const std::vector<double> r = detail::elements_as<double>(in[w + 3]);
    detail::dispatch_float(y.dtype, [&](auto z) {
      using T = decltype(z);
      T* yp = y.data<T>();
      for (int64_t i = 0; i < y.size(); ++i)
        yp[i] = static_cast<T>(static_cast<double>(yp[i]) + r[static_cast<size_t>(i)]);
    });
  }
}

}  // namespace kiln
