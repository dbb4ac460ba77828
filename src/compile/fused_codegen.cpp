// C++ source for a fused elementwise region. The kernel processes n elements:
//   void kernel(int64_t n, const void* const* in, const int64_t* strides, void* const* out)
// input k's element i is at in[k] + i * strides[k] (elements); outputs are contiguous.
// Every intermediate is rounded to its stored dtype, so results equal the unfused kernels'.
#include <sstream>

#include "compile/fused.h"
#include "compile/codegen_util.h"

namespace kiln::compiler {


int FusedProgram::num_inputs() const {
  int n = 0;
  for (auto& op : ops) n += op.prim ? 0 : 1;
  return n;
}

std::string FusedProgram::signature() const {
  std::ostringstream os;
  for (auto& op : ops) {
    if (op.prim) op.prim->print(os);
    else os << (op.uniform ? "uniform" : "in") << op.input;
    os << ":" << dtype_name(op.dtype) << "(";
    for (int a : op.args) os << a << ",";
    os << ")";
  }
  for (int o : outputs) os << "->" << o;
  return os.str();
}

std::string FusedProgram::source(const std::string& symbol) const {
  std::ostringstream s;
  s << "#include <cstdint>\n#include \"kiln/half.h\"\n#include \"backend/common/math.h\"\n\n";
  s << "extern \"C\" void " << symbol
    << "(int64_t n, const void* const* in, const int64_t* st, void* const* out) {\n";
  for (auto& op : ops) {
    if (op.prim) continue;
    s << "  const " << cpp_type(op.dtype) << "* __restrict in" << op.input << " = static_cast<const "
      << cpp_type(op.dtype) << "*>(in[" << op.input << "]);\n";
    s << "  const int64_t s" << op.input << " = st[" << op.input << "];\n";
    if (op.uniform) {
      s << "  const " << compute_type(op.dtype) << " u" << op.input << " = static_cast<" << compute_type(op.dtype)
        << ">(in" << op.input << "[0]);\n";
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    Dtype d = ops[static_cast<size_t>(outputs[o])].dtype;
    s << "  " << cpp_type(d) << "* __restrict out" << o << " = static_cast<" << cpp_type(d) << "*>(out[" << o
      << "]);\n";
  }
  // The body, with input loads spelled by `load`.
  auto body = [&](bool unit) {
    std::ostringstream b;
    for (size_t i = 0; i < ops.size(); ++i) {
      const FusedOp& op = ops[i];
      const char* ct = compute_type(op.dtype);
      b << "      const " << ct << " t" << i << " = ";
      if (!op.prim) {
        if (op.uniform) b << "u" << op.input << ";\n";
        else b << "static_cast<" << ct << ">(in" << op.input << (unit ? "[i]" : "[i * s" + std::to_string(op.input) + "]") << ");\n";
        continue;
      }
      std::vector<std::string> args;
      std::vector<Dtype> arg_dtypes;
      for (int a : op.args) {
        args.push_back("t" + std::to_string(a));
        arg_dtypes.push_back(ops[static_cast<size_t>(a)].dtype);
      }
      b << rounded_expr(op.prim->kind(), *op.prim, op.dtype, args, arg_dtypes) << ";\n";
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const FusedOp& op = ops[static_cast<size_t>(outputs[o])];
      b << "      out" << o << "[i] = static_cast<" << cpp_type(op.dtype) << ">(t" << outputs[o] << ");\n";
    }
    return b.str();
  };
  s << "  bool unit = true;\n";
  for (auto& op : ops) {
    if (!op.prim && !op.uniform) s << "  unit = unit && s" << op.input << " == 1;\n";
  }
  s << "  if (unit) {\n    for (int64_t i = 0; i < n; ++i) {\n" << body(true) << "    }\n";
  s << "  } else {\n    for (int64_t i = 0; i < n; ++i) {\n" << body(false) << "    }\n  }\n}\n";
  return s.str();
}

}  // namespace kiln::compiler
