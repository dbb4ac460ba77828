// What each kernel reads from its one by-value parameter (the kernels of kernels/*.cuh and
// the generated ones alike): a named struct, included by the host code that fills it
// (backend/cuda/struct_launch.h) and by the kernel source, so neither side numbers slots.
// Every field is 8 bytes wide, so the host hands the struct over as the launch's words
// (recorded and replayed like any launch).
#pragma once

namespace kiln::cuda::args {

constexpr int kMaxAxes = 8;

// Limits of the language-model kernels (kernels/llm.cuh, attention.cuh) that the host's launches keep to.
constexpr int kGemvWarps = 8;  // most warps a decode product's block splits its rows' chunks between
constexpr int kMmaRows = 32;  // weight rows a block of the tensor-core product takes (two 16-row tiles)
constexpr int kMmaChunk = 128;  // values of a weight row its warps take a step (16 bytes of 4-bit values a lane)
constexpr int kMmaWarps = 8;  // most warps a block of it splits the chunks between
constexpr int kMvWarps = 8;  // warps of a block of the one-row tensor-core product (quantized_mv)
constexpr int kMvChunk = 256;  // values of a weight row its warps take a step (two 16-byte pieces a lane)
constexpr int kMvTiledStages = 4;  // its steps a warp keeps in shared memory with tile order (in flight or read)
constexpr int kMmaMostRows = 32;  // activation rows it takes (four 8-row B tiles); more go to cuBLASLt
constexpr int kQuantizeBlocks = 8;  // blocks of 32 values a quantize_rows thread block rounds (a warp each)
constexpr int kNormLaneValues = 32;  // values a lane holds of a row a warp normalizes (rows up to 32 * 32)
constexpr int kNormThreadValues = 8;  // values a thread holds of a row a block normalizes in registers
constexpr int kLaneDims = 8;  // head dims of q, k and v an attention lane holds (up to 256)
constexpr int kAttentionKeys = 4;  // keys an attention lane group loads at once
constexpr int kAttentionMmaKeys = 64;  // keys attention::mma stages a step (Wk tiles of 64 / Wk)
constexpr int kCombineRun = 8;  // splits attention::combine weighs at once; its weights are allocated in whole runs
constexpr int kMaxClusterSplits = 16;  // most blocks of a cluster that share a decode row tile's keys (sm_90)
constexpr int kAttentionRopePairs = 64;  // rotated pairs of a head the tensor-core attention takes (128 dims)
constexpr int kMaxCacheRows = 64;  // batch rows a launch over each row's own caches takes (more: more launches)

#ifndef KILN_HD
#define KILN_HD
#endif
/* Bytes of a quantized_mv block's shared memory before its warps' slots: x's image (k / 32
   segments of 16 words), 16 zero words, k / 32 sums, kMvWarps * 16 row sums and 32 floats. */
KILN_HD constexpr long mv_slots_at(long k) { return k * 2 + 16 * 4 + k / 32 * 4 + kMvWarps * 16 * 4 + 32 * 4; }
/* Bytes of one of its warps' slots with tile order: a step's 2048 bytes of weights, then each
   lane's four scales and each lane's four biases of scale_bytes each. */
KILN_HD constexpr long mv_tiled_slot_bytes(long scale_bytes) { return 2048 + 2 * 32 * 4 * scale_bytes; }

/* dequantize: rows of k values, packed (`bits` words a 32 values), one scale and bias a group. */
struct Dequantize {
  long rows, k, group_size;
  const void* packed;
  const void* scales;
  const void* biases;
  void* out;  // [rows, k], the scales' dtype
  long tiled;  // 1: 4-bit weights in tile order (backend/common/tile_order.h)
};

/* Weights of n rows of k 4-bit values in tile order put back in row order: packed words,
   scales and biases (the scales' dtype) into new arrays. */
struct Untile {
  long n, k, group_size;
  const void* packed;
  const void* scales;
  const void* biases;
  void* packed_out;
  void* scales_out;
  void* biases_out;
};

/* x [m, k] @ dequantize(w [n, k])^T for m <= 8 rows: a block a group of rows of w; with a norm
   weight, rms_norm(x, norm_weight, eps) in place of x; with an addend, the sum. With integer
   activations x holds quantize_rows' codes and block_scale and block_sum its blocks'. */
struct QuantizedGemv {
  long m, n, k, group_size;
  double eps;
  const void* norm_weight;  // null: x as it is
  const void* x;
  const void* block_scale;  // [m, k / 32] float, integer activations only
  const void* block_sum;  // [m, k / 32] float: the block's scale times the sum of its codes
  const void* packed;
  const void* scales;
  const void* biases;
  const void* addend;  // null, or [m, n] of the output's dtype, added to the product
  void* out;  // [m, n]
  long weights_ready;  // 1: no earlier kernel writes packed, so it is read before x is ready
  long glu;  // 1: out [m, n / 2] = silu(product[:, :n/2]) * product[:, n/2:]
  long tiled;  // 1: packed, scales and biases in tile order (backend/common/tile_order.h)
};

/* Rows of x [m, k] (normalized first with a norm weight) rounded to integer codes [m, k] (int8
   or int16) and per block of 32 a float scale and the scale times the sum of the codes. */
struct QuantizeRows {
  long m, k;
  double eps;
  const void* x;
  const void* norm_weight;  // null: x as it is
  void* codes;
  void* block_scale;
  void* block_sum;
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
  const void* bias;  // null when absent (layer_norm only)
  void* out;
};

/* rope over rows of d contiguous values (x row-major [.., len, d]); a thread a pair. */
struct Rope {
  long rows, d, len, dims, half, rows_per_offset, partner, step;
  double base, scale;  // base unused when freqs is given
  const void* x;
  const void* offsets;  // int32, one per group of rows_per_offset rows
  const void* freqs;  // null, or dims/2 frequencies
  void* out;
};

/* Attention (kernels/attention.cuh), a block a group of query rows of one key/value head and a
   split of split_len keys: each split's partial softmax sums, then a second kernel combines the
   splits (one split writes the result). k, v, q and mask index [b, h, l, e] by strides (the last
   stride of q, k and v is 1); where k_rows[0] is set, batch row b's keys and values start at
   k_rows[b] and v_rows[b] instead of k + b * k_strides[0] (each row's own cache, one layout). */
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
  const void* key_lengths;  // int32 [batch] or null; each row's key count is its entry + key_length_add
  long key_length_add;
  long inputs_ready;  // 1: no earlier kernel writes key_lengths or rope_freqs (attention::mma reads them early)
  /* The step's own key and value of each batch row (attention::mma with one query position,
     fresh_k set): read from here (the key rotated, as q is, where rope_dims > 0) instead of from
     the caches at the row's position (key_lengths[b], clamped into the caches), and written
     there by one block. */
  const void* fresh_k;
  const void* fresh_v;
  long fresh_k_strides[2], fresh_v_strides[2];  // batch row, head; the last stride is 1
  long rope_dims, rope_traditional;
  double rope_scale;
  const void* rope_freqs;  // float32 [rope_dims / 2], or null: then rope_inv
  double rope_inv[kAttentionRopePairs];  // base^(-2i / rope_dims), as the CPU's rope computes them
  float* partial;  // [batch * hq * lq * splits, dv + 2]: sums, then max and total
  void* out;  // row-major [batch, hq, lq, dv]
  const void* k_rows[kMaxCacheRows];
  const void* v_rows[kMaxCacheRows];
};
static_assert(sizeof(Attention) <= 4096, "a kernel's parameters fit in 4 KB");

