// Building the interpreter's program of a fused region (interp_program.h).
#include "backend/cuda/interp_program.h"

#include "backend/cuda/kernels/args.h"
#include "ops/elementwise.h"

namespace kiln::cuda {

namespace {

using namespace args;

enum class Form { none, unary, binary, test, compare };

// The interpreter's code of op kind k and how it reads and gives values.
std::pair<long, Form> code_of(OpKind k) {
  switch (k) {
// clang-format off
#define KILN_INTERP_UNARY(F) \
  case OpKind::F: return {kInterp##F, Form::unary};
#define KILN_INTERP_BINARY(F) \
  case OpKind::F: return {kInterp##F, Form::binary};
#define KILN_INTERP_TEST(F) \
  case OpKind::F: return {kInterp##F, Form::test};
#define KILN_INTERP_COMPARE(F) \
  case OpKind::F: return {kInterp##F, Form::compare};
// clang-format on
#include "backend/cuda/kernels/interp_ops.def"
#undef KILN_INTERP_UNARY
#undef KILN_INTERP_BINARY
#undef KILN_INTERP_TEST
#undef KILN_INTERP_COMPARE
    default: return {0, Form::none};
  }
}

long word(long code, long a = 0, long b = 0, long c = 0) { return code | a << 8 | b << 16 | c << 24; }

}  // namespace

std::optional<InterpProgram> interp_program(const compiler::FusedProgram& p) {
  const size_t nout = p.outputs.size(), nin = static_cast<size_t>(p.num_inputs());
  if (p.ops.size() + nout > static_cast<size_t>(kInterpWords) || nout + nin > static_cast<size_t>(kInterpOperands))
    return std::nullopt;
  InterpProgram r;
  r.dtypes.assign(nout + nin, 0);
  auto dtype = [&](int v) { return p.ops[static_cast<size_t>(v)].dtype; };
  for (const compiler::FusedOp& op : p.ops) {
    if (op.dtype != float32 && op.dtype != bool_) return std::nullopt;
    if (!op.prim) {
      r.dtypes[nout + static_cast<size_t>(op.input)] = op.dtype == bool_ ? kInterpBool : 0;
      r.words.push_back(word(kInterpLoad, static_cast<long>(nout) + op.input));
      continue;
    }
    const std::vector<int>& a = op.args;
    const OpKind k = op.prim->kind();
    if (k == OpKind::Where) {
      if (a.size() != 3 || dtype(a[0]) != bool_ || dtype(a[1]) != float32 || dtype(a[2]) != float32 ||
          op.dtype != float32)
        return std::nullopt;
      r.words.push_back(word(kInterpWhere, a[0], a[1], a[2]));
      continue;
    }
    if (k == OpKind::AsType) {
      if (a.size() != 1 || dtype(a[0]) == op.dtype) return std::nullopt;
      r.words.push_back(word(op.dtype == bool_ ? kInterpToBool : kInterpFromBool, a[0]));
      continue;
    }
    const auto [code, shape] = code_of(k);
    const size_t arity = shape == Form::binary || shape == Form::compare ? 2 : 1;
    const Dtype gives = shape == Form::test || shape == Form::compare ? bool_ : float32;
    if (shape == Form::none || a.size() != arity || op.dtype != gives) return std::nullopt;
    for (int v : a) {
      if (dtype(v) != float32) return std::nullopt;
    }
    r.words.push_back(word(code, a[0], arity == 2 ? a[1] : 0));
  }
  for (size_t o = 0; o < nout; ++o) {
    r.dtypes[o] = dtype(p.outputs[o]) == bool_ ? kInterpBool : 0;
    r.words.push_back(word(kInterpStore, p.outputs[o], static_cast<long>(o)));
  }
  return r;
}

}  // namespace kiln::cuda
