// Every primitive on a CUDA device: one switch on the op kind, so primitives need no
// GPU methods and all CUDA code stays in this directory.
#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "backend/common/dispatch.h"
#include "backend/cpu/indices.h"
#include "backend/cpu/strided.h"
#include "backend/cuda/codegen.h"
#include "backend/cuda/collectives.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels/args.h"
#include "backend/cuda/llm_ops.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/struct_launch.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/plan_graph.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/tiers.h"
#include "backend/cuda/tuning.h"
#include "compile/codegen_util.h"
#include "compile/plan.h"
#include "compile/tier.h"
#include "core/hash_fields.h"
#include "core/stats.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/layout.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/sort.h"
#include "ops/views.h"

namespace kiln::cuda {

using compiler::FusedOp;
using compiler::FusedProgram;
using compiler::row_col_strides;
using compiler::RowOp;
using compiler::RowProgram;
using detail::Tensor;
using detail::view;

namespace {

constexpr const char* kCopyHeader = "backend/cuda/kernels/copy.cuh";
constexpr const char* kArgReduceHeader = "backend/cuda/kernels/argreduce.cuh";
constexpr const char* kGatherHeader = "backend/cuda/kernels/gather.cuh";

std::shared_ptr<Primitive> borrow(const Primitive& p) {
  return std::shared_ptr<Primitive>(std::shared_ptr<Primitive>(), const_cast<Primitive*>(&p));
}

// How a copy of src, broadcast to `shape`, into a destination with `dst_strides` runs down
// its columns (the copy of a transpose, batched or not), when it does.
std::optional<detail::ColumnRuns> copy_column_runs(const Tensor& src, const Shape& shape, const Strides& dst_strides) {
  if (detail::shape_size(shape) >= (int64_t{1} << 40)) return std::nullopt;  // the tiles' 32-bit coordinates
  const Strides from = detail::broadcast_strides(src, shape);
  return detail::column_runs(detail::merge_axes<2>(shape, {&dst_strides, &from}), 32);
}

// src into dst of the same dtype through square tiles in shared memory, where the strided
// kernel read one word of each row a warp (1/6 to 1/12 of a copy's bandwidth on an H100).
// Elements move a word at a time where every word is aligned: 8 bytes of 4-byte elements,
// 4 bytes of smaller ones (transposed in registers, copy::transpose_packed).
void copy_tiles(int dev, const detail::ColumnRuns& t, const Tensor& src, const Tensor& dst) {
  const int64_t item = static_cast<int64_t>(dst.itemsize());
  const int64_t w = item == 4 ? 2 : item < 4 ? 4 / item : 1, side = 32 * w, word = w * item;
  const bool words = w > 1 && ptr_bits(src) % word == 0 && ptr_bits(dst) % word == 0 && t.src_batch % w == 0 &&
                     t.src_col % w == 0 && t.dst_batch % w == 0 && t.dst_row % w == 0;
  const int64_t tiles = t.batch * ((t.rows + side - 1) / side) * ((t.cols + side - 1) / side);
  const args::Transpose a{t.batch,     t.rows,    t.cols,        t.src_batch,   t.src_col,
                          t.dst_batch, t.dst_row, data_ptr(src), data_ptr(dst), words ? 1 : 0};
  const std::string call =
      std::string(item < 4 ? "copy::transpose_packed<" : "copy::transpose_tiles<") + word_type(dst.itemsize()) + ">";
  launch_struct(dev, kCopyHeader, "Transpose", call, a,
                static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{device_info(dev).sms} * 32)), 256);
}

// A program's kernel for one device and variant (a key of its kernel slots).
template <class Variant>
struct DeviceVariant {
  int device;
  Variant variant;
  bool operator==(const DeviceVariant&) const = default;
  size_t hash() const { return detail::hash_fields(device, variant.hash()); }
};

// A kernel kept in a program's slots, and when it became ready (a call's tier record).
struct SlotKernel {
  Kernel kernel;
  int64_t ready_ns;
};

// The kernel for a program variant: from the program's own slots when it has them (a
// replayed compiled call), else from the source-keyed cache (eager ops). In a region run under
// the background policy, a kernel not yet compiled throws KernelPending (tiers.h). A template,
// so a replay's call passes its source maker without allocating.
template <class Variant, class MakeSource>
Kernel program_kernel(int dev, const compiler::KernelSlots* slots, const Variant& variant,
                      const MakeSource& make_source) {
  const DeviceVariant<Variant> key{dev, variant};
  if (!slots) {
    std::string src = make_source();
    return kernel(dev, src, "kiln_kernel", [&] { return src; });
  }
  if (const void* k = slots->find(key)) {
    const auto& s = *static_cast<const SlotKernel*>(k);
    compiler::note_region(true, s.ready_ns);
    return s.kernel;
  }
  Kernel k;
  int64_t ready = 0;
  if (background_region()) {
    k = background_kernel(dev, *slots, key, make_source, &ready);
  } else {
    std::string src = make_source();
    k = kernel(dev, src, "kiln_kernel", [&] { return src; });
    ready = compiler::now_ns();
  }
  slots->put(key, std::make_shared<const SlotKernel>(SlotKernel{k, ready}));
  compiler::note_region(true, ready);
  return k;
}

// Operand k of an elementwise program: its outputs first, then its inputs.
const Tensor& operand(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins, size_t k) {
  return k < outs.size() ? outs[k] : ins[k - outs.size()];
}

// Runs the flat kernel: every output and every input outside the `scalars` mask is
// contiguous over the n elements. Accesses are 16 bytes of the widest dtype when every
// dense pointer is aligned to that, else one element.
void run_flat(int dev, const FusedProgram& p, int64_t n, const std::vector<Tensor>& ins,
              const std::vector<Tensor>& outs, uint64_t scalars, const compiler::KernelSlots* slots) {
  auto dense = [&](size_t i) { return i < outs.size() || !(scalars >> (i - outs.size()) & 1); };
  const size_t nops = outs.size() + ins.size();
  int widest = 1;
  for (size_t i = 0; i < nops; ++i) {
    if (dense(i)) widest = std::max(widest, static_cast<int>(operand(outs, ins, i).itemsize()));
  }
  int vec = std::max(tuning().vector_bytes / widest, 1);
  for (size_t i = 0; i < nops && vec > 1; ++i) {
    if (dense(i) && !aligned_to(operand(outs, ins, i), vec)) vec = 1;
  }
  OperandArgs<args::FlatHead, args::FlatOperand> a(nops);
  a.head.n = n;
  for (size_t i = 0; i < nops; ++i) a.operand[i].data = data_ptr(operand(outs, ins, i));
  ElementwiseVariant v;
  v.form = ElementwiseVariant::Form::flat;
  v.scalar_inputs = scalars;
  v.vec = vec;
  Kernel f = program_kernel(dev, slots, v, [&] { return elementwise_source(p, v); });
  launch(dev, f, grid_for(dev, (n + vec - 1) / vec, 256, tuning().flat_blocks_per_sm), 256, a.words());
}

// Whether the flat kernel applies without merging axes, the common case of a compiled
// call: outputs and inputs dense over `shape`, or inputs of one element (broadcast
// scalars, marked in `scalars`).
bool plainly_flat(const Shape& shape, int64_t n, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                  uint64_t& scalars) {
  if (n < 2 || ins.size() > 48) return false;
  for (auto& o : outs) {
    if (o.shape != shape || !o.row_contiguous()) return false;
  }
  scalars = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].size() == 1)
      scalars |= uint64_t{1} << i;
    else if (ins[i].shape != shape || !ins[i].row_contiguous())
      return false;
  }
  return true;
}

