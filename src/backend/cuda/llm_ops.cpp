// The language-model primitives on a CUDA device. Each fills its argument struct
// (kernels/args.h) and launches a kernel of kernels/llm.cuh, compiled once per
// instantiation; launches are recorded like any other, so a compiled step replays them.
// Operands a kernel needs dense (or 16-byte aligned for its vector loads) are copied first.
#include "backend/cuda/llm_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <cstring>
#include <string>

#include "backend/cpu/strided.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/codegen.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels/args.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/struct_launch.h"
#include "backend/cuda/tuning.h"
#include "compile/codegen_util.h"
#include "core/buffer.h"
#include "core/stats.h"
#include "ops/nn.h"

namespace kiln::cuda {

using detail::Tensor;

Tensor contiguous_on_device(const Tensor& t, int device);  // eval.cpp

namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kMinSplitKeys = 512;  // fewest keys a split of decode attention takes
constexpr unsigned kAttentionThreads = 256;  // most threads of an attention block

constexpr const char* kHeader = "backend/cuda/kernels/llm.cuh";
constexpr const char* kAttentionHeader = "backend/cuda/kernels/attention.cuh";

/* Launches llm::<call>(args). Every kernel of llm.cuh waits for its inputs itself. */
template <class Args>
void run(int dev, const char* args_name, const std::string& call, const Args& a, unsigned grid, unsigned block,
         unsigned shared = 0) {
  launch_struct(dev, kHeader, args_name, "llm::" + call, a, grid, block, shared, true);
}
/* Launches attention::<call> of kernels/attention.cuh (which waits for its inputs too). */
void run_attention(int dev, const std::string& call, const args::Attention& a, unsigned grid, unsigned block,
                   unsigned shared = 0, const std::string& attributes = "") {
  launch_struct(dev, kAttentionHeader, "Attention", "attention::" + call, a, grid, block, shared, true, attributes);
}

std::string type(Dtype d) { return compiler::cpp_type(d); }

/* t row-major and starting on a multiple of `align` bytes, copied when it is not. */
Tensor dense(int dev, const Tensor& t, long align = 1) {
  if (t.row_contiguous() && ptr_bits(t) % align == 0) return t;
  return contiguous_on_device(t, dev);
}

/* t in dtype d (row-major), converted on the device when it is not. */
Tensor as_dtype(int dev, const Tensor& t, Dtype d) {
  if (t.dtype == d) return dense(dev, t);
  Tensor c(t.shape, d);
  allocate_output(dev, c);
  copy_into(dev, t, c);
  return c;
}

void fill_zero(int dev, Tensor& y) {
  Tensor zero(Shape{}, y.dtype);
  zero.allocate();
  std::memset(zero.raw(), 0, zero.itemsize());
  copy_into(dev, to_device(zero, dev), y);
}

unsigned row_blocks(int dev, int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{device_info(dev).sms} * 16));
}

// ---- quantization ---------------------------------------------------------------------
/* The packed rows of w expanded into y (rows x k values, y's dtype). */
void dequantize_into(int dev, const QuantParams& q, const Tensor& w, const Tensor& s, const Tensor& b, Tensor& y) {
  const int64_t k = y.shape.empty() ? 0 : y.shape.back(), rows = k ? y.size() / k : 0;
  if (rows == 0) return;
  const Tensor pw = dense(dev, w, 16), ps = dense(dev, s), pb = as_dtype(dev, b, s.dtype);
  args::Dequantize a{rows,
                     k,
                     q.group_size,
                     reinterpret_cast<const void*>(ptr_bits(pw)),
                     reinterpret_cast<const void*>(ptr_bits(ps)),
                     reinterpret_cast<const void*>(ptr_bits(pb)),
                     reinterpret_cast<void*>(ptr_bits(y)),
                     q.tiled ? 1L : 0L};
  // A thread per 8 values; tile order: a block of 256 threads per two steps of 16 rows x 256 values.
  run(dev, "Dequantize", "dequantize<" + type(s.dtype) + ", " + type(y.dtype) + ", " + std::to_string(q.bits) + ">", a,
      grid_for(dev, rows * k / (q.tiled ? 32 : 8), kThreads), kThreads);
}

/* Weights in tile order (q.tiled) put back in row order on the device, for the kernels that
   read rows; q and the tensors as they are otherwise. */
struct RowOrder {
  QuantParams q;
  Tensor w, s, b;
};
RowOrder row_order(int dev, QuantParams q, const Tensor& w, const Tensor& s, const Tensor& b) {
  if (!q.tiled) return {q, w, s, b};
  const Tensor pw = dense(dev, w, 16), ps = dense(dev, s), pb = as_dtype(dev, b, s.dtype);
  RowOrder r{q, Tensor(w.shape, w.dtype), Tensor(s.shape, s.dtype), Tensor(s.shape, s.dtype)};
  r.q.tiled = false;
  for (Tensor* t : {&r.w, &r.s, &r.b}) allocate_output(dev, *t);
  const int64_t n = w.shape[0], k = w.shape[1] * 8;
  const args::Untile a{n,
                       k,
                       q.group_size,
                       reinterpret_cast<const void*>(ptr_bits(pw)),
                       reinterpret_cast<const void*>(ptr_bits(ps)),
                       reinterpret_cast<const void*>(ptr_bits(pb)),
                       reinterpret_cast<void*>(ptr_bits(r.w)),
                       reinterpret_cast<void*>(ptr_bits(r.s)),
                       reinterpret_cast<void*>(ptr_bits(r.b))};
  run(dev, "Untile", "untile<" + type(s.dtype) + ">", a, grid_for(dev, n * (k / 32), kThreads), kThreads);
  return r;
}

void norm(int dev, const std::vector<Tensor>& in, Tensor& y, double eps, bool layer, bool has_weight, bool has_bias);

/* y = x @ dequantize(w)^T (transpose) or x @ dequantize(w); with `norm` (a weight and eps),
   rms_norm(x) in place of x. */
struct InputNorm {
  Tensor weight;
  double eps;
};
/* out += addend (same shape and dtype). */
void add_into(int dev, const Tensor& addend, Tensor& y) {
  const Tensor r = dense(dev, addend);
  args::AddInto a{y.size(), reinterpret_cast<const void*>(ptr_bits(r)), reinterpret_cast<void*>(ptr_bits(y))};
  run(dev, "AddInto", "add_into<" + type(y.dtype) + ">", a, grid_for(dev, y.size(), kThreads), kThreads);
}

