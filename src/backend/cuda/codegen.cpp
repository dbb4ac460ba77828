#include "backend/cuda/codegen.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "backend/cuda/tuning.h"
#include "compile/codegen_util.h"
#include "core/hash_fields.h"

namespace kiln::cuda {

using compiler::compute_type;
using compiler::cpp_type;
using compiler::functor;
using compiler::wide_type;

namespace {

// The kernel's opening: the support header, then kiln_kernel taking args::<args> a for
// every operand of p.
void open_kernel(std::ostringstream& s, const compiler::FusedProgram& p, const char* args, bool bounded) {
  const size_t operands = p.outputs.size() + static_cast<size_t>(p.num_inputs());
  s << "#include \"" << kSupportHeader << "\"\n\n";
  s << "extern \"C\" __global__ void " << (bounded ? "__launch_bounds__(256) " : "")
    << "kiln_kernel(const kiln::cuda::args::" << args << "<" << operands << "> a) {\n";
}

// Pointers to every operand: outputs out<o> (operand o), inputs in<k> after them.
void emit_pointers(std::ostringstream& s, const compiler::FusedProgram& p) {
  const int nout = static_cast<int>(p.outputs.size());
  for (int o = 0; o < nout; ++o) {
    const char* t = cpp_type(p.ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype);
    s << "  " << t << "* __restrict__ out" << o << " = static_cast<" << t << "*>(a.operand[" << o << "].data);\n";
  }
  for (auto& op : p.ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    s << "  const " << t << "* __restrict__ in" << op.input << " = static_cast<const " << t << "*>(a.operand["
      << nout + op.input << "].data);\n";
  }
}

// Whether d is bfloat16 or float16 (computed in float, stored in 16 bits).
bool sixteen_bit(Dtype d) { return d == bfloat16 || d == float16; }

// Whether member i is a unary op whose result has its argument's dtype.
template <class Ops>
bool same_type_unary(const Ops& ops, size_t i) {
  return ops[i].args.size() == 1 && ops[static_cast<size_t>(ops[i].args[0])].dtype == ops[i].dtype;
}

// Whether member i is a sin or cos of a float32 or 16-bit float into its own type, whose fast
// form defers its fallback to the caller.
template <class Ops>
bool has_fast_form(const Ops& ops, size_t i) {
  const auto* prim = ops[i].prim.get();
  return prim && (prim->kind() == OpKind::Sin || prim->kind() == OpKind::Cos) && same_type_unary(ops, i) &&
         (sixteen_bit(ops[i].dtype) || ops[i].dtype == float32);
}

// Member i's expression: bfloat16 add, subtract and multiply of bfloat16 values as native
// bf16 math, gelu_tanh, sin and cos with a 16-bit result in cheaper float forms, every other
// op as the shared generators spell it. Eager ops run through here too, so they agree. With
// `fast`, sin and cos take the form that sets `slow` instead of taking their fallback.
template <class Ops>
std::string cuda_member_expr(const Ops& ops, size_t i, bool fast = false) {
  const auto& op = ops[i];
  const OpKind k = op.prim->kind();
  const std::string arg = compiler::numbered("t", op.args.empty() ? 0 : op.args[0]);
  // A float computed for a 16-bit result, rounded to it.
  auto narrowed = [&](const std::string& v) {
    return "static_cast<float>(static_cast<" + std::string(compiler::cpp_type(op.dtype)) + ">(" + v + "))";
  };
  if (fast && has_fast_form(ops, i)) {
    const bool f32 = op.dtype == float32;
    const std::string call =
        std::string(k == OpKind::Sin ? "kiln_sin" : "kiln_cos") + (f32 ? "f" : "") + "_fast(" + arg + ", slow)";
    return f32 ? call : narrowed(call);
  }
  const char* narrow = k == OpKind::GeluTanh ? "kiln_gelu_tanh_narrow"
                       : k == OpKind::Sin    ? "kiln_sin_narrow"
                       : k == OpKind::Cos    ? "kiln_cos_narrow"
                                             : nullptr;
  if (narrow && sixteen_bit(op.dtype) && same_type_unary(ops, i)) {
    return narrowed(std::string(narrow) + "(" + arg + ")");
  }
  const char* native = k == OpKind::Add        ? "kiln_bf16_add"
                       : k == OpKind::Subtract ? "kiln_bf16_sub"
                       : k == OpKind::Multiply ? "kiln_bf16_mul"
                                               : nullptr;
  bool bf16 = op.dtype == bfloat16 && op.args.size() == 2;
  for (int a : op.args) bf16 &= ops[static_cast<size_t>(a)].dtype == bfloat16;
  if (!native || !bf16) return compiler::member_expr(ops, i);
  return std::string(native) + "(t" + std::to_string(op.args[0]) + ", t" + std::to_string(op.args[1]) + ")";
}

// Every op of p for one element into t<i> (compute types); load(k) reads input k, and
// store(o, value) writes output o. `fast`: see cuda_member_expr.
void emit_element(std::ostringstream& s, const compiler::FusedProgram& p, const std::string& indent,
                  const std::function<std::string(int)>& load,
                  const std::function<std::string(int, const std::string&)>& store, bool fast = false) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const compiler::FusedOp& op = p.ops[i];
    const char* ct = compute_type(op.dtype);
    s << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      s << "static_cast<" << ct << ">(" << load(op.input) << ");\n";
      continue;
    }
    s << cuda_member_expr(p.ops, i, fast) << ";\n";
  }
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    int v = p.outputs[o];
    std::string value =
        "kiln_narrow<" + std::string(cpp_type(p.ops[static_cast<size_t>(v)].dtype)) + ">(t" + std::to_string(v) + ")";
    s << indent << store(static_cast<int>(o), value) << ";\n";
  }
}