// Runs the program in tiles (elementwise_tiled_source) where the merged layout is (batch,
// rows, columns), at least one input runs down the columns (a transpose; all such alike, at
// least 32 x 32, their 64 x 65 tiles within 48 KiB of shared memory), and every other
// operand runs along them or, for inputs, is one value a row: one pass, every read and
// write coalesced. False when the program is not of that form.
bool run_tiled(int dev, const FusedProgram& p, const Shape& ms, const std::vector<Strides>& strides,
               const std::vector<Tensor>& ins, const std::vector<Tensor>& outs, const compiler::KernelSlots* slots) {
  const size_t nout = outs.size(), nops = strides.size(), nd = ms.size();
  if (ins.size() > 24 || nd < 2 || nd > 3 || detail::shape_size(ms) >= (int64_t{1} << 40)) return false;
  const int64_t R = ms[nd - 2], C = ms[nd - 1];
  uint64_t per_row = 0, tiled = 0;
  size_t tile_bytes = 0;
  bool pairs = C % 2 == 0;  // every pair of neighbours aligned
  OperandArgs<args::TiledHead, args::TiledOperand> a(nops);
  for (size_t k = 0; k < nops; ++k) {
    const Strides& st = strides[k];
    const int64_t sb = nd == 3 ? st[0] : 0, sr = st[nd - 2], sc = st[nd - 1];
    const uint64_t bit = k < nout ? 0 : uint64_t{1} << (k - nout);
    int64_t second = sr;  // the row stride, or a tiled input's column stride
    if (sc == 0 && bit) {
      per_row |= bit;
    } else if (sc != 1) {
      tile_bytes += 64 * 65 * operand(outs, ins, k).itemsize();
      if (!bit || sr != 1 || R < 32 || C < 32 || tile_bytes > 48 * 1024) return false;
      tiled |= bit;
      second = sc;
    }
    if (sc != 0) pairs = pairs && sb % 2 == 0 && second % 2 == 0 && aligned_to(operand(outs, ins, k), 2);
    a.operand[k] = {sb, second, data_ptr(operand(outs, ins, k))};
  }
  if (!tiled) return false;
  a.head = {nd == 3 ? ms[0] : 1, R, C, pairs ? 1 : 0};
  ElementwiseVariant v;
  v.form = ElementwiseVariant::Form::tiled;
  v.row_inputs = per_row;
  v.tiled_inputs = tiled;
  Kernel f = program_kernel(dev, slots, v, [&] { return elementwise_source(p, v); });
  const int64_t tiles = a.head.batch * ((R + 63) / 64) * ((C + 63) / 64);
  launch(dev, f, static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{device_info(dev).sms} * 32)), 256, a.words());
  return true;
}

// Runs the program over rows (elementwise_rows_source) of the last merged axis, which every
// operand walks contiguously, with a stride of its own (`x[:, ::2]`) or, for inputs, not at
// all (`x * w + b` with a row w, b; a column broadcast; rows with gaps; a batch of such):
// index arithmetic a row, not an axis and element, and vectors where every contiguous row
// start is aligned. False when the layout is not of that form.
bool run_rows(int dev, const FusedProgram& p, const Shape& ms, const std::vector<Strides>& strides,
              const std::vector<Tensor>& ins, const std::vector<Tensor>& outs, const compiler::KernelSlots* slots) {
  const size_t nout = outs.size(), nops = strides.size();
  if (nops > 24 || ms.empty() || ms.size() > kMaxDims + 1) return false;  // a bit per operand in the variant key
  const size_t last = ms.size() - 1;
  uint64_t row_inputs = 0, strided = 0;
  int widest = 1;
  for (size_t k = 0; k < nops; ++k) {
    const int64_t step = strides[k][last];
    if (step == 0 && k >= nout) {
      row_inputs |= uint64_t{1} << (k - nout);
      continue;
    }
    if (step != 1) strided |= uint64_t{1} << k;
    widest = std::max(widest, static_cast<int>(operand(outs, ins, k).itemsize()));
  }
  // Small stepped programs keep the generic kernel: one variant a program, not one a layout,
  // where the speed does not matter but the compile time does.
  const int64_t n = detail::shape_size(ms);
  if (strided && n < (int64_t{1} << 16)) return false;
  // Half-width vectors where operands step: a warp's element loads of a stepped operand then
  // touch half the lines (strided_mul bfloat16: 0.86 -> 0.95 of a copy, float32 level).
  int vec = std::max((strided ? tuning().vector_bytes / 2 : tuning().vector_bytes) / widest, 1);
  auto aligned = [&](size_t k) {  // every row start of a contiguous operand k on a vector
    if (strides[k][last] != 1) return true;
    for (size_t d = 0; d < last; ++d) {
      if (strides[k][d] % vec != 0) return false;
    }
    return aligned_to(operand(outs, ins, k), vec);
  };
  for (size_t k = 0; k < nops && vec > 1; ++k) {
    if (ms[last] % vec != 0 || !aligned(k)) vec = 1;
  }
  OperandArgs<args::RowsHead, args::RowsOperand> a(nops);
  const int64_t rows = n / ms[last];
  a.head.rows = rows;
  a.head.row_length = ms[last];
  a.head.outer = static_cast<long>(last);
  for (size_t d = 0; d < last; ++d) a.head.shape[d] = ms[d];
  for (size_t k = 0; k < nops; ++k) {
    for (size_t d = 0; d < last; ++d) a.operand[k].strides[d] = strides[k][d];
    a.operand[k].step = strides[k][last];
    a.operand[k].data = data_ptr(operand(outs, ins, k));
  }
  const int64_t vectors = rows * (ms[last] / vec);
  const unsigned grid = grid_for(dev, vectors, 256, tuning().flat_blocks_per_sm);
  ElementwiseVariant v;
  v.form = ElementwiseVariant::Form::rows;
  v.row_inputs = row_inputs;
  v.strided = strided;
  v.vec = vec;
  v.narrow = vectors + int64_t{grid} * 256 < (int64_t{1} << 32);  // the 32-bit index never wraps
  Kernel f = program_kernel(dev, slots, v, [&] { return elementwise_source(p, v); });
  launch(dev, f, grid, 256, a.words());
  return true;
}