/* Writes the update (any strides) into out at a start read on the device, clamped so the
   update stays inside; shapes are the update's. */
struct SliceUpdate {
  long n, nd;
  long shape[kMaxAxes], update_strides[kMaxAxes], out_strides[kMaxAxes], out_lengths[kMaxAxes];
  long axes[kMaxAxes];  // axis of each start entry, -1 past the last
  const void* update;
  const void* start;  // int32
  void* out;  // at the view's offset
};

/* Writes each of `rows` batch rows of two updates (keys, then values: [rows, heads, len, dims[u]]
   by strides) into its own dense cache ([heads, capacity, dims[u]]) at the row's position,
   clamped so the rows stay inside. */
struct CacheUpdate {
  long rows, heads, len, capacity;
  long dims[2];
  long update_strides[2][4];
  const void* update[2];
  const void* positions;  // int32 [rows]
  void* caches[2][kMaxCacheRows];
};
static_assert(sizeof(CacheUpdate) <= 4096, "a kernel's parameters fit in 4 KB");

// --- The kernels of support.cuh's neighbours: copies, reductions, scans, gathers, products.

/* copy::bytes: `bytes` bytes from `from` to `to`. */
struct CopyBytes {
  long bytes;
  const void* from;
  void* to;
};

/* copy::transpose_*: dst element (b, r, c) at b * dst_batch + r * dst_row + c from src
   element b * src_batch + r + c * src_col (the source runs down the destination's columns). */