// Output vectors r<o> of `vec` elements, declared at `indent`.
void declare_output_vectors(std::ostringstream& s, const compiler::FusedProgram& p, int vec,
                            const std::string& indent) {
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    s << indent << "kiln_vec<" << cpp_type(p.ops[static_cast<size_t>(p.outputs[o])].dtype) << ", " << vec << "> r" << o
      << ";\n";
  }
}

// Every op for elements e = 0 .. vec - 1 into r<o>.v[e], unrolled by the generator: constant
// indices keep the vectors in registers. load(k) reads input k's element e. Where ops have
// fast forms, the vector is computed with them, and again with the full forms only when one
// of them met an argument it does not cover.
void emit_vectors(std::ostringstream& s, const compiler::FusedProgram& p, int vec, const std::string& indent,
                  const std::function<std::string(int)>& load) {
  bool fast = false;
  for (size_t i = 0; i < p.ops.size(); ++i) fast = fast || has_fast_form(p.ops, i);
  auto elements = [&](bool fast_forms, const std::string& in) {
    for (int e = 0; e < vec; ++e) {
      s << in << "{\n" << in << "  constexpr int e = " << e << ";\n";
      emit_element(
          s, p, in + "  ", load,
          [](int o, const std::string& val) { return compiler::numbered("r", o) + ".v[e] = " + val; }, fast_forms);
      s << in << "}\n";
    }
  };
  if (fast) s << indent << "bool slow = false;\n";
  elements(fast, indent);
  if (fast) {
    s << indent << "if (slow) {\n";
    elements(false, indent + "  ");
    s << indent << "}\n";
  }
}

}  // namespace

std::string elementwise_source(const compiler::FusedProgram& p) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  const int nops = nin + nout;
  std::ostringstream s;
  open_kernel(s, p, "Elementwise", false);
  s << "  const long n = a.head.n;\n  const int nd = static_cast<int>(a.head.nd);\n";
  emit_pointers(s, p);
  s << "  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {\n";
  s << "    long rem = i";
  for (int k = 0; k < nops; ++k) s << ", o" << k << " = 0";
  s << ";\n    for (int d = nd - 1; d >= 0; --d) {\n";
  s << "      const long sz = a.head.shape[d];\n      const long q = rem / sz;\n      const long c = rem - q * sz;\n";
  s << "      rem = q;\n";
  for (int k = 0; k < nops; ++k) s << "      o" << k << " += c * a.operand[" << k << "].strides[d];\n";
  s << "    }\n";
  emit_element(
      s, p, "    ", [&](int k) { return compiler::numbered("in", k) + compiler::numbered("[o", nout + k) + "]"; },
      [](int o, const std::string& v) {
        return compiler::numbered("out", o) + compiler::numbered("[o", o) + "] = " + v;
      });
  s << "  }\n}\n";
  return s.str();
}