// Runs an elementwise program: outputs (any strides, exactly `shape`) then inputs
// (broadcast to `shape`). Contiguous operands and broadcast scalars take the flat kernel.
void run_program(int dev, const FusedProgram& p, const Shape& shape, const std::vector<Tensor>& ins,
                 const std::vector<Tensor>& outs, const compiler::KernelSlots* slots = nullptr) {
  int64_t n = detail::shape_size(shape);
  if (n == 0) return;
  uint64_t scalars = 0;
  if (plainly_flat(shape, n, ins, outs, scalars)) return run_flat(dev, p, n, ins, outs, scalars, slots);
  std::vector<Strides> strides;
  for (auto& o : outs) strides.push_back(o.strides);
  for (auto& t : ins) strides.push_back(detail::broadcast_strides(t, shape));
  Shape ms = shape;
  detail::merge_axes_in_place(ms, strides);
  if (run_tiled(dev, p, ms, strides, ins, outs, slots)) return;
  // Other inputs read down the output's columns (a transpose) are copied in tiles first: two
  // passes at a copy's bandwidth beat one strided pass that reads a word of each row. Small
  // arrays are not worth the extra launch.
  if (n >= (int64_t{1} << 18)) {
    std::vector<Tensor> read = ins;
    bool copied = false;
    for (Tensor& t : read) {
      Tensor dense(shape, t.dtype);
      const auto runs = t.size() > 1 ? copy_column_runs(t, shape, dense.strides) : std::nullopt;
      if (!runs || runs->src_col == 0) continue;  // src_col == 0: a broadcast, not a transpose
      allocate_output(dev, dense);
      copy_tiles(dev, *runs, t, dense);
      t = dense;
      copied = true;
    }
    if (copied) return run_program(dev, p, shape, read, outs, slots);
  }
  const int nops = static_cast<int>(strides.size());
  bool flat = ms.size() <= 1 && ins.size() <= 48;  // a bit per input in the variant key
  scalars = 0;
  for (int k = 0; k < nops && flat; ++k) {
    int64_t st = ms.empty() ? 1 : strides[static_cast<size_t>(k)][0];
    bool is_out = k < static_cast<int>(outs.size());
    if (st == 0 && !is_out)
      scalars |= uint64_t{1} << (k - static_cast<int>(outs.size()));
    else if (st != 1)
      flat = false;
  }
  if (flat) return run_flat(dev, p, n, ins, outs, scalars, slots);
  if (run_rows(dev, p, ms, strides, ins, outs, slots)) return;
  if (static_cast<int>(ms.size()) > kMaxDims) {
    fail("cuda", "elementwise kernel over ", ms.size(), " axes that do not merge (at most ", kMaxDims, ")");
  }
  OperandArgs<args::ElementwiseHead, args::StridedOperand> a(static_cast<size_t>(nops));
  a.head.n = n;
  a.head.nd = static_cast<long>(ms.size());
  for (size_t d = 0; d < ms.size(); ++d) a.head.shape[d] = ms[d];
  for (size_t k = 0; k < a.operand.size(); ++k) {
    for (size_t d = 0; d < ms.size(); ++d) a.operand[k].strides[d] = strides[k][d];
    a.operand[k].data = data_ptr(operand(outs, ins, k));
  }
  Kernel f = program_kernel(dev, slots, ElementwiseVariant{}, [&] { return elementwise_source(p); });
  launch(dev, f, grid_for(dev, n, 256), 256, a.words());
}

// One op over all of `in`, giving out[0].
void run_single(int dev, const Primitive& prim, const std::vector<Tensor>& in, Tensor& out) {
  FusedProgram p;
  std::vector<int> args;
  for (size_t i = 0; i < in.size(); ++i) {
    FusedOp op;
    op.dtype = in[i].dtype;
    op.input = static_cast<int>(i);
    p.ops.push_back(op);
    args.push_back(static_cast<int>(i));
  }
  FusedOp op;
  op.prim = borrow(prim);
  op.args = args;
  op.dtype = out.dtype;
  p.ops.push_back(op);
  p.outputs = {static_cast<int>(in.size())};
  run_program(dev, p, out.shape, in, {out});
}

// A fused elementwise region, in the tier the policy allows (docs/codegen.md, "Tiers"):
// its kernels once NVRTC has made them; until then (background) or always (off) the
// interpreter, where it takes the region; otherwise the kernels, waiting for NVRTC.
void run_region(int dev, const FusedProgram& p, const Shape& shape, const std::vector<Tensor>& ins,
                const std::vector<Tensor>& outs) {
  const FusedKernels policy = fused_kernels();
  if (policy == FusedKernels::off && run_interpreted(dev, p, shape, ins, outs)) return;
  if (policy != FusedKernels::background || !interpretable(dev, p))
    return run_program(dev, p, shape, ins, outs, &p.gpu_kernels);
  struct Background {
    Background() { background_region() = true; }
    ~Background() { background_region() = false; }
  };
  try {
    Background on;
    return run_program(dev, p, shape, ins, outs, &p.gpu_kernels);
  } catch (const KernelPending&) {
  }
  if (!run_interpreted(dev, p, shape, ins, outs)) run_program(dev, p, shape, ins, outs, &p.gpu_kernels);
}

}  // namespace

// src (broadcast) into dst (any strides), converting the dtype.
void copy_into(int dev, const Tensor& src, const Tensor& dst) {
  if (src.dtype == dst.dtype) {
    if (auto t = copy_column_runs(src, dst.shape, dst.strides)) return copy_tiles(dev, *t, src, dst);
  }
  FusedProgram p;
  FusedOp in;
  in.dtype = src.dtype;
  in.input = 0;
  p.ops.push_back(in);
  if (src.dtype != dst.dtype) {
    FusedOp cv;
    cv.prim = std::make_shared<AsType>(dst.dtype);
    cv.args = {0};
    cv.dtype = dst.dtype;
    p.ops.push_back(cv);
  }
  p.outputs = {static_cast<int>(p.ops.size()) - 1};
  run_program(dev, p, dst.shape, {src}, {dst});
}

Tensor contiguous_on_device(const Tensor& t, int device) {
  Tensor c(t.shape, t.dtype);
  allocate_output(device, c);
  copy_into(device, t, c);
  std::vector<Tensor> outs{c};
  finish_outputs(device, outs);
  return c;
}