/* y = silu(full[..., :f]) * full[..., f:] for y of f columns. */
void gated_into(int dev, const Tensor& full, Tensor& y) {
  const int64_t f = y.shape.back(), rows = f ? y.size() / f : 0;
  if (rows == 0) return;
  args::Gated a{rows, f, reinterpret_cast<const void*>(ptr_bits(full)), reinterpret_cast<void*>(ptr_bits(y))};
  run(dev, "Gated", "gated<" + type(y.dtype) + ">", a, grid_for(dev, rows * f, kThreads), kThreads);
}

/* A decode product's launch: the rows of w a block takes (with `glu`, gate rows and their up
   rows), sharing the activations' loads: four (two with more than two activation rows) where
   the output columns allow, else fewer. Its warps split the rows' chunks of 32 values, two chunks
   a lane or more (at most kGemvWarps warps; a chunk a lane made the integer product's blocks,
   mostly their folds, take 0.20 ms instead of 0.11 for the 128256 x 4096 logits). */
struct GemvShape {
  int64_t rows;
  unsigned grid, block;
};
GemvShape gemv_shape(int64_t m, int64_t n, int64_t k, bool glu) {
  const int64_t outs = glu ? n / 2 : n, per_out = glu ? 2 : 1;
  const int64_t most = m > 2 ? 2 : 4;  // each activation row adds R sums a lane holds
  const int64_t rows = outs % (most / per_out) == 0 ? most : outs % (2 / per_out) == 0 ? 2 : 1;
  unsigned warps = 1;
  while (warps < unsigned{args::kGemvWarps} && k / 32 >= 32 * 2 * static_cast<int64_t>(warps)) warps *= 2;
  return {rows, static_cast<unsigned>(outs * per_out / rows), 32 * warps};
}

/* quantized_matmul with integer activations (QmmActivations::int8 and int16) of transposed
   weights: x's rows rounded to codes (after the norm, with one) by quantize_rows, then the
   integer decode product a tile of up to kDecodeRows rows at a time (prefill reads the weights
   once a tile). */
void quantized_matmul_integer(int dev, const QuantParams& q, QmmActivations activations, const Tensor& x,
                              const Tensor& w, const Tensor& s, const Tensor& b, Tensor& y,
                              const std::optional<InputNorm>& with_norm = std::nullopt, const Tensor* addend = nullptr,
                              bool glu = false) {
  const int64_t k = x.shape.back(), n = y.shape.back() * (glu ? 2 : 1), m = n ? y.size() * (glu ? 2 : 1) / n : 0;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    fill_zero(dev, y);
    if (addend) add_into(dev, *addend, y);
    return;
  }
  if (q.tiled) {  // the integer kernels read rows
    const RowOrder r = row_order(dev, q, w, s, b);
    return quantized_matmul_integer(dev, r.q, activations, x, r.w, r.s, r.b, y, with_norm, addend, glu);
  }
  const bool wide = activations == QmmActivations::int16;
  const int64_t code_bytes = wide ? 2 : 1, blocks = k / 32, outs = glu ? n / 2 : n;
  // x at 16 bytes: quantize_rows reads a row's squares in 16-byte pieces.
  const Tensor px = dense(dev, x, 16), pw = dense(dev, w, 16), ps = dense(dev, s);
  const Tensor pb = as_dtype(dev, b, ps.dtype);
  Tensor nw, r;
  if (with_norm) nw = dense(dev, with_norm->weight);
  if (addend) r = dense(dev, *addend);
  Tensor codes(Shape{m, k}, wide ? int16 : int8), scale(Shape{m, blocks}, float32), sum(Shape{m, blocks}, float32);
  for (Tensor* t : {&codes, &scale, &sum}) allocate_output(dev, *t);
  const args::QuantizeRows qa{m,
                              k,
                              with_norm ? with_norm->eps : 0.0,
                              reinterpret_cast<const void*>(ptr_bits(px)),
                              with_norm ? reinterpret_cast<const void*>(ptr_bits(nw)) : nullptr,
                              reinterpret_cast<void*>(ptr_bits(codes)),
                              reinterpret_cast<void*>(ptr_bits(scale)),
                              reinterpret_cast<void*>(ptr_bits(sum))};
  run(dev, "QuantizeRows",
      "quantize_rows<" + type(x.dtype) + ", " + type(with_norm ? nw.dtype : x.dtype) + ", " +
          (wide ? "true" : "false") + ">",
      qa, static_cast<unsigned>(m * ((blocks + args::kQuantizeBlocks - 1) / args::kQuantizeBlocks)),
      32 * args::kQuantizeBlocks);
  const int64_t out_bytes = static_cast<int64_t>(size_of(y.dtype));
  for (int64_t m0 = 0; m0 < m; m0 += kDecodeRows) {
    const int64_t tile = std::min<int64_t>(kDecodeRows, m - m0);
    const args::QuantizedGemv a{tile,
                                n,
                                k,
                                q.group_size,
                                0.0,
                                nullptr,
                                reinterpret_cast<const void*>(ptr_bits(codes) + m0 * k * code_bytes),
                                reinterpret_cast<const void*>(ptr_bits(scale) + m0 * blocks * 4),
                                reinterpret_cast<const void*>(ptr_bits(sum) + m0 * blocks * 4),
                                reinterpret_cast<const void*>(ptr_bits(pw)),
                                reinterpret_cast<const void*>(ptr_bits(ps)),
                                reinterpret_cast<const void*>(ptr_bits(pb)),
                                addend ? reinterpret_cast<const void*>(ptr_bits(r) + m0 * n * out_bytes) : nullptr,
                                reinterpret_cast<void*>(ptr_bits(y) + m0 * outs * out_bytes),
                                fixed_during_recording(pw) ? 1L : 0L,
                                glu ? 1L : 0L,
                                0L};
    const GemvShape g = gemv_shape(tile, n, k, glu);
    run(dev, "QuantizedGemv",
        "quantized_gemv_integer<" + type(x.dtype) + ", " + type(ps.dtype) + ", " + std::to_string(q.bits) + ", " +
            std::to_string(tile) + ", " + (wide ? "true" : "false") + ", " + std::to_string(g.rows) + ">",
        a, g.grid, g.block);
  }
}

/* Whether a product runs on the tensor cores (quantized_mma): transposed 4-bit weights, 16-bit
   activations, from the knob's rows (KILN_CUDA_MMA_PRODUCT_ROWS) up to args::kMmaMostRows, whole
   chunks of values and whole tiles of weight rows, compute capability 8.0 or newer. */
