// Random programs for differential testing of compile (see random_graph.h).
//
// The generator picks each step at random and builds it on lazy probe arrays of the
// right shapes and dtypes (nothing is evaluated); a choice the front end refuses
// with kiln::Error is dropped and another one drawn, so every accepted program is
// valid by construction and its shapes and dtypes are the front ends' own.
#include "fuzz/random_graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

namespace kiln::fuzz {

namespace {

using UnFn = Array (*)(const Array&);
using BinFn = Array (*)(const Array&, const Array&);

struct UnaryEntry {
  const char* name;
  UnFn fn;
  bool smooth;  // a well-conditioned continuous function: approximate in, approximate out
};

// The fuzz column of the op registry.
constexpr bool smooth = true;
constexpr bool rough = false;

// Every unary row of the op registry.
const std::vector<UnaryEntry>& unary_table() {
  static const std::vector<UnaryEntry> t = {
#define KILN_UNARY(F, n, dtypes, cost, fuzz) {#n, static_cast<UnFn>(&kiln::n), fuzz},
#include "ops/op_table.def"
  };
  return t;
}

struct BinaryEntry {
  const char* name;
  BinFn fn;
  bool smooth;
};

// Every binary row of the op registry.
const std::vector<BinaryEntry>& binary_table() {
  static const std::vector<BinaryEntry> t = {
#define KILN_BINARY(F, n, dtypes, cost, fuzz) {#n, static_cast<BinFn>(&kiln::n), fuzz},
#include "ops/op_table.def"
  };
  return t;
}

// Scalar ops, in the order scalar_apply switches on. Those past kLastOperator are
// functions with the scalar on the right only.
const char* const kScalarNames[] = {"+",  "-", "*", "/", "%",  "==", "!=",      "<",       "<=",   ">",
                                    ">=", "&", "|", "^", "<<", ">>", "maximum", "minimum", "power"};
constexpr int kNumScalarOps = 19;
constexpr int kLastOperator = 15;
// Scalar ops whose result is a smooth function of the array operand.
bool scalar_smooth(int fn, bool left) {
  switch (fn) {
    case 0:
    case 1:
    case 2:
    case 16:
    case 17: return true;
    case 3: return !left;  // x / c
    default: return false;
  }
}

template <class T>
Array scalar_apply(int fn, const Array& a, T s, bool left) {
  switch (fn) {
    case 0: return left ? s + a : a + s;
    case 1: return left ? s - a : a - s;
    case 2: return left ? s * a : a * s;
    case 3: return left ? s / a : a / s;
    case 4: return left ? s % a : a % s;
    case 5: return left ? s == a : a == s;
    case 6: return left ? s != a : a != s;
    case 7: return left ? s < a : a < s;
    case 8: return left ? s <= a : a <= s;
    case 9: return left ? s > a : a > s;
    case 10: return left ? s >= a : a >= s;
    case 11: return left ? s & a : a & s;
    case 12: return left ? s | a : a | s;
    case 13: return left ? s ^ a : a ^ s;
    case 14: return left ? s << a : a << s;
    case 15: return left ? s >> a : a >> s;
    case 16: return maximum(a, s);
    case 17: return minimum(a, s);
    default: return power(a, s);
  }
}

enum ReduceFn {
  r_sum,
  r_prod,
  r_max,
  r_min,
  r_mean,
  r_var,
  r_logsumexp,
  r_softmax,
  r_any,
  r_all,
  r_argmax,
  r_argmin,
  r_cumsum,
  r_sort,
  r_argsort,
  r_count
};
const char* const kReduceNames[] = {"sum", "prod", "max",    "min",    "mean",   "var",  "logsumexp", "softmax",
                                    "any", "all",  "argmax", "argmin", "cumsum", "sort", "argsort"};

// The language-model ops (StepKind::nn), selection and random numbers.
enum NnFn {
  nn_rms_norm,
  nn_layer_norm,
  nn_rope,
  nn_sdpa,
  nn_quantize,
  nn_dequantize,
  nn_qmm,
  nn_slice_update,
  nn_slice_update_at,
  nn_count
};
const char* const kNnNames[] = {
    "rms_norm",         "layer_norm",   "rope",           "scaled_dot_product_attention", "quantize", "dequantize",
    "quantized_matmul", "slice_update", "slice_update_at"};
enum SelFn { sel_topk, sel_argpartition, sel_partition, sel_count };
const char* const kSelNames[] = {"topk", "argpartition", "partition"};
enum RandFn { rnd_bits, rnd_uniform, rnd_normal, rnd_bernoulli, rnd_categorical, rnd_split, rnd_subkey, rnd_count };
const char* const kRandNames[] = {"random_bits",        "random_uniform", "random_normal", "random_bernoulli",
                                  "random_categorical", "random_split",   "random_subkey"};

std::string shape_text(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

std::string list_text(const std::vector<int>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ")";
  return os.str();
}

std::string scalar_text(double v, ScalarType t) {
  std::ostringstream os;
  switch (t) {
    case ScalarType::f64:
    case ScalarType::f32: os << v << (v == std::floor(v) ? ".0" : "") << (t == ScalarType::f32 ? "f" : ""); break;
    case ScalarType::i32: os << static_cast<int>(v); break;
    case ScalarType::boolean: os << (v != 0 ? "true" : "false"); break;
  }
  return os.str();
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Array int32_vector(const Shape& v) {
  std::vector<int32_t> x(v.begin(), v.end());
  return array(x, {static_cast<int64_t>(x.size())});
}

/* The optional operand `bit` of s (nn steps list them after `required` operands). */
std::optional<Array> opt_arg(const Step& s, const std::vector<Array>& v, size_t required, unsigned bit) {
  if (!(s.opt & bit)) return std::nullopt;
  size_t i = required;
  for (unsigned b = 1; b < bit; b <<= 1) i += (s.opt & b) ? 1 : 0;
  return v[static_cast<size_t>(s.args[i])];
}

Array apply_nn(const Step& s, const std::vector<Array>& v) {
  auto arg = [&](size_t i) -> const Array& { return v[static_cast<size_t>(s.args[i])]; };
  switch (static_cast<NnFn>(s.fn)) {
    case nn_rms_norm: return rms_norm(arg(0), opt_arg(s, v, 1, kOptWeight), s.eps);
    case nn_layer_norm: return layer_norm(arg(0), opt_arg(s, v, 1, kOptWeight), opt_arg(s, v, 1, kOptBias), s.eps);
    case nn_rope: {
      auto offsets = opt_arg(s, v, 1, kOptOffsetArray), freqs = opt_arg(s, v, 1, kOptFreqs);
      if (offsets) return rope(arg(0), s.k, s.traditional, s.base, s.fscale, *offsets, freqs);
      return rope(arg(0), s.k, s.traditional, s.base, s.fscale, s.offset, freqs);
    }
    case nn_sdpa:
      return scaled_dot_product_attention(arg(0), arg(1), arg(2), s.fscale, opt_arg(s, v, 3, kOptMask), s.causal,
                                          opt_arg(s, v, 3, kOptKeyLengths));
    case nn_quantize: {
      auto q = quantize(arg(0), s.group_size, s.bits);
      return s.which == 0 ? std::get<0>(q) : s.which == 1 ? std::get<1>(q) : std::get<2>(q);
    }
    case nn_dequantize: {
      auto [w, sc, b] = quantize(arg(0), s.group_size, s.bits);
      return dequantize(w, sc, b, s.group_size, s.bits);
    }
    case nn_qmm: {
      // quantize -> quantized_matmul, with the fused pattern around it on request: a weighted
      // rms_norm read only by the product, and an add of a same-shaped tensor behind it.
      auto [w, sc, b] = quantize(arg(1), s.group_size, s.bits);
      Array x = arg(0);
      if (auto nw = opt_arg(s, v, 2, kOptNorm)) x = rms_norm(x, nw, s.eps);
      Array y = quantized_matmul(x, w, sc, b, s.transpose, s.group_size, s.bits, s.activations);
      if (auto r = opt_arg(s, v, 2, kOptResidual)) y = y + *r;
      return y;
    }
    case nn_slice_update: {
      Shape start, stop, step;
      for (auto& a : s.slices) {
        start.push_back(*a.start);
        stop.push_back(*a.stop);
        step.push_back(a.step);
      }
      return slice_update(arg(0), arg(1), start, stop, step);
    }
    case nn_slice_update_at: {
      // The start vector clamped into [0, limit] (s.shape: the traced room left on each axis),
      // so the program's data cannot put the update out of range at the traced shapes.
      Array start = minimum(maximum(arg(2), int32_vector(Shape(s.shape.size(), 0))), int32_vector(s.shape));
      return slice_update(arg(0), arg(1), start, s.axes);
    }
    case nn_count: break;
  }
  fail("fuzz", "bad nn step");
}

Array apply_selection(const Step& s, const Array& a) {
  switch (static_cast<SelFn>(s.fn)) {
    case sel_topk: {
      auto [values, indices] = topk(a, s.k, s.axis);
      return s.which == 0 ? values : indices;
    }
    case sel_argpartition: return argpartition(a, s.k, s.axis);
    case sel_partition: return partition(a, s.k, s.axis);
    case sel_count: break;
  }
  fail("fuzz", "bad selection step");
}

Array apply_random(const Step& s, const std::vector<Array>& v) {
  const Array& key = v[static_cast<size_t>(s.args[0])];
  switch (static_cast<RandFn>(s.fn)) {
    case rnd_bits: return random::bits(s.shape, key);
    case rnd_uniform: return random::uniform(s.shape, key, s.dtype, s.param0, s.param1);
    case rnd_normal: return random::normal(s.shape, key, s.dtype, s.param0, s.param1);
    case rnd_bernoulli: return random::bernoulli(v[static_cast<size_t>(s.args[1])], key);
    case rnd_categorical: return random::categorical(v[static_cast<size_t>(s.args[1])], key, s.axis);
    case rnd_split: return random::split(key, s.k);
    case rnd_subkey:  // one row of a split, a key again
      return reshape(slice(random::split(key, s.k), {SliceArg{s.which, s.which + 1, 1}}), {2});
    case rnd_count: break;
  }
  fail("fuzz", "bad random step");
}

/* Applies one step to the values computed so far. */
Array apply_step(const Step& s, const std::vector<Array>& v) {
  auto arg = [&](size_t i) -> const Array& { return v[static_cast<size_t>(s.args[i])]; };
  switch (s.kind) {
    case StepKind::unary: return unary_table()[static_cast<size_t>(s.fn)].fn(arg(0));
    case StepKind::binary: return binary_table()[static_cast<size_t>(s.fn)].fn(arg(0), arg(1));
    case StepKind::scalar:
      switch (s.scalar_type) {
        case ScalarType::f64: return scalar_apply(s.fn, arg(0), s.scalar, s.scalar_left);
        case ScalarType::f32: return scalar_apply(s.fn, arg(0), static_cast<float>(s.scalar), s.scalar_left);
        case ScalarType::i32: return scalar_apply(s.fn, arg(0), static_cast<int>(s.scalar), s.scalar_left);
        case ScalarType::boolean: return scalar_apply(s.fn, arg(0), s.scalar != 0, s.scalar_left);
      }
      break;
    case StepKind::where: return where(arg(0), arg(1), arg(2));
    case StepKind::astype: return astype(arg(0), s.dtype);
    case StepKind::reduce: {
      const Array& a = arg(0);
      switch (static_cast<ReduceFn>(s.fn)) {
        case r_sum: return sum(a, s.axes, s.keepdims);
        case r_prod: return prod(a, s.axes, s.keepdims);
        case r_max: return max(a, s.axes, s.keepdims);
        case r_min: return min(a, s.axes, s.keepdims);
        case r_mean: return mean(a, s.axes, s.keepdims);
        case r_var: return var(a, s.axes, s.keepdims);
        case r_logsumexp: return logsumexp(a, s.axes, s.keepdims);
        case r_softmax: return softmax(a, s.axes);
        case r_any: return any(a, s.axes, s.keepdims);
        case r_all: return all(a, s.axes, s.keepdims);
        case r_argmax: return argmax(a, s.has_axis ? std::optional<int>(s.axis) : std::nullopt, s.keepdims);
        case r_argmin: return argmin(a, s.has_axis ? std::optional<int>(s.axis) : std::nullopt, s.keepdims);
        case r_cumsum: return cumsum(a, s.axis, s.reverse, s.inclusive);
        case r_sort: return sort(a, s.axis);
        case r_argsort: return argsort(a, s.axis);
        case r_count: break;
      }
      break;
    }
    case StepKind::reshape: return reshape(arg(0), s.shape);
    case StepKind::transpose: return transpose(arg(0), s.axes);
    case StepKind::slice: return slice(arg(0), s.slices);
    case StepKind::expand_dims: return expand_dims(arg(0), s.axis);
    case StepKind::squeeze: return squeeze(arg(0), s.axes);
    case StepKind::concatenate: {
      std::vector<Array> parts;
      for (size_t i = 0; i < s.args.size(); ++i) parts.push_back(arg(i));
      return concatenate(parts, s.axis);
    }
    case StepKind::broadcast_to: return broadcast_to(arg(0), s.shape);
    case StepKind::copy: return copy(arg(0));
    case StepKind::nn: return apply_nn(s, v);
    case StepKind::selection: return apply_selection(s, arg(0));
    case StepKind::random: return apply_random(s, v);
  }
  fail("fuzz", "bad step");
}

/* How exactly the result of `s` must match, from its operands'. */
Exactness exactness_of(const Step& s, const std::vector<Exactness>& ex, const std::vector<Dtype>& dt, Dtype out) {
  Exactness in = Exactness::exact;
  for (int a : s.args) in = std::max(in, ex[static_cast<size_t>(a)]);
  if (in == Exactness::unreliable) return in;
  bool approx = in == Exactness::approximate;
  switch (s.kind) {
    case StepKind::unary:
      return approx && !unary_table()[static_cast<size_t>(s.fn)].smooth ? Exactness::unreliable : in;
    case StepKind::binary:
      return approx && !binary_table()[static_cast<size_t>(s.fn)].smooth ? Exactness::unreliable : in;
    case StepKind::scalar: return approx && !scalar_smooth(s.fn, s.scalar_left) ? Exactness::unreliable : in;
    case StepKind::where: return ex[static_cast<size_t>(s.args[0])] != Exactness::exact ? Exactness::unreliable : in;
    case StepKind::astype: return approx && !is_floating(out) ? Exactness::unreliable : in;
    case StepKind::reduce: {
      auto fn = static_cast<ReduceFn>(s.fn);
      if (approx) {
        bool discrete = fn == r_any || fn == r_all || fn == r_argmax || fn == r_argmin || fn == r_argsort;
        return discrete ? Exactness::unreliable : in;
      }
      // Reassociated float accumulation: sums and everything built on them.
      bool accumulates = fn == r_sum || fn == r_prod || fn == r_mean || fn == r_var || fn == r_logsumexp ||
                         fn == r_softmax || fn == r_cumsum;
      Dtype src = dt[static_cast<size_t>(s.args[0])];
      if (accumulates && (is_floating(out) || is_floating(src))) return Exactness::approximate;
      return in;
    }
    case StepKind::nn: {
      auto ex_of = [&](size_t i) { return ex[static_cast<size_t>(s.args[i])]; };
      switch (static_cast<NnFn>(s.fn)) {
        case nn_rms_norm:
        case nn_layer_norm:
          // Float32 sums over the row, whose order the row kernels and the fused product may
          // change; and a division by the row's statistic, which amplifies differences in x up
          // to rsqrt(eps) times on rows near zero (or, for layer_norm, near constant).
          return approx ? Exactness::unreliable : Exactness::approximate;
        case nn_rope:
          // Elementwise per feature (one kernel, compiled or not): exact on exact operands,
          // linear in x; but positions and frequencies go through cos and sin of their product.
          for (size_t i = 1; i < s.args.size(); ++i) {
            if (ex_of(i) != Exactness::exact) return Exactness::unreliable;
          }
          return in;
        case nn_sdpa:
          // Float32 dot products and an online softmax, accumulated in an order the kernel picks
          // by layout; the softmax of scores as large as D * 70000^2 turns any difference in its
          // operands into arbitrary weights.
          return approx ? Exactness::unreliable : Exactness::approximate;
        case nn_quantize:
        case nn_dequantize:
          // Codes are rounded: exact from exact weights, a different code from nearly equal ones.
          return approx ? Exactness::unreliable : in;
        case nn_qmm:
          if (ex_of(1) != Exactness::exact) return Exactness::unreliable;  // the weights are rounded to codes
          if (approx && ((s.opt & kOptNorm) || s.activations != QmmActivations::exact)) {
            return Exactness::unreliable;  // a norm (above), or x rounded to integer codes per block
          }
          // Float32 sums of products (int8/int16: of exact integer dots times float scales) in
          // an order that the path (GEMV/GEMM, fused norm and residual, threads) decides.
          return Exactness::approximate;
        case nn_slice_update:
        case nn_slice_update_at:
        case nn_count: return in;  // values moved unchanged (the start is an exact integer or unreliable)
      }
      return in;
    }
    case StepKind::selection:
      // Values are moved: topk's largest-first values are order statistics (1-Lipschitz);
      // indices, and partition's arrangement off kth, can change with any difference.
      if (approx) return s.fn == sel_topk && s.which == 0 ? in : Exactness::unreliable;
      return in;
    case StepKind::random:
      // Bits from the key; uniform and normal are elementwise math on them (fused as eager);
      // bernoulli compares p with a uniform draw and categorical takes an argmax.
      if (approx && (s.fn == rnd_bernoulli || s.fn == rnd_categorical)) return Exactness::unreliable;
      return in;
    default: return in;  // layout ops move values unchanged
  }
}

/* Whether another device may differ from this one on s's result beyond exactness (see
   Program::same_device_only). */
bool same_device_only(const Step& s, const std::vector<bool>& sd) {
  for (int a : s.args) {
    if (sd[static_cast<size_t>(a)]) return true;
  }
  switch (s.kind) {
    case StepKind::selection: return s.fn != sel_topk;
    case StepKind::random: return s.fn == rnd_categorical;
    case StepKind::nn: return s.fn == nn_quantize || s.fn == nn_dequantize || s.fn == nn_qmm;
    default: return false;
  }
}

// ---- the generator ------------------------------------------------------------------

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& o) : rng_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull), opts_(o) {
    p_.seed = seed;
  }