namespace {

// The widest itemsize of the per-element outputs, and of the per-element inputs when asked.
int widest_element_item(const RowProgram& p, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                        bool with_inputs) {
  int widest = 1;
  for (auto& op : p.ops) {
    if (with_inputs && !op.prim && !op.per_row && !op.uniform) {
      widest = std::max(widest, static_cast<int>(ins[static_cast<size_t>(op.input)].itemsize()));
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!p.ops[static_cast<size_t>(p.outputs[o])].per_row)
      widest = std::max(widest, static_cast<int>(outs[o].itemsize()));
  }
  return widest;
}

// The reduction passes a row program makes over each row (its ops' deepest level).
int reduction_passes(const RowProgram& p) {
  const std::vector<int> levels = compiler::row_pass_levels(p);
  return levels.empty() ? 0 : *std::max_element(levels.begin(), levels.end());
}

bool has_element_outputs(const RowProgram& p) {
  return std::any_of(p.outputs.begin(), p.outputs.end(), [&](int o) { return !p.ops[static_cast<size_t>(o)].per_row; });
}

// A row kernel's arguments (args::Row): rows, row length and each input's strides, read here
// to choose the variant too.
using RowArgs = OperandArgs<args::RowHead, args::RowOperand>;

// Register rows: each thread keeps its share of the row from load to store, so the row is
// read once and every element op computed once. False when a row does not fit.
bool registers_variant(const RowProgram& p, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                       const RowArgs& a, int64_t n, RowVariant& var) {
  if (tuning().row_registers == 0) return false;
  constexpr int kMostElements = 32;  // per thread; more would spill
  const int widest = widest_element_item(p, ins, outs, true);
  // Measured (docs/benchmarks.md): float32 rows run as fast staged, and so do 16-bit rows
  // with per-element outputs past 4096 elements or after one reduction pass (RMSNorm).
  const bool staged_faster = widest > 2 || (has_element_outputs(p) && (n > 4096 || reduction_passes(p) == 1));
  if (tuning().row_registers < 0 && staged_faster) return false;
  int vec = std::max(tuning().vector_bytes / widest, 1);
  bool aligned = n % vec == 0;
  for (auto& op : p.ops) {
    if (op.prim || op.per_row || op.uniform) continue;
    const size_t k = static_cast<size_t>(op.input);
    aligned = aligned && a.operand[k].col_stride == 1 && a.operand[k].row_stride % vec == 0 && aligned_to(ins[k], vec);
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    if (p.ops[static_cast<size_t>(p.outputs[o])].per_row) continue;
    aligned = aligned && aligned_to(outs[o], vec);
  }
  if (!aligned) vec = 1;
  // One reduction pass (RMSNorm, a row sum) measured fastest with more threads and fewer
  // elements each; two or more passes (softmax, LayerNorm) with fewer threads, whose block
  // reductions cost less.
  const int elems = reduction_passes(p) == 1 ? tuning().row_elems_one_pass : tuning().row_elems;
  int threads = 32;
  while (threads < 1024 && int64_t{threads} * elems < n) threads *= 2;
  const int64_t chunks = (n + int64_t{threads} * vec - 1) / (int64_t{threads} * vec);
  if (chunks * vec > kMostElements) return false;
  var.threads = threads;
  var.vec = vec;
  var.chunks = static_cast<int>(std::max<int64_t>(chunks, 1));
  var.min_blocks = tuning().row_min_blocks;
  var.exact = n == int64_t{var.chunks} * threads * vec;
  return true;
}

// An input read per element whose rows are its own and contiguous (cs == 1, rs != 0): one a
// staged row may hold in shared memory.
bool contiguous_rows(const RowOp& op, const RowArgs& a) {
  if (op.prim || op.per_row || op.uniform) return false;
  const args::RowOperand& in = a.operand[static_cast<size_t>(op.input)];
  return in.col_stride == 1 && in.row_stride != 0;
}

// The shared memory a staged row may take: the device's opt-in limit (227 KB on an H100),
// less room for the kernel's own arrays, or KILN_CUDA_ROW_SHARED_KB.
size_t staged_cap(int dev) {
  if (tuning().row_shared_kb > 0) return size_t{1024} * static_cast<size_t>(tuning().row_shared_kb);
  constexpr size_t kStaticRoom = 8 * 1024;
  const size_t optin = static_cast<size_t>(std::max(device_info(dev).shared_optin, 0));
  return std::max<size_t>(kDefaultSharedBytes, optin > kStaticRoom ? optin - kStaticRoom : 0);
}

// Threads a row for staged rows of `smem` bytes, past 48 KB, where few blocks fit an SM: as
// many as fill the SM's threads with the blocks its shared memory holds (KILN_CUDA_LONG_ROW_THREADS).
int long_row_threads(int dev, size_t smem) {
  if (tuning().long_row_threads > 0) return tuning().long_row_threads;
  constexpr size_t kBlockReserve = 1024;  // the block's own arrays and the driver's share
  const DeviceInfo& info = device_info(dev);
  const size_t blocks =
      std::max<size_t>(static_cast<size_t>(std::max(info.shared_per_sm, 0)) / (smem + kBlockReserve), 1);
  int threads = 32;
  while (threads < 1024 &&
         static_cast<size_t>(threads) * 2 * blocks <= static_cast<size_t>(std::max(info.threads_per_sm, 1024)))
    threads *= 2;
  return threads;
}

// Blocks of a thread-block cluster that share a staged row of `row_bytes`, where one block
// cannot stage it: enough that each stages at most KILN_CUDA_ROW_CLUSTER_KB (32) KB, so
// several blocks an SM overlap loads with reductions. Rows that fit stay a block each (a
// cluster of two 64 KB parts measured slower than one 128 KB block).
// Clusters need sm_90; KILN_CUDA_ROW_CLUSTER caps them (8, the portable size; 1: none).
int row_cluster(int dev, size_t row_bytes, size_t shared_cap) {
  if (device_info(dev).major < 9 || row_bytes <= shared_cap) return 1;
  const size_t part_bytes = size_t{1024} * static_cast<size_t>(tuning().row_cluster_kb);
  int blocks = 1;
  while (blocks < tuning().row_cluster && row_bytes > part_bytes * static_cast<size_t>(blocks)) blocks *= 2;
  return blocks;
}

// Staged rows: inputs read in more than one pass are staged in shared memory when they fit
// in `shared_cap` bytes, so global memory is read once. Returns the shared memory bytes.
size_t staged_variant(const RowProgram& p, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                      const RowArgs& a, int64_t n, RowVariant& var, int dev, size_t shared_cap) {
  var.threads = 32;
  while (var.threads < tuning().row_threads && var.threads * 8 < n) var.threads *= 2;
  auto stageable = [&](const RowOp& op) { return op.input < 32 && contiguous_rows(op, a); };  // a bit of cached_inputs
  size_t row_bytes = 0;
  for (auto& op : p.ops) {
    if (stageable(op)) row_bytes += static_cast<size_t>(n) * ins[static_cast<size_t>(op.input)].itemsize();
  }
  var.cluster = shared_cap > 0 ? row_cluster(dev, row_bytes, shared_cap) : 1;
  const int64_t part = var.cluster > 1 ? cluster_part(n, var.cluster) : n;
  size_t smem = 0;
  bool aligned_in = true;
  for (auto& op : p.ops) {
    if (!stageable(op)) continue;
    size_t k = static_cast<size_t>(op.input);
    const long item = static_cast<long>(ins[k].itemsize());
    size_t bytes = (static_cast<size_t>(part) * static_cast<size_t>(item) + 15) / 16 * 16;
    if (smem + bytes > shared_cap) continue;
    smem += bytes;
    var.cached_inputs |= uint64_t{1} << k;
    aligned_in =
        aligned_in && ptr_bits(ins[k]) % 16 == 0 && (a.operand[k].row_stride * item) % 16 == 0 && (n * item) % 16 == 0;
  }
  var.vector_in = var.cached_inputs != 0 && aligned_in;
  var.async_stage = var.vector_in && tuning().row_async_stage;
  if (smem > kDefaultSharedBytes) var.threads = std::max(var.threads, long_row_threads(dev, smem));
  auto outputs_align = [&](int v) {
    for (size_t o = 0; o < outs.size(); ++o) {
      if (p.ops[static_cast<size_t>(p.outputs[o])].per_row) continue;
      if (!aligned_to(outs[o], v) || n % v != 0) return false;
    }
    return true;
  };
  // Vector passes: every per-element input read v at a time, from its staged row (16-byte
  // aligned in shared memory) or from global memory where its rows allow.
  const int v = std::max(tuning().vector_bytes / widest_element_item(p, ins, outs, true), 1);
  bool passes = v > 1 && n % v == 0 && tuning().row_vector_passes && outputs_align(v);
  for (auto& op : p.ops) {
    if (op.prim || op.per_row || op.uniform || (op.input < 32 && ((var.cached_inputs >> op.input) & 1))) continue;
    const size_t k = static_cast<size_t>(op.input);
    passes = passes && a.operand[k].col_stride == 1 && a.operand[k].row_stride % v == 0 && aligned_to(ins[k], v);
  }
  var.vector_passes = passes;
  var.vector_out = passes ? v : std::max(tuning().vector_bytes / widest_element_item(p, ins, outs, false), 1);
  if (!passes && !outputs_align(var.vector_out)) var.vector_out = 1;
  return smem;
}

// Rows too long to stage are read from global memory in every pass: 1024 threads a row and
// as few blocks an SM as keep the rows in flight within the L2 cache, so the passes after
// the first read them there (KILN_CUDA_ROWS_IN_L2=0: as many blocks as fit). Returns the
// blocks an SM; 0 where every long row was staged, or where not even a row an SM fits.
int64_t rows_in_l2(int dev, const RowProgram& p, const std::vector<Tensor>& ins, const RowArgs& a, int64_t n,
                   const RowVariant& var) {
  if (!tuning().rows_in_l2 || reduction_passes(p) == 0) return 0;
  int64_t row_bytes = 0;  // of the contiguous rows left unstaged
  for (auto& op : p.ops) {
    if (!contiguous_rows(op, a)) continue;
    if (op.input < 64 && ((var.cached_inputs >> op.input) & 1)) continue;
    row_bytes += n * static_cast<int64_t>(ins[static_cast<size_t>(op.input)].itemsize());
  }
  if (row_bytes <= int64_t{kDefaultSharedBytes}) return 0;
  const DeviceInfo& info = device_info(dev);
  const int64_t rows = static_cast<int64_t>(std::max(info.l2_bytes, 0)) / row_bytes;
  return std::min<int64_t>(rows / std::max(info.sms, 1), 2);
}

// How a split reduction cuts its rows: the first kernel's variant, the parts per row and
// their length, and the first kernel's blocks.
struct Parts {
  RowVariant var;
  int64_t splits = 0, len = 0, blocks = 0;
};

// n cut into about `parts` parts (at least 1) of a length that is a multiple of `multiple`:
// the length, and the parts that length needs.
std::pair<int64_t, int64_t> cut(int64_t n, int64_t parts, int64_t multiple = 1) {
  const int64_t len = ((n + parts - 1) / parts + multiple - 1) / multiple * multiple;
  return {len, (n + len - 1) / len};
}

// The vector of neighbouring rows a lane reads in a column reduction (1: none): 16 bytes
// of the widest input, at most 8 rows, where every input's rows are aligned to it, the rows
// a multiple of it, and no per-row value is computed before the reduction.
int64_t column_vector(const RowProgram& p, const RowArgs& a, int64_t rows) {
  const std::vector<int> levels = compiler::row_pass_levels(p);
  int64_t widest = 1;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const RowOp& op = p.ops[i];
    if (op.per_row && levels[i] == 0) return 1;
    if (!op.prim && !op.uniform) widest = std::max<int64_t>(widest, size_of(op.dtype));
  }
  const int64_t v = std::min<int64_t>(16 / widest, 8);
  if (v < 2 || rows % v != 0) return 1;
  for (auto& op : p.ops) {
    if (op.prim || op.uniform) continue;
    const size_t k = static_cast<size_t>(op.input);
    const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.operand[k].data));
    if (a.operand[k].col_stride % v != 0 || address % (v * size_of(op.dtype)) != 0) return 1;
  }
  return v;
}