bool mma_product(int dev, const QuantParams& q, bool transpose, Dtype xt, int64_t m, int64_t n, int64_t k, bool glu) {
  return transpose && q.bits == 4 && (xt == bfloat16 || xt == float16) && m >= std::max(2, tuning().mma_product_rows) &&
         m <= args::kMmaMostRows && k % args::kMmaChunk == 0 &&
         (glu ? n / 2 : n) % (args::kMmaRows / (glu ? 2 : 1)) == 0 && device_info(dev).major >= 8;
}

/* Shared memory of a quantized_mv block: x's image and sums, 16 zero words, the warps' row sums
   and a fold's 32 floats; with tile order, its warps' slots (scales and biases of scale_bytes). */
unsigned mv_shared_bytes(int64_t k, bool tiled, int64_t scale_bytes) {
  return static_cast<unsigned>(
      args::mv_slots_at(k) +
      (tiled ? args::kMvWarps * args::kMvTiledStages * args::mv_tiled_slot_bytes(scale_bytes) : 0));
}

/* Launches quantized_mv<types, nw_type, split, tiled>. */
void quantized_mv(int dev, const args::QuantizedGemv& a, const std::string& types, const std::string& nw_type,
                  int split, int64_t scale_bytes) {
  const unsigned grid = static_cast<unsigned>(a.n / 16 / (args::kMvWarps / split));
  run(dev, "QuantizedGemv",
      "quantized_mv<" + types + ", " + nw_type + ", " + std::to_string(split) + ", " + (a.tiled ? "true" : "false") +
          ">",
      a, grid, 32 * args::kMvWarps, mv_shared_bytes(a.k, a.tiled, scale_bytes));
}

/* Launches quantized_mma<types, NT, nw_type> with NT tiles of 8 activation rows. */
void quantized_mma(int dev, const args::QuantizedGemv& a, const std::string& types, const std::string& nw_type) {
  const int64_t outs = a.glu ? a.n / 2 : a.n, chunks = a.k / args::kMmaChunk, nt = a.m <= 8 ? 1 : a.m <= 16 ? 2 : 4;
  const unsigned warps = static_cast<unsigned>(std::clamp<int64_t>(chunks / 2, 1, args::kMmaWarps));
  const unsigned grid = static_cast<unsigned>(a.glu ? outs / (args::kMmaRows / 2) : outs / args::kMmaRows);
  const unsigned shared = static_cast<unsigned>(warps * (args::kMmaRows + 1) * nt * 8 * sizeof(float));
  run(dev, "QuantizedGemv", "quantized_mma<" + types + ", " + std::to_string(nt) + ", " + nw_type + ">", a, grid,
      32 * warps, shared);
}

/* The one-row product on the tensor cores (quantized_mv) takes transposed 4-bit weights against
   one row of 16-bit x when the knob's rows (KILN_CUDA_MMA_PRODUCT_ROWS) start at 1: whole chunks
   of values, whole 16-row tiles, scales and biases on 4-byte boundaries, x's image within the
   block's shared memory; with glu, whole tiles of gate rows (a block takes as many tiles of
   their up rows, so at most kMvWarps / 2 warps split a tile). Returns the warps that split a
   tile (0: not this kernel). */
int mv_split(int dev, const QuantParams& q, bool transpose, Dtype xt, int64_t m, int64_t n, int64_t k, const Tensor& s,
             const Tensor& b, bool glu) {
  if (!transpose || q.bits != 4 || (xt != bfloat16 && xt != float16) || m != 1 || tuning().mma_product_rows > 1 ||
      k % args::kMvChunk != 0 || n % (glu ? 32 : 16) != 0 || ptr_bits(s) % 4 != 0 || ptr_bits(b) % 4 != 0 ||
      device_info(dev).major < 8 ||
      mv_shared_bytes(k, q.tiled, int64_t(size_of(s.dtype))) > static_cast<unsigned>(device_info(dev).shared_optin))
    return 0;
  // The most warps a tile whose warps all fit on the SMs at once (16 an SM at 128 registers):
  // fewer leave SMs waiting on their loads, more run in two rounds (measured on an H200).
  const int64_t tiles = n / 16, resident = int64_t{device_info(dev).sms} * 16, most = args::kMvWarps / (glu ? 2 : 1);
  const int chosen = tuning().mv_split;
  int split = static_cast<int>(std::min<int64_t>(
      chosen ? static_cast<int>(std::bit_floor(static_cast<unsigned>(chosen))) : args::kMvWarps, most));
  while (!chosen && split > 1 && tiles * split > resident) split /= 2;
  // A block's tiles (with glu, its gate tiles) divide the product's.
  const int64_t units = glu ? tiles / 2 : tiles;
  while (units % (args::kMvWarps / split / (glu ? 2 : 1)) != 0) split *= 2;
  return split;
}

