// C++ source for a fused row region. The kernel runs rows [r0, r1) of a
// (rows, n) view: input k's element (r, j) is at in[k] + r*rs[k] + j*cs[k];
// per-element outputs are contiguous (rows, n), per-row outputs (rows).
// Each reduction is one pass over the row, folding in the eager kernels' order
// (backend/common/fold.h); elementwise work is recomputed in each pass that needs
// it rather than stored, but for one costly value the output pass reads back.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "compile/codegen_util.h"
#include "compile/row_fused.h"

namespace kiln::compiler {

std::string RowProgram::signature() const {
  std::ostringstream os;
  os << "rows" << reduced_axes << ";";
  for (auto& op : ops) {
    if (op.prim)
      op.prim->print(os);
    else
      os << (op.uniform ? "uniform" : "in") << op.input;
    os << ":" << dtype_name(op.dtype) << (op.per_row ? "r" : "e") << "(";
    for (int a : op.args) os << a << ",";
    os << ")";
  }
  for (int o : outputs) os << "->" << o;
  return os.str();
}

bool is_row_reduce(const RowOp& op) { return op.prim && op_category(op.prim->kind()) == OpCategory::reduce; }

std::vector<int> row_pass_levels(const RowProgram& p) {
  std::vector<int> level(p.ops.size(), 0);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    int l = 0;
    for (int a : p.ops[i].args) l = std::max(l, level[static_cast<size_t>(a)]);
    level[i] = is_row_reduce(p.ops[i]) ? l + 1 : l;
  }
  return level;
}

std::set<size_t> row_element_closure(const RowProgram& p, const std::vector<size_t>& roots, size_t leaf) {
  std::set<size_t> need;
  std::function<void(size_t)> visit = [&](size_t i) {
    if (p.ops[i].per_row || need.count(i)) return;
    need.insert(i);
    if (i == leaf) return;
    for (int a : p.ops[i].args) visit(static_cast<size_t>(a));
  };
  for (size_t r : roots) visit(r);
  return need;
}