struct Transpose {
  long batch, rows, cols, src_batch, src_col, dst_batch, dst_row;
  const void* src;
  void* dst;
  long words;  // 1: every word of the copy is aligned, so it moves a word at a time
};

/* argreduce::first_extreme: the index (int32) of the first extreme along an axis of `length`
   positions `axis_stride` apart, for each of `rows` rows indexed by the other nd axes. */
struct ArgReduce {
  long rows, nd;
  long shape[kMaxAxes], strides[kMaxAxes];
  long length, axis_stride;
  const void* in;
  void* out;
};
/* argreduce::reduce_parts and fold_parts: long rows in `parts` parts of part_len positions;
   each part's pick goes to values and indices (8 bytes each, rows * parts). */
struct ArgReduceParts {
  ArgReduce arg;
  void* values;
  void* indices;
  long parts, part_len;
};

/* scan::cumsum along an axis, a line for each element of the other nd axes. */
struct Cumsum {
  long lines, nd;
  long shape[kMaxAxes], in_strides[kMaxAxes], out_strides[kMaxAxes];
  long length, in_axis_stride, out_axis_stride;
  long reverse, inclusive;  // 0 or 1
  const void* in;
  void* out;
};

/* gather::take: y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride] over y's nd axes; an index
   counts from the end of the axis (of `size` entries) when negative. */
struct Gather {
  long n, nd;
  long shape[kMaxAxes], y_strides[kMaxAxes], a_strides[kMaxAxes], idx_strides[kMaxAxes];
  long axis_stride, size;
  void* y;
  const void* a;
  const void* idx;  // of the kernel's index type
};

/* random::bits: n random words from the key's two words, key_stride apart. */
struct RandomBits {
  long n;
  const void* key;
  long key_stride;
  void* out;
};

/* topk::largest: the k largest of each contiguous row of n, values and int32 positions [rows, k]. */
struct TopK {
  long rows, n, k;
  const void* in;
  void* values;
  void* positions;
};

/* matmul::naive: y [batch..., m, n] row-major = a [.., m, k] @ b [.., k, n], any strides. */
struct Matmul {
  long total, m, n, k, batch_axes;
  long batch_shape[kMaxAxes], a_batch_strides[kMaxAxes], b_batch_strides[kMaxAxes];
  long a_row_stride, a_col_stride, b_row_stride, b_col_stride;
  const void* a;
  const void* b;
  void* y;
};

// --- Generated kernels (backend/cuda/codegen.cpp, row_source.cpp): a part every launch has,
// then one record per operand, their count known only when the program is, so the host
// fills a Head and a vector of Operands (struct_launch.h: OperandArgs) and the generated
// kernel reads WithOperands<Head, Operand, N>.

template <class Head, class Operand, int N>
struct WithOperands {
  Head head;
  Operand operand[N];
};