/* With `glu`, y holds silu(gate) * up of a product whose columns are the gate and up halves. */
void quantized_matmul(int dev, const QuantParams& q, bool transpose, const Tensor& x, const Tensor& w, const Tensor& s,
                      const Tensor& b, Tensor& y, const std::optional<InputNorm>& with_norm = std::nullopt,
                      const Tensor* addend = nullptr, bool glu = false) {
  const int64_t k = x.shape.back(), n = y.shape.back() * (glu ? 2 : 1), m = n ? y.size() * (glu ? 2 : 1) / n : 0;
  if (m == 0 || n == 0) return;
  const bool mma = k > 0 && mma_product(dev, q, transpose, x.dtype, m, n, k, glu);
  const int split = k > 0 ? mv_split(dev, q, transpose, x.dtype, m, n, k, s, b, glu) : 0;
  if (glu && !mma && !split && (k == 0 || !transpose || m > kDecodeRows)) {  // the whole product, then its gate
    Shape full_shape = y.shape;
    full_shape.back() = n;
    Tensor full(full_shape, y.dtype);
    allocate_output(dev, full);
    quantized_matmul(dev, q, transpose, x, w, s, b, full, with_norm);
    return gated_into(dev, full, y);
  }
  if (k == 0) {
    fill_zero(dev, y);
    if (addend) add_into(dev, *addend, y);
    return;
  }
  if (q.tiled && !split && !mma && m <= kDecodeRows) {  // the CUDA cores' decode product reads rows
    const RowOrder r = row_order(dev, q, w, s, b);
    return quantized_matmul(dev, r.q, transpose, x, r.w, r.s, r.b, y, with_norm, addend, glu);
  }
  if (split || mma || (transpose && m <= kDecodeRows)) {
    const Tensor px = dense(dev, x, 16), pw = dense(dev, w, 16), ps = dense(dev, s);
    const Tensor pb = as_dtype(dev, b, ps.dtype);
    Tensor nw, r;
    if (with_norm) nw = dense(dev, with_norm->weight, 16);
    if (addend) r = dense(dev, *addend);
    args::QuantizedGemv a{m,
                          n,
                          k,
                          q.group_size,
                          with_norm ? with_norm->eps : 0.0,
                          with_norm ? reinterpret_cast<const void*>(ptr_bits(nw)) : nullptr,
                          reinterpret_cast<const void*>(ptr_bits(px)),
                          nullptr,
                          nullptr,
                          reinterpret_cast<const void*>(ptr_bits(pw)),
                          reinterpret_cast<const void*>(ptr_bits(ps)),
                          reinterpret_cast<const void*>(ptr_bits(pb)),
                          addend ? reinterpret_cast<const void*>(ptr_bits(r)) : nullptr,
                          reinterpret_cast<void*>(ptr_bits(y)),
                          fixed_during_recording(pw) ? 1L : 0L,
                          glu ? 1L : 0L,
                          q.tiled ? 1L : 0L};
    const std::string nw_type = type(with_norm ? nw.dtype : x.dtype);
    if (split) {  // scales and biases too are read before x is ready
      a.weights_ready = a.weights_ready && fixed_during_recording(ps) && fixed_during_recording(pb);
      return quantized_mv(dev, a, type(x.dtype) + ", " + type(ps.dtype), nw_type, split, int64_t(size_of(ps.dtype)));
    }
    if (mma) return quantized_mma(dev, a, type(x.dtype) + ", " + type(ps.dtype), nw_type);
    const GemvShape g = gemv_shape(m, n, k, glu);
    run(dev, "QuantizedGemv",
        "quantized_gemv<" + type(x.dtype) + ", " + type(ps.dtype) + ", " + std::to_string(q.bits) + ", " +
            std::to_string(m) + ", " + nw_type + ", " + std::to_string(g.rows) + ">",
        a, g.grid, g.block);
    return;
  }
  if (with_norm) {  // the norm first, then the product
    Tensor h(x.shape, x.dtype);
    allocate_output(dev, h);
    norm(dev, {x, with_norm->weight}, h, with_norm->eps, false, true, false);
    return quantized_matmul(dev, q, transpose, h, w, s, b, y, std::nullopt, addend);
  }
  // Prefill and the untransposed layout: the weights expanded to the activations' dtype (as
  // MLX and a bfloat16 PyTorch model hold them), then cuBLASLt in that dtype with float32 sums.
  const int64_t wk = transpose ? k : n;  // values a packed row holds
  Tensor full(Shape{w.shape[0], wk}, x.dtype);
  allocate_output(dev, full);
  dequantize_into(dev, q, w, s, b, full);
  const Tensor wt = transpose ? detail::view(full, Shape{k, n}, Strides{1, k}, 0) : full;
  // Every row of x meets the same weights: one [m, k] @ [k, n] product (x [B, 1, k] of B sessions
  // as B batched one-row products read the expanded weights B times).
  const Tensor xd = dense(dev, x);
  Tensor yd = y.dtype == x.dtype ? y : Tensor(y.shape, x.dtype);
  if (y.dtype != x.dtype) allocate_output(dev, yd);
  Tensor y2 = detail::view(yd, Shape{m, n}, Strides{n, 1}, yd.offset);
  matmul(dev, detail::view(xd, Shape{m, k}, Strides{k, 1}, xd.offset), wt, y2);
  if (y.dtype != x.dtype) copy_into(dev, yd, y);
  if (addend) add_into(dev, *addend, y);
}

// ---- norms ----------------------------------------------------------------------------------
void norm(int dev, const std::vector<Tensor>& in, Tensor& y, double eps, bool layer, bool has_weight, bool has_bias) {
  const int64_t n = y.shape.empty() ? 1 : y.shape.back(), rows = n ? y.size() / n : 0;
  if (rows == 0) return;
  const Tensor x = dense(dev, in[0]);
  // Weight and bias in one dtype (the first given), read as the kernel's W.
  const Dtype wd = has_weight ? in[1].dtype : has_bias ? in[1].dtype : x.dtype;
  Tensor w, b;
  if (has_weight) w = as_dtype(dev, in[1], wd);
  if (has_bias) b = as_dtype(dev, in[has_weight ? 2 : 1], wd);
  args::Norm a{rows,
               n,
               eps,
               reinterpret_cast<const void*>(ptr_bits(x)),
               has_weight ? reinterpret_cast<const void*>(ptr_bits(w)) : nullptr,
               has_bias ? reinterpret_cast<const void*>(ptr_bits(b)) : nullptr,
               reinterpret_cast<void*>(ptr_bits(y))};
  // Rows in 16-byte loads where every row, the weight and the bias start on 16 bytes.
  const int64_t vec = 16 / static_cast<int64_t>(x.itemsize());
  const bool runs = n % vec == 0 && ptr_bits(x) % 16 == 0 && ptr_bits(y) % 16 == 0 &&
                    (!has_weight || ptr_bits(w) % 16 == 0) && (!has_bias || ptr_bits(b) % 16 == 0);
  const std::string types =
      type(x.dtype) + ", " + type(wd) + ", " + (layer ? "true" : "false") + ", " + std::to_string(runs ? vec : 1) + ">";
  if (n <= 32 * args::kNormLaneValues &&
      rows >= 64) {  // a warp a row: many short rows (one row: a block's loads in parallel)
    constexpr unsigned kWarps = 4;
    run(dev, "Norm", "norm_warp<" + types, a, static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps);
  } else {
    // Enough threads (at most 512: the kernel takes up to 128 registers) that a row of up to
    // 4096 values sits in registers, kNormThreadValues a thread.
    const int64_t held = (n + args::kNormThreadValues - 1) / args::kNormThreadValues;
    const auto threads = static_cast<unsigned>(std::clamp<int64_t>((held + 31) / 32 * 32, 64, 512));
    run(dev, "Norm", "norm<" + types, a, row_blocks(dev, rows), threads);
  }
}