// Rows next to each other in memory: a lane reduces a part of a vector of rows (8 warps a
// block down each part, about kColumnBlocksPerSm blocks an SM), else a thread a part of one row.
Parts column_parts(const RowProgram& p, const RowArgs& a, int64_t rows, int64_t n, int64_t sms) {
  constexpr int64_t kMinPart = 64;  // elements: a thread's share
  constexpr int64_t kColumnBlocksPerSm = 4;  // 2 measured 6-9% slower, 8 and 16 within 1%
  Parts parts;
  parts.var.split = 3;
  if (const int64_t v = column_vector(p, a, rows); v > 1) {
    parts.var.threads = 256;
    parts.var.vector_passes = true;
    parts.var.vector_out = static_cast<int>(v);
    const int64_t row_blocks = (rows + 32 * v - 1) / (32 * v);
    std::tie(parts.len, parts.splits) =
        cut(n, std::clamp(sms * kColumnBlocksPerSm / row_blocks, int64_t{1}, std::max<int64_t>(n / (8 * kMinPart), 1)));
    parts.blocks = row_blocks * parts.splits;
    return parts;
  }
  const int64_t target = sms * 8;
  parts.var.threads = rows >= 256 ? 256 : 32;
  std::tie(parts.len, parts.splits) =
      cut(n, std::clamp(target * tuning().column_parts / rows, int64_t{1}, std::max<int64_t>(n / kMinPart, 1)));
  parts.blocks = (rows + parts.var.threads - 1) / parts.var.threads * parts.splits;
  return parts;
}

// Few long rows: a block reduces a part of a row, parts starting on a vector.
Parts row_parts(const RowProgram& p, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs, const RowArgs& a,
                int64_t rows, int64_t n, int64_t target) {
  constexpr int64_t kMinPart = 4096;  // elements: a block's share, worth its partial and fold
  Parts parts;
  staged_variant(p, ins, outs, a, n, parts.var, 0, 0);
  parts.var.split = 1;
  const int64_t v = parts.var.vector_passes ? parts.var.vector_out : 1;
  parts.splits = std::min((target * tuning().part_waves + rows - 1) / rows, n / kMinPart);
  if (parts.splits < 2) return parts;
  std::tie(parts.len, parts.splits) = cut(n, parts.splits, v);
  parts.blocks = rows * parts.splits;
  return parts;
}

// A one-pass program with per-row outputs only, over few long rows (sum(x), a mean over the
// last axes of a small batch) or over rows next to each other in memory (a sum over the
// first axis): one block a row would leave most SMs idle or read across the rows, so a
// first kernel reduces parts of rows into partials and a second folds each row's partials
// in order. Deterministic: the parts depend only on the shape, layout and device. False
// when not taken.
bool split_rows(int dev, const RowProgram& p, int64_t rows, int64_t n, RowArgs a, const std::vector<Tensor>& ins,
                const std::vector<Tensor>& outs, const compiler::KernelSlots* slots) {
  if (!tuning().row_split || n < 2) return false;
  for (int o : p.outputs) {
    if (!p.ops[static_cast<size_t>(o)].per_row) return false;
  }
  int next_rows = 0, element_inputs = 0;  // inputs whose row stride is 1 and element stride not
  for (auto& op : p.ops) {
    if (op.prim || op.per_row || op.uniform) continue;
    const args::RowOperand& in = a.operand[static_cast<size_t>(op.input)];
    next_rows += in.row_stride == 1 && in.col_stride != 1 ? 1 : 0;
    ++element_inputs;
  }
  if (next_rows > 0 && next_rows < element_inputs) return false;  // mixed layouts: one block a row
  const int64_t sms = device_info(dev).sms, target = sms * 8;  // 256-thread blocks that fill every SM
  if (next_rows == 0 && rows >= target) return false;  // the common case, before the passes are walked
  if (reduction_passes(p) != 1) return false;
  const Parts parts = next_rows > 0 ? column_parts(p, a, rows, n, sms) : row_parts(p, ins, outs, a, rows, n, target);
  if (parts.splits < 2 && next_rows == 0) return false;
  std::vector<Tensor> partials;  // 8 bytes a partial: room for any accumulator type
  for (auto& op : p.ops) {
    if (!compiler::is_row_reduce(op)) continue;
    partials.emplace_back(Shape{rows * parts.splits}, float64);
    allocate_output(dev, partials.back());
    a.operand.push_back({0, 0, data_ptr(partials.back())});
  }
  a.head.splits = parts.splits;
  a.head.part_len = parts.len;
  const std::vector<long> words = a.words();
  const int64_t most = sms * 32;
  Kernel first = program_kernel(dev, slots, parts.var, [&] { return row_source(p, parts.var); });
  launch(dev, first, static_cast<unsigned>(std::min(parts.blocks, most)), static_cast<unsigned>(parts.var.threads),
         words, 0);
  RowVariant fold;
  fold.threads = 128;
  fold.split = 2;
  Kernel second = program_kernel(dev, slots, fold, [&] { return row_source(p, fold); });
  launch(dev, second, static_cast<unsigned>(std::min(rows, most)), static_cast<unsigned>(fold.threads), words, 0);
  return true;
}