  Program run() {
    make_inputs();
    int target = uniform(opts_.min_steps, opts_.max_steps);
    int tries = 0;
    while (static_cast<int>(p_.steps.size()) < target && tries < target * 30) {
      ++tries;
      Step s;
      if (!propose(s)) continue;
      try_add(s);
    }
    choose_outputs();
    return std::move(p_);
  }

 private:
  std::mt19937_64 rng_;
  GenOptions opts_;
  Program p_;
  bool big_ = false;  // a program over large arrays (parallel chunks, many tiles)
  bool llm_ = false;  // a program with inputs shaped for the language-model ops
  std::vector<Array> probes_;  // lazy stand-ins, never evaluated

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }

  int64_t random_dim() {
    if (big_) {
      // Rows longer than a kernel chunk or tile, and odd sizes that leave remainders.
      static const std::vector<int64_t> dims = {1, 3, 17, 64, 130, 1031, 2049};
      return pick(dims);
    }
    static const std::vector<int64_t> dims = {0, 1, 1, 2, 2, 3, 3, 5, 5, 8, 8};
    // zeros make most programs trivial: keep them rare
    int64_t d = pick(dims);
    if (d == 0 && !chance(0.3)) d = 2;
    return d;
  }

  Dtype random_dtype() {
    static const std::vector<Dtype> d = {float32, float32, float32, float16, bfloat16, float64,
                                         float64, int32,   int32,   int64,   uint8,    bool_};
    return pick(d);
  }