// ---- rope -----------------------------------------------------------------------------------
void rope(int dev, const Rope& prim, const std::vector<Tensor>& in, Tensor& y) {
  const Tensor x = dense(dev, in[0]);
  const int64_t d = x.shape.back(), len = x.shape[x.shape.size() - 2], rows = d ? x.size() / d : 0;
  if (rows == 0 || len == 0) return;
  const Tensor offsets = as_dtype(dev, in[1], int32);
  Tensor freqs;
  if (prim.has_freqs()) freqs = as_dtype(dev, in[2], float32);
  const int64_t half = prim.dims() / 2;
  const bool trad = prim.traditional();
  args::Rope a{rows,
               d,
               len,
               prim.dims(),
               half,
               rows / offsets.size(),
               trad ? 1 : half,
               trad ? 2 : 1,
               prim.base().value_or(0.0f),
               prim.scale(),
               reinterpret_cast<const void*>(ptr_bits(x)),
               reinterpret_cast<const void*>(ptr_bits(offsets)),
               prim.has_freqs() ? reinterpret_cast<const void*>(ptr_bits(freqs)) : nullptr,
               reinterpret_cast<void*>(ptr_bits(y))};
  run(dev, "Rope", "rope<" + type(x.dtype) + ">", a, grid_for(dev, rows * std::max(half, d - prim.dims()), kThreads),
      kThreads);
}

// ---- attention ------------------------------------------------------------------------------
/* q, k or v with unit stride along the last axis. */
Tensor unit_rows(int dev, const Tensor& t) { return t.strides.back() == 1 || t.shape.back() <= 1 ? t : dense(dev, t); }

/* The operands of one attention: q, k and v as the op gives them, or, with k_rows and v_rows,
   each batch row's own caches (q.shape[0] of each, dense, of k's and v's shape [1, ...]); the
   mask and key lengths where given. */
struct AttentionOperands {
  const char* op = "scaled_dot_product_attention";  // errors name it
  Tensor q, k, v, mask, lengths;
  const Tensor* k_rows = nullptr;
  const Tensor* v_rows = nullptr;
  ScaledDotProductAttention::Mask mask_kind = ScaledDotProductAttention::Mask::none;
  bool causal = false;
  float scale = 1;
  int64_t length_add = 0;  // added to each key length
  // The step's own keys and values with one query position (args::Attention's fresh_k), rotated
  // by `rope` where set: lengths then hold the positions.
  Tensor fresh_k, fresh_v, freqs;
  const Rope* rope = nullptr;
};

/* How attention::split reads a head's rows: Vec values a load (16 bytes where every row
   allows, else 1), Lanes lanes a key row, Chunks loads a lane, Rows query rows a block. */
struct AttentionShape {
  int vec, lanes, chunks, rows;
};
/* Whether every row of t (its last axis, of unit stride) starts on 16 bytes, `vec` values. */
bool rows_of_16_bytes(const Tensor& t, int vec) {
  for (size_t i = 0; i + 1 < t.shape.size(); ++i) {
    if (t.strides[i] % vec != 0) return false;
  }
  return (t.strides.back() == 1 || t.shape.back() <= 1) && ptr_bits(t) % 16 == 0;
}

/* Values of q, k and v a 16-byte load takes where every row of all three (and of every batch
   row's caches) starts on 16 bytes, else 1. */
int row_load_width(const AttentionOperands& o) {
  const int vec = static_cast<int>(16 / o.q.itemsize());
  auto fits = [&](const Tensor& t) { return rows_of_16_bytes(t, vec); };
  bool rows_fit = true;
  for (int64_t b = 0; o.k_rows && b < o.q.shape[0]; ++b) rows_fit = rows_fit && fits(o.k_rows[b]) && fits(o.v_rows[b]);
  return o.q.shape[3] % vec == 0 && o.v.shape[3] % vec == 0 && fits(o.q) && fits(o.k) && fits(o.v) && rows_fit ? vec
                                                                                                               : 1;
}

AttentionShape attention_shape(int64_t d, int64_t dv, int vec, int64_t rows) {
  const int64_t loads = (std::max(d, dv) + vec - 1) / vec;  // loads of a key row
  int lanes = 1;
  while (lanes < 32 && lanes < loads) lanes *= 2;
  const int chunks = static_cast<int>((loads + lanes - 1) / lanes);
  // Each row holds its q and sums in registers: at most 32 values of each a lane.
  int r = 1;
  while (r < 8 && r < rows && 2 * r * chunks * vec <= 32) r *= 2;
  return {vec, lanes, chunks, r};
}

/* Whether attention::mma takes these operands: 16-bit heads of 64 or 128 dims whose rows are
   16-byte aligned, on a GPU with tensor cores of sm_80 or later. */
bool attention_takes_mma(int dev, const AttentionOperands& o) {
  const int64_t d = o.q.shape[3];
  return (o.q.dtype == float16 || o.q.dtype == bfloat16) && d == o.v.shape[3] && (d == 64 || d == 128) &&
         device_info(dev).major >= 8 && row_load_width(o) == 8;
}

}  // namespace

// Decoding rows (one row tile a head) of few heads on sm_90, caches of kMinSplitKeys and more: a
// cluster of 8 blocks a head (16 where `most` allows: faster for one op over 4096 keys, not
// measurably in a model's decode) shares what the rows see (in the kernel: the valid keys, not the
// cache's capacity) and merges in shared memory, where those blocks fit in one wave (4 sessions of
// the 8B shape in 256 blocks measured no faster than splits and a combine). Smaller caches take
// one block a head: ~2 us less than a cluster over a few keys.
int64_t attention_cluster(int major, int64_t sms, int64_t cache_keys, int64_t heads, bool decoding, int64_t most) {
  if (major < 9 || !decoding || cache_keys < kMinSplitKeys) return 0;
  for (int64_t c : {int64_t{args::kMaxClusterSplits}, int64_t{8}})
    if (c <= most && heads * c <= sms) return c;
  return 0;
}

