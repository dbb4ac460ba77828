// CPU kernel for matmul: float32/float64 through OpenBLAS (strided operands passed
// with transpose flags and leading dimensions, not copied, where BLAS can read
// them), float16/bfloat16 through sgemm in float32, integers and bool through a
// blocked kernel with wrapping arithmetic. MatmulEpilogue: the product, then bias and
// activation in place, rounded as the separate kernels would.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/strided.h"
#include "core/checked.h"
#include "core/thread_pool.h"
#include "ops/linalg.h"

namespace kiln {

namespace {

using detail::Tensor;

/* One matrix operand: its first element and its row and column strides. */
template <class T>
struct Mat {
  const T* p;
  int64_t rows, cols, rs, cs;
  T at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
};

/* How row-major cblas can read a matrix in place: transposed or not, with a leading dimension. */
struct BlasForm {
  bool ok = false, trans = false;
  int64_t ld = 0;
};

template <class T>
BlasForm blas_form(const Mat<T>& m) {
  auto fits = [](int64_t v) { return v <= INT_MAX; };
  if ((m.cols == 1 || m.cs == 1) && (m.rows == 1 || m.rs >= std::max<int64_t>(1, m.cols))) {
    int64_t ld = m.rows == 1 ? std::max<int64_t>(1, m.cols) : m.rs;
    return {fits(ld), false, ld};
  }
  if ((m.rows == 1 || m.rs == 1) && (m.cols == 1 || m.cs >= std::max<int64_t>(1, m.rows))) {
    int64_t ld = m.cols == 1 ? std::max<int64_t>(1, m.rows) : m.cs;
    return {fits(ld), true, ld};
  }
  return {};
}

/* A row-major copy of m converted to D. */
template <class D, class T>
void pack(const Mat<T>& m, std::vector<D>& out) {
  out.resize(static_cast<size_t>(m.rows * m.cols));
  D* o = out.data();
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j)
      o[i * m.cols + j] = static_cast<D>(static_cast<math::compute_t<T>>(m.at(i, j)));
  }
}

inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a, int lda, const float* b,
                 int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a, int lda, const double* b,
                 int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

/* c (M x N, row-major) = a @ b in float32/float64, copying an operand only when BLAS cannot read it. */
template <class T>
void blas_matmul(const Mat<T>& a, const Mat<T>& b, T* c) {
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  if (K == 0) {
    std::fill(c, c + M * N, T(0));
    return;
  }
  // cblas takes int sizes: a larger one would be cut, not computed.
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX) {
    fail("matmul", "a product of ", M, " x ", K, " by ", K, " x ", N, " has a dimension past BLAS's 2^31-1");
  }
  std::vector<T> ta, tb;
  BlasForm fa = blas_form(a), fb = blas_form(b);
  const T* pa = a.p;
  const T* pb = b.p;
  if (!fa.ok) pack(a, ta), pa = ta.data(), fa = {true, false, K};
  if (!fb.ok) pack(b, tb), pb = tb.data(), fb = {true, false, N};
  gemm(fa.trans ? CblasTrans : CblasNoTrans, fb.trans ? CblasTrans : CblasNoTrans, static_cast<int>(M),
       static_cast<int>(N), static_cast<int>(K), pa, static_cast<int>(fa.ld), pb, static_cast<int>(fb.ld), c,
       static_cast<int>(N));
}

/* 16-bit floats: convert to float32, sgemm, round the result once. */
template <class T>
void half_matmul(const Mat<T>& a, const Mat<T>& b, T* c) {
  std::vector<float> ta, tb, tc(static_cast<size_t>(a.rows * b.cols));
  pack(a, ta);
  pack(b, tb);
  blas_matmul<float>({ta.data(), a.rows, a.cols, a.cols, 1}, {tb.data(), b.rows, b.cols, b.cols, 1}, tc.data());
  for (size_t i = 0; i < tc.size(); ++i) c[i] = static_cast<T>(tc[i]);
}