  void make_inputs() {
    big_ = chance(opts_.big_fraction);
    if (big_) opts_.max_elements = opts_.max_big_elements;
    int n = uniform(1, opts_.max_inputs);
    int rank = uniform(big_ ? 1 : 0, 3);
    Shape base;
    for (int i = 0; i < rank; ++i) base.push_back(random_dim());
    while (numel(base) > opts_.max_elements / 2) base[static_cast<size_t>(uniform(0, rank - 1))] = 1 + uniform(0, 2);
    for (int i = 0; i < n; ++i) {
      InputSpec in;
      if (chance(0.2) && !big_) {
        int r = uniform(0, 3);
        for (int k = 0; k < r; ++k) in.shape.push_back(random_dim());
      } else {
        // A suffix of the base shape with some dims set to 1: broadcasts against it.
        int r = uniform(0, rank);
        if (i == 0 || chance(0.5)) r = rank;
        in.shape.assign(base.end() - r, base.end());
        for (auto& d : in.shape) {
          if (chance(i == 0 ? 0.05 : 0.25)) d = 1;
        }
      }
      in.dtype = random_dtype();
      if (!in.shape.empty() && chance(0.25)) in.layout = chance(0.5) ? InputLayout::transposed : InputLayout::strided;
      add_input(in);
    }
    llm_ = !big_ && chance(opts_.llm_fraction);
    if (llm_) make_llm_inputs();
  }

  void add_input(const InputSpec& in) {
    p_.inputs.push_back(in);
    probes_.push_back(zeros(in.shape, in.dtype));
    p_.shapes.push_back(in.shape);
    p_.dtypes.push_back(in.dtype);
    p_.exactness.push_back(Exactness::exact);
    p_.same_device_only.push_back(false);
  }
  void add_input(Shape shape, Dtype dtype, bool fixed = false) {
    InputSpec in;
    in.shape = std::move(shape);
    in.dtype = dtype;
    in.fixed = fixed;
    // Views with other strides where the ops allow them (keys and start vectors too).
    if (!in.shape.empty() && chance(0.2)) in.layout = chance(0.5) ? InputLayout::transposed : InputLayout::strided;
    add_input(in);
  }

  /* Inputs the language-model ops accept, beside the ordinary ones: attention's q, k and v
     (grouped-query heads, key length apart from query length, masks, per-row key lengths and
     positions), weights with a groups' axis of 32 to 256 and activations for them, norm weights,
     random keys, slice_update start vectors. */
  void make_llm_inputs() {
    static const std::vector<Dtype> act = {float32, float32, float16, bfloat16};
    if (chance(0.6)) {
      Dtype d = pick(act);
      static const std::vector<int64_t> reps = {1, 1, 2, 3}, lqs = {1, 1, 2, 3, 4}, lks = {1, 3, 4, 6}, ds = {2, 4, 8};
      int64_t b = uniform(1, 2), hkv = uniform(1, 2), rep = pick(reps), lq = pick(lqs);
      int64_t lk = chance(0.3) ? lq : pick(lks), hd = pick(ds), dv = chance(0.7) ? hd : 3;
      add_input({b, hkv * rep, lq, hd}, d);
      add_input({b, hkv, lk, hd}, d);
      add_input({b, hkv, lk, dv}, d);
      if (chance(0.4)) {
        if (chance(0.5))
          add_input({lq, lk}, bool_);
        else
          add_input({b, 1, lq, lk}, chance(0.5) ? d : float32);
      }
      if (chance(0.5)) add_input({b}, int32);  // key lengths, or positions per batch row
      if (chance(0.3)) add_input({}, int32);  // one position for all rows
      if (chance(0.3)) add_input({hd / 2}, float32);  // rope frequencies
      if (chance(0.3)) add_input({hd}, d);  // a norm weight for the rows of q
    }
    if (chance(0.5)) {
      static const std::vector<int64_t> ks = {32, 64, 64, 128, 256},
                                        ns = {1, 16, 24};  // N: sizes no other input has (fixed)
      int64_t kd = pick(ks), n = pick(ns);
      Dtype d = pick(act);
      add_input({n, kd}, d, true);  // [out, in]: transposed products, and quantize along K
      int64_t m = std::max<int64_t>(1, std::min<int64_t>(uniform(1, 5), 512 / kd));
      if (chance(0.5))
        add_input({m, kd}, chance(0.7) ? d : pick(act));
      else
        add_input({1, m, kd}, chance(0.7) ? d : pick(act));
      if (chance(0.5)) add_input({kd}, d, true);  // an rms_norm weight in front of the product
      if (chance(0.4)) add_input({m, n}, d);  // a residual behind it
    }
    if (chance(0.6)) {
      add_input({2}, uint32, true);
      if (chance(0.3)) add_input({2}, uint32, true);
    }
    if (chance(0.6)) add_input({chance(0.6) ? 1 : 2}, int32, true);
  }

  int value_count() const { return static_cast<int>(probes_.size()); }

  // Recent values more often, so programs grow deep as well as wide.
  int pick_value() {
    int n = value_count();
    if (chance(0.45)) return n - 1;
    if (chance(0.3)) return uniform(std::max(0, n - 4), n - 1);
    return uniform(0, n - 1);
  }

  const Shape& shape_of(int v) const { return p_.shapes[static_cast<size_t>(v)]; }
  Dtype dtype_of(int v) const { return p_.dtypes[static_cast<size_t>(v)]; }