// A row program over inputs broadcast to `full`, whose last `reduced` axes form the rows.
void run_rows(int dev, const RowProgram& p, const Shape& full, std::vector<Tensor> ins, std::vector<Tensor>& outs,
              const compiler::KernelSlots* slots = nullptr) {
  size_t lead = full.size() - static_cast<size_t>(p.reduced_axes);
  int64_t rows = 1, n = 1;
  for (size_t i = 0; i < full.size(); ++i) (i < lead ? rows : n) *= full[i];
  if (rows == 0) return;
  size_t nin = ins.size();
  RowArgs a(nin + outs.size());
  a.head.rows = rows;
  a.head.n = n;
  for (size_t k = 0; k < nin; ++k) {
    int64_t rs = 0, cs = 0;
    if (!row_col_strides(detail::broadcast_strides(ins[k], full), full, lead, rs, cs)) {
      // A view, or a broadcast over some leading axes, whose axes do not collapse: read a
      // row-major copy broadcast to the full shape instead.
      Tensor dense(full, ins[k].dtype);
      allocate_output(dev, dense);
      copy_into(dev, ins[k], dense);
      ins[k] = dense;
      if (!row_col_strides(detail::broadcast_strides(ins[k], full), full, lead, rs, cs)) {
        fail("cuda", "row kernel input layout does not collapse");
      }
    }
    a.operand[k] = {rs, cs, data_ptr(ins[k])};
  }
  for (size_t o = 0; o < outs.size(); ++o) a.operand[nin + o].data = data_ptr(outs[o]);
  if (split_rows(dev, p, rows, n, a, ins, outs, slots)) return;
  RowVariant var;
  size_t smem = 0;
  int64_t per_sm = tuning().row_blocks_per_sm;
  if (!registers_variant(p, ins, outs, a, n, var)) {
    smem = staged_variant(p, ins, outs, a, n, var, dev, staged_cap(dev));
    if (const int64_t l2 = rows_in_l2(dev, p, ins, a, n, var); l2 > 0) {
      var.threads = 1024;
      per_sm = l2;
    }
  }
  Kernel f = program_kernel(dev, slots, var, [&] { return row_source(p, var); });
  // Register-row blocks loop over the rows: one wave of resident blocks. Staged blocks: up
  // to 128 an SM, nearly a block a row, which ends more evenly (both as measured).
  if (var.chunks > 0) per_sm = resident_blocks(f, static_cast<unsigned>(var.threads), 0);
  const int64_t most = per_sm == 0 ? INT32_MAX : int64_t{device_info(dev).sms} * per_sm;
  const int64_t clusters =
      std::min(rows, std::max<int64_t>(most / var.cluster, 1));  // a cluster a row (var.cluster blocks)
  const unsigned grid = static_cast<unsigned>(clusters * var.cluster);
  launch(dev, f, grid, static_cast<unsigned>(var.threads), a.words(), static_cast<unsigned>(smem));
}

void reduce(int dev, const Primitive& prim, const Tensor& x, Tensor& y) {
  const std::vector<int>& axes = reduce_axes_of(prim);
  std::vector<bool> red(x.shape.size(), false);
  for (int a : axes) red[static_cast<size_t>(a)] = true;
  Shape shape;
  Strides strides;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < x.shape.size(); ++i) {
      if (red[i] == (pass == 1)) {
        shape.push_back(x.shape[i]);
        strides.push_back(x.strides[i]);
      }
    }
  }
  Tensor xv = view(x, shape, strides, x.offset);
  RowProgram p;
  p.reduced_axes = static_cast<int>(axes.size());
  RowOp in;
  in.dtype = x.dtype;
  in.input = 0;
  RowOp r;
  r.prim = borrow(prim);
  r.args = {0};
  r.dtype = y.dtype;
  r.per_row = true;
  p.ops = {in, r};
  p.outputs = {1};
  std::vector<Tensor> outs{y};
  run_rows(dev, p, shape, {xv}, outs);
}

// Kept axes (all but `axis`) of t, with strides; size-1 axes dropped.
void kept_axes(const Tensor& t, int axis, const Strides& strides, Shape& shape, Strides& st) {
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (static_cast<int>(i) == axis || t.shape[i] == 1) continue;
    shape.push_back(t.shape[i]);
    st.push_back(strides[i]);
  }
  if (static_cast<int>(shape.size()) > kMaxDims) fail("cuda", "more than ", kMaxDims, " axes");
}

std::string type_name(Dtype d) { return compiler::cpp_type(d); }

void arg_reduce(int dev, const ArgReduce& prim, const Tensor& x, Tensor& y) {
  int axis = prim.axis();
  Shape shape;
  Strides st;
  kept_axes(x, axis, x.strides, shape, st);
  int64_t rows = y.size();
  if (rows == 0) return;
  args::ArgReduce a{};
  a.rows = rows;
  a.nd = static_cast<long>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    a.shape[d] = shape[d];
    a.strides[d] = st[d];
  }
  const int64_t len = x.shape[static_cast<size_t>(axis)], as = x.strides[static_cast<size_t>(axis)];
  a.length = len;
  a.axis_stride = as;
  a.in = data_ptr(x);
  a.out = data_ptr(y);
  std::string types = "<";  // appended: GCC 12 warns falsely (-Wrestrict) on "<" + std::string
  types += type_name(x.dtype);
  types += prim.kind() == OpKind::ArgMax ? ", true>" : ", false>";
  const int64_t sms = device_info(dev).sms;
  // A thread a row reads across a row held contiguously, and leaves SMs idle for few rows:
  // long rows then go in parts, a block a part, and a warp a row folds the parts' picks.
  if (tuning().row_split && len >= 256 && (as == 1 || rows < sms * 256)) {
    constexpr int64_t kMinPart = 2048;  // positions: a block's share
    // At most one wave of blocks (8 resident a SM): a few parts past it ran alone after it.
    const auto [part_len, parts] =  // parts of 16 positions: aligned rows give aligned 16-byte loads
        cut(len, std::clamp(sms * 8 * tuning().part_waves / rows, int64_t{1}, std::max<int64_t>(len / kMinPart, 1)),
            16);
    Tensor values(Shape{rows * parts}, float64), indices(Shape{rows * parts}, int64);  // 8 bytes a value: any type
    allocate_output(dev, values);
    allocate_output(dev, indices);
    const args::ArgReduceParts ap{a, data_ptr(values), data_ptr(indices), parts, part_len};
    launch_struct(dev, kArgReduceHeader, "ArgReduceParts", "argreduce::reduce_parts" + types, ap,
                  static_cast<unsigned>(std::min(rows * parts, sms * 32)), 256);
    launch_struct(dev, kArgReduceHeader, "ArgReduceParts", "argreduce::fold_parts" + types, ap,
                  grid_for(dev, rows * 32, 128), 128);  // a warp a row
    return;
  }
  launch_struct(dev, kArgReduceHeader, "ArgReduce", "argreduce::first_extreme" + types, a, grid_for(dev, rows, 128),
                128);
}

