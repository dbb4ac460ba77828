#include "backend/cuda/codegen.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "backend/cuda/tuning.h"
#include "compile/codegen_util.h"

namespace kiln::cuda {

using compiler::compute_type;
using compiler::cpp_type;
using compiler::functor;
using compiler::wide_type;

const char* support_header() {
  return R"(#pragma once
#include <cstdint>
#include "kiln/half.h"
#include "backend/common/math.h"

template <int N> struct KilnMeta { long v[N]; };
// V elements of T read or written as one aligned access (16 bytes at most).
template <class T, int V> struct alignas(sizeof(T) * V) kiln_vec { T v[V]; };

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

// bfloat16 add, subtract and multiply of floats that hold bfloat16 values, as one bf16 fma on
// their bits. This equals rounding the float result (double rounding through float is
// harmless: 24 >= 2 * 8 + 2 bits) without the f32->bf16 cvt, which issues at 16 a clock per SM.
__device__ inline unsigned short kiln_bf16_bits(float x) { return static_cast<unsigned short>(__float_as_uint(x) >> 16); }
__device__ inline float kiln_bf16_fma(unsigned short a, unsigned short b, unsigned short c) {
#if __CUDA_ARCH__ >= 800
  unsigned short r;
  asm("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(r) : "h"(a), "h"(b), "h"(c));
  return __uint_as_float(static_cast<unsigned>(r) << 16);
#else  // no bf16 arithmetic: the exact float product (8 x 8 bits) plus c, rounded once
  const float f = __uint_as_float(static_cast<unsigned>(a) << 16) * __uint_as_float(static_cast<unsigned>(b) << 16);
  return static_cast<float>(static_cast<kiln::bfloat16_t>(f + __uint_as_float(static_cast<unsigned>(c) << 16)));
#endif
}
__device__ inline float kiln_bf16_add(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(a), 0x3F80 /* 1 */, kiln_bf16_bits(b));
}
__device__ inline float kiln_bf16_sub(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(b), 0xBF80 /* -1 */, kiln_bf16_bits(a));
}
__device__ inline float kiln_bf16_mul(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(a), kiln_bf16_bits(b), 0x8000 /* -0: keeps a zero product's sign */);
}

// gelu_tanh for a 16-bit float result, in float alone: x sigmoid(2u) with e^-|2u| <= 1, so the
// denominator stays in [1, 2] and the fast division is safe. Its few-ulp float error vanishes
// in the rounding to 8 or 11 bits (a float32 result needs the double form).
__device__ inline float kiln_gelu_tanh_narrow(float x) {
  x = x < -14.0f ? -14.0f : x;  // the result is -0 there; never -inf * 0
  const float v = -1.5957691216057308f * (x + 0.044715f * (x * x * x));  // -2u
  const float e = expf(v > 0.0f ? -v : v);
  return __fdividef(v > 0.0f ? x * e : x, 1.0f + e);
}

