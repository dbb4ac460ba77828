// C++ source for a fused elementwise region. The kernel processes n elements:
//   void kernel(int64_t n, const void* const* in, const int64_t* strides, void* const* out)
// input k's element i is at in[k] + i * strides[k] (elements); outputs are contiguous.
// Every intermediate is rounded to its stored dtype, so results equal the unfused kernels'.
#include <sstream>

#include "compile/fused.h"
#include "ops/elementwise.h"

namespace kiln::compiler {

namespace {

const char* cpp_type(Dtype d) {
  switch (d) {
    case bool_: return "bool";
    case uint8: return "uint8_t";
    case uint16: return "uint16_t";
    case uint32: return "uint32_t";
    case uint64: return "uint64_t";
    case int8: return "int8_t";
    case int16: return "int16_t";
    case int32: return "int32_t";
    case int64: return "int64_t";
    case float16: return "kiln::float16_t";
    case bfloat16: return "kiln::bfloat16_t";
    case float32: return "float";
    case float64: return "double";
  }
  return "void";
}

// The type arithmetic is done in (float for the 16-bit floats).
const char* compute_type(Dtype d) { return (d == float16 || d == bfloat16) ? "float" : cpp_type(d); }

const char* functor(OpKind k) {
  switch (k) {
#define KILN_UNARY(F, n) case OpKind::F: return "kiln::math::" #F;
#define KILN_BINARY(F, n) KILN_UNARY(F, n)
#include "ops/op_table.def"
    default: return nullptr;
  }
}

}  // namespace

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
      auto arg = [&](size_t k) { return "t" + std::to_string(op.args[k]); };
      if (!op.prim) {
        if (op.uniform) b << "u" << op.input << ";\n";
        else b << "static_cast<" << ct << ">(in" << op.input << (unit ? "[i]" : "[i * s" + std::to_string(op.input) + "]") << ");\n";
        continue;
      }
      OpKind k = op.prim->kind();
      std::string expr;
      if (k == OpKind::AsType) {
        Dtype from = ops[static_cast<size_t>(op.args[0])].dtype;
        expr = std::string("kiln::math::convert<") + cpp_type(op.dtype) + ">(static_cast<" + cpp_type(from) + ">(" +
               arg(0) + "))";
      } else if (k == OpKind::Where) {
        expr = "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
      } else if (op.args.size() == 1) {
        expr = std::string(functor(k)) + "{}(" + arg(0) + ")";
      } else {
        expr = std::string(functor(k)) + "{}(" + arg(0) + ", " + arg(1) + ")";
      }
      // Round through the stored type where it is narrower than the compute type.
      if (op.dtype == float16 || op.dtype == bfloat16 || k == OpKind::AsType) {
        b << "static_cast<" << ct << ">(static_cast<" << cpp_type(op.dtype) << ">(" << expr << "));\n";
      } else {
        b << "static_cast<" << ct << ">(" << expr << ");\n";
      }
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
