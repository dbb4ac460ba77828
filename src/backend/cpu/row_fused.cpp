// Running a fused row region on the CPU.
#include <sstream>

#include "backend/cpu/copy.h"
#include "backend/cpu/jit.h"
#include "backend/cpu/strided.h"
#include "compile/codegen_util.h"
#include "compile/row_fused.h"
#include "compile/tier.h"
#include "ops/elementwise.h"

namespace kiln::compiler {

using detail::Tensor;

RowFused::RowFused(std::shared_ptr<const RowProgram> program)
    : Primitive(OpKind::RowFused), program_(std::move(program)) {}

std::vector<Shape> RowFused::output_shapes(const std::vector<Shape>& in) const {
  Shape full = broadcast_shapes("row_fused", in);
  if (static_cast<int>(full.size()) < program_->reduced_axes) {
    fail("row_fused", "inputs of rank ", full.size(), " cannot have ", program_->reduced_axes, " reduced axes");
  }
  Shape row = full;
  for (size_t i = row.size() - static_cast<size_t>(program_->reduced_axes); i < row.size(); ++i) row[i] = 1;
  std::vector<Shape> out;
  for (int o : program_->outputs) out.push_back(program_->ops[static_cast<size_t>(o)].per_row ? row : full);
  return out;
}

void RowFused::print(std::ostream& os) const { print_region(os, name(), program_->ops); }

RowFused::KernelFn RowFused::kernel() {
  void* fn = kernel_.get([&] {
    std::string symbol = "kiln_rows_" + std::to_string(std::hash<std::string>{}(program_->signature()));
    return cpu::TieredKernel::Source{program_->source(symbol), symbol};
  });
  return reinterpret_cast<KernelFn>(fn);
}

bool row_col_strides(const Strides& s, const Shape& full, size_t lead, int64_t& rs, int64_t& cs) {
  auto collapse = [&](size_t b, size_t e, int64_t& out) {
    int64_t expected = -1;  // stride the next outer axis must have
    out = 0;
    bool first = true;
    for (size_t i = e; i-- > b;) {
      if (full[i] == 1) continue;
      if (first) {
        out = s[i];
        first = false;
      } else if (s[i] != expected) {
        return false;
      }
      expected = s[i] * full[i];
    }
    return true;
  };
  return collapse(0, lead, rs) && collapse(lead, full.size(), cs);
}

// A shapeless replay may give an input traced as one value per row a full row:
// the kernel would read only its first column, so such calls run unfused.
bool RowFused::per_row_inputs_hold(const std::vector<Tensor>& in, const Shape& full, size_t lead) const {
  for (auto& op : program_->ops) {
    if (op.prim || !op.per_row) continue;
    const Shape& s = in[static_cast<size_t>(op.input)].shape;
    size_t pad = full.size() - s.size();
    for (size_t i = std::max(lead, pad); i < full.size(); ++i) {
      if (s[i - pad] != 1) return false;
    }
  }
  return true;
}

void RowFused::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  for (auto& o : out) o.allocate();
  Shape full;
  {
    std::vector<Shape> shapes;
    for (auto& t : in) shapes.push_back(t.shape);
    full = broadcast_shapes("row_fused", shapes);
  }
  size_t lead = full.size() - static_cast<size_t>(program_->reduced_axes);
  int64_t n = 1, rows = 1;
  for (size_t i = 0; i < full.size(); ++i) (i < lead ? rows : n) *= full[i];
  if (rows == 0) return;
  KernelFn fn = kernel();
  note_region(fn != nullptr, kernel_.ready_ns());  // a layout the kernel does not take is no tier's doing
  if (!fn || n == 0 || !per_row_inputs_hold(in, full, lead)) return run_unfused(in, out);
  std::vector<Tensor> inputs = in;
  std::vector<int64_t> rs(in.size()), cs(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    if (row_col_strides(detail::broadcast_strides(inputs[k], full), full, lead, rs[k], cs[k])) continue;
    // Reading a view whose axes do not collapse: use a row-major copy instead.
    Tensor c(inputs[k].shape, inputs[k].dtype);
    c.allocate();
    detail::copy_convert(inputs[k], c);
    inputs[k] = c;
    if (!row_col_strides(detail::broadcast_strides(inputs[k], full), full, lead, rs[k], cs[k])) {
      return run_unfused(in, out);
    }
  }
  std::vector<const void*> ip;
  for (auto& t : inputs) ip.push_back(t.raw());
  std::vector<void*> op;
  for (auto& t : out) op.push_back(t.raw());
  int64_t cost = n * static_cast<int64_t>(program_->ops.size());
  int64_t grain = std::max<int64_t>(1, detail::kParallelGrain / std::max<int64_t>(1, cost));
  detail::parallel_for(rows, grain,
                       [&](int64_t b, int64_t e) { fn(b, e, rows, n, ip.data(), rs.data(), cs.data(), op.data()); });
}

void RowFused::run_unfused(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const auto& ops = program_->ops;
  std::vector<Tensor> vals(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const RowOp& op = ops[i];
    if (!op.prim) {
      vals[i] = in[static_cast<size_t>(op.input)];
      continue;
    }
    std::vector<Tensor> args;
    std::vector<Shape> shapes;
    for (int a : op.args) {
      args.push_back(vals[static_cast<size_t>(a)]);
      shapes.push_back(args.back().shape);
    }
    std::vector<Tensor> res{Tensor(op.prim->output_shapes(shapes)[0], op.dtype)};
    op.prim->eval_cpu(args, res);
    vals[i] = std::move(res[0]);
  }
  for (size_t o = 0; o < out.size(); ++o) detail::copy_convert(vals[static_cast<size_t>(program_->outputs[o])], out[o]);
}

}  // namespace kiln::compiler