namespace {

void attention(int dev, const AttentionOperands& o, Tensor& y) {
  using Mask = ScaledDotProductAttention::Mask;
  if (y.size() == 0) return;
  const Tensor &q = o.q, &k = o.k, &v = o.v;
  const int64_t batch = q.shape[0], hq = q.shape[1], lq = q.shape[2], d = q.shape[3];
  const int64_t hkv = k.shape[1], lk = k.shape[2], dv = v.shape[3];
  const bool fresh = o.fresh_k.buffer != nullptr;
  if (d > 32 * args::kLaneDims || dv > 32 * args::kLaneDims)
    fail(o.op, "head dims above ", 32 * args::kLaneDims, " on a CUDA device (q ", d, ", v ", dv, ")");
  if (lk > INT32_MAX || (hq / hkv) * lq > INT32_MAX)
    fail(o.op, "more than 2^31 - 1 keys or query rows a head on a CUDA device");
  Strides mask_strides(4, 0);
  if (o.mask_kind != Mask::none) mask_strides = detail::broadcast_strides(o.mask, {batch, hq, lq, lk});
  const int64_t group = hq / hkv, rows = group * lq;
  // Splits of the keys that give every SM two blocks (one where the rows alone fill the GPU),
  // each a whole number of `step` keys and at least kMinSplitKeys: a decode step's cache of a few
  // hundred keys takes one block a head in less time than merging splits takes a second kernel.
  const int64_t sms = device_info(dev).sms;
  auto split_keys = [&](int64_t blocks_per_split, int64_t step) {
    const int64_t want = blocks_per_split >= sms ? 1 : (2 * sms + blocks_per_split - 1) / blocks_per_split;
    auto whole_steps = [&](int64_t keys) { return (keys + step - 1) / step * step; };
    const int64_t len = std::max(whole_steps(kMinSplitKeys), whole_steps((lk + want - 1) / want));
    return std::pair{len, std::max<int64_t>(1, (lk + len - 1) / len)};
  };
  // Tensor cores for 16-bit heads of 64 or 128 dims whose rows are 16-byte aligned: 4 warps as
  // Wr row tiles of 16 x Wk tiles of keys (Wk = 4 for up to 16 rows, as in decoding).
  const int vec = row_load_width(o);
  const bool mma = attention_takes_mma(dev, o);
  if (fresh && (!mma || lq != 1)) fail(o.op, "internal: the step's own keys go to the tensor-core kernel, one query");
  const int64_t row_tiles = (rows + 15) / 16;
  const int64_t wk = row_tiles >= 4 ? 1 : row_tiles == 1 ? 4 : 2;
  AttentionShape sh{};
  unsigned warps = 4, shared = 0;
  int64_t blocks_per_split = 0, step = args::kAttentionMmaKeys;
  if (mma) {
    blocks_per_split = batch * hkv * ((row_tiles + 4 / wk - 1) / (4 / wk));
    // Two stages of keys and values, later the warps' sums to merge.
    shared = static_cast<unsigned>(
        std::max<int64_t>(2 * 2 * args::kAttentionMmaKeys * d * 2, wk > 1 ? 4 * 16 * (d + 2) * 4 : 0));
  } else {
    // A block takes Rows rows (query positions x the heads of a key/value head), its warps one
    // pass of keys at least.
    sh = attention_shape(d, dv, vec, rows);
    blocks_per_split = batch * hkv * ((rows + sh.rows - 1) / sh.rows);
    warps = static_cast<unsigned>(
        std::clamp<int64_t>(48 * 1024 / (sh.rows * (dv + 2) * int64_t{sizeof(float)}), 1, kAttentionThreads / 32));
    step = int64_t{warps} * (32 / sh.lanes) * args::kAttentionKeys;
    shared = static_cast<unsigned>(warps * sh.rows * (dv + 2) * sizeof(float));
  }
  const int64_t cluster = mma ? attention_cluster(device_info(dev).major, sms, lk, blocks_per_split, row_tiles == 1,
                                                  tuning().attention_cluster)
                              : 0;
  const auto [split_len, splits] =
      cluster ? std::pair<int64_t, int64_t>{0, cluster} : split_keys(blocks_per_split, step);
  const int64_t blocks = blocks_per_split * splits;
  if (blocks > INT32_MAX) fail(o.op, "too many queries for one launch (", blocks, " blocks)");
  Tensor partial;
  if (splits > 1 && !cluster) {
    partial = Tensor(Shape{batch * hq * lq * splits * (dv + 2)}, float32);
    allocate_output(dev, partial);
  }
  args::Attention a{};
  a.batch = batch, a.hq = hq, a.hkv = hkv, a.lq = lq, a.lk = lk, a.d = d, a.dv = dv;
  a.splits = splits, a.split_len = split_len;
  for (int i = 0; i < 3; ++i) {
    a.q_strides[i] = q.strides[static_cast<size_t>(i)];
    a.k_strides[i] = k.strides[static_cast<size_t>(i)];
    a.v_strides[i] = v.strides[static_cast<size_t>(i)];
  }
  a.mask_kind = o.mask_kind == Mask::none ? 0 : o.mask_kind == Mask::keep ? 1 : 2;
  for (int i = 0; i < 4; ++i) a.mask_strides[i] = mask_strides[static_cast<size_t>(i)];
  a.causal = o.causal;
  a.scale = o.scale;
  a.q = reinterpret_cast<const void*>(ptr_bits(q));
  a.k = reinterpret_cast<const void*>(ptr_bits(k));
  a.v = reinterpret_cast<const void*>(ptr_bits(v));
  for (int64_t b = 0; o.k_rows && b < batch; ++b) {
    a.k_rows[b] = reinterpret_cast<const void*>(ptr_bits(o.k_rows[b]));
    a.v_rows[b] = reinterpret_cast<const void*>(ptr_bits(o.v_rows[b]));
  }
  a.mask = o.mask_kind == Mask::none ? nullptr : reinterpret_cast<const void*>(ptr_bits(o.mask));
  a.key_lengths = o.lengths.buffer ? reinterpret_cast<const void*>(ptr_bits(o.lengths)) : nullptr;
  a.key_length_add = o.length_add;
  a.inputs_ready =
      (!o.lengths.buffer || fixed_during_recording(o.lengths)) && (!o.freqs.buffer || fixed_during_recording(o.freqs));
  if (fresh) {
    a.fresh_k = reinterpret_cast<const void*>(ptr_bits(o.fresh_k));
    a.fresh_v = reinterpret_cast<const void*>(ptr_bits(o.fresh_v));
    for (int i = 0; i < 2; ++i) {
      a.fresh_k_strides[i] = o.fresh_k.strides[static_cast<size_t>(i)];
      a.fresh_v_strides[i] = o.fresh_v.strides[static_cast<size_t>(i)];
    }
    if (o.rope) {
      const int dims = o.rope->dims();
      if (dims / 2 > args::kAttentionRopePairs) fail(o.op, "internal: rope of ", dims, " dims in the attention kernel");
      a.rope_dims = dims, a.rope_traditional = o.rope->traditional(), a.rope_scale = o.rope->scale();
      a.rope_freqs = o.freqs.buffer ? reinterpret_cast<const void*>(ptr_bits(o.freqs)) : nullptr;
      for (int i = 0; i < dims / 2 && o.rope->base(); ++i)
        a.rope_inv[i] = std::pow(static_cast<double>(*o.rope->base()), -2.0 * i / dims);
    }
  }
  a.partial = partial.buffer ? reinterpret_cast<float*>(ptr_bits(partial)) : nullptr;
  a.out = reinterpret_cast<void*>(ptr_bits(y));
  const std::string t = type(q.dtype), mt = o.mask_kind == Mask::keep ? "bool" : t;
  const std::string call = mma ? "mma<" + t + ", " + mt + ", " + std::to_string(d) + ", " + std::to_string(wk) +
                                     (cluster ? ", " + std::to_string(cluster) + ">" : ">")
                               : "split<" + t + ", " + mt + ", " + std::to_string(sh.vec) + ", " +
                                     std::to_string(sh.lanes) + ", " + std::to_string(sh.chunks) + ", " +
                                     std::to_string(sh.rows) + ">";
  const std::string attributes = cluster ? "__cluster_dims__(" + std::to_string(cluster) + ", 1, 1)" : std::string();
  run_attention(dev, call, a, static_cast<unsigned>(blocks), 32 * warps, shared, attributes);
  // combine's weights, [splits] floats, in whole runs of kCombineRun: ptxas reads the tail of its
  // loop over them in 16-byte loads (compute-sanitizer memcheck saw reads past `splits` floats).
  constexpr int64_t kRun = args::kCombineRun;
  if (splits > 1 && !cluster)
    run_attention(dev, "combine<" + t + ">", a, static_cast<unsigned>(batch * hq * lq),  // a block a row
                  static_cast<unsigned>(std::clamp<int64_t>((dv + 31) / 32 * 32, 32, kThreads)),
                  static_cast<unsigned>((splits + kRun - 1) / kRun * kRun * sizeof(float)));
}

void attention(int dev, const ScaledDotProductAttention& prim, const std::vector<Tensor>& in, Tensor& y) {
  using Mask = ScaledDotProductAttention::Mask;
  AttentionOperands o;
  o.q = unit_rows(dev, in[0]), o.k = unit_rows(dev, in[1]), o.v = unit_rows(dev, in[2]);
  size_t next = 3;
  o.mask_kind = prim.mask();
  if (prim.mask() != Mask::none) o.mask = in[next++];
  if (prim.has_key_lengths()) o.lengths = as_dtype(dev, in[next], int32);
  o.causal = prim.causal();
  o.scale = prim.scale();
  attention(dev, o, y);
}

/* Rows [b0, b0 + n) of t along its first axis. */
Tensor batch_rows(const Tensor& t, int64_t b0, int64_t n) {
  Shape s = t.shape;
  s[0] = n;
  return detail::view(t, std::move(s), t.strides, t.offset + b0 * t.strides[0]);
}

// ---- cache update ---------------------------------------------------------------------------
/* Counts t's bytes as moved by a layout op. */
void count_moved(const Tensor& t) {
  detail::count(detail::counters().layout_bytes_copied, static_cast<uint64_t>(t.size()) * t.itemsize());
}

/* y in the buffer of a donated, whole `cache` (updated where it lies: only the update's bytes
   move), else a copy of it. */
void start_from(int dev, const Tensor& cache, Tensor& y) {
  if (allocate_from(dev, cache, y)) return;
  copy_into(dev, cache, y);
  count_moved(cache);
}

void slice_update(int dev, const DynamicSliceUpdate& prim, const std::vector<Tensor>& in, Tensor& y) {
  const Tensor& u = in[1];
  start_from(dev, in[0], y);
  if (u.size() == 0) return;
  count_moved(u);
  if (u.shape.size() > static_cast<size_t>(args::kMaxAxes))
    fail("slice_update", "updates of more than ", args::kMaxAxes, " axes on a CUDA device");
  const Tensor start = as_dtype(dev, in[2], int32);
  args::SliceUpdate a{};
  a.n = u.size();
  a.nd = static_cast<long>(u.shape.size());
  for (size_t i = 0; i < u.shape.size(); ++i) {
    a.shape[i] = u.shape[i];
    a.update_strides[i] = u.strides[i];
    a.out_strides[i] = y.strides[i];
    a.out_lengths[i] = y.shape[i];
  }
  std::fill(std::begin(a.axes), std::end(a.axes), -1L);
  for (size_t i = 0; i < prim.axes().size(); ++i) a.axes[i] = prim.axes()[i];
  a.update = reinterpret_cast<const void*>(ptr_bits(u));
  a.start = reinterpret_cast<const void*>(ptr_bits(start));
  a.out = reinterpret_cast<void*>(ptr_bits(y));
  run(dev, "SliceUpdate", std::string("slice_update<") + word_type(u.itemsize()) + ">", a,
      grid_for(dev, u.size(), kThreads), kThreads);
}

/* Each batch row's keys and values written at its position into its caches (`caches`: B of
   keys, then B of values), one kernel a kMaxCacheRows batch rows. */
void write_caches(int dev, const Tensor& keys, const Tensor& values, const Tensor& positions, const Tensor* caches) {
  const int64_t batch = keys.shape[0];
  if (keys.size() + values.size() == 0) return;
  count_moved(keys);
  count_moved(values);
  for (int64_t b0 = 0; b0 < batch; b0 += args::kMaxCacheRows) {
    const int64_t n = std::min<int64_t>(args::kMaxCacheRows, batch - b0);
    args::CacheUpdate a{};
    a.rows = n, a.heads = keys.shape[1], a.len = keys.shape[2], a.capacity = caches[0].shape[2];
    for (int u = 0; u < 2; ++u) {
      const Tensor rows = batch_rows(u == 0 ? keys : values, b0, n);
      a.dims[u] = rows.shape[3];
      for (int i = 0; i < 4; ++i) a.update_strides[u][i] = rows.strides[static_cast<size_t>(i)];
      a.update[u] = reinterpret_cast<const void*>(ptr_bits(rows));
      for (int64_t b = 0; b < n; ++b)
        a.caches[u][b] = reinterpret_cast<void*>(ptr_bits(caches[static_cast<size_t>(u * batch + b0 + b)]));
    }
    a.positions = reinterpret_cast<const void*>(ptr_bits(batch_rows(positions, b0, n)));
    run(dev, "CacheUpdate", std::string("cache_update<") + word_type(keys.itemsize()) + ">", a,
        grid_for(dev, n * a.heads * a.len * (a.dims[0] + a.dims[1]), kThreads), kThreads);
  }
}

/* x rotated by the op's rope into a new tensor. */
Tensor rotated(int dev, const Rope& rotation, const Tensor& x, const Tensor& positions, const Tensor& freqs) {
  Tensor y(x.shape, x.dtype);
  allocate_output(dev, y);
  std::vector<Tensor> in = rotation.inputs(x, positions, freqs);
  rope(dev, rotation, in, y);
  return y;
}

/* The caches updated where they lie when donated (else copied first). With one query position
   on the tensor-core kernel, one kernel a kMaxCacheRows batch rows does the rest: it rotates q
   and the step's keys, writes them and the values into the caches, and attends. Otherwise rope,
   the cache writes and the attention run one after another. */
void cache_attention(int dev, const CacheAttention& prim, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const size_t first = prim.first_cache();
  const int64_t batch = in[0].shape[0], len = in[0].shape[2];
  for (size_t i = 1; i < out.size(); ++i) start_from(dev, in[first + i - 1], out[i]);
  const Tensor* caches = out.data() + 1;  // B of keys, then B of values
  allocate_output(dev, out[0]);
  const Tensor positions = as_dtype(dev, in[3], int32);
  Tensor freqs;
  if (prim.rope() && prim.rope()->has_freqs()) freqs = as_dtype(dev, in[4], float32);
  AttentionOperands o;
  o.op = "cache_attention";
  o.q = unit_rows(dev, in[0]), o.k = caches[0], o.v = caches[static_cast<size_t>(batch)];
  o.k_rows = caches, o.v_rows = caches + batch;
  // The tensor-core kernel takes the step's rows with 16-byte copies.
  const bool fused =
      len == 1 && attention_takes_mma(dev, o) && rows_of_16_bytes(in[1], 8) && rows_of_16_bytes(in[2], 8);
  Tensor keys = in[1];
  if (!fused) {
    if (prim.rope()) {
      o.q = rotated(dev, *prim.rope(), o.q, positions, freqs);
      keys = rotated(dev, *prim.rope(), keys, positions, freqs);
    }
    write_caches(dev, keys, in[2], positions, caches);
  }
  for (int64_t b0 = 0; b0 < batch; b0 += args::kMaxCacheRows) {
    const int64_t n = std::min<int64_t>(args::kMaxCacheRows, batch - b0);
    AttentionOperands part = o;
    part.q = batch_rows(o.q, b0, n), part.lengths = batch_rows(positions, b0, n), part.length_add = len;
    part.k = caches[static_cast<size_t>(b0)], part.v = caches[static_cast<size_t>(batch + b0)];
    part.k_rows = caches + b0, part.v_rows = caches + batch + b0;
    part.causal = prim.causal(), part.scale = prim.scale();
    if (fused) {
      part.fresh_k = batch_rows(in[1], b0, n), part.fresh_v = batch_rows(in[2], b0, n);
      part.rope = prim.rope(), part.freqs = freqs;
    }
    Tensor y = batch_rows(out[0], b0, n);
    attention(dev, part, y);
  }
}

/* A quantized product (w, scales and biases at wsb[0..2]) with what it joins: the norm in front,
   the addend or the gate behind; integer activations take their own kernels (the ops require
   transposed weights for them). */
void quantized_product(int dev, const QuantParams& q, bool transpose, QmmActivations activations, const Tensor& x,
                       const Tensor* wsb, Tensor& y, const std::optional<InputNorm>& with_norm = std::nullopt,
                       const Tensor* addend = nullptr, bool glu = false) {
  allocate_output(dev, y);
  if (activations != QmmActivations::exact)
    return quantized_matmul_integer(dev, q, activations, x, wsb[0], wsb[1], wsb[2], y, with_norm, addend, glu);
  quantized_matmul(dev, q, transpose, x, wsb[0], wsb[1], wsb[2], y, with_norm, addend, glu);
}

}  // namespace

