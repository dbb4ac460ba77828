#include "backend/cuda/codegen.h"

#include <functional>
#include <set>
#include <sstream>

#include "compile/codegen_util.h"

namespace kiln::cuda {

using compiler::compute_type;
using compiler::cpp_type;
using compiler::functor;
using compiler::rounded_expr;
using compiler::wide_type;

const char* support_header() {
  return R"(#pragma once
#include <cstdint>
#include "kiln/half.h"
#include "backend/common/math.h"

template <int N> struct KilnMeta { long v[N]; };

__device__ inline long kiln_gid() { return static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline long kiln_gstride() { return static_cast<long>(gridDim.x) * blockDim.x; }
__device__ inline double kiln_f64(long bits) { return __longlong_as_double(bits); }
template <class T> __device__ inline bool kiln_isnan(T x) {
  if constexpr (kiln::math::is_float_v<T>) return x != x; else return false;
}
// Offset of element i of a shape of nd axes (v[shape + d]) with strides v[strides + d].
template <int N> __device__ inline long kiln_offset(const KilnMeta<N>& m, long i, int nd, int shape, int strides) {
  long off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long s = m.v[shape + d];
    const long q = i / s;
    off += (i - q * s) * m.v[strides + d];
    i = q;
  }
  return off;
}

// Index of the first extreme along an axis (NaN is the extreme). v: rows, nd, shape[8],
// strides[8], length, axis stride, in, out.
template <class T, bool IsMax, int N> __device__ void kiln_argreduce(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  const long rows = m.v[0], len = m.v[18], as = m.v[19];
  const int nd = static_cast<int>(m.v[1]);
  const T* in = reinterpret_cast<const T*>(m.v[20]);
  int32_t* out = reinterpret_cast<int32_t*>(m.v[21]);
  for (long r = kiln_gid(); r < rows; r += kiln_gstride()) {
    const long base = kiln_offset(m, r, nd, 2, 10);
    CT best = static_cast<CT>(in[base]);
    int32_t bi = 0;
    for (long k = 1; k < len; ++k) {
      if (kiln_isnan(best)) break;
      const CT v = static_cast<CT>(in[base + k * as]);
      if (kiln_isnan(v) || (IsMax ? v > best : v < best)) {
        best = v;
        bi = static_cast<int32_t>(k);
      }
    }
    out[r] = bi;
  }
}

// Cumulative sum along an axis, one thread per line. v: lines, nd, shape[8], in strides[8],
// out strides[8], length, in axis stride, out axis stride, reverse, inclusive, in, out.
template <class T, int N> __device__ void kiln_cumsum(const KilnMeta<N>& m) {
  using A = kiln::math::compute_t<T>;
  const long lines = m.v[0], len = m.v[26], ias = m.v[27], oas = m.v[28];
  const bool reverse = m.v[29] != 0, inclusive = m.v[30] != 0;
  const int nd = static_cast<int>(m.v[1]);
  const T* in = reinterpret_cast<const T*>(m.v[31]);
  T* out = reinterpret_cast<T*>(m.v[32]);
  for (long r = kiln_gid(); r < lines; r += kiln_gstride()) {
    const long ib = kiln_offset(m, r, nd, 2, 10), ob = kiln_offset(m, r, nd, 2, 18);
    A acc = A(0);
    for (long s = 0; s < len; ++s) {
      const long k = reverse ? len - 1 - s : s;
      const A v = static_cast<A>(in[ib + k * ias]);
      if (inclusive) acc = kiln::math::Add{}(acc, v);
      out[ob + k * oas] = static_cast<T>(acc);
      if (!inclusive) acc = kiln::math::Add{}(acc, v);
    }
  }
}

// start + i * step in float64, converted; the last element exactly `last` when given.
// v: n, start bits, step bits, has last, last bits, out.
template <class T, int N> __device__ void kiln_arange(const KilnMeta<N>& m) {
  const long n = m.v[0];
  const double start = kiln_f64(m.v[1]), step = kiln_f64(m.v[2]);
  T* out = reinterpret_cast<T*>(m.v[5]);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    if (m.v[3] && i == n - 1) out[i] = kiln::math::convert<T>(kiln_f64(m.v[4]));
    else out[i] = kiln::math::convert<T>(start + static_cast<double>(i) * step);
  }
}

// y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride] for elements of width sizeof(E).
// v: n, nd, shape[8], y strides[8], a strides[8], idx strides[8], axis stride, y, a, idx.
template <class E, int N> __device__ void kiln_gather(const KilnMeta<N>& m) {
  const long n = m.v[0], as = m.v[34];
  const int nd = static_cast<int>(m.v[1]);
  E* y = reinterpret_cast<E*>(m.v[35]);
  const E* a = reinterpret_cast<const E*>(m.v[36]);
  const long* idx = reinterpret_cast<const long*>(m.v[37]);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    const long k = idx[kiln_offset(m, i, nd, 2, 26)];
    y[kiln_offset(m, i, nd, 2, 10)] = a[kiln_offset(m, i, nd, 2, 18) + k * as];
  }
}

