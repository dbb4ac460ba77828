// Running a fused region on the CPU: inputs broadcast to the output shape, axes merged,
// rows handed to the generated kernel (or the interpreter) on the thread pool.
#include <sstream>

#include "backend/cpu/copy.h"
#include "backend/cpu/jit.h"
#include "backend/cpu/strided.h"
#include "compile/codegen_util.h"
#include "compile/fused.h"
#include "compile/tier.h"
#include "ops/elementwise.h"

namespace kiln::compiler {

using detail::Tensor;

namespace {

// Axis merging for any number of operands (operand 0 is the contiguous output shape).
struct Layout {
  Shape shape;  // merged, never empty
  std::vector<Strides> strides;  // per operand
};

Layout merge(const Shape& shape, const std::vector<Strides>& strides) {
  Layout L{shape, strides};
  detail::merge_axes_in_place(L.shape, L.strides);
  if (L.shape.empty()) {
    L.shape.push_back(1);
    for (auto& s : L.strides) s.push_back(1);
  }
  return L;
}

// Element offsets of every operand at the start of outer row r.
void row_offsets(const Layout& L, int64_t r, std::vector<int64_t>& off) {
  size_t nd = L.shape.size();
  std::fill(off.begin(), off.end(), 0);
  for (size_t d = nd - 1; d-- > 0;) {
    int64_t i = r % L.shape[d];
    r /= L.shape[d];
    for (size_t k = 0; k < off.size(); ++k) off[k] += i * L.strides[k][d];
  }
}

// The output's layout and every input's, broadcast to the output's shape, axes merged.
Layout merged_layout(const std::vector<Tensor>& in, const Tensor& out) {
  std::vector<Strides> strides;
  strides.push_back(out.strides);
  for (auto& t : in) strides.push_back(detail::broadcast_strides(t, out.shape));
  return merge(out.shape, strides);
}

constexpr int64_t kTile = 1024;  // elements per interpreter tile and per kernel call chunk

}  // namespace

Fused::Fused(std::shared_ptr<const FusedProgram> program) : Primitive(OpKind::Fused), program_(std::move(program)) {}

std::vector<Shape> Fused::output_shapes(const std::vector<Shape>& in) const {
  Shape s = broadcast_shapes("fused", in);
  return std::vector<Shape>(program_->outputs.size(), s);
}

void Fused::print(std::ostream& os) const { print_region(os, name(), program_->ops); }

Fused::KernelFn Fused::kernel() {
  void* fn = kernel_.get([&] {
    std::string symbol = "kiln_fused_" + std::to_string(std::hash<std::string>{}(program_->signature()));
    return cpu::TieredKernel::Source{program_->source(symbol), symbol};
  });
  note_region(fn != nullptr, kernel_.ready_ns());
  return reinterpret_cast<KernelFn>(fn);
}

void Fused::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  for (auto& o : out) o.allocate();
  if (out[0].size() == 0) return;
  KernelFn fn = kernel();
  if (!fn) return interpret(in, out);
  Layout L = merged_layout(in, out[0]);
  int64_t inner = L.shape.back();
  int64_t rows = detail::shape_size(L.shape) / inner;
  size_t nin = in.size(), nout = out.size();
  int64_t cost = 0;  // per element: the members that compute (inputs cost nothing)
  for (auto& op : program_->ops) cost += op.prim ? 1 : 0;
  // Work is split into chunks of rows, or of one long row. The generated code is vectorized,
  // so a member costs a fraction of an eager kernel's element: a chunk holds 4 grains of work,
  // or waking a pool thread (microseconds) would outweigh a small call's whole kernel.
  int64_t chunk = std::max<int64_t>(1, 4 * detail::kParallelGrain / std::max<int64_t>(1, cost));
  int64_t pieces_per_row = std::max<int64_t>(1, (inner + chunk - 1) / chunk);
  if (rows > 1) pieces_per_row = 1;
  int64_t piece_len = (inner + pieces_per_row - 1) / pieces_per_row;
  int64_t grain = std::max<int64_t>(1, chunk / std::max<int64_t>(1, piece_len));
  // The kernel over n elements of row r from element `start`, with the caller's scratch.
  struct Scratch {
    std::vector<int64_t> off, st;
    std::vector<const void*> ip;
    std::vector<void*> op;
  };
  auto scratch = [&] {
    Scratch w{std::vector<int64_t>(nin + 1), std::vector<int64_t>(nin), std::vector<const void*>(nin),
              std::vector<void*>(nout)};
    for (size_t k = 0; k < nin; ++k) w.st[k] = L.strides[k + 1].back();
    return w;
  };
  auto run = [&](Scratch& w, int64_t r, int64_t start, int64_t n) {
    row_offsets(L, r, w.off);
    for (size_t k = 0; k < nin; ++k) {
      w.ip[k] = static_cast<const char*>(in[k].raw()) +
                (w.off[k + 1] + start * w.st[k]) * static_cast<int64_t>(in[k].itemsize());
    }
    int64_t out_off = w.off[0] + start;  // outputs are contiguous and share the layout of operand 0
    for (size_t o = 0; o < nout; ++o) {
      w.op[o] = static_cast<char*>(out[o].raw()) + out_off * static_cast<int64_t>(out[o].itemsize());
    }
    fn(n, w.ip.data(), w.st.data(), w.op.data());
  };
  if (detail::runs_down_columns(L.shape, L.strides)) {
    // An input read down the columns (a transpose): blocks of kBlock rows, so each of its
    // lines serves kBlock rows while it is in the cache, and kBlockColumns columns: a call of
    // the kernel costs tens of ns (32 columns measured 38 ms for transpose(a) * b + 0.5 of
    // 4096 x 4096 on the 2-core VM, 64 to 256 columns 32.6, 28.5 and 26.5 ms).
    constexpr int64_t kBlockColumns = 256;
    const int64_t R = L.shape[L.shape.size() - 2];
    detail::parallel_row_blocks<kBlockColumns>(
        rows / R, R, inner, std::max<int64_t>(1, chunk / (detail::kBlock * inner)), scratch,
        [&](Scratch& w, int64_t m, int64_t r, int64_t c0, int64_t n) { run(w, m * R + r, c0, n); });
    return;
  }
  detail::parallel_for(rows * pieces_per_row, grain, [&](int64_t b, int64_t e) {
    Scratch w = scratch();
    for (int64_t p = b; p < e; ++p) {
      int64_t r = p / pieces_per_row, start = (p % pieces_per_row) * piece_len;
      run(w, r, start, std::min(piece_len, inner - start));
    }
  });
}