void check_llm_inputs(const Primitive& prim, const std::vector<Tensor>& in) {
  if (prim.kind() == OpKind::DynamicSliceUpdate && !on_device(in[2]))
    static_cast<const DynamicSliceUpdate&>(prim).check_start(in[0].shape, in[1].shape, in[2]);
  if (prim.kind() == OpKind::CacheAttention && !on_device(in[3])) {
    auto& p = static_cast<const CacheAttention&>(prim);
    CacheAttention::check_positions(in[1].shape, in[p.first_cache()].shape[2], in[3]);
  }
}

void eval_llm(int dev, Primitive& prim, std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  switch (prim.kind()) {
    case OpKind::Dequantize:
      allocate_output(dev, y);
      dequantize_into(dev, static_cast<const Dequantize&>(prim).params(), in[0], in[1], in[2], y);
      return;
    case OpKind::QuantizedMatmul: {
      auto& p = static_cast<const QuantizedMatmul&>(prim);
      return quantized_product(dev, p.params(), p.transpose(), p.activations(), in[0], &in[1], y);
    }
    case OpKind::FusedQuantizedMatmul: {
      auto& p = static_cast<const FusedQuantizedMatmul&>(prim);
      const size_t w = p.packed_at();
      std::optional<InputNorm> with_norm;
      if (p.norm_eps()) with_norm = InputNorm{in[1], *p.norm_eps()};
      return quantized_product(dev, p.params(), p.transpose(), p.activations(), in[0], &in[w], y, with_norm,
                               p.addend() ? &in[w + 3] : nullptr, p.glu());
    }
    case OpKind::RmsNorm: {
      auto& p = static_cast<const RmsNorm&>(prim);
      allocate_output(dev, y);
      return norm(dev, in, y, p.eps(), false, p.has_weight(), false);
    }
    case OpKind::LayerNorm: {
      auto& p = static_cast<const LayerNorm&>(prim);
      allocate_output(dev, y);
      return norm(dev, in, y, p.eps(), true, p.has_weight(), p.has_bias());
    }
    case OpKind::Rope: allocate_output(dev, y); return rope(dev, static_cast<const Rope&>(prim), in, y);
    case OpKind::ScaledDotProductAttention:
      allocate_output(dev, y);
      return attention(dev, static_cast<const ScaledDotProductAttention&>(prim), in, y);
    case OpKind::DynamicSliceUpdate: return slice_update(dev, static_cast<const DynamicSliceUpdate&>(prim), in, y);
    case OpKind::CacheAttention: return cache_attention(dev, static_cast<const CacheAttention&>(prim), in, out);
    default: break;
  }
  // Quantize (once per weight, at load) runs on the host, its results uploaded.
  std::vector<Tensor> host_in = in;
  ensure_host(host_in);
  for (auto& t : host_in) t.donated = false;
  prim.eval_cpu(host_in, out);
  for (auto& t : out) t = to_device(t, dev);
}

}  // namespace kiln::cuda