  static bool broadcastable(const Shape& a, const Shape& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 1; i <= n; ++i) {
      int64_t x = a[a.size() - i], y = b[b.size() - i];
      if (x != y && x != 1 && y != 1) return false;
    }
    return true;
  }

  // A value whose shape broadcasts with all of `with` (may be one of them).
  int pick_compatible(const std::vector<int>& with) {
    std::vector<int> ok;
    for (int v = 0; v < value_count(); ++v) {
      bool good = true;
      for (int w : with) good = good && broadcastable(shape_of(v), shape_of(w));
      if (good) ok.push_back(v);
    }
    // Prefer a different value from the first operand when one exists.
    if (ok.size() > 1 && chance(0.8)) {
      std::vector<int> others;
      for (int v : ok) {
        if (v != with[0]) others.push_back(v);
      }
      if (!others.empty()) return pick(others);
    }
    return ok.empty() ? with[0] : pick(ok);
  }

  std::vector<int> random_axes(int rank, bool allow_empty) {
    std::vector<int> axes;
    if (rank == 0 || (allow_empty && chance(0.25))) return axes;
    for (int i = 0; i < rank; ++i) {
      if (chance(0.45)) axes.push_back(chance(0.3) ? i - rank : i);
    }
    if (axes.empty()) {
      int i = uniform(0, rank - 1);
      axes.push_back(chance(0.3) ? i - rank : i);
    }
    std::shuffle(axes.begin(), axes.end(), rng_);
    return axes;
  }

  Shape random_reshape(const Shape& in) {
    int64_t n = numel(in);
    int rank = uniform(n == 1 ? 0 : 1, 3);
    Shape out;
    int64_t left = n;
    for (int i = 0; i + 1 < rank; ++i) {
      std::vector<int64_t> divs;
      if (left == 0) {
        divs = {0, 1, 2, 3};
      } else {
        for (int64_t d = 1; d <= left; ++d) {
          if (left % d == 0) divs.push_back(d);
        }
      }
      int64_t d = pick(divs);
      out.push_back(d);
      if (d != 0) left /= d;
    }
    if (rank > 0) {
      // The last dim takes what is left; with a zero placed already anything goes.
      bool has_zero = std::find(out.begin(), out.end(), 0) != out.end();
      out.push_back(has_zero ? uniform(0, 3) : left);
      std::shuffle(out.begin(), out.end(), rng_);
      if (n > 0 && chance(0.4)) out[static_cast<size_t>(uniform(0, rank - 1))] = -1;
    }
    return out;
  }

  std::optional<int64_t> slice_bound(int64_t n) {
    if (chance(0.35)) return std::nullopt;
    return static_cast<int64_t>(uniform(-static_cast<int>(n) - 2, static_cast<int>(n) + 2));
  }

  /* Fills a candidate step; false when nothing suitable exists. */
  bool propose(Step& s) {
    // Not static: the weights of the language-model ops depend on the program (llm_).
    const std::vector<std::pair<StepKind, int>> weights = {
        {StepKind::unary, 18},
        {StepKind::binary, 20},
        {StepKind::scalar, 12},
        {StepKind::where, 6},
        {StepKind::astype, 6},
        {StepKind::reduce, 14},
        {StepKind::reshape, 6},
        {StepKind::transpose, 5},
        {StepKind::slice, 7},
        {StepKind::expand_dims, 3},
        {StepKind::squeeze, 2},
        {StepKind::concatenate, 4},
        {StepKind::broadcast_to, 2},
        {StepKind::copy, 1},
        {StepKind::nn, llm_ ? 16 : 3},
        {StepKind::selection, 3},
        {StepKind::random, llm_ ? 10 : 1},
    };
    int total = 0;
    for (auto& w : weights) total += w.second;
    int r = uniform(0, total - 1);
    for (auto& w : weights) {
      if (r < w.second) {
        s.kind = w.first;
        break;
      }
      r -= w.second;
    }
    int a = pick_value();
    s.args = {a};
    const Shape& sh = shape_of(a);
    int rank = static_cast<int>(sh.size());
    switch (s.kind) {
      case StepKind::unary: s.fn = uniform(0, static_cast<int>(unary_table().size()) - 1); break;
      case StepKind::binary:
        s.fn = uniform(0, static_cast<int>(binary_table().size()) - 1);
        s.args.push_back(pick_compatible({a}));
        if (chance(0.3)) std::swap(s.args[0], s.args[1]);
        break;
      case StepKind::scalar: {
        s.fn = uniform(0, kNumScalarOps - 1);
        s.scalar_left = s.fn <= kLastOperator && chance(0.3);
        int t = uniform(0, 9);
        s.scalar_type = t < 4   ? ScalarType::f64
                        : t < 6 ? ScalarType::f32
                        : t < 9 ? ScalarType::i32
                                : ScalarType::boolean;
        static const std::vector<double> floats = {2.0, 0.5, -1.5, 3.0, 0.0, 1.0, -0.25, 10.0};
        static const std::vector<double> ints = {-2, -1, 0, 1, 2, 3, 7};
        if (s.scalar_type == ScalarType::boolean)
          s.scalar = chance(0.5) ? 1 : 0;
        else if (s.scalar_type == ScalarType::i32)
          s.scalar = pick(ints);
        else
          s.scalar = pick(floats);
        if (s.fn == 14 || s.fn == 15) s.scalar = std::fabs(s.scalar);  // mostly in-range shifts
        break;
      }
      case StepKind::where: {
        // Prefer a bool condition, often a fresh comparison result.
        std::vector<int> bools;
        for (int v = 0; v < value_count(); ++v) {
          if (dtype_of(v) == bool_ && broadcastable(shape_of(v), sh)) bools.push_back(v);
        }
        int cond = !bools.empty() && chance(0.8) ? pick(bools) : pick_compatible({a});
        int other = pick_compatible({a, cond});
        s.args = {cond, a, other};
        if (chance(0.5)) std::swap(s.args[1], s.args[2]);
        break;
      }
      case StepKind::astype: s.dtype = random_dtype(); break;
      case StepKind::reduce:
        s.fn = uniform(0, r_count - 1);
        s.keepdims = chance(0.5);
        if (s.fn == r_argmax || s.fn == r_argmin) {
          s.has_axis = rank > 0 && chance(0.7);
          if (s.has_axis) s.axis = uniform(-rank, rank - 1);
        } else if (s.fn == r_cumsum || s.fn == r_sort || s.fn == r_argsort) {
          if (rank == 0) return false;
          s.axis = uniform(-rank, rank - 1);
          s.reverse = s.fn == r_cumsum && chance(0.3);
          s.inclusive = s.fn != r_cumsum || chance(0.7);
        } else {
          s.axes = random_axes(rank, true);
        }
        break;
      case StepKind::reshape: s.shape = random_reshape(sh); break;
      case StepKind::transpose:
        if (rank < 2 && chance(0.7)) return false;
        if (!chance(0.3)) {
          s.axes.resize(static_cast<size_t>(rank));
          std::iota(s.axes.begin(), s.axes.end(), 0);
          std::shuffle(s.axes.begin(), s.axes.end(), rng_);
          for (auto& x : s.axes) {
            if (chance(0.2)) x -= rank;
          }
        }
        break;
      case StepKind::slice: {
        if (rank == 0) return false;
        int nargs = uniform(1, rank);
        static const std::vector<int64_t> steps = {1, 1, 1, 2, 3, -1, -1, -2};
        for (int i = 0; i < nargs; ++i) {
          SliceArg arg;
          int64_t n = sh[static_cast<size_t>(i)];
          if (chance(0.25)) {
            s.slices.push_back(arg);  // whole axis
            continue;
          }
          arg.start = slice_bound(n);
          arg.stop = slice_bound(n);
          arg.step = pick(steps);
          s.slices.push_back(arg);
        }
        break;
      }
      case StepKind::expand_dims:
        if (rank >= 4) return false;
        s.axis = uniform(-rank - 1, rank);
        break;
      case StepKind::squeeze: {
        std::vector<int> ones;
        for (int i = 0; i < rank; ++i) {
          if (sh[static_cast<size_t>(i)] == 1) ones.push_back(i);
        }
        if (ones.empty()) return false;
        if (chance(0.5)) s.axes = {chance(0.5) ? pick(ones) : pick(ones) - rank};
        break;
      }
      case StepKind::concatenate: {
        if (rank == 0) return false;
        s.axis = uniform(-rank, rank - 1);
        int ax = s.axis < 0 ? s.axis + rank : s.axis;
        std::vector<int> fits;
        for (int v = 0; v < value_count(); ++v) {
          const Shape& o = shape_of(v);
          if (o.size() != sh.size()) continue;
          bool good = true;
          for (int i = 0; i < rank; ++i)
            good = good && (i == ax || o[static_cast<size_t>(i)] == sh[static_cast<size_t>(i)]);
          if (good) fits.push_back(v);
        }
        int parts = uniform(2, 3);
        for (int i = 1; i < parts; ++i) s.args.push_back(pick(fits));
        break;
      }
      case StepKind::broadcast_to: {
        if (rank >= 4) return false;
        Shape to;
        if (chance(0.5)) to.push_back(uniform(1, 3));
        static const std::vector<int64_t> grow = {0, 2, 3, 3, 4, 4};
        for (auto d : sh) to.push_back(d == 1 && chance(0.6) ? pick(grow) : d);
        s.shape = to;
        break;
      }
      case StepKind::copy: break;
      case StepKind::nn: return propose_nn(s, a);
      case StepKind::selection: {
        if (rank == 0) return false;
        s.fn = uniform(0, sel_count - 1);
        s.axis = chance(0.6) ? -1 : uniform(-rank, rank - 1);
        int64_t n = sh[static_cast<size_t>(s.axis < 0 ? s.axis + rank : s.axis)];
        if (s.fn == sel_topk) {
          s.k = uniform(0, static_cast<int>(std::min<int64_t>(n, 9)));
          s.which = uniform(0, 1);
        } else {
          if (n == 0) return false;
          s.k = uniform(-static_cast<int>(n), static_cast<int>(n) - 1);
        }
        break;
      }
      case StepKind::random: return propose_random(s, a);
    }
    return true;
  }

  // Values satisfying pred.
  template <class F>
  std::vector<int> values_where(F pred) {
    std::vector<int> out;
    for (int v = 0; v < value_count(); ++v) {
      if (pred(v)) out.push_back(v);
    }
    return out;
  }
  static bool is_activation(Dtype d) { return d == float32 || d == float16 || d == bfloat16; }
  // A value satisfying pred, preferring recent ones as pick_value does; -1 when none.
  template <class F>
  int pick_where(F pred) {
    auto c = values_where(pred);
    if (c.empty()) return -1;
    if (chance(0.4)) return c.back();
    return pick(c);
  }
  int64_t last_dim(int v) const { return shape_of(v).empty() ? -1 : shape_of(v).back(); }
  bool is_vector(int v, int64_t n) const { return shape_of(v) == Shape{n}; }

  bool propose_nn(Step& s, int a) {
    // Weighted toward the ops with the most paths (attention, quantized products, rope).
    static const int weights[nn_count] = {2, 1, 2, 3, 2, 2, 4, 1, 2};
    int r = uniform(0, std::accumulate(std::begin(weights), std::end(weights), 0) - 1);
    for (s.fn = 0; r >= weights[s.fn]; ++s.fn) r -= weights[s.fn];
    static const std::vector<float> epss = {1e-5f, 1e-6f, 1e-2f};
    switch (static_cast<NnFn>(s.fn)) {
      case nn_rms_norm:
      case nn_layer_norm: {
        // Any floating value of rank >= 1, sometimes a weight (and bias) vector as long as its rows.
        if (shape_of(a).empty())
          a = pick_where([&](int v) { return !shape_of(v).empty() && is_floating(dtype_of(v)); });
        if (a < 0) return false;
        s.args = {a};
        s.eps = pick(epss);
        for (unsigned bit : {kOptWeight, kOptBias}) {
          if (bit == kOptBias && s.fn == nn_rms_norm) break;
          int w = chance(0.6) ? pick_where([&](int v) { return is_vector(v, last_dim(a)); }) : -1;
          if (w >= 0) {
            s.opt |= bit;
            s.args.push_back(w);
          }
        }
        return true;
      }
      case nn_rope: {
        int x =
            pick_where([&](int v) { return shape_of(v).size() >= 2 && last_dim(v) >= 2 && is_floating(dtype_of(v)); });
        if (x < 0) return false;
        s.args = {x};
        const Shape& sh = shape_of(x);
        s.k = 2 * uniform(1, static_cast<int>(sh.back() / 2));
        s.traditional = chance(0.5);
        static const std::vector<float> scales = {1.0f, 1.0f, 0.5f, 0.25f};
        s.fscale = pick(scales);
        static const std::vector<int64_t> offsets = {0, 0, 1, 3, 17, -2, 4096};
        s.offset = pick(offsets);
        if (chance(0.5)) {  // an int32 offset per batch row, or one for all
          int o = pick_where(
              [&](int v) { return dtype_of(v) == int32 && (shape_of(v).empty() || shape_of(v) == Shape{sh[0]}); });
          if (o >= 0) {
            s.opt |= kOptOffsetArray;
            s.args.push_back(o);
          }
        }
        int f =
            chance(0.35) ? pick_where([&](int v) { return is_vector(v, s.k / 2) && is_floating(dtype_of(v)); }) : -1;
        if (f >= 0) {
          s.opt |= kOptFreqs;
          s.args.push_back(f);
        } else {
          static const std::vector<float> bases = {10000.0f, 500000.0f, 10.0f};
          s.base = pick(bases);
        }
        return true;
      }
      case nn_sdpa: {
        auto rank4 = [&](int v) { return shape_of(v).size() == 4 && is_activation(dtype_of(v)); };
        int q = pick_where(rank4);
        if (q < 0) return false;
        const Shape& qs = shape_of(q);
        int k = pick_where([&](int v) {
          const Shape& ks = shape_of(v);
          return rank4(v) && dtype_of(v) == dtype_of(q) && ks[0] == qs[0] && ks[3] == qs[3] && ks[1] > 0 &&
                 qs[1] % ks[1] == 0;
        });
        if (k < 0) return false;
        const Shape& ks = shape_of(k);
        int vv = pick_where([&](int v) {
          const Shape& vs = shape_of(v);
          return rank4(v) && dtype_of(v) == dtype_of(q) && vs[0] == qs[0] && vs[1] == ks[1] && vs[2] == ks[2];
        });
        if (vv < 0) return false;
        s.args = {q, k, vv};
        s.causal = chance(0.4);
        s.fscale = chance(0.6) ? 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(qs[3], 1))) : 1.0f;
        Shape scores{qs[0], qs[1], qs[2], ks[2]};
        if (chance(0.4)) {
          int m = pick_where([&](int v) {
            Dtype d = dtype_of(v);
            return (d == bool_ || is_floating(d)) && shape_of(v).size() <= 4 && broadcastable(shape_of(v), scores) &&
                   v != q && v != k && v != vv;
          });
          if (m >= 0) {
            s.opt |= kOptMask;
            s.args.push_back(m);
          }
        }
        if (chance(0.35)) {
          int l = pick_where([&](int v) { return dtype_of(v) == int32 && is_vector(v, qs[0]); });
          if (l >= 0) {
            s.opt |= kOptKeyLengths;
            s.args.push_back(l);
          }
        }
        return true;
      }
      case nn_quantize:
      case nn_dequantize:
      case nn_qmm: {
        static const std::vector<int> groups = {32, 64, 128}, bitss = {2, 3, 4, 5, 6, 8};
        s.group_size = pick(groups);
        s.bits = pick(bitss);
        int need = s.fn == nn_qmm ? 2 : 1;
        int w = pick_where([&](int v) {
          const Shape& ws = shape_of(v);
          return is_activation(dtype_of(v)) && static_cast<int>(ws.size()) >= need &&
                 (s.fn == nn_qmm ? ws.size() == 2 : true) && ws.back() > 0 && ws.back() % s.group_size == 0;
        });
        if (w < 0) return false;
        if (s.fn != nn_qmm) {
          s.args = {w};
          s.which = uniform(0, 2);
          return true;
        }
        const Shape& ws = shape_of(w);
        s.transpose = chance(0.75);
        int64_t kdim = s.transpose ? ws[1] : ws[0];
        int x = pick_where([&](int v) { return is_activation(dtype_of(v)) && last_dim(v) == kdim && v != w; });
        if (x < 0) return false;
        s.args = {x, w};
        if (s.transpose) {
          static const std::vector<QmmActivations> acts = {QmmActivations::exact, QmmActivations::exact,
                                                           QmmActivations::int8, QmmActivations::int16};
          s.activations = pick(acts);
        }
        if (s.transpose && chance(0.4)) {
          int nw = pick_where([&](int v) { return is_vector(v, kdim) && is_floating(dtype_of(v)) && v != x; });
          if (nw >= 0) {
            s.opt |= kOptNorm;
            s.args.push_back(nw);
            s.eps = pick(epss);
          }
        }
        if (chance(0.4)) {
          Shape out = shape_of(x);
          out.back() = s.transpose ? ws[0] : ws[1];
          int r = pick_where([&](int v) { return shape_of(v) == out && dtype_of(v) == dtype_of(x); });
          if (r >= 0) {
            s.opt |= kOptResidual;
            s.args.push_back(r);
          }
        }
        return true;
      }
      case nn_slice_update: {
        const Shape& sh = shape_of(a);
        if (sh.empty()) return false;
        static const std::vector<int64_t> steps = {1, 1, 1, 2, 3, -1, -2};
        std::vector<SliceArg> args;
        for (auto n : sh) {
          int64_t lo = uniform(-static_cast<int>(n) - 1, static_cast<int>(n));
          int64_t hi = uniform(-static_cast<int>(n) - 1, static_cast<int>(n) + 1);
          args.push_back(SliceArg{lo, hi, pick(steps)});
        }
        Shape region;
        try {
          region = slice(probes_[static_cast<size_t>(a)], args).shape();
        } catch (const Error&) {
          return false;
        }
        int u = pick_where(
            [&](int v) { return shape_of(v).size() <= region.size() && broadcastable(shape_of(v), region) && v != a; });
        if (u < 0) return false;
        s.args = {a, u};
        s.slices = args;
        return true;
      }
      case nn_slice_update_at: {
        const Shape& sh = shape_of(a);
        if (sh.empty()) return false;
        int u = pick_where([&](int v) {
          const Shape& us = shape_of(v);
          if (us.size() != sh.size() || v == a) return false;
          for (size_t i = 0; i < us.size(); ++i) {
            if (us[i] > sh[i]) return false;
          }
          return true;
        });
        if (u < 0) return false;
        int naxes = sh.size() >= 2 && chance(0.4) ? 2 : 1;
        int st = pick_where([&](int v) { return dtype_of(v) == int32 && is_vector(v, naxes); });
        if (st < 0) return false;
        s.args = {a, u, st};
        std::vector<int> all(sh.size());
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng_);
        const Shape& us = shape_of(u);
        for (int i = 0; i < naxes; ++i) {
          int ax = all[static_cast<size_t>(i)];
          s.shape.push_back(sh[static_cast<size_t>(ax)] - us[static_cast<size_t>(ax)]);
          s.axes.push_back(chance(0.3) ? ax - static_cast<int>(sh.size()) : ax);
        }
        return true;
      }
      case nn_count: break;
    }
    return false;
  }

  bool propose_random(Step& s, int a) {
    int key = pick_where([&](int v) { return dtype_of(v) == uint32 && is_vector(v, 2); });
    if (key < 0) return false;
    s.fn = uniform(0, rnd_count - 1);
    s.args = {key};
    static const std::vector<Dtype> dtypes = {float32, float32, float16, bfloat16, float64};
    switch (static_cast<RandFn>(s.fn)) {
      case rnd_bits:
      case rnd_uniform:
      case rnd_normal:
        // The shape of a value in the program, so the draw meets it in elementwise steps.
        s.shape = shape_of(a);
        s.dtype = pick(dtypes);
        if (s.fn == rnd_uniform && chance(0.5)) {
          s.param0 = -2;
          s.param1 = 3;
        } else if (s.fn == rnd_normal && chance(0.5)) {
          s.param0 = 1;
          s.param1 = 0.5;
        }
        return true;
      case rnd_bernoulli:
      case rnd_categorical:
        if (!is_floating(dtype_of(a)) || (s.fn == rnd_categorical && shape_of(a).empty())) {
          a = pick_where(
              [&](int v) { return is_floating(dtype_of(v)) && (s.fn == rnd_bernoulli || !shape_of(v).empty()); });
          if (a < 0) return false;
        }
        s.args.push_back(a);
        if (s.fn == rnd_categorical) {
          int rank = static_cast<int>(shape_of(a).size());
          s.axis = chance(0.6) ? -1 : uniform(-rank, rank - 1);
        }
        return true;
      case rnd_split:
      case rnd_subkey:
        s.k = uniform(1, 4);
        s.which = uniform(0, s.k - 1);
        return true;
      case rnd_count: break;
    }
    return false;
  }

  void try_add(const Step& s) {
    Array out;
    try {
      out = apply_step(s, probes_);
    } catch (const Error&) {
      return;  // the front end refuses this choice: draw another
    }
    // nn steps read inputs of up to 8 * 256 elements (quantized weights): allow their size.
    if (out.size() > opts_.max_elements * (s.kind == StepKind::nn ? 8 : 1) || out.ndim() > 4) return;
    p_.steps.push_back(s);
    p_.exactness.push_back(exactness_of(s, p_.exactness, p_.dtypes, out.dtype()));
    p_.same_device_only.push_back(same_device_only(s, p_.same_device_only));
    p_.shapes.push_back(out.shape());
    p_.dtypes.push_back(out.dtype());
    if (s.kind == StepKind::reduce) p_.has_reduction = true;
    probes_.push_back(out);
  }

  void choose_outputs() {
    int n = value_count();
    p_.outputs.push_back(n - 1);
    int extra = uniform(0, 2);
    // Half the time one of them is a language-model, selection or random step (their operands
    // are narrow, so they are often off the path to the last value, and unused values are
    // neither run eagerly nor compiled).
    std::vector<int> special;
    int nin = static_cast<int>(p_.inputs.size());
    for (int v = nin; v < n - 1; ++v) {
      StepKind k = p_.steps[static_cast<size_t>(v - nin)].kind;
      if (k == StepKind::nn || k == StepKind::selection || k == StepKind::random) special.push_back(v);
    }
    if (extra > 0 && !special.empty() && chance(0.5)) {
      p_.outputs.push_back(pick(special));
      --extra;
    }
    for (int i = 0; i < extra; ++i) p_.outputs.push_back(uniform(0, n - 1));
    std::shuffle(p_.outputs.begin(), p_.outputs.end(), rng_);
  }
};