std::string elementwise_flat_source(const compiler::FusedProgram& p, uint64_t scalar_inputs, int vec) {
  const int nout = static_cast<int>(p.outputs.size());
  auto scalar = [&](int k) { return ((scalar_inputs >> k) & 1) != 0; };
  std::ostringstream s;
  open_kernel(s, p, "ElementwiseFlat", true);
  s << "  const long n = a.head.n;\n";
  emit_pointers(s, p);
  for (auto& op : p.ops) {  // broadcast scalars are read once
    if (op.prim || !scalar(op.input)) continue;
    s << "  const " << cpp_type(op.dtype) << " s" << op.input << " = in" << op.input << "[0];\n";
  }
  auto load = [&](const std::string& at) {
    return [&, at](int k) { return scalar(k) ? compiler::numbered("s", k) : compiler::numbered("in", k) + at; };
  };
  std::string v = std::to_string(vec);
  s << "  const long nv = n / " << v << ";\n";
  s << "  for (long b = kiln_gid(); b < nv; b += kiln_gstride()) {\n";
  for (auto& op : p.ops) {
    if (op.prim || scalar(op.input)) continue;
    std::string k = std::to_string(op.input), t = cpp_type(op.dtype);
    s << "    const kiln_vec<" << t << ", " << v << "> a" << k << " = reinterpret_cast<const kiln_vec<" << t << ", "
      << v << ">*>(in" << k << ")[b];\n";
  }
  declare_output_vectors(s, p, vec, "    ");
  emit_vectors(s, p, vec, "    ",
               [&](int k) { return scalar(k) ? compiler::numbered("s", k) : compiler::numbered("a", k) + ".v[e]"; });
  for (int o = 0; o < nout; ++o) {
    s << "    reinterpret_cast<decltype(r" << o << ")*>(out" << o << ")[b] = r" << o << ";\n";
  }
  s << "  }\n";
  s << "  for (long i = nv * " << v << " + kiln_gid(); i < n; i += kiln_gstride()) {\n";
  emit_element(s, p, "    ", load("[i]"),
               [](int o, const std::string& val) { return compiler::numbered("out", o) + "[i] = " + val; });
  s << "  }\n}\n";
  return s.str();
}

std::string row_member_expr(const std::vector<compiler::RowOp>& ops, size_t i) { return cuda_member_expr(ops, i); }

std::string elementwise_rows_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t strided, int vec,
                                    bool narrow) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size()), nops = nin + nout;
  auto per_row = [&](int k) { return ((row_inputs >> k) & 1) != 0; };
  auto stepped = [&](int operand) { return ((strided >> operand) & 1) != 0; };
  const std::string v = std::to_string(vec), index = narrow ? "unsigned" : "long";
  std::ostringstream s;
  open_kernel(s, p, "ElementwiseRows", true);
  s << "  const " << index << " rows = static_cast<" << index << ">(a.head.rows), per_row = static_cast<" << index
    << ">(a.head.row_length / " << v
    << ");\n  const int outer = static_cast<int>(a.head.outer);  // the axes before the last\n";
  emit_pointers(s, p);
  for (int k = 0; k < nops; ++k) {
    if (stepped(k)) s << "  const long step" << k << " = a.operand[" << k << "].step;  // along the rows\n";
  }
  s << "  for (" << index << " w = static_cast<" << index
    << ">(blockIdx.x) * blockDim.x + threadIdx.x; w < rows * per_row; "
    << "w += static_cast<" << index << ">(gridDim.x) * blockDim.x) {\n";
  s << "    const " << index << " r = w / per_row;\n    const long c = static_cast<long>(w - r * per_row) * " << v
    << ";\n";
  // Each operand's offset of row r (operand o: outputs first, then inputs).
  s << "    long at[" << nops << "] = {};\n";
  s << "    if (outer == 1) {\n";
  s << "#pragma unroll\n      for (int o = 0; o < " << nops
    << "; ++o) at[o] = static_cast<long>(r) * a.operand[o].strides[0];\n";
  s << "    } else {\n      " << index << " rem = r;\n      for (int d = outer - 1; d >= 0; --d) {\n";
  s << "        const " << index << " size = static_cast<" << index << ">(a.head.shape[d]), q = rem / size;\n";
  s << "        const long i = static_cast<long>(rem - q * size);\n        rem = q;\n";
  s << "#pragma unroll\n        for (int o = 0; o < " << nops << "; ++o) at[o] += i * a.operand[o].strides[d];\n";
  s << "      }\n    }\n";
  for (auto& op : p.ops) {
    if (op.prim || stepped(nout + op.input)) continue;
    const std::string k = std::to_string(op.input), t = cpp_type(op.dtype),
                      at = compiler::numbered("at[", nout + op.input) + "]";
    if (per_row(op.input)) {
      s << "    const " << t << " s" << k << " = in" << k << "[" << at << "];\n";
    } else {
      s << "    const kiln_vec<" << t << ", " << v << "> a" << k << " = *reinterpret_cast<const kiln_vec<" << t << ", "
        << v << ">*>(in" << k << " + " << at << " + c);\n";
    }
  }
  declare_output_vectors(s, p, vec, "    ");
  emit_vectors(s, p, vec, "    ", [&](int k) {
    const std::string n = std::to_string(k), o = std::to_string(nout + k);
    if (stepped(nout + k)) return "in" + n + "[at[" + o + "] + (c + e) * step" + o + "]";
    return per_row(k) ? "s" + n : "a" + n + ".v[e]";
  });
  for (int o = 0; o < nout; ++o) {
    if (!stepped(o)) {  // by index into vectors, which NVCC stores at once (through a cast pointer, in 4-byte parts)
      s << "    reinterpret_cast<decltype(r" << o << ")*>(out" << o << " + at[" << o << "])[c / " << v << "] = r" << o
        << ";\n";
      continue;
    }
    s << "#pragma unroll\n    for (int e = 0; e < " << v << "; ++e) out" << o << "[at[" << o << "] + (c + e) * step"
      << o << "] = r" << o << ".v[e];\n";
  }
  s << "  }\n}\n";
  return s.str();
}

