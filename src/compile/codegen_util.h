// Pieces of C++ source shared by the fused elementwise and row code generators.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ops/primitive.h"

namespace kiln::compiler {

/* The C++ storage type of a dtype ("float", "kiln::bfloat16_t", ...). */
const char* cpp_type(Dtype d);
/* The type arithmetic on d is done in (float for the 16-bit floats). */
const char* compute_type(Dtype d);
/* The math functor of a unary, binary or reduce op ("kiln::math::Exp"). */
const char* functor(OpKind k);
/* The accumulator a reduction's lanes are folded into: double for float sums. */
const char* wide_type(OpKind k, Dtype d);
/* Expression computing an elementwise op on argument variables (compute types),
   rounded through the stored dtype so results equal the eager kernels'. `fn` replaces the
   op's functor call by a function of the same arguments and result. */
std::string rounded_expr(OpKind k, const Primitive& prim, Dtype out, const std::vector<std::string>& args,
                         const std::vector<Dtype>& arg_dtypes, const std::string& fn = "");

/* prefix followed by n ("t3"): appended, because GCC 12 warns falsely (-Wrestrict) on
   "t" + std::to_string(n) once inlined. */
inline std::string numbered(const char* prefix, int64_t n) {
  std::string s = prefix;
  return s += std::to_string(n);
}

/* rounded_expr for member i of a region program (FusedProgram or RowProgram ops), its
   arguments spelled t<a>. */
template <class Ops>
std::string member_expr(const Ops& ops, size_t i) {
  std::vector<std::string> args;
  std::vector<Dtype> arg_dtypes;
  for (int a : ops[i].args) {
    args.push_back(numbered("t", a));
    arg_dtypes.push_back(ops[static_cast<size_t>(a)].dtype);
  }
  return rounded_expr(ops[i].prim->kind(), *ops[i].prim, ops[i].dtype, args, arg_dtypes);
}

/* "name[exp,multiply,...]": a fused region's primitive and the members it replaced. */
template <class Ops>
void print_region(std::ostream& os, const char* name, const Ops& ops) {
  os << name << "[";
  bool first = true;
  for (auto& op : ops) {
    if (!op.prim) continue;
    os << (first ? "" : ",") << op.prim->name();
    first = false;
  }
  os << "]";
}

}  // namespace kiln::compiler
