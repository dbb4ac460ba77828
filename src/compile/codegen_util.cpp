#include "compile/codegen_util.h"

namespace kiln::compiler {

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

const char* compute_type(Dtype d) { return (d == float16 || d == bfloat16) ? "float" : cpp_type(d); }

const char* functor(OpKind k) {
  switch (k) {
#define KILN_UNARY(F, n, ...) \
  case OpKind::F:             \
    return "kiln::math::" #F;
#define KILN_BINARY(F, n, ...) KILN_UNARY(F, n)
#define KILN_REDUCE(F, n) KILN_UNARY(F, n)
#include "ops/op_table.def"
    default: return "";
  }
}

const char* wide_type(OpKind k, Dtype d) {
  if (k == OpKind::Sum && is_floating(d)) return "double";
  return compute_type(d);
}

namespace {

// Ops whose result is one of their arguments or another value of the arguments' type
// (a sign flip, an integral value, a pick), so rounding it through that type again is a no-op.
bool result_exact_in_type(OpKind k) {
  switch (k) {
    case OpKind::Abs:
    case OpKind::Negative:
    case OpKind::Sign:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Where: return true;
    default: return false;
  }
}

}  // namespace

std::string rounded_expr(OpKind k, const Primitive& prim, Dtype out, const std::vector<std::string>& args,
                         const std::vector<Dtype>& arg_dtypes, const std::string& fn) {
  std::string expr;
  if (k == OpKind::AsType) {
    // A 16-bit float argument is held exactly by its compute type, which converts the same.
    const Dtype from = arg_dtypes[0];
    const bool exact = from == float16 || from == bfloat16;
    expr = std::string("kiln::math::convert<") + cpp_type(out) + ">(" +
           (exact ? args[0] : std::string("static_cast<") + cpp_type(from) + ">(" + args[0] + ")") + ")";
  } else if (k == OpKind::Where) {
    expr = "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")";
  } else {
    expr = fn.empty() ? std::string(functor(k)) + "{}(" : fn + "(";
    for (size_t i = 0; i < args.size(); ++i) expr += (i ? ", " : "") + args[i];
    expr += ")";
  }
  std::string ct = compute_type(out);
  bool args_in_out_type = true;
  for (size_t i = (k == OpKind::Where ? 1 : 0); i < arg_dtypes.size(); ++i) args_in_out_type &= arg_dtypes[i] == out;
  bool already_rounded = k != OpKind::AsType && result_exact_in_type(k) && args_in_out_type;
  // Round through the stored type where it is narrower than the compute type.
  if (!already_rounded && (out == float16 || out == bfloat16 || k == OpKind::AsType)) {
    return "static_cast<" + ct + ">(static_cast<" + cpp_type(out) + ">(" + expr + "))";
  }
  return "static_cast<" + ct + ">(" + expr + ")";
}

}  // namespace kiln::compiler
