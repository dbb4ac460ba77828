// What each kernel of kernels/*.cuh reads from its one by-value parameter: a named struct,
// included by the host code that fills it (backend/cuda/struct_launch.h) and by the kernel
// source, so neither side numbers slots. Every field is 8 bytes wide, so the host hands the
// struct over as the launch's words (recorded and replayed like any launch).
#pragma once

namespace kiln::cuda::args {

constexpr int kMaxAxes = 8;

/* dequantize: rows of k values, packed (`bits` words a 32 values), one scale and bias a group. */
struct Dequantize {
  long rows, k, group_size;
  const void* packed;
  const void* scales;
  const void* biases;
  void* out;  // [rows, k], the scales' dtype
};

/* x [m, k] @ dequantize(w [n, k])^T for m <= 8 rows: a warp a row of w; with a norm weight,
   rms_norm(x, norm_weight, eps) in place of x; with an addend, the sum. */
struct QuantizedGemv {
  long m, n, k, group_size;
  double eps;
  const void* norm_weight;  // null: x as it is
  const void* x;
  const void* packed;
  const void* scales;
  const void* biases;
  const void* addend;  // null, or [m, n] of the output's dtype, added to the product
  void* out;           // [m, n]
  long weights_ready;  // 1: no earlier kernel writes packed, so it is read before x is ready
  long glu;            // 1: out [m, n / 2] = silu(product[:, :n/2]) * product[:, n/2:]
};

/* out [rows, f] = silu(in[:, :f]) * in[:, f:] for in [rows, 2f], both row-major. */
struct Gated {
  long rows, f;
  const void* in;
  void* out;
};

/* out += addend, n elements of one dtype, both row-major. */
struct AddInto {
  long n;
  const void* addend;
  void* out;
};

/* rms_norm or layer_norm over rows of n contiguous values, a block a row. */
struct Norm {
  long rows, n;
  double eps;
  const void* x;
  const void* weight;  // null when absent
  const void* bias;    // null when absent (layer_norm only)
  void* out;
};

/* rope over rows of d contiguous values (x row-major [.., len, d]); a thread a pair. */
struct Rope {
  long rows, d, len, dims, half, rows_per_offset, partner, step;
  double base, scale;  // base unused when freqs is given
  const void* x;
  const void* offsets;  // int32, one per group of rows_per_offset rows
  const void* freqs;    // null, or dims/2 frequencies
  void* out;
};

/* Attention, a block a (batch, head, query, split of keys): partial softmax sums of each split,
   then a second kernel combines the splits. k, v, q and mask index [b, h, l, e] by strides
   (the last stride of q, k and v is 1). */
struct Attention {
  long batch, hq, hkv, lq, lk, d, dv, splits, split_len;
  long q_strides[3], k_strides[3], v_strides[3];
  long mask_kind;  // 0 none, 1 keep (bool), 2 additive
  long mask_strides[4];
  long causal;
  double scale;
  const void* q;
  const void* k;
  const void* v;
  const void* mask;
  const void* key_lengths;  // int32 [batch] or null
  float* partial;           // [batch * hq * lq * splits, dv + 2]: sums, then max and total
  void* out;                // row-major [batch, hq, lq, dv]
};

/* Writes the update (any strides) into out at a start read on the device, clamped so the
   update stays inside; shapes are the update's. */
struct SliceUpdate {
  long n, nd;
  long shape[kMaxAxes], update_strides[kMaxAxes], out_strides[kMaxAxes], out_lengths[kMaxAxes];
  long axes[kMaxAxes];  // axis of each start entry, -1 past the last
  const void* update;
  const void* start;  // int32
  void* out;          // at the view's offset
};

/* Gather indices as int64, negative ones counted from the end, clamped into the axis. */
struct Indices {
  long n, size;
  const void* in;  // row-major, of the kernel's index type
  void* out;       // int64 [n]
};

}  // namespace kiln::cuda::args