// Values representable in the input's dtype, with the odd special one.
std::vector<double> input_values(const InputSpec& in, std::mt19937_64& rng) {
  int64_t n = numel(in.shape);
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& x : v) {
    double r = u(rng);
    if (in.dtype == bool_) {
      x = r < 0.5 ? 1 : 0;
    } else if (is_integral(in.dtype)) {
      x = std::floor(r * 14) - 5;  // [-5, 8]
      if (is_unsigned(in.dtype)) x = std::floor(r * 11);
      if (in.dtype == int64 && u(rng) < 0.05) x = (u(rng) < 0.5 ? -1 : 1) * 1099511627776.0;
    } else if (u(rng) < 0.07) {
      static const double specials[] = {0.0,
                                        -0.0,
                                        1.0,
                                        -1.0,
                                        0.5,
                                        std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(),
                                        1e-6,
                                        70000.0,
                                        -3.0};
      x = specials[static_cast<size_t>(u(rng) * 11) % 11];
    } else {
      x = r * 8 - 4;
    }
  }
  return v;
}

}  // namespace

const std::vector<const char*>& unary_names() {
  static const std::vector<const char*> n = [] {
    std::vector<const char*> v;
    for (auto& e : unary_table()) v.push_back(e.name);
    return v;
  }();
  return n;
}
const std::vector<const char*>& binary_names() {
  static const std::vector<const char*> n = [] {
    std::vector<const char*> v;
    for (auto& e : binary_table()) v.push_back(e.name);
    return v;
  }();
  return n;
}
const std::vector<const char*>& scalar_names() {
  static const std::vector<const char*> n(std::begin(kScalarNames), std::end(kScalarNames));
  return n;
}
const std::vector<const char*>& reduce_names() {
  static const std::vector<const char*> n(std::begin(kReduceNames), std::end(kReduceNames));
  return n;
}