// Batched matrix product for the types cuBLASLt does not take, one thread per output.
// v: total, M, N, K, nb, batch shape[8], a batch strides[8], b batch strides[8],
// a row stride, a col stride, b row stride, b col stride, a, b, y.
template <class T, int N> __device__ void kiln_matmul(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  const long total = m.v[0], M = m.v[1], Nn = m.v[2], K = m.v[3];
  const int nb = static_cast<int>(m.v[4]);
  const T* a = reinterpret_cast<const T*>(m.v[33]);
  const T* b = reinterpret_cast<const T*>(m.v[34]);
  T* y = reinterpret_cast<T*>(m.v[35]);
  for (long i = kiln_gid(); i < total; i += kiln_gstride()) {
    const long col = i % Nn, row = (i / Nn) % M, batch = i / (Nn * M);
    const T* pa = a + kiln_offset(m, batch, nb, 5, 13) + row * m.v[29];
    const T* pb = b + kiln_offset(m, batch, nb, 5, 21) + col * m.v[32];
    CT acc = CT(0);
    for (long k = 0; k < K; ++k)
      acc = kiln::math::Add{}(acc, kiln::math::Multiply{}(static_cast<CT>(pa[k * m.v[30]]), static_cast<CT>(pb[k * m.v[31]])));
    y[i] = static_cast<T>(acc);
  }
}
)";
}

int elementwise_meta_len(int operands) { return 2 + kMaxDims + operands * (kMaxDims + 1); }

std::string elementwise_source(const compiler::FusedProgram& p) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  const int nops = nin + nout, len = elementwise_meta_len(nops);
  const int strides0 = 2 + kMaxDims, ptr0 = strides0 + nops * kMaxDims;
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << len << "> m) {\n";
  s << "  const long n = m.v[0];\n  const int nd = static_cast<int>(m.v[1]);\n";
  for (int o = 0; o < nout; ++o) {
    const char* t = cpp_type(p.ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype);
    s << "  " << t << "* __restrict__ out" << o << " = reinterpret_cast<" << t << "*>(m.v[" << ptr0 + o << "]);\n";
  }
  for (auto& op : p.ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    s << "  const " << t << "* __restrict__ in" << op.input << " = reinterpret_cast<const " << t << "*>(m.v["
      << ptr0 + nout + op.input << "]);\n";
  }
  s << "  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {\n";
  s << "    long rem = i";
  for (int k = 0; k < nops; ++k) s << ", o" << k << " = 0";
  s << ";\n    for (int d = nd - 1; d >= 0; --d) {\n";
  s << "      const long sz = m.v[2 + d];\n      const long q = rem / sz;\n      const long c = rem - q * sz;\n";
  s << "      rem = q;\n";
  for (int k = 0; k < nops; ++k) s << "      o" << k << " += c * m.v[" << strides0 + k * kMaxDims << " + d];\n";
  s << "    }\n";
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const compiler::FusedOp& op = p.ops[i];
    const char* ct = compute_type(op.dtype);
    s << "    const " << ct << " t" << i << " = ";
    if (!op.prim) {
      s << "static_cast<" << ct << ">(in" << op.input << "[o" << nout + op.input << "]);\n";
      continue;
    }
    std::vector<std::string> args;
    std::vector<Dtype> arg_dtypes;
    for (int a : op.args) {
      args.push_back("t" + std::to_string(a));
      arg_dtypes.push_back(p.ops[static_cast<size_t>(a)].dtype);
    }
    s << rounded_expr(op.prim->kind(), *op.prim, op.dtype, args, arg_dtypes) << ";\n";
  }
  for (int o = 0; o < nout; ++o) {
    int v = p.outputs[static_cast<size_t>(o)];
    s << "    out" << o << "[o" << o << "] = static_cast<" << cpp_type(p.ops[static_cast<size_t>(v)].dtype) << ">(t" << v
      << ");\n";
  }
  s << "  }\n}\n";
  return s.str();
}