/* elementwise_source: n elements of a merged shape of nd axes, each operand (outputs first,
   then inputs) at its own strides. */
struct ElementwiseHead {
  long n, nd;
  long shape[kMaxAxes];
};
struct StridedOperand {
  long strides[kMaxAxes];
  void* data;
};
template <int N>
using Elementwise = WithOperands<ElementwiseHead, StridedOperand, N>;

/* elementwise_flat_source: n contiguous elements (or, for inputs marked scalar, one). */
struct FlatHead {
  long n;
};
struct FlatOperand {
  void* data;
};
template <int N>
using ElementwiseFlat = WithOperands<FlatHead, FlatOperand, N>;

/* elementwise_rows_source: `rows` rows of row_length elements; the `outer` axes before the
   last (of the given shape) index the rows, at each operand's strides, and each operand
   steps along its rows by `step` (0: an input with one value a row). */
struct RowsHead {
  long rows, row_length, outer;
  long shape[kMaxAxes];
};
struct RowsOperand {
  long strides[kMaxAxes];
  long step;
  void* data;
};
template <int N>
using ElementwiseRows = WithOperands<RowsHead, RowsOperand, N>;

/* elementwise_tiled_source: (batch, rows, cols) in 64 x 64 tiles; `words`: pairs of
   neighbours are aligned. Each operand: its batch stride and its row stride (a tiled input's
   column stride). */
struct TiledHead {
  long batch, rows, cols, words;
};
struct TiledOperand {
  long batch_stride, line_stride;
  void* data;
};
template <int N>
using ElementwiseTiled = WithOperands<TiledHead, TiledOperand, N>;

/* row_source: `rows` rows of n elements, a block (or a cluster) a row. Operands: the inputs
   (element (r, j) at r * row_stride + j * col_stride), then the outputs (row-major: per-element
   ones [rows, n], per-row ones [rows]), then, for split rows, each reduction's partials
   (rows * splits of 8 bytes) in the program's order; the outputs' and partials' strides are 0.
   Split rows cut each row into `splits` parts of part_len elements. */
struct RowHead {
  long rows, n, splits, part_len;
};
struct RowOperand {
  long row_stride, col_stride;
  void* data;
};
template <int N>
using Row = WithOperands<RowHead, RowOperand, N>;

/* The precompiled interpreter (interp.cuh): an elementwise program over n elements of a merged
   shape, each program word `code | a << 8 | b << 16 | c << 24` (a, b, c: earlier words' values,
   or an operand). Values are floats (bool ones 0 or 1); an operand is float32 or bool. */
enum InterpCode : long {
  kInterpLoad,  // operand a at this element
  kInterpStore,  // value a into operand b
  kInterpWhere,  // a ? b : c
  kInterpToBool,  // astype(a, bool)
  kInterpFromBool,  // astype(a, float32)
#define KILN_INTERP_OP(F) kInterp##F,
#define KILN_INTERP_UNARY(F) KILN_INTERP_OP(F)
#define KILN_INTERP_BINARY(F) KILN_INTERP_OP(F)
#define KILN_INTERP_TEST(F) KILN_INTERP_OP(F)
#define KILN_INTERP_COMPARE(F) KILN_INTERP_OP(F)
#include "backend/cuda/kernels/interp_ops.def"
#undef KILN_INTERP_OP
#undef KILN_INTERP_UNARY
#undef KILN_INTERP_BINARY
#undef KILN_INTERP_TEST
#undef KILN_INTERP_COMPARE
  kInterpCodes
};
constexpr int kInterpWords = 96;  // program words (region inputs, members, stores)
constexpr int kInterpOperands = 16;  // outputs, then inputs
constexpr long kInterpBool = 1;  // an operand's dtype: 0 float32, 1 bool
struct InterpOperand {
  long strides[kMaxAxes];
  long dtype;
  const void* data;
};
struct Interp {
  long n, nd, words;
  long shape[kMaxAxes];
  long program[kInterpWords];
  InterpOperand operand[kInterpOperands];
};

}  // namespace kiln::cuda::args