const std::vector<const char*>& nn_names() {
  static const std::vector<const char*> n(std::begin(kNnNames), std::end(kNnNames));
  return n;
}
const std::vector<const char*>& selection_names() {
  static const std::vector<const char*> n(std::begin(kSelNames), std::end(kSelNames));
  return n;
}
const std::vector<const char*>& random_names() {
  static const std::vector<const char*> n(std::begin(kRandNames), std::end(kRandNames));
  return n;
}

Program generate(uint64_t seed, const GenOptions& opts) { return Generator(seed, opts).run(); }

std::vector<Array> Program::run_all(const std::vector<Array>& in) const {
  if (in.size() != inputs.size()) fail("fuzz", "program takes ", inputs.size(), " inputs, got ", in.size());
  std::vector<Array> v(in);
  v.reserve(in.size() + steps.size());
  for (auto& s : steps) v.push_back(apply_step(s, v));
  return v;
}

std::vector<Array> Program::run(const std::vector<Array>& in) const {
  std::vector<Array> v = run_all(in);
  std::vector<Array> out;
  for (int o : outputs) out.push_back(v[static_cast<size_t>(o)]);
  return out;
}

std::vector<Shape> Program::variant_shapes() const {
  std::mt19937_64 rng(seed ^ 0x8CB92BA72F3D8DD7ull);
  std::vector<int64_t> dims, pinned;
  for (auto& in : inputs) {
    if (in.fixed) pinned.insert(pinned.end(), in.shape.begin(), in.shape.end());
  }
  auto is_pinned = [&](int64_t d) { return std::find(pinned.begin(), pinned.end(), d) != pinned.end(); };
  for (auto& in : inputs) {
    if (in.fixed) continue;
    for (auto d : in.shape) {
      if (d > 1 && !is_pinned(d)) dims.push_back(d);
    }
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  std::vector<int64_t> grown(dims.size());
  int64_t prev = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    grown[i] = std::max(prev + 1, dims[i] + static_cast<int64_t>(rng() % 3) + 1);
    prev = grown[i];
  }
  std::vector<Shape> out;
  for (auto& in : inputs) {
    Shape s = in.shape;
    if (in.fixed) {
      out.push_back(s);
      continue;
    }
    for (auto& d : s) {
      if (d > 1 && !is_pinned(d))
        d = grown[static_cast<size_t>(std::lower_bound(dims.begin(), dims.end(), d) - dims.begin())];
    }
    out.push_back(s);
  }
  return out;
}

std::vector<Array> Program::make_inputs(const std::vector<Shape>* shapes, uint64_t stream) const {
  std::mt19937_64 rng(seed ^ 0xD1B54A32D192ED03ull ^ (stream * 0x9E3779B97F4A7C15ull));
  std::vector<Array> out;
  for (size_t k = 0; k < inputs.size(); ++k) {
    InputSpec in = inputs[k];
    if (shapes) in.shape = (*shapes)[k];
    std::vector<double> vals = input_values(in, rng);
    Array a;
    switch (in.layout) {
      case InputLayout::contiguous: a = astype(array(vals, in.shape), in.dtype); break;
      case InputLayout::transposed: {
        // Materialize the transpose, then view it transposed back: same values, reversed strides.
        Array t = copy(transpose(astype(array(vals, in.shape), in.dtype)));
        t.eval();
        a = transpose(t);
        break;
      }
      case InputLayout::strided: {
        // Every other element along the last axis of a twice-as-wide array.
        Shape wide = in.shape;
        wide.back() *= 2;
        std::vector<double> big(vals.size() * 2, 0.0);
        for (size_t i = 0; i < vals.size(); ++i) big[2 * i] = vals[i];
        Array w = astype(array(big, wide), in.dtype);
        w.eval();
        std::vector<SliceArg> args(in.shape.size());
        args.back().step = 2;
        a = slice(w, args);
        break;
      }
    }
    a.eval();
    out.push_back(a);
  }
  return out;
}

namespace {

void nn_text(std::ostream& os, const Step& s) {
  auto v = [&](size_t i) {
    std::string t = "%";  // appended, not "%" + ...: GCC 12 warns falsely (-Wrestrict) on that
    return t += std::to_string(s.args[i]);
  };
  // The optional operands, named, after `required` ones.
  auto opts = [&](size_t required, std::initializer_list<std::pair<unsigned, const char*>> names) {
    size_t i = required;
    for (auto& [bit, name] : names) {
      if (s.opt & bit) os << ", " << name << "=" << v(i++);
    }
  };
  auto quant = [&] { os << "g" << s.group_size << ", b" << s.bits; };
  switch (static_cast<NnFn>(s.fn)) {
    case nn_rms_norm:
    case nn_layer_norm:
      os << kNnNames[s.fn] << "(" << v(0);
      opts(1, {{kOptWeight, "weight"}, {kOptBias, "bias"}});
      os << ", eps=" << s.eps << ")";
      break;
    case nn_rope:
      os << "rope(" << v(0) << ", dims=" << s.k << (s.traditional ? ", traditional" : "") << ", scale=" << s.fscale;
      if (s.base) os << ", base=" << *s.base;
      if (!(s.opt & kOptOffsetArray)) os << ", offset=" << s.offset;
      opts(1, {{kOptOffsetArray, "offset"}, {kOptFreqs, "freqs"}});
      os << ")";
      break;
    case nn_sdpa:
      os << "sdpa(" << v(0) << ", " << v(1) << ", " << v(2) << ", scale=" << s.fscale << (s.causal ? ", causal" : "");
      opts(3, {{kOptMask, "mask"}, {kOptKeyLengths, "key_lengths"}});
      os << ")";
      break;
    case nn_quantize:
      os << "quantize(" << v(0) << ", ";
      quant();
      os << ")[" << s.which << "]";
      break;
    case nn_dequantize:
      os << "dequantize(quantize(" << v(0) << ", ";
      quant();
      os << "))";
      break;
    case nn_qmm:
      os << "qmm(";
      if (s.opt & kOptNorm)
        os << "rms_norm(" << v(0) << ", " << v(2) << ", eps=" << s.eps << ")";
      else
        os << v(0);
      os << ", quantize(" << v(1) << "), ";
      quant();
      os << (s.transpose ? ", T" : "") << ", " << kQmmActivationNames[static_cast<int>(s.activations)] << ")";
      if (s.opt & kOptResidual) os << " + " << v(s.opt & kOptNorm ? 3 : 2);
      break;
    case nn_slice_update:
      os << "slice_update(" << v(0) << ", " << v(1) << ", [";
      for (size_t i = 0; i < s.slices.size(); ++i) {
        os << (i ? ", " : "") << *s.slices[i].start << ":" << *s.slices[i].stop << ":" << s.slices[i].step;
      }
      os << "])";
      break;
    case nn_slice_update_at:
      os << "slice_update(" << v(0) << ", " << v(1) << ", clip(" << v(2) << ", 0, " << shape_text(s.shape)
         << "), axes=" << list_text(s.axes) << ")";
      break;
    case nn_count: break;
  }
}

}  // namespace