namespace {

// An element value of the last reduction pass that the output pass needs again (softmax's
// exp(x - max)): the last pass stores it in a per-element output of its dtype, whose
// element the output pass reads back before overwriting it, instead of computing it again.
struct KeptValue {
  size_t op;
  size_t output;  // index into the program's outputs
};

// Math worth a store and a load to skip (exp, log, sin, sqrt, ...), not an add or a negation.
bool costly(OpKind k) { return op_traits(k).cost != OpCost::cheap; }

std::optional<KeptValue> kept_value(const RowProgram& p, const std::vector<int>& level, int passes) {
  if (passes == 0) return std::nullopt;
  std::vector<size_t> roots, elem_outputs;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (is_row_reduce(p.ops[i]) && level[i] == passes) roots.push_back(static_cast<size_t>(p.ops[i].args[0]));
  }
  for (int o : p.outputs) {
    if (!p.ops[static_cast<size_t>(o)].per_row) elem_outputs.push_back(static_cast<size_t>(o));
  }
  const std::set<size_t> in_pass = row_element_closure(p, roots), in_outputs = row_element_closure(p, elem_outputs);
  for (auto i = in_pass.rbegin(); i != in_pass.rend(); ++i) {  // the latest value: it covers its arguments
    const RowOp& op = p.ops[*i];
    if (!op.prim || !in_outputs.count(*i)) continue;
    const std::set<size_t> recomputed = row_element_closure(p, {*i});
    if (std::none_of(recomputed.begin(), recomputed.end(),
                     [&](size_t j) { return p.ops[j].prim && costly(p.ops[j].prim->kind()); })) {
      return std::nullopt;  // cheaper to compute again (LayerNorm's x - mean measured 5% slower kept)
    }
    // Stored and read back exactly: the output holds the value's own compute type.
    if (std::string(cpp_type(op.dtype)) != compute_type(op.dtype)) return std::nullopt;
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      const RowOp& out = p.ops[static_cast<size_t>(p.outputs[o])];
      if (!out.per_row && out.dtype == op.dtype) return KeptValue{*i, o};
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::string RowProgram::source(const std::string& symbol) const {
  size_t n_ops = ops.size();
  // Pass in which each per-row value becomes available (0: before the first pass).
  const std::vector<int> level = row_pass_levels(*this);
  const int passes = level.empty() ? 0 : *std::max_element(level.begin(), level.end());
  std::ostringstream s;
  s << "#include <cstdint>\n#include \"kiln/half.h\"\n#include \"backend/common/fold.h\"\n\n";
  s << "extern \"C\" void " << symbol
    << "(int64_t r0, int64_t r1, int64_t rows, int64_t n, const void* const* in, const int64_t* rs, const int64_t* cs, "
       "void* const* out) {\n";
  for (auto& op : ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    s << "  const " << t << "* __restrict in" << op.input << " = static_cast<const " << t << "*>(in[" << op.input
      << "]);\n";
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const char* t = cpp_type(ops[static_cast<size_t>(outputs[o])].dtype);
    s << "  " << t << "* __restrict out" << o << " = static_cast<" << t << "*>(out[" << o << "]);\n";
  }
  s << "  for (int64_t r = r0; r < r1; ++r) {\n";
  // Emits op i (and the per-element ops it needs) with element index `j`, into `b`.
  auto emit_op = [&](std::ostringstream& b, size_t i, const std::string& j, const std::string& indent) {
    const RowOp& op = ops[i];
    const char* ct = compute_type(op.dtype);
    b << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      std::string k = std::to_string(op.input);
      if (op.per_row || op.uniform)
        b << "static_cast<" << ct << ">(in" << k << "[r * rs[" << k << "]]);\n";
      else
        b << "static_cast<" << ct << ">(in" << k << "[r * rs[" << k << "] + " << j << " * cs[" << k << "]]);\n";
      return;
    }
    b << member_expr(ops, i) << ";\n";
  };
  auto element_closure = [&](const std::vector<size_t>& roots) { return row_element_closure(*this, roots); };
  auto emit_row_ops = [&](int lvl) {
    for (size_t i = 0; i < n_ops; ++i) {
      if (ops[i].per_row && !is_row_reduce(ops[i]) && level[i] == lvl) emit_op(s, i, "0", "    ");
    }
  };
  const std::optional<KeptValue> kept = kept_value(*this, level, passes);
  emit_row_ops(0);
  for (int p = 1; p <= passes; ++p) {
    std::vector<size_t> reductions;
    for (size_t i = 0; i < n_ops; ++i) {
      if (is_row_reduce(ops[i]) && level[i] == p) reductions.push_back(i);
    }
    bool stored = false;  // the kept value, by the first reduction of the last pass that computes it
    // Each reduction folds its values in the eager kernels' order (backend/common/fold.h),
    // so compiled sums equal eager ones bit for bit. Captures by value: a row value captured
    // by reference could alias the output stores, and the output pass then ran scalar.
    for (size_t i : reductions) {
      const char* ct = compute_type(ops[i].dtype);
      const size_t root = static_cast<size_t>(ops[i].args[0]);
      const std::set<size_t> need = element_closure({root});
      const std::string f = functor(ops[i].prim->kind());
      s << "    const " << ct << " total" << i << " = kiln::fold::row<" << f << ", " << ct
        << ">(rows, n, [=](int64_t a, int64_t b) {\n      return kiln::fold::run<" << f << ", " << ct
        << ">(b - a, [=](int64_t i) -> " << ct << " {\n      const int64_t j = a + i;\n";
      for (size_t k : need) emit_op(s, k, "j", "      ");
      if (p == passes && kept && !stored && need.count(kept->op)) {  // the value the output pass reads back
        s << "      out" << kept->output << "[r * n + j] = t" << kept->op << ";\n";
        stored = true;
      }
      s << "      return static_cast<" << ct << ">(t" << root << ");\n      });\n    });\n";
    }
    for (size_t i : reductions) {
      s << "    const " << compute_type(ops[i].dtype) << " t" << i << " = static_cast<" << compute_type(ops[i].dtype)
        << ">(static_cast<" << cpp_type(ops[i].dtype) << ">(total" << i << "));\n";
    }
    emit_row_ops(p);
  }
  // Final pass: per-element outputs; then per-row outputs.
  std::vector<size_t> elem_outputs;
  for (int o : outputs) {
    if (!ops[static_cast<size_t>(o)].per_row) elem_outputs.push_back(static_cast<size_t>(o));
  }
  if (!elem_outputs.empty()) {
    auto need = row_element_closure(*this, elem_outputs, kept ? kept->op : SIZE_MAX);
    s << "    for (int64_t j = 0; j < n; ++j) {\n";
    std::ostringstream body;
    for (size_t i : need) {
      if (kept && i == kept->op)
        body << "      const " << compute_type(ops[i].dtype) << " t" << i << " = out" << kept->output
             << "[r * n + j];\n";
      else
        emit_op(body, i, "j", "      ");
    }
    s << body.str();
    for (size_t o = 0; o < outputs.size(); ++o) {
      const RowOp& op = ops[static_cast<size_t>(outputs[o])];
      if (op.per_row) continue;
      s << "      out" << o << "[r * n + j] = static_cast<" << cpp_type(op.dtype) << ">(t" << outputs[o] << ");\n";
    }
    s << "    }\n";
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const RowOp& op = ops[static_cast<size_t>(outputs[o])];
    if (!op.per_row) continue;
    s << "    out" << o << "[r] = static_cast<" << cpp_type(op.dtype) << ">(t" << outputs[o] << ");\n";
  }
  s << "  }\n}\n";
  return s.str();
}

}  // namespace kiln::compiler