std::string elementwise_tiled_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t tiled_inputs) {
  const int nout = static_cast<int>(p.outputs.size());
  auto per_row = [&](int k) { return ((row_inputs >> k) & 1) != 0; };
  auto tiled = [&](int k) { return ((tiled_inputs >> k) & 1) != 0; };
  auto each_input = [&](auto&& f) {
    for (auto& op : p.ops) {
      if (!op.prim) f(op.input, std::to_string(op.input), std::string(cpp_type(op.dtype)));
    }
  };
  std::ostringstream s;
  open_kernel(s, p, "ElementwiseTiled", true);
  s << "  const long R = a.head.rows, C = a.head.cols;\n  const bool words = a.head.words != 0;\n";
  emit_pointers(s, p);
  for (int o = 0; o < nout; ++o) {
    s << "  const long ob" << o << " = a.operand[" << o << "].batch_stride, osr" << o << " = a.operand[" << o
      << "].line_stride;\n";
  }
  each_input([&](int in, const std::string& k, const std::string& t) {
    const std::string at = "a.operand[" + std::to_string(nout + in) + "]";
    s << "  const long sb" << k << " = " << at << ".batch_stride, " << (tiled(in) ? "sc" : "sr") << k << " = " << at
      << ".line_stride;\n";
    if (tiled(in)) s << "  __shared__ " << t << " tile" << k << "[64][65];  // [column][row] of the tile\n";
  });
  s << "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
  s << "  const unsigned tiles_r = static_cast<unsigned>((R + 63) / 64), tiles_c = static_cast<unsigned>((C + 63) / "
       "64);\n";
  s << "  const unsigned tiles = static_cast<unsigned>(a.head.batch) * tiles_r * tiles_c;\n";
  s << "  for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {\n";
  s << "    const long b = t / (tiles_r * tiles_c), r0 = static_cast<long>(t / tiles_c % tiles_r) * 64, "
       "c0 = static_cast<long>(t % tiles_c) * 64;\n";
  s << "    const bool whole = words && r0 + 64 <= R && c0 + 64 <= C;  // pairs of elements a load or store\n";
  // Offsets are found once a tile, each phase's accesses stepping by constant multiples of the
  // strides; the loops are unrolled with a fixed trip count, every load of a phase issued
  // before its stores. Accesses index the restrict pointers themselves: through pointers
  // derived in the loop NVCC issued each step's loads after the last step's stores.
  s << "    const long rt = r0 + 2 * tx;  // the tiled inputs' rows rt and rt + 1, columns c0 + ty + k\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (tiled(in)) s << "    const long col" << k << " = b * sb" << k << " + rt + (c0 + ty) * sc" << k << ";\n";
  });
  // Whole tiles take loops of their own, so that nothing between the unrolled iterations
  // keeps their loads from being issued first.
  s << "    if (whole) {\n#pragma unroll\n      for (int k = 0; k < 64; k += 8) {\n        const int q = ty + k;\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (!tiled(in)) return;
    s << "        const kiln_vec<" << t << ", 2> x" << k << " = *reinterpret_cast<const kiln_vec<" << t << ", 2>*>(in"
      << k << " + col" << k << " + k * sc" << k << ");\n";
    s << "        tile" << k << "[q][2 * tx] = x" << k << ".v[0];\n        tile" << k << "[q][2 * tx + 1] = x" << k
      << ".v[1];\n";
  });
  s << "      }\n    } else {\n      for (int k = 0; k < 64 && c0 + ty + k < C; k += 8) {\n        const int q = ty + "
       "k;\n";
  s << "        for (int e = 0; e < 2 && rt + e < R; ++e) {\n";
  each_input([&](int in, const std::string& k, const std::string&) {
    if (tiled(in))
      s << "          tile" << k << "[q][2 * tx + e] = in" << k << "[col" << k << " + k * sc" << k << " + e];\n";
  });
  s << "        }\n      }\n    }\n    __syncthreads();\n";
  s << "    const long ry = r0 + ty, c = c0 + 2 * tx;  // rows ry + k, columns c and c + 1\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (tiled(in)) return;
    s << "    const long row" << k << " = b * sb" << k << " + ry * sr" << k << (per_row(in) ? "" : " + c") << ";\n";
  });
  // Outputs are stored a pair at a time by index into pairs (where `whole`: every offset even),
  // which NVCC turns into one store; a store through a cast pointer took one an element.
  for (int o = 0; o < nout; ++o) {
    s << "    const long dst" << o << " = b * ob" << o << " + ry * osr" << o << " + c, pair" << o << " = dst" << o
      << " / 2, pair_sr" << o << " = osr" << o << " / 2;\n";
  }
  auto per_row_loads = [&](const std::string& indent) {
    each_input([&](int in, const std::string& k, const std::string& t) {
      if (per_row(in))
        s << indent << "const " << t << " s" << k << " = in" << k << "[row" << k << " + k * sr" << k << "];\n";
    });
  };
  s << "    if (whole) {\n#pragma unroll\n      for (int k = 0; k < 64; k += 8) {\n        const int q = ty + k;\n";
  per_row_loads("        ");
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (!per_row(in) && !tiled(in)) {
      s << "        const kiln_vec<" << t << ", 2> in" << k << "_pair = *reinterpret_cast<const kiln_vec<" << t
        << ", 2>*>(in" << k << " + row" << k << " + k * sr" << k << ");\n";
    }
  });
  // Input k's element e of the pair at row q, column 2 tx (a row-major input's from its
  // loaded pair or, at the edges, from memory).
  auto load = [&](bool loaded_pair) {
    return [&, loaded_pair](int k) {
      const std::string n = std::to_string(k);
      if (per_row(k)) return "s" + n;
      if (tiled(k)) return "tile" + n + "[2 * tx + e][q]";
      return loaded_pair ? "in" + n + "_pair.v[e]" : "in" + n + "[row" + n + " + k * sr" + n + " + e]";
    };
  };
  declare_output_vectors(s, p, 2, "        ");
  emit_vectors(s, p, 2, "        ", load(true));
  for (int o = 0; o < nout; ++o) {
    s << "        reinterpret_cast<decltype(r" << o << ")*>(out" << o << ")[pair" << o << " + k * pair_sr" << o
      << "] = r" << o << ";\n";
  }
  s << "      }\n    } else {\n      for (int k = 0; k < 64 && ry + k < R; k += 8) {\n        const int q = ty + k;\n";
  per_row_loads("        ");
  s << "        for (int e = 0; e < 2 && c + e < C; ++e) {\n";
  emit_element(s, p, "          ", load(false), [](int o, const std::string& v) {
    const std::string n = std::to_string(o);
    return "out" + n + "[dst" + n + " + k * osr" + n + " + e] = " + v;
  });
  s << "        }\n      }\n    }\n    __syncthreads();  // the tiles are written again next\n  }\n}\n";
  return s.str();
}

const char* word_type(size_t itemsize) {
  return itemsize == 1 ? "uint8_t" : itemsize == 2 ? "uint16_t" : itemsize == 4 ? "uint32_t" : "uint64_t";
}

size_t ElementwiseVariant::hash() const {
  return detail::hash_fields(form, scalar_inputs, row_inputs, tiled_inputs, strided, vec, narrow);
}

std::string elementwise_source(const compiler::FusedProgram& p, const ElementwiseVariant& v) {
  switch (v.form) {
    case ElementwiseVariant::Form::flat: return elementwise_flat_source(p, v.scalar_inputs, v.vec);
    case ElementwiseVariant::Form::rows: return elementwise_rows_source(p, v.row_inputs, v.strided, v.vec, v.narrow);
    case ElementwiseVariant::Form::tiled: return elementwise_tiled_source(p, v.row_inputs, v.tiled_inputs);
    case ElementwiseVariant::Form::strided: break;
  }
  return elementwise_source(p);
}

}  // namespace kiln::cuda