int row_meta_len(int inputs, int outputs) { return 2 + 3 * inputs + outputs; }

namespace {
bool is_reduce(const compiler::RowOp& op) {
  return op.prim && op_category(op.prim->kind()) == OpCategory::reduce;
}
}  // namespace

std::string row_source(const compiler::RowProgram& p, int threads) {
  const auto& ops = p.ops;
  size_t n_ops = ops.size();
  int nin = 0;
  for (auto& op : ops) nin += op.prim ? 0 : 1;
  int nout = static_cast<int>(p.outputs.size());
  const int len = row_meta_len(nin, nout);
  const int rs0 = 2, cs0 = 2 + nin, in0 = 2 + 2 * nin, out0 = 2 + 3 * nin;
  // Pass after which each per-row value is known (0: before the first pass).
  std::vector<int> level(n_ops, 0);
  int passes = 0;
  for (size_t i = 0; i < n_ops; ++i) {
    int l = 0;
    for (int a : ops[i].args) l = std::max(l, level[static_cast<size_t>(a)]);
    level[i] = is_reduce(ops[i]) ? l + 1 : l;
    passes = std::max(passes, level[i]);
  }
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") kiln_kernel(const KilnMeta<" << len
    << "> m) {\n";
  s << "  const long rows = m.v[0], n = m.v[1];\n  const int tid = threadIdx.x;\n";
  for (auto& op : ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    s << "  const " << t << "* __restrict__ in" << op.input << " = reinterpret_cast<const " << t << "*>(m.v["
      << in0 + op.input << "]);\n";
    s << "  const long rs" << op.input << " = m.v[" << rs0 + op.input << "], cs" << op.input << " = m.v["
      << cs0 + op.input << "];\n";
  }
  for (int o = 0; o < nout; ++o) {
    const char* t = cpp_type(ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype);
    s << "  " << t << "* __restrict__ out" << o << " = reinterpret_cast<" << t << "*>(m.v[" << out0 + o << "]);\n";
  }
  for (size_t i = 0; i < n_ops; ++i) {
    if (is_reduce(ops[i])) {
      s << "  __shared__ " << wide_type(ops[i].prim->kind(), ops[i].dtype) << " sh" << i << "[" << threads << "];\n";
    }
  }
  s << "  for (long r = blockIdx.x; r < rows; r += gridDim.x) {\n";
  auto emit_op = [&](std::ostringstream& b, size_t i, const std::string& indent) {
    const compiler::RowOp& op = ops[i];
    const char* ct = compute_type(op.dtype);
    b << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      std::string k = std::to_string(op.input);
      if (op.per_row || op.uniform) b << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << "]);\n";
      else b << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << " + j * cs" << k << "]);\n";
      return;
    }
    std::vector<std::string> args;
    std::vector<Dtype> arg_dtypes;
    for (int a : op.args) {
      args.push_back("t" + std::to_string(a));
      arg_dtypes.push_back(ops[static_cast<size_t>(a)].dtype);
    }
    b << rounded_expr(op.prim->kind(), *op.prim, op.dtype, args, arg_dtypes) << ";\n";
  };
  auto element_closure = [&](const std::vector<size_t>& roots) {
    std::set<size_t> need;
    std::function<void(size_t)> visit = [&](size_t i) {
      if (ops[i].per_row || need.count(i)) return;
      need.insert(i);
      for (int a : ops[i].args) visit(static_cast<size_t>(a));
    };
    for (size_t r : roots) visit(r);
    return need;
  };
  auto emit_row_ops = [&](int lvl) {
    for (size_t i = 0; i < n_ops; ++i) {
      if (ops[i].per_row && !is_reduce(ops[i]) && level[i] == lvl) emit_op(s, i, "    ");
    }
  };
  emit_row_ops(0);
  for (int pass = 1; pass <= passes; ++pass) {
    std::vector<size_t> reductions, roots;
    for (size_t i = 0; i < n_ops; ++i) {
      if (is_reduce(ops[i]) && level[i] == pass) {
        reductions.push_back(i);
        roots.push_back(static_cast<size_t>(ops[i].args[0]));
      }
    }
    for (size_t i : reductions) {
      const char* w = wide_type(ops[i].prim->kind(), ops[i].dtype);
      s << "    " << w << " acc" << i << " = static_cast<" << w << ">(" << functor(ops[i].prim->kind()) << "::init<"
        << compute_type(ops[i].dtype) << ">());\n";
    }
    s << "    for (long j = tid; j < n; j += blockDim.x) {\n";
    for (size_t i : element_closure(roots)) emit_op(s, i, "      ");
    for (size_t i : reductions) {
      const char* w = wide_type(ops[i].prim->kind(), ops[i].dtype);
      s << "      acc" << i << " = " << functor(ops[i].prim->kind()) << "{}(acc" << i << ", static_cast<" << w
        << ">(t" << ops[i].args[0] << "));\n";
    }
    s << "    }\n";
    for (size_t i : reductions) s << "    sh" << i << "[tid] = acc" << i << ";\n";
    s << "    __syncthreads();\n";
    s << "    for (int half = blockDim.x / 2; half > 0; half >>= 1) {\n      if (tid < half) {\n";
    for (size_t i : reductions) {
      s << "        sh" << i << "[tid] = " << functor(ops[i].prim->kind()) << "{}(sh" << i << "[tid], sh" << i
        << "[tid + half]);\n";
    }
    s << "      }\n      __syncthreads();\n    }\n";
    for (size_t i : reductions) {
      const char* ct = compute_type(ops[i].dtype);
      s << "    const " << ct << " t" << i << " = static_cast<" << ct << ">(static_cast<" << cpp_type(ops[i].dtype)
        << ">(sh" << i << "[0]));\n";
    }
    s << "    __syncthreads();\n";  // sh is rewritten by the next pass or row
    emit_row_ops(pass);
  }
  std::vector<size_t> elem_outputs;
  for (int o : p.outputs) {
    if (!ops[static_cast<size_t>(o)].per_row) elem_outputs.push_back(static_cast<size_t>(o));
  }
  if (!elem_outputs.empty()) {
    s << "    for (long j = tid; j < n; j += blockDim.x) {\n";
    for (size_t i : element_closure(elem_outputs)) emit_op(s, i, "      ");
    for (int o = 0; o < nout; ++o) {
      const compiler::RowOp& op = ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])];
      if (op.per_row) continue;
      s << "      out" << o << "[r * n + j] = static_cast<" << cpp_type(op.dtype) << ">(t" << p.outputs[static_cast<size_t>(o)]
        << ");\n";
    }
    s << "    }\n";
  }
  s << "    if (tid == 0) {\n";
  for (int o = 0; o < nout; ++o) {
    const compiler::RowOp& op = ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])];
    if (!op.per_row) continue;
    s << "      out" << o << "[r] = static_cast<" << cpp_type(op.dtype) << ">(t" << p.outputs[static_cast<size_t>(o)]
      << ");\n";
  }
  s << "    }\n  }\n}\n";
  return s.str();
}

std::string instantiate(const std::string& call, int meta_len) {
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << meta_len << "> m) { " << call << "(m); }\n";
  return s.str();
}

}  // namespace kiln::cuda