// Integer accumulation wraps: narrow types compute in uint32 (the low bits are the
// same), wider ones in their own unsigned type. bool is "or of ands".
template <class T>
struct Acc {
  using type = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
};
template <>
struct Acc<bool> {
  using type = uint8_t;
};
template <class T>
using acc_t = typename Acc<T>::type;

template <class T>
void int_matmul(const Mat<T>& a, const Mat<T>& b, T* c) {
  using U = acc_t<T>;
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  std::vector<U> bp(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t j = 0; j < N; ++j) bp[static_cast<size_t>(k * N + j)] = static_cast<U>(b.at(k, j));
  }
  constexpr int64_t kBlockK = 128, kBlockN = 256;  // a 128 x 256 tile of b stays in L2
  int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, K * N));
  detail::parallel_for(M, grain, [&](int64_t i0, int64_t i1) {
    std::vector<U> acc(static_cast<size_t>((i1 - i0) * N), U(0));
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      int64_t j1 = std::min(N, j0 + kBlockN);
      for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
        int64_t k1 = std::min(K, k0 + kBlockK);
        for (int64_t i = i0; i < i1; ++i) {
          U* crow = acc.data() + (i - i0) * N;
          for (int64_t k = k0; k < k1; ++k) {
            U av = static_cast<U>(a.at(i, k));
            if (av == 0) continue;
            const U* brow = bp.data() + k * N;
            if constexpr (std::is_same_v<T, bool>) {
              for (int64_t j = j0; j < j1; ++j) crow[j] = static_cast<U>(crow[j] | brow[j]);
            } else {
              for (int64_t j = j0; j < j1; ++j) crow[j] = static_cast<U>(crow[j] + av * brow[j]);
            }
          }
        }
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < N; ++j) c[i * N + j] = static_cast<T>(acc[static_cast<size_t>((i - i0) * N + j)]);
    }
  });
}

template <class T>
void matmul_one(const Mat<T>& a, const Mat<T>& b, T* c) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    blas_matmul(a, b, c);
  else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>)
    half_matmul(a, b, c);
  else
    int_matmul(a, b, c);
}

/* Per output batch axis, the stride of each operand (0 where it broadcasts or is absent). */
void batch_strides(const Tensor& t, const Shape& out, Strides& s) {
  size_t nb = out.size() - 2, tb = t.shape.size() - 2;
  s.assign(nb, 0);
  for (size_t i = 0; i < tb; ++i) {
    size_t o = nb - tb + i;
    if (t.shape[i] != 1) s[o] = t.strides[i];
  }
}

/* When b is shared by every batch and a's batch rows stack evenly, the whole batch
   is one (batches * M) x K product: the row stride of that stack, else 0. */
int64_t stacked_row_stride(const Shape& batch, const Strides& sa, const Strides& sb, int64_t M, int64_t rs) {
  for (int64_t s : sb) {
    if (s != 0) return 0;
  }
  // Merge (batch axes..., M) from the inside out, as for any contiguous run of rows.
  int64_t stride = 0, size = 1;
  auto push = [&](int64_t n, int64_t st) {
    if (n == 1) return true;
    if (size == 1)
      stride = st;
    else if (st != stride * size)
      return false;
    size *= n;
    return true;
  };
  if (!push(M, rs)) return 0;
  for (size_t d = batch.size(); d-- > 0;) {
    if (!push(batch[d], sa[d])) return 0;
  }
  return size == 1 ? 1 : stride;
}