std::string Program::step_text(const Step& s) const {
  std::ostringstream os;
  auto v = [&](size_t i) { return "%" + std::to_string(s.args[i]); };
  switch (s.kind) {
    case StepKind::unary: os << unary_table()[static_cast<size_t>(s.fn)].name << "(" << v(0) << ")"; break;
    case StepKind::binary:
      os << binary_table()[static_cast<size_t>(s.fn)].name << "(" << v(0) << ", " << v(1) << ")";
      break;
    case StepKind::scalar: {
      std::string c = scalar_text(s.scalar, s.scalar_type);
      if (s.fn > kLastOperator)
        os << kScalarNames[s.fn] << "(" << v(0) << ", " << c << ")";
      else if (s.scalar_left)
        os << c << " " << kScalarNames[s.fn] << " " << v(0);
      else
        os << v(0) << " " << kScalarNames[s.fn] << " " << c;
      break;
    }
    case StepKind::where: os << "where(" << v(0) << ", " << v(1) << ", " << v(2) << ")"; break;
    case StepKind::astype: os << "astype(" << v(0) << ", " << dtype_name(s.dtype) << ")"; break;
    case StepKind::reduce: {
      os << kReduceNames[s.fn] << "(" << v(0);
      if (s.fn == r_argmax || s.fn == r_argmin) {
        if (s.has_axis) os << ", axis=" << s.axis;
        if (s.keepdims) os << ", keepdims";
      } else if (s.fn == r_cumsum) {
        os << ", axis=" << s.axis << (s.reverse ? ", reverse" : "") << (s.inclusive ? "" : ", exclusive");
      } else if (s.fn == r_sort || s.fn == r_argsort) {
        os << ", axis=" << s.axis;
      } else {
        os << ", axes=" << list_text(s.axes);
        if (s.keepdims && s.fn != r_softmax) os << ", keepdims";
      }
      os << ")";
      break;
    }
    case StepKind::reshape: os << "reshape(" << v(0) << ", " << shape_text(s.shape) << ")"; break;
    case StepKind::transpose: os << "transpose(" << v(0) << ", " << list_text(s.axes) << ")"; break;
    case StepKind::slice: {
      os << v(0) << "[";
      for (size_t i = 0; i < s.slices.size(); ++i) {
        auto& a = s.slices[i];
        os << (i ? ", " : "");
        if (a.start) os << *a.start;
        os << ":";
        if (a.stop) os << *a.stop;
        if (a.step != 1) os << ":" << a.step;
      }
      os << "]";
      break;
    }
    case StepKind::expand_dims: os << "expand_dims(" << v(0) << ", " << s.axis << ")"; break;
    case StepKind::squeeze: os << "squeeze(" << v(0) << ", " << list_text(s.axes) << ")"; break;
    case StepKind::concatenate: {
      os << "concatenate([";
      for (size_t i = 0; i < s.args.size(); ++i) os << (i ? ", " : "") << v(i);
      os << "], axis=" << s.axis << ")";
      break;
    }
    case StepKind::broadcast_to: os << "broadcast_to(" << v(0) << ", " << shape_text(s.shape) << ")"; break;
    case StepKind::copy: os << "copy(" << v(0) << ")"; break;
    case StepKind::nn: nn_text(os, s); break;
    case StepKind::selection:
      os << kSelNames[s.fn] << "(" << v(0) << ", " << s.k << ", axis=" << s.axis << ")";
      if (s.fn == sel_topk) os << (s.which == 0 ? ".values" : ".indices");
      break;
    case StepKind::random: {
      os << kRandNames[s.fn] << "(key=" << v(0);
      switch (static_cast<RandFn>(s.fn)) {
        case rnd_bits: os << ", " << shape_text(s.shape); break;
        case rnd_uniform:
        case rnd_normal:
          os << ", " << shape_text(s.shape) << ", " << dtype_name(s.dtype) << ", " << s.param0 << ", " << s.param1;
          break;
        case rnd_bernoulli: os << ", p=" << v(1); break;
        case rnd_categorical: os << ", logits=" << v(1) << ", axis=" << s.axis; break;
        case rnd_split: os << ", num=" << s.k; break;
        case rnd_subkey: os << ", num=" << s.k << ")[" << s.which << "]"; break;
        case rnd_count: break;
      }
      if (s.fn != rnd_subkey) os << ")";
      break;
    }
  }
  return os.str();
}

std::string Program::listing() const {
  static const char* const ex_names[] = {"", "  ~", "  ?"};
  static const char* const layouts[] = {"", " transposed", " strided"};
  std::ostringstream os;
  os << "# seed " << seed << ": " << inputs.size() << " inputs, " << steps.size() << " steps"
     << "  (~ compared with tolerance, ? by shape and dtype only)\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << "%" << i << " = input " << dtype_name(inputs[i].dtype) << shape_text(inputs[i].shape)
       << layouts[static_cast<int>(inputs[i].layout)] << (inputs[i].fixed ? " fixed" : "") << "\n";
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    size_t i = inputs.size() + k;
    std::string line = "%";  // appended apart, as in nn_text
    line += std::to_string(i);
    line += " = ";
    line += step_text(steps[k]);
    os << std::left << std::setw(52) << line << " -> " << dtype_name(dtypes[i]) << shape_text(shapes[i])
       << ex_names[static_cast<int>(exactness[i])] << "\n";
  }
  os << "return";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", %" : " %") << outputs[i];
  os << "\n";
  return os.str();
}

// ---- checking -----------------------------------------------------------------------

namespace {

double tolerance(Dtype d) {
  switch (d) {
    case float16: return 1e-2;
    case bfloat16: return 6e-2;
    case float32: return 2e-4;
    default: return 1e-9;
  }
}

std::string number_text(double x) {
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
}

// Restores the compile mode and the fused-kernel policy however the check ends.
struct ModeGuard {
  CompileMode saved = compile_mode();
  FusedKernels saved_kernels = fused_kernels();
  ~ModeGuard() {
    set_compile_mode(saved);
    set_fused_kernels(saved_kernels);
  }
};

const char* mode_name(CompileMode m) {
  switch (m) {
    case CompileMode::disabled: return "disabled";
    case CompileMode::no_simplify: return "no_simplify";
    case CompileMode::no_fuse: return "no_fuse";
    case CompileMode::enabled: return "enabled";
  }
  return "?";
}

}  // namespace

std::string compare_arrays(const Array& got, const Array& want, Exactness e, bool* inexact) {
  if (inexact) *inexact = false;
  std::ostringstream os;
  if (got.shape() != want.shape()) {
    os << "shape " << shape_text(got.shape()) << ", eager " << shape_text(want.shape());
    return os.str();
  }
  if (got.dtype() != want.dtype()) {
    os << "dtype " << dtype_name(got.dtype()) << ", eager " << dtype_name(want.dtype());
    return os.str();
  }
  if (e == Exactness::unreliable) {
    got.eval();
    return "";
  }
  int bad = 0;
  int64_t first = -1;
  if (!is_floating(want.dtype())) {
    auto g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] == w[i]) continue;
      if (bad++ < 4) os << (bad > 1 ? "; " : "") << "[" << i << "] " << g[i] << ", eager " << w[i];
      if (first < 0) first = static_cast<int64_t>(i);
    }
  } else {
    auto g = got.to_vector<double>(), w = want.to_vector<double>();
    double rtol = tolerance(want.dtype()), scale = 1;
    for (double x : w) {
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    }
    for (size_t i = 0; i < g.size(); ++i) {
      double x = g[i], y = w[i];
      if (std::isnan(x) && std::isnan(y)) continue;
      bool same = x == y && std::signbit(x) == std::signbit(y);
      if (same) continue;
      if (e == Exactness::approximate && !std::isnan(x) && !std::isnan(y) && std::isfinite(x) == std::isfinite(y)) {
        if (x == y || std::fabs(x - y) <= rtol * (std::fabs(y) + scale)) {
          if (inexact) *inexact = true;
          continue;
        }
      }
      if (bad++ < 4) os << (bad > 1 ? "; " : "") << "[" << i << "] " << number_text(x) << ", eager " << number_text(y);
      if (first < 0) first = static_cast<int64_t>(i);
    }
  }
  if (bad == 0) return "";
  std::ostringstream head;
  head << bad << " of " << want.size() << " elements differ"
       << (e == Exactness::exact ? " (bit-exact expected)" : " (beyond tolerance)") << ": " << os.str();
  return head.str();
}

std::string unchecked_report(uint64_t unchecked, uint64_t compared) {
  char text[128];
  std::snprintf(text, sizeof text, "%llu of %llu output comparisons by shape and dtype only (%.1f%%)",
                static_cast<unsigned long long>(unchecked), static_cast<unsigned long long>(compared),
                compared ? 100.0 * static_cast<double>(unchecked) / static_cast<double>(compared) : 0.0);
  return text;
}

