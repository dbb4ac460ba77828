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
    if (op.prim)
      op.prim->print(os);
    else
      os << (op.uniform ? "uniform" : "in") << op.input;
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
  s << "extern \"C\" void " << symbol << "(int64_t n, const void* const* in, const int64_t* st, void* const* out) {\n";
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
  // The body works on tiles of up to B elements, one op at a time across the tile: a
  // chain of libm calls then overlaps across elements (one element's chain is
  // latency-bound), and the cheap ops between them vectorize. Each element still sees
  // the same operations in the same order, so results are unchanged. Tiles live on the
  // stack: B shrinks for large regions to keep them within about 64 KiB.
  int64_t B = 64;
  while (B > 8 && static_cast<int64_t>(ops.size()) * B * 8 > 65536) B /= 2;
  auto body = [&](bool unit) {
    std::ostringstream b;
    std::vector<std::string> ref(ops.size());  // how op i's element j is spelled
    for (size_t i = 0; i < ops.size(); ++i) {
      const FusedOp& op = ops[i];
      const char* ct = compute_type(op.dtype);
      if (!op.prim) {
        if (op.uniform)
          ref[i] = numbered("u", op.input);
        else
          ref[i] = std::string("static_cast<") + ct + ">(in" + std::to_string(op.input) +
                   (unit ? "[i0 + j]" : "[(i0 + j) * s" + std::to_string(op.input) + "]") + ")";
        continue;
      }
      std::vector<std::string> args;
      std::vector<Dtype> arg_dtypes;
      for (int a : op.args) {
        args.push_back(ref[static_cast<size_t>(a)]);
        arg_dtypes.push_back(ops[static_cast<size_t>(a)].dtype);
      }
      b << "      " << ct << " t" << i << "[B];\n";
      b << "      for (int64_t j = 0; j < m; ++j) t" << i
        << "[j] = " << rounded_expr(op.prim->kind(), *op.prim, op.dtype, args, arg_dtypes) << ";\n";
      ref[i] = numbered("t", static_cast<int64_t>(i)) + "[j]";
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const FusedOp& op = ops[static_cast<size_t>(outputs[o])];
      b << "      for (int64_t j = 0; j < m; ++j) out" << o << "[i0 + j] = static_cast<" << cpp_type(op.dtype) << ">("
        << ref[static_cast<size_t>(outputs[o])] << ");\n";
    }
    return b.str();
  };
  s << "  constexpr int64_t B = " << B << ";\n";
  s << "  bool unit = true;\n";
  for (auto& op : ops) {
    if (!op.prim && !op.uniform) s << "  unit = unit && s" << op.input << " == 1;\n";
  }
  // Full tiles run loops of the constant trip count B, which the compiler vectorizes
  // without remainder code and merges across ops (the loops of variable length cost more
  // than the arithmetic in cheap regions); the last, partial tile runs the same body.
  auto tiles = [&](bool unit) {
    std::string b = body(unit);
    return "    int64_t i0 = 0;\n    for (; i0 + B <= n; i0 += B) {\n      constexpr int64_t m = B;\n" + b +
           "    }\n    if (i0 < n) {\n      const int64_t m = n - i0;\n" + b + "    }\n";
  };
  s << "  if (unit) {\n" << tiles(true);
  s << "  } else {\n" << tiles(false) << "  }\n}\n";
  return s.str();
}

}  // namespace kiln::compiler