/* y = a @ b, y allocated here (row-major). */
void product(const Tensor& a, const Tensor& b, Tensor& y) {
  y.allocate();
  if (y.size() == 0) return;
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  Shape batch(y.shape.begin(), y.shape.end() - 2);
  Strides sa, sb;
  batch_strides(a, y.shape, sa);
  batch_strides(b, y.shape, sb);
  const int64_t batches = detail::shape_size(batch);
  if (batches > 1) {
    if (int64_t rs = stacked_row_stride(batch, sa, sb, M, a.strides[ra - 2])) {
      detail::dispatch_dtype(y.dtype, [&](auto t) {
        using T = decltype(t);
        Mat<T> ma{a.data<T>(), batches * M, K, rs, a.strides[ra - 1]};
        Mat<T> mb{b.data<T>(), K, N, b.strides[rb - 2], b.strides[rb - 1]};
        matmul_one<T>(ma, mb, y.data<T>());
      });
      return;
    }
  }
  // Small products run side by side (each single-threaded); large ones one at a
  // time so BLAS or the row split can use every core.
  const int64_t work = std::max<int64_t>(1, detail::saturating_mul(M * N, std::max<int64_t>(K, 1)));
  const int64_t grain = work <= (1 << 18) ? std::max<int64_t>(1, (1 << 18) / work) : batches;
  detail::dispatch_dtype(y.dtype, [&](auto t) {
    using T = decltype(t);
    detail::parallel_for(batches, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        int64_t oa = a.offset, ob = b.offset, rest = i;
        for (size_t d = batch.size(); d-- > 0;) {
          int64_t k = rest % batch[d];
          rest /= batch[d];
          oa += k * sa[d];
          ob += k * sb[d];
        }
        const T* pa = static_cast<const T*>(a.buffer->data()) + oa;
        const T* pb = static_cast<const T*>(b.buffer->data()) + ob;
        Mat<T> ma{pa, M, K, a.strides[ra - 2], a.strides[ra - 1]};
        Mat<T> mb{pb, K, N, b.strides[rb - 2], b.strides[rb - 1]};
        matmul_one<T>(ma, mb, y.data<T>() + i * M * N);
      }
    });
  });
}

/* y = act(p + bias) elementwise (p and bias broadcast to y; p may be y itself), each step
   rounded to T as the separate add and activation kernels round. */
template <class T, class Act>
void bias_activation(const Tensor& p, const Tensor& bias, Tensor& y, Act act, int64_t cost) {
  using C = math::compute_t<T>;
  Strides ps = detail::broadcast_strides(p, y.shape), bs = detail::broadcast_strides(bias, y.shape);
  auto L = detail::merge_axes<3>(y.shape, {&y.strides, &ps, &bs});
  const T* pp = p.data<T>();
  const T* bp = bias.data<T>();
  T* yp = y.data<T>();
  detail::parallel_rows<3>(L, cost, [&](auto off, int64_t n, auto st) {
    const T* x = pp + off[1];
    const T* c = bp + off[2];
    T* o = yp + off[0];
    auto one = [&](T xv, T cv) {
      T sum = static_cast<T>(math::Add{}(static_cast<C>(xv), static_cast<C>(cv)));
      return static_cast<T>(act(static_cast<C>(sum)));
    };
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = one(x[i], c[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = one(x[i * st[1]], c[i * st[2]]);
    }
  });
}

}  // namespace

void Matmul::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) { product(in[0], in[1], out[0]); }

void MatmulEpilogue::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& bias = in[2];
  Tensor& y = out[0];
  if (!is_floating(y.dtype) || in[0].dtype != y.dtype || in[1].dtype != y.dtype || bias.dtype != y.dtype) {
    fail("matmul_epilogue", "operands must share one floating dtype");
  }
  Shape ps = Matmul().output_shapes({in[0].shape, in[1].shape})[0];
  Tensor p;
  if (ps == y.shape) {
    product(in[0], in[1], y);  // then the epilogue runs in place
    p = y;
  } else {
    p = Tensor(ps, y.dtype);  // the bias broadcasts the product (a shapeless replay)
    product(in[0], in[1], p);
    y.allocate();
  }
  if (y.size() == 0) return;
  detail::dispatch_dtype(y.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (math::is_float_v<math::compute_t<T>>) {
      switch (act_) {
        case Activation::none:
          bias_activation<T>(
              p, bias, y, [](auto v) { return v; }, 1);
          break;
        case Activation::gelu: bias_activation<T>(p, bias, y, math::Gelu{}, 8); break;
        case Activation::gelu_tanh: bias_activation<T>(p, bias, y, math::GeluTanh{}, 8); break;
      }
    }
  });
}

}  // namespace kiln