CheckResult check(const Program& p, const CheckOptions& opts) {
  CheckResult res;
  auto prog = std::make_shared<const Program>(p);
  Function fn = [prog](const std::vector<Array>& in) { return prog->run(in); };
  auto failed = [&](const std::string& what) {
    res.ok = false;
    res.failure = what + "\n" + p.listing();
    return res;
  };
  std::vector<Array> inputs, want;
  try {
    inputs = p.make_inputs();
    want = p.run(inputs);
    eval(want);
  } catch (const std::exception& e) {
    return failed(std::string("eager run threw: ") + e.what());
  }
  ModeGuard guard;
  auto compare_all = [&](const std::vector<Array>& got, const std::string& ctx) -> std::string {
    if (got.size() != want.size()) {
      return ctx + ": " + std::to_string(got.size()) + " outputs, eager " + std::to_string(want.size());
    }
    for (size_t i = 0; i < got.size(); ++i) {
      Exactness e = p.exactness[static_cast<size_t>(p.outputs[i])];
      bool inexact = false;
      std::string d = compare_arrays(got[i], want[i], e, &inexact);
      ++res.outputs_compared;
      if (e == Exactness::unreliable) ++res.outputs_unchecked;
      if (inexact) ++res.outputs_inexact;
      if (!d.empty()) return ctx + ", output " + std::to_string(i) + " (%" + std::to_string(p.outputs[i]) + "): " + d;
    }
    return "";
  };
  for (CompileMode mode :
       {CompileMode::disabled, CompileMode::no_simplify, CompileMode::no_fuse, CompileMode::enabled}) {
    std::string ctx = std::string("mode ") + mode_name(mode);
    try {
      set_compile_mode(mode);
      CompiledFunction f = compile(fn, {false, "fuzz"});
      // Both tiers: the first call runs fused regions through the interpreter, as a call does
      // while their kernels compile; the second replays the cached plan on generated kernels.
      set_fused_kernels(FusedKernels::off);
      std::vector<Array> got = f(inputs);
      eval(got);
      std::string d = compare_all(got, ctx + ", interim tier");
      if (!d.empty()) return failed(d);
      set_fused_kernels(FusedKernels::wait);
      got = f(inputs);
      eval(got);
      d = compare_all(got, ctx + ", second call, fused tier");
      if (!d.empty()) return failed(d);
      if (mode == CompileMode::enabled) {
        // Other values of the same shapes: the replay reads its inputs, never traced values
        // (a random key captured as a constant would repeat the first call's draws).
        std::vector<Array> other = p.make_inputs(nullptr, 1), other_want;
        bool runs = true;
        try {
          other_want = p.run(other);
          eval(other_want);
        } catch (const Error&) {
          runs = false;  // refused eagerly on these values (a start out of range...)
        }
        if (runs) {
          res.values_checked = true;
          got = f(other);
          eval(got);
          std::swap(want, other_want);
          d = compare_all(got, ctx + ", other input values");
          std::swap(want, other_want);
          if (!d.empty()) return failed(d);
        }
      }
    } catch (const std::exception& e) {
      return failed(ctx + ": threw: " + e.what());
    }
  }
  {
    // Compiled calls compose with lazy graphs: unevaluated inputs, and a compiled call
    // inlined into an outer compile (which then fuses through it).
    std::string ctx = "mode enabled, lazy inputs and nested compile";
    try {
      set_compile_mode(CompileMode::enabled);
      CompiledFunction inner = compile(fn, {false, "fuzz_inner"});
      CompiledFunction outer =
          compile([inner](const std::vector<Array>& in) { return inner(in); }, {false, "fuzz_outer"});
      std::vector<Array> lazy;
      for (auto& a : inputs) lazy.push_back(copy(a));
      std::vector<Array> got = outer(lazy);
      eval(got);
      std::string d = compare_all(got, ctx);
      if (!d.empty()) return failed(d);
    } catch (const std::exception& e) {
      return failed(ctx + ": threw: " + e.what());
    }
  }
  if (opts.shapeless) {
    std::string ctx = "mode enabled, shapeless";
    try {
      set_compile_mode(CompileMode::enabled);
      CompiledFunction f = compile(fn, {true, "fuzz_shapeless"});
      for (int call = 0; call < 2; ++call) {
        std::vector<Array> got = f(inputs);
        eval(got);
        std::string d = compare_all(got, ctx + (call ? ", second call" : ""));
        if (!d.empty()) return failed(d);
      }
      if (opts.shapeless_variants) {
        // Other shapes, same ranks: replayed without a trace, must match eager on them.
        std::vector<Shape> shapes = p.variant_shapes();
        std::vector<Array> vin, vwant;
        bool runs = true;
        try {
          vin = p.make_inputs(&shapes);
          std::vector<Array> all = p.run_all(vin);
          // A shapeless function is traced once per rank: a program whose ranks change with
          // the sizes (squeeze() without axes drops the axes of size 1 it meets) has no replay
          // that can match (seeds 5189, 5575 before the generator's op pool grew).
          for (size_t i = 0; i < all.size() && runs; ++i)
            runs = static_cast<size_t>(all[i].ndim()) == p.shapes[i].size();
          for (int o : p.outputs) vwant.push_back(all[static_cast<size_t>(o)]);
          if (runs) eval(vwant);
        } catch (const Error&) {
          runs = false;  // the program fixes a shape (reshape, slice of a fixed length...)
        }
        if (runs) {
          res.variant_checked = true;
          ctx += ", other input shapes (";
          for (size_t i = 0; i < shapes.size(); ++i) ctx += (i ? " " : "") + shape_text(shapes[i]);
          ctx += ")";
          std::vector<Array> got = f(vin);
          eval(got);
          std::swap(want, vwant);
          std::string d = compare_all(got, ctx);
          std::swap(want, vwant);
          if (!d.empty()) return failed(d);
        }
      }
    } catch (const std::exception& e) {
      return failed(ctx + ": threw: " + e.what());
    }
  }
  return res;
}

// ---- minimizing ---------------------------------------------------------------------

namespace {

/* Recomputes shapes, dtypes and exactness from the steps; false when a step is refused. */
bool revalidate(Program& p) {
  std::vector<Array> probes;
  p.shapes.clear();
  p.dtypes.clear();
  p.exactness.clear();
  p.same_device_only.clear();
  p.has_reduction = false;
  for (auto& in : p.inputs) {
    probes.push_back(zeros(in.shape, in.dtype));
    p.shapes.push_back(in.shape);
    p.dtypes.push_back(in.dtype);
    p.exactness.push_back(Exactness::exact);
    p.same_device_only.push_back(false);
  }
  for (auto& s : p.steps) {
    for (int a : s.args) {
      if (a < 0 || a >= static_cast<int>(probes.size())) return false;
    }
    Array out;
    try {
      out = apply_step(s, probes);
    } catch (const Error&) {
      return false;
    }
    p.exactness.push_back(exactness_of(s, p.exactness, p.dtypes, out.dtype()));
    p.same_device_only.push_back(same_device_only(s, p.same_device_only));
    p.shapes.push_back(out.shape());
    p.dtypes.push_back(out.dtype());
    p.has_reduction = p.has_reduction || s.kind == StepKind::reduce;
    probes.push_back(out);
  }
  return !p.outputs.empty();
}

/* p without value v; its users read `with` instead (with < v). */
Program remove_value(const Program& p, int v, int with) {
  Program q = p;
  auto remap = [&](int a) { return a == v ? with : a > v ? a - 1 : a; };
  int nin = static_cast<int>(p.inputs.size());
  if (v < nin)
    q.inputs.erase(q.inputs.begin() + v);
  else
    q.steps.erase(q.steps.begin() + (v - nin));
  for (auto& s : q.steps) {
    for (auto& a : s.args) a = remap(a);
  }
  for (auto& o : q.outputs) o = remap(o);
  return q;
}

}  // namespace

std::string failure_kind(const std::string& failure) {
  std::string first = failure.substr(0, failure.find('\n'));
  std::string mode = first.substr(0, first.find_first_of(",:"));
  std::string what;
  size_t t = first.find("threw: ");
  if (t != std::string::npos) {
    for (char c : first.substr(t)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) what += c;
    }
  } else if (first.find("elements differ") != std::string::npos) {
    what = "values differ";
  } else if (first.find(": shape (") != std::string::npos) {
    what = "shape differs";
  } else if (first.find(": dtype ") != std::string::npos) {
    what = "dtype differs";
  } else {
    what = "other";
  }
  return mode + " / " + what;
}

Program minimize(const Program& start, const std::function<bool(const Program&)>& still_fails) {
  Program p = start;
  revalidate(p);
  auto accept = [&](Program q) {
    if (!revalidate(q) || !still_fails(q)) return false;
    p = std::move(q);
    return true;
  };
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < p.outputs.size() && p.outputs.size() > 1; ++i) {
      Program q = p;
      q.outputs.erase(q.outputs.begin() + static_cast<long>(i));
      if (accept(std::move(q))) {
        changed = true;
        --i;
      }
    }
    int nin = static_cast<int>(p.inputs.size());
    for (int k = static_cast<int>(p.steps.size()) - 1; k >= 0; --k) {
      if (k >= static_cast<int>(p.steps.size())) continue;
      int v = nin + k;
      std::vector<int> withs = p.steps[static_cast<size_t>(k)].args;
      for (int w = 0; w < v; ++w) {
        if (std::find(withs.begin(), withs.end(), w) == withs.end()) withs.push_back(w);
      }
      for (int w : withs) {
        if (accept(remove_value(p, v, w))) {
          changed = true;
          break;
        }
      }
    }
    for (int i = static_cast<int>(p.inputs.size()) - 1; i >= 0 && p.inputs.size() > 1; --i) {
      bool used = std::find(p.outputs.begin(), p.outputs.end(), i) != p.outputs.end();
      for (auto& s : p.steps) used = used || std::find(s.args.begin(), s.args.end(), i) != s.args.end();
      if (!used && accept(remove_value(p, i, 0))) changed = true;
    }
    for (auto& in : p.inputs) {
      if (in.layout == InputLayout::contiguous) continue;
      Program q = p;
      q.inputs[static_cast<size_t>(&in - p.inputs.data())].layout = InputLayout::contiguous;
      if (accept(std::move(q))) {
        changed = true;
        break;
      }
    }
  }
  return p;
}

}  // namespace kiln::fuzz