void cumsum(int dev, const CumSum& prim, const Tensor& x, Tensor& y) {
  int axis = prim.axis();
  Shape shape, shape2;
  Strides ist, ost;
  kept_axes(x, axis, x.strides, shape, ist);
  kept_axes(y, axis, y.strides, shape2, ost);
  int64_t len = x.shape[static_cast<size_t>(axis)];
  int64_t lines = len == 0 ? 0 : y.size() / len;
  if (lines == 0) return;
  args::Cumsum a{};
  a.lines = lines;
  a.nd = static_cast<long>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    a.shape[d] = shape[d];
    a.in_strides[d] = ist[d];
    a.out_strides[d] = ost[d];
  }
  a.length = len;
  a.in_axis_stride = x.strides[static_cast<size_t>(axis)];
  a.out_axis_stride = y.strides[static_cast<size_t>(axis)];
  a.reverse = prim.reverse();
  a.inclusive = prim.inclusive();
  a.in = data_ptr(x);
  a.out = data_ptr(y);
  launch_struct(dev, "backend/cuda/kernels/scan.cuh", "Cumsum", "scan::cumsum<" + type_name(x.dtype) + ">", a,
                grid_for(dev, lines, 128), 128);
}

// A 0-d device tensor holding `value` converted to dtype d.
Tensor device_scalar(int dev, double value, Dtype d) {
  Tensor h(Shape{}, d);
  h.allocate();
  detail::dispatch_dtype(d, [&](auto t) {
    using T = decltype(t);
    *h.data<T>() = math::convert<T>(value);
  });
  return to_device(h, dev);
}

// y gathered from a along `axis` by the indices idx (read row-major, with the strides `is`),
// negative ones counted from the end. Checked on the host first (an out-of-range index raises
// the CPU's error), except while a compiled call records for CUDA-graph replay, which has no
// host round trip: there the kernel clamps them.
void gather(int dev, const char* op, const Tensor& a, const Strides& as, int64_t axis, const Tensor& idx,
            const Strides& is, const Tensor& y) {
  const int64_t size = a.shape[static_cast<size_t>(axis)];
  if (!recording() || size == 0) detail::normalized_indices(op, to_host(idx), size, static_cast<int>(axis));
  if (y.size() == 0) return;
  if (static_cast<int>(y.shape.size()) > kMaxDims) fail("cuda", "gather over more than ", kMaxDims, " axes");
  const Tensor in = idx.row_contiguous() ? idx : contiguous_on_device(idx, dev);
  args::Gather g{};
  g.n = y.size();
  g.nd = static_cast<long>(y.shape.size());
  for (size_t d = 0; d < y.shape.size(); ++d) {
    g.shape[d] = y.shape[d];
    g.y_strides[d] = y.strides[d];
    g.a_strides[d] = as[d];
    g.idx_strides[d] = is[d];
  }
  g.axis_stride = a.strides[static_cast<size_t>(axis)];
  g.size = size;
  g.y = data_ptr(y);
  g.a = data_ptr(a);
  g.idx = data_ptr(in);
  launch_struct(dev, kGatherHeader, "Gather",
                std::string("gather::take<") + word_type(y.itemsize()) + ", " + type_name(idx.dtype) + ">", g,
                grid_for(dev, y.size(), 256), 256);
}

// Random words: a thread a Threefry pair (backend/common/threefry.h), the key read on the
// device, so a key computed there (a split) needs no copy to the host.
void random_bits(int dev, const Tensor& key, Tensor& y) {
  if (y.size() == 0) return;
  const args::RandomBits a{y.size(), data_ptr(key), key.strides[0], data_ptr(y)};
  launch_struct(dev, "backend/cuda/kernels/random.cuh", "RandomBits", "random::bits", a,
                grid_for(dev, (y.size() + 1) / 2, 256), 256);
}

// topk of up to 1024 picks a row on the device (topk::largest); false for more.
bool topk_on_device(int dev, const Selection& prim, const Tensor& x, std::vector<Tensor>& out) {
  const int64_t k = prim.k(), n = x.shape.back();
  if (k > 1024) return false;
  for (auto& o : out) allocate_output(dev, o);
  const int64_t rows = n == 0 ? 0 : x.size() / n;
  if (k == 0 || rows == 0) return true;
  Tensor dense = x;
  if (!x.row_contiguous()) {
    dense = Tensor(x.shape, x.dtype);
    allocate_output(dev, dense);
    copy_into(dev, x, dense);
  }
  const args::TopK a{rows, n, k, data_ptr(dense), data_ptr(out[0]), data_ptr(out[1])};
  launch_struct(dev, "backend/cuda/kernels/topk.cuh", "TopK", "topk::largest<" + type_name(x.dtype) + ">", a,
                static_cast<unsigned>(std::min<int64_t>(rows, int64_t{device_info(dev).sms} * 8)), 256);
  return true;
}

// Sorting and selection: topk on the device where it can, the rest on the host (the input
// copied down, the results up).
void select(int dev, Primitive& prim, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (prim.kind() == OpKind::TopK && topk_on_device(dev, static_cast<const Selection&>(prim), in[0], out)) return;
  std::vector<Tensor> host_in{to_host(in[0])};
  prim.eval_cpu(host_in, out);
  for (auto& t : out) t = to_device(t, dev);
}

// activation(a @ b + bias) (the fuse_matmul_epilogue pass): cuBLASLt's epilogue adds a bias
// vector and applies the tanh GELU; the exact GELU, which it lacks, runs as a kernel after
// the biased product. Else (no algorithm for the epilogue, a bias that broadcasts the
// product) the product, then bias and activation in one elementwise kernel.
void matmul_epilogue(int dev, const MatmulEpilogue& prim, const std::vector<Tensor>& in, Tensor& y) {
  using Act = MatmulEpilogue::Activation;
  const Tensor& bias = in[2];
  Shape ps = Matmul().output_shapes({in[0].shape, in[1].shape})[0];
  const int64_t n = y.shape.back();
  const bool vector_bias = ps == y.shape && bias.size() == n && !bias.shape.empty() && bias.shape.back() == n;
  std::shared_ptr<Primitive> act;
  if (prim.activation() == Act::gelu) act = std::make_shared<Unary<math::Gelu>>();
  if (prim.activation() == Act::gelu_tanh) act = std::make_shared<Unary<math::GeluTanh>>();
  // cuBLASLt's own GELU is an approximation good to float32, not float64: there the
  // activation runs as a kernel after the biased product, as for the exact GELU.
  const bool kernel_act = prim.activation() == Act::gelu || (act && y.dtype == float64);
  if (vector_bias && !kernel_act && matmul_bias(dev, in[0], in[1], bias, act != nullptr, y)) return;
  Tensor t(ps, y.dtype);
  allocate_output(dev, t);
  if (vector_bias && kernel_act && matmul_bias(dev, in[0], in[1], bias, false, t)) {
    run_single(dev, *act, {t}, y);
    return;
  }
  matmul(dev, in[0], in[1], t);
  FusedProgram p;
  FusedOp x, c, sum;
  x.dtype = t.dtype;
  x.input = 0;
  c.dtype = bias.dtype;
  c.input = 1;
  sum.prim = std::make_shared<Binary<math::Add>>();
  sum.args = {0, 1};
  sum.dtype = y.dtype;
  p.ops = {x, c, sum};
  if (act) {
    FusedOp f;
    f.prim = act;
    f.args = {2};
    f.dtype = y.dtype;
    p.ops.push_back(f);
  }
  p.outputs = {static_cast<int>(p.ops.size()) - 1};
  run_program(dev, p, y.shape, {t, bias}, {y});
}

}  // namespace