// A value exchanged with lane (lane ^ mask) of the warp, for any type of 1 to 8 bytes.
template <class W> __device__ inline W kiln_shfl_xor(W v, int mask) {
  if constexpr (sizeof(W) == 8) {
    long long b;
    memcpy(&b, &v, 8);
    b = __shfl_xor_sync(0xffffffffu, b, mask);
    memcpy(&v, &b, 8);
  } else {
    int b = 0;
    memcpy(&b, &v, sizeof(W));
    b = __shfl_xor_sync(0xffffffffu, b, mask);
    memcpy(&v, &b, sizeof(W));
  }
  return v;
}
// F folded over v of every thread of the block (a multiple of 32 threads); sh holds 32.
// Every thread gets the result; the caller syncs before sh is written again.
template <class F, class W> __device__ inline W kiln_block_reduce(W v, W init, W* sh) {
  for (int m = 16; m > 0; m >>= 1) v = F{}(v, kiln_shfl_xor(v, m));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? sh[lane] : init;
    for (int m = 16; m > 0; m >>= 1) v = F{}(v, kiln_shfl_xor(v, m));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
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
int flat_meta_len(int operands) { return 1 + operands; }

namespace {

// Pointers to every operand: outputs out<o> from v[ptr0], inputs in<k> after them.
void emit_pointers(std::ostringstream& s, const compiler::FusedProgram& p, int ptr0) {
  const int nout = static_cast<int>(p.outputs.size());
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
}

// Member i's expression: bfloat16 add, subtract and multiply of bfloat16 values as native
// bf16 math, gelu_tanh with a 16-bit result in float, every other op as the shared
// generators spell it.
template <class Ops>
std::string cuda_member_expr(const Ops& ops, size_t i) {
  const auto& op = ops[i];
  const OpKind k = op.prim->kind();
  if (k == OpKind::GeluTanh && (op.dtype == bfloat16 || op.dtype == float16) &&
      ops[static_cast<size_t>(op.args[0])].dtype == op.dtype) {
    const std::string t = compiler::cpp_type(op.dtype);
    return "static_cast<float>(static_cast<" + t + ">(kiln_gelu_tanh_narrow(t" + std::to_string(op.args[0]) + ")))";
  }
  const char* native = k == OpKind::Add ? "kiln_bf16_add" : k == OpKind::Subtract ? "kiln_bf16_sub"
                       : k == OpKind::Multiply ? "kiln_bf16_mul" : nullptr;
  bool bf16 = op.dtype == bfloat16 && op.args.size() == 2;
  for (int a : op.args) bf16 &= ops[static_cast<size_t>(a)].dtype == bfloat16;
  if (!native || !bf16) return compiler::member_expr(ops, i);
  return std::string(native) + "(t" + std::to_string(op.args[0]) + ", t" + std::to_string(op.args[1]) + ")";
}

// Every op of p for one element into t<i> (compute types); load(k) reads input k, and
// store(o, value) writes output o.
void emit_element(std::ostringstream& s, const compiler::FusedProgram& p, const std::string& indent,
                  const std::function<std::string(int)>& load,
                  const std::function<std::string(int, const std::string&)>& store) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const compiler::FusedOp& op = p.ops[i];
    const char* ct = compute_type(op.dtype);
    s << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      s << "static_cast<" << ct << ">(" << load(op.input) << ");\n";
      continue;
    }
    s << cuda_member_expr(p.ops, i) << ";\n";
  }
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    int v = p.outputs[o];
    std::string value = "static_cast<" + std::string(cpp_type(p.ops[static_cast<size_t>(v)].dtype)) + ">(t" +
                        std::to_string(v) + ")";
    s << indent << store(static_cast<int>(o), value) << ";\n";
  }
}

}  // namespace

std::string elementwise_source(const compiler::FusedProgram& p) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  const int nops = nin + nout, len = elementwise_meta_len(nops);
  const int strides0 = 2 + kMaxDims, ptr0 = strides0 + nops * kMaxDims;
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << len << "> m) {\n";
  s << "  const long n = m.v[0];\n  const int nd = static_cast<int>(m.v[1]);\n";
  emit_pointers(s, p, ptr0);
  s << "  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {\n";
  s << "    long rem = i";
  for (int k = 0; k < nops; ++k) s << ", o" << k << " = 0";
  s << ";\n    for (int d = nd - 1; d >= 0; --d) {\n";
  s << "      const long sz = m.v[2 + d];\n      const long q = rem / sz;\n      const long c = rem - q * sz;\n";
  s << "      rem = q;\n";
  for (int k = 0; k < nops; ++k) s << "      o" << k << " += c * m.v[" << strides0 + k * kMaxDims << " + d];\n";
  s << "    }\n";
  emit_element(
      s, p, "    ", [&](int k) { return "in" + std::to_string(k) + "[o" + std::to_string(nout + k) + "]"; },
      [](int o, const std::string& v) { return "out" + std::to_string(o) + "[o" + std::to_string(o) + "] = " + v; });
  s << "  }\n}\n";
  return s.str();
}