// Without a compiler: run each member's own kernel on tiles of one row at a time,
// so intermediates stay in cache and results equal the unfused ones exactly.
void Fused::interpret(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Layout L = merged_layout(in, out[0]);
  int64_t inner = L.shape.back();
  int64_t rows = detail::shape_size(L.shape) / inner;
  int64_t tiles_per_row = (inner + kTile - 1) / kTile;
  const auto& ops = program_->ops;
  detail::parallel_for(rows * tiles_per_row, 4, [&](int64_t b, int64_t e) {
    std::vector<int64_t> off(in.size() + 1);
    std::vector<Tensor> vals(ops.size());
    for (int64_t p = b; p < e; ++p) {
      int64_t r = p / tiles_per_row, start = (p % tiles_per_row) * kTile;
      int64_t n = std::min(kTile, inner - start);
      row_offsets(L, r, off);
      for (size_t i = 0; i < ops.size(); ++i) {
        const FusedOp& op = ops[i];
        Tensor& t = vals[i];
        if (!op.prim) {  // a strided 1-D view of the input's tile
          const Tensor& src = in[static_cast<size_t>(op.input)];
          int64_t s = L.strides[static_cast<size_t>(op.input) + 1].back();
          t = src;
          t.shape = {n};
          t.strides = {s};
          t.offset = src.offset + off[static_cast<size_t>(op.input) + 1] + start * s;
          continue;
        }
        std::vector<Tensor> args;
        for (int a : op.args) args.push_back(vals[static_cast<size_t>(a)]);
        std::vector<Tensor> res{Tensor(Shape{n}, op.dtype)};
        op.prim->eval_cpu(args, res);
        t = std::move(res[0]);
      }
      for (size_t o = 0; o < out.size(); ++o) {
        Tensor dst = out[o];
        dst.shape = {n};
        dst.strides = {1};
        dst.offset = out[o].offset + off[0] + start;
        detail::copy_convert(vals[static_cast<size_t>(program_->outputs[o])], dst);
      }
    }
  });
}

}  // namespace kiln::compiler