void eval(Device device, const Primitive& cprim, std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int dev = device.index;
  auto& prim = const_cast<Primitive&>(cprim);
  OpKind k = prim.kind();
  // A view of host data stays a view of that host buffer, as on the CPU (no upload now, no
  // download for a host reader); a device reader uploads the buffer on use, an owned one once.
  if (op_category(k) == OpCategory::view && !on_device(in[0]) && !(k == OpKind::Reshape && !in[0].row_contiguous())) {
    prim.eval_cpu(in, out);
    return;
  }
  if (op_category(k) == OpCategory::nn) check_llm_inputs(prim, in);
  prepare_inputs(dev, in);
  switch (op_category(k)) {
    case OpCategory::unary:
    case OpCategory::binary:
    case OpCategory::elementwise:
      allocate_output(dev, out[0]);
      run_single(dev, prim, in, out[0]);
      break;
    case OpCategory::reduce:
      allocate_output(dev, out[0]);
      reduce(dev, prim, in[0], out[0]);
      break;
    case OpCategory::view:
      if (k == OpKind::Reshape && !in[0].row_contiguous()) {
        allocate_output(dev, out[0]);
        copy_into(dev, in[0], view(out[0], in[0].shape, detail::row_major_strides(in[0].shape), out[0].offset));
      } else {
        prim.eval_cpu(in, out);  // views touch no data
      }
      break;
    case OpCategory::creation:
      if (k == OpKind::Full) {
        allocate_output(dev, out[0]);
        copy_into(dev, in[0], out[0]);
      } else {
        // Arange and AxisSize depend on parameters (and shapes) alone: made on the host, uploaded.
        std::vector<Tensor> host_in = in;
        for (auto& t : host_in) t.buffer.reset();  // only shapes are read
        prim.eval_cpu(host_in, out);
        for (auto& t : out) t = to_device(t, dev);
      }
      break;
    case OpCategory::reduction:
      allocate_output(dev, out[0]);
      arg_reduce(dev, static_cast<const ArgReduce&>(prim), in[0], out[0]);
      break;
    case OpCategory::scan:
      allocate_output(dev, out[0]);
      cumsum(dev, static_cast<const CumSum&>(prim), in[0], out[0]);
      break;
    case OpCategory::matmul:
      allocate_output(dev, out[0]);
      if (k == OpKind::MatmulEpilogue)
        matmul_epilogue(dev, static_cast<const MatmulEpilogue&>(prim), in, out[0]);
      else
        matmul(dev, in[0], in[1], out[0]);
      break;
    case OpCategory::layout: {
      Tensor& y = out[0];
      if (k != OpKind::SliceUpdate) allocate_output(dev, y);
      if (k == OpKind::Copy) {
        copy_into(dev, in[0], y);
      } else if (k == OpKind::Concatenate) {
        size_t ax = static_cast<size_t>(static_cast<const Concatenate&>(prim).axis());
        int64_t at = 0;
        for (auto& t : in) {
          if (t.size() > 0) copy_into(dev, t, view(y, t.shape, y.strides, y.offset + at * y.strides[ax]));
          at += t.shape[ax];
        }
      } else if (k == OpKind::Pad) {
        auto& pad = static_cast<const Pad&>(prim);
        copy_into(dev, device_scalar(dev, pad.value(), y.dtype), y);
        int64_t off = y.offset;
        for (size_t i = 0; i < y.shape.size(); ++i) off += pad.widths()[i].first * y.strides[i];
        copy_into(dev, in[0], view(y, in[0].shape, y.strides, off));
      } else if (k == OpKind::SliceUpdate) {
        auto& su = static_cast<const SliceUpdate&>(prim);
        auto moved = [](const Tensor& t) { return static_cast<uint64_t>(t.size()) * t.itemsize(); };
        if (!allocate_from(dev, in[0], y)) {  // else updated in place: in[0] was donated
          copy_into(dev, in[0], y);
          detail::count(detail::counters().layout_bytes_copied, moved(in[0]));
        }
        detail::count(detail::counters().layout_bytes_copied, moved(in[1]));
        auto r = resolve_slice("slice_update", in[0].shape, su.args());
        if (detail::shape_size(r.length) > 0) {
          Strides rs(y.shape.size());
          int64_t off = y.offset;
          for (size_t i = 0; i < y.shape.size(); ++i) {
            rs[i] = r.length[i] > 1 ? y.strides[i] * r.step[i] : y.strides[i];  // as on the CPU: no wrap
            off += r.start[i] * y.strides[i];
          }
          copy_into(dev, in[1], view(y, r.length, rs, off));
        }
      }
      break;
    }
    case OpCategory::gather: {
      const Tensor& a = in[0];
      const Tensor& ind = in[1];
      Tensor& y = out[0];
      allocate_output(dev, y);
      if (k == OpKind::Take) {
        size_t ax = static_cast<size_t>(static_cast<const Take&>(prim).axis());
        const detail::GatherStrides g = detail::take_strides(a, ind, y, ax);
        gather(dev, "take", a, g.a, static_cast<int64_t>(ax), ind, g.idx, y);
      } else {
        size_t ax = static_cast<size_t>(static_cast<const TakeAlongAxis&>(prim).axis());
        const detail::GatherStrides g = detail::take_along_axis_strides(a, ind, y, ax);
        gather(dev, "take_along_axis", a, g.a, static_cast<int64_t>(ax), ind, g.idx, y);
      }
      break;
    }
    case OpCategory::nn: eval_llm(dev, prim, in, out); break;
    case OpCategory::random:
      allocate_output(dev, out[0]);
      random_bits(dev, in[0], out[0]);
      break;
    case OpCategory::selection: select(dev, prim, in, out); break;
    case OpCategory::collective: run_collective(dev, prim, in, out); break;
    case OpCategory::fused:
      if (k == OpKind::Fused) {
        auto& f = static_cast<const compiler::Fused&>(prim);
        for (auto& o : out) allocate_output(dev, o);
        run_region(dev, f.program(), out[0].shape, in, out);
      } else {
        auto& rf = static_cast<const compiler::RowFused&>(prim);
        for (auto& o : out) allocate_output(dev, o);
        std::vector<Shape> shapes;
        for (auto& t : in) shapes.push_back(t.shape);
        Shape full = broadcast_shapes("row_fused", shapes);
        run_rows(dev, rf.program(), full, in, out, &rf.program().gpu_kernels);
      }
      break;
    case OpCategory::compiled: run_compiled(dev, static_cast<const compiler::CompiledCall&>(prim), in, out); return;
  }
  finish_outputs(dev, out);
}

}  // namespace kiln::cuda