std::string elementwise_flat_source(const compiler::FusedProgram& p, uint64_t scalar_inputs, int vec) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  auto scalar = [&](int k) { return ((scalar_inputs >> k) & 1) != 0; };
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(256) kiln_kernel(const KilnMeta<" << flat_meta_len(nin + nout)
    << "> m) {\n  const long n = m.v[0];\n";
  emit_pointers(s, p, 1);
  for (auto& op : p.ops) {  // broadcast scalars are read once
    if (op.prim || !scalar(op.input)) continue;
    s << "  const " << cpp_type(op.dtype) << " s" << op.input << " = in" << op.input << "[0];\n";
  }
  auto load = [&](const std::string& at) {
    return [&, at](int k) { return scalar(k) ? "s" + std::to_string(k) : "in" + std::to_string(k) + at; };
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
  for (int o = 0; o < nout; ++o) {
    s << "    kiln_vec<" << cpp_type(p.ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype) << ", " << v
      << "> r" << o << ";\n";
  }
  // Unrolled by the generator: constant indices keep the vectors in registers.
  for (int e = 0; e < vec; ++e) {
    s << "    {\n      constexpr int e = " << e << ";\n";
    emit_element(
        s, p, "      ", [&](int k) { return scalar(k) ? "s" + std::to_string(k) : "a" + std::to_string(k) + ".v[e]"; },
        [](int o, const std::string& val) { return "r" + std::to_string(o) + ".v[e] = " + val; });
    s << "    }\n";
  }
  for (int o = 0; o < nout; ++o) {
    s << "    reinterpret_cast<decltype(r" << o << ")*>(out" << o << ")[b] = r" << o << ";\n";
  }
  s << "  }\n";
  s << "  for (long i = nv * " << v << " + kiln_gid(); i < n; i += kiln_gstride()) {\n";
  emit_element(s, p, "    ", load("[i]"),
               [](int o, const std::string& val) { return "out" + std::to_string(o) + "[i] = " + val; });
  s << "  }\n}\n";
  return s.str();
}

int row_meta_len(int inputs, int outputs) { return 2 + 3 * inputs + outputs; }


std::string row_source(const compiler::RowProgram& p, const RowVariant& var) {
  const auto& ops = p.ops;
  const size_t n_ops = ops.size();
  int nin = 0;
  for (auto& op : ops) nin += op.prim ? 0 : 1;
  const int nout = static_cast<int>(p.outputs.size());
  const int len = row_meta_len(nin, nout);
  const int rs0 = 2, cs0 = 2 + nin, in0 = 2 + 2 * nin, out0 = 2 + 3 * nin;
  auto cached = [&](int k) { return ((var.cached_inputs >> k) & 1) != 0; };
  // Pass after which each per-row value is known (0: before the first pass).
  const std::vector<int> level = compiler::row_pass_levels(p);
  const int passes = level.empty() ? 0 : *std::max_element(level.begin(), level.end());
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(" << var.threads << ") kiln_kernel(const KilnMeta<" << len
    << "> m) {\n";
  s << "  const long rows = m.v[0], n = m.v[1];\n  const int tid = threadIdx.x;\n";
  if (var.cached_inputs) s << "  extern __shared__ __align__(16) unsigned char kiln_smem[];\n  long smem_at = 0;\n";
  for (auto& op : ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    std::string k = std::to_string(op.input);
    s << "  const " << t << "* __restrict__ in" << k << " = reinterpret_cast<const " << t << "*>(m.v[" << in0 + op.input
      << "]);\n";
    s << "  const long rs" << k << " = m.v[" << rs0 + op.input << "], cs" << k << " = m.v[" << cs0 + op.input << "];\n";
    if (cached(op.input)) {  // this row of the input, staged in shared memory (cs == 1)
      s << "  " << t << "* c" << k << " = reinterpret_cast<" << t << "*>(kiln_smem + smem_at);\n";
      s << "  smem_at += (n * static_cast<long>(sizeof(" << t << ")) + 15) / 16 * 16;\n";
    }
  }
  for (int o = 0; o < nout; ++o) {
    const char* t = cpp_type(ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype);
    s << "  " << t << "* __restrict__ out" << o << " = reinterpret_cast<" << t << "*>(m.v[" << out0 + o << "]);\n";
  }
  for (size_t i = 0; i < n_ops; ++i) {
    if (compiler::is_row_reduce(ops[i])) s << "  __shared__ " << wide_type(ops[i].prim->kind(), ops[i].dtype) << " sh" << i << "[32];\n";
  }
  s << "  for (long r = blockIdx.x; r < rows; r += gridDim.x) {\n";
  for (auto& op : ops) {
    if (op.prim || !cached(op.input)) continue;
    std::string k = std::to_string(op.input), t = cpp_type(op.dtype);
    if (var.vector_in) {
      std::string vec = "kiln_vec<" + t + ", " + std::to_string(16 / size_of(op.dtype)) + ">";
      s << "    for (long j = tid; j < n / " << 16 / size_of(op.dtype) << "; j += blockDim.x) reinterpret_cast<" << vec
        << "*>(c" << k << ")[j] = reinterpret_cast<const " << vec << "*>(in" << k << " + r * rs" << k << ")[j];\n";
    } else {
      s << "    for (long j = tid; j < n; j += blockDim.x) c" << k << "[j] = in" << k << "[r * rs" << k << " + j];\n";
    }
  }
  if (var.cached_inputs) s << "    __syncthreads();\n";
  auto emit_op = [&](std::ostringstream& b, size_t i, const std::string& indent) {
    const compiler::RowOp& op = ops[i];
    const char* ct = compute_type(op.dtype);
    b << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      std::string k = std::to_string(op.input);
      if (op.per_row || op.uniform) b << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << "]);\n";
      else if (cached(op.input)) b << "static_cast<" << ct << ">(c" << k << "[j]);\n";
      else b << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << " + j * cs" << k << "]);\n";
      return;
    }
    b << cuda_member_expr(ops, i) << ";\n";
  };
  auto element_closure = [&](const std::vector<size_t>& roots) { return compiler::row_element_closure(p, roots); };
  auto emit_row_ops = [&](int lvl) {
    for (size_t i = 0; i < n_ops; ++i) {
      if (ops[i].per_row && !compiler::is_row_reduce(ops[i]) && level[i] == lvl) emit_op(s, i, "    ");
    }
  };
  emit_row_ops(0);
  for (int pass = 1; pass <= passes; ++pass) {
    std::vector<size_t> reductions, roots;
    for (size_t i = 0; i < n_ops; ++i) {
      if (compiler::is_row_reduce(ops[i]) && level[i] == pass) {
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
    for (size_t i : reductions) {
      const char* w = wide_type(ops[i].prim->kind(), ops[i].dtype);
      const char* ct = compute_type(ops[i].dtype);
      s << "    const " << ct << " t" << i << " = static_cast<" << ct << ">(static_cast<" << cpp_type(ops[i].dtype)
        << ">(kiln_block_reduce<" << functor(ops[i].prim->kind()) << ">(acc" << i << ", static_cast<" << w << ">("
        << functor(ops[i].prim->kind()) << "::init<" << ct << ">()), sh" << i << ")));\n";
    }
    s << "    __syncthreads();\n";  // sh is rewritten by the next pass or row
    emit_row_ops(pass);
  }
  std::vector<size_t> elem_outputs;
  for (int o : p.outputs) {
    if (!ops[static_cast<size_t>(o)].per_row) elem_outputs.push_back(static_cast<size_t>(o));
  }
  if (!elem_outputs.empty()) {
    // With vector stores each thread computes vector_out neighbouring elements.
    const int v = std::max(var.vector_out, 1);
    s << "    for (long jv = tid; jv < n / " << v << "; jv += blockDim.x) {\n";
    for (int o = 0; o < nout; ++o) {
      const compiler::RowOp& op = ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])];
      if (!op.per_row) s << "      kiln_vec<" << cpp_type(op.dtype) << ", " << v << "> r" << o << ";\n";
    }
    const std::set<size_t> closure = element_closure(elem_outputs);
    for (int e = 0; e < v; ++e) {  // unrolled here: constant indices keep the vector in registers
      s << "      {\n        constexpr int e = " << e << ";\n        const long j = jv * " << v << " + e;\n";
      for (size_t i : closure) emit_op(s, i, "        ");
      for (int o = 0; o < nout; ++o) {
        const compiler::RowOp& op = ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])];
        if (op.per_row) continue;
        s << "        r" << o << ".v[e] = static_cast<" << cpp_type(op.dtype) << ">(t" << p.outputs[static_cast<size_t>(o)]
          << ");\n";
      }
      s << "      }\n";
    }
    for (int o = 0; o < nout; ++o) {
      if (ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].per_row) continue;
      s << "      reinterpret_cast<decltype(r" << o << ")*>(out" << o << " + r * n)[jv] = r" << o << ";\n";
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
  s << "    }\n";
  if (var.cached_inputs) s << "    __syncthreads();\n";  // the staged row is replaced by the next one
  s << "  }\n}\n";
  return s.str();
}

std::string instantiate(const std::string& call, int meta_len) {
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << meta_len << "> m) { " << call << "(m); }\n";
  return s.str();
}

}  // namespace kiln::cuda
