// Differential fuzzing of compile: random array programs built from a seed, run
// eagerly and through kiln::compile in every mode, outputs compared.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::fuzz {

/* How an output may be compared with its eager counterpart. Fusion keeps
   elementwise math bit-identical; reductions may be reassociated, so values that
   depend on a float sum are compared with a tolerance, and values that pass such
   a sum through a discontinuous or ill-conditioned op only by shape and dtype. */
enum class Exactness : uint8_t { exact, approximate, unreliable };

enum class StepKind : uint8_t {
  unary,  // fn indexes unary_names()
  binary,  // fn indexes binary_names()
  scalar,  // fn indexes scalar_names(); a C++ scalar on one side
  where,  // where(args[0], args[1], args[2])
  astype,
  reduce,  // fn indexes reduce_names()
  reshape,
  transpose,
  slice,
  expand_dims,
  squeeze,
  concatenate,
  broadcast_to,
  copy,
  nn,  // fn indexes nn_names(): the language-model ops (norms, rope, attention, quantization, slice_update)
  selection,  // fn indexes selection_names(): topk, argpartition, partition
  random,  // fn indexes random_names(); args[0] is a key (uint32 (2,))
};
inline constexpr int kStepKinds = static_cast<int>(StepKind::random) + 1;

enum class ScalarType : uint8_t { f64, f32, i32, boolean };

struct Step {
  StepKind kind = StepKind::copy;
  int fn = 0;
  std::vector<int> args;  // value numbers: inputs first, then one per step
  std::vector<int> axes;  // reductions, transpose (perm), squeeze
  bool keepdims = false;
  bool has_axis = false;  // argmax/argmin: axis given
  bool reverse = false, inclusive = true;  // cumsum
  int axis = 0;  // expand_dims, concatenate, argmax, cumsum
  Shape shape;  // reshape, broadcast_to
  std::vector<SliceArg> slices;
  Dtype dtype = float32;  // astype
  double scalar = 0;
  ScalarType scalar_type = ScalarType::f64;
  bool scalar_left = false;
  // nn, selection and random steps
  unsigned opt = 0;  // kOpt* bits: which optional operands args holds (in the order of the bits)
  int k = 0;  // rope dims, topk k, argpartition/partition kth, split num
  int which = 0;  // the output of quantize / topk, the row of a split key
  int group_size = 64, bits = 4;
  QmmActivations activations = QmmActivations::exact;
  bool transpose = true;  // quantized_matmul
  bool traditional = false;  // rope
  bool causal = false;  // scaled_dot_product_attention
  float eps = 1e-5f;  // norms
  float fscale = 1;  // rope's position scale, attention's score scale
  std::optional<float> base;  // rope (none: freqs given)
  int64_t offset = 0;  // rope's integer offset
  double param0 = 0, param1 = 1;  // uniform low/high, normal loc/scale
};

// Optional operands of nn steps, in args after the required ones in this order.
inline constexpr unsigned kOptWeight = 1, kOptBias = 2,  // norms
    kOptOffsetArray = 4, kOptFreqs = 8,  // rope
    kOptMask = 16, kOptKeyLengths = 32,  // attention
    kOptNorm = 64, kOptResidual = 128;  // quantized_matmul: rms_norm(x, w) in front, + r behind

/* How an input is laid out in memory (same logical values). */
enum class InputLayout : uint8_t { contiguous, transposed, strided };

struct InputSpec {
  Shape shape;
  Dtype dtype = float32;
  InputLayout layout = InputLayout::contiguous;
  /* variant_shapes keeps this input's shape (a key, a start vector: the op fixes it; weights
     quantized along K, which x shares), and so every dimension of the same size in the other
     inputs: fusion still relies on sizes equal at trace time staying equal (see
     FuzzRegression.ShapelessFusionOfShapesEqualOnlyAtTraceTime). */
  bool fixed = false;
};

struct Program {
  uint64_t seed = 0;
  std::vector<InputSpec> inputs;
  std::vector<Step> steps;
  std::vector<int> outputs;
  // Per value (inputs, then steps): how exactly compiled results must match.
  std::vector<Exactness> exactness;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  bool has_reduction = false;  // any reduce step at all
  /* Per value: computed compiled and eager on one device it is as exactness says, but another
     device may legitimately differ beyond tolerance (argpartition's order off kth, Gumbel draws
     through libm's log, codes rounded from a scale whose last bit may differ). */
  std::vector<bool> same_device_only;

  /* Runs the program on `in` (one array per input spec); pure, any thread. */
  std::vector<Array> run(const std::vector<Array>& in) const;
  /* Every value (inputs, then one per step), lazy. */
  std::vector<Array> run_all(const std::vector<Array>& in) const;
  /* The program's input data, a pure function of the seed (and of `stream`: another stream
     gives other values of the same shapes), evaluated; `shapes` replaces the input shapes
     when given. */
  std::vector<Array> make_inputs(const std::vector<Shape>* shapes = nullptr, uint64_t stream = 0) const;
  /* Input shapes for a shapeless replay: every dimension above 1 grown by a seeded
     amount, equal dimensions kept equal and distinct ones distinct; fixed inputs, and
     the sizes they have wherever they occur, kept (InputSpec::fixed). */
  std::vector<Shape> variant_shapes() const;
  /* A text listing: one line per input, step and output. */
  std::string listing() const;
  /* Short text for one step's right-hand side, e.g. "sum(%3, axes=(0,-1), keepdims)". */
  std::string step_text(const Step& s) const;
};

struct GenOptions {
  int min_steps = 3, max_steps = 25;
  int max_inputs = 4;
  int64_t max_elements = 512;  // per value
  double big_fraction = 0.04;  // programs over large arrays instead (parallel paths)
  int64_t max_big_elements = 1 << 16;
  double llm_fraction = 0.4;  // programs with inputs for the language-model ops (not big ones)
};

/* Builds the random program for `seed`: the same seed gives the same program. */
Program generate(uint64_t seed, const GenOptions& opts = {});

const std::vector<const char*>& unary_names();
const std::vector<const char*>& binary_names();
const std::vector<const char*>& scalar_names();
const std::vector<const char*>& reduce_names();
const std::vector<const char*>& nn_names();
const std::vector<const char*>& selection_names();
const std::vector<const char*>& random_names();

struct CheckOptions {
  bool shapeless = true;  // also compile with shapeless=true and call twice
  /* Also call the shapeless function on inputs of other shapes (variant_shapes),
     where the eager program accepts them. */
  bool shapeless_variants = true;
  bool verbose = false;
};

struct CheckResult {
  bool ok = true;
  std::string failure;  // what differed, with the listing
  int outputs_compared = 0;
  int outputs_inexact = 0;  // approximate outputs that differed in some bit but within tolerance
  int outputs_unchecked = 0;  // unreliable outputs: compared by shape and dtype only
  bool variant_checked = false;  // the shapeless function also ran on other shapes
  bool values_checked = false;  // the compiled function also ran on other input values
};

/* Unreliable outputs are compared by shape and dtype only: a run of seeds counts them, and its
   test fails when they pass this share of its comparisons, so that a generator drifting
   towards programs whose values go unchecked is noticed. Programs are a pure function of the
   seed, so a fixed run's share is a fixed number. */
inline constexpr double kMaxUncheckedShare = 0.15;

/* "U of N output comparisons by shape and dtype only (P%)", for a run's report. */
std::string unchecked_report(uint64_t unchecked, uint64_t compared);

/* Runs p eagerly and compiled (every CompileMode, then shapeless), compares the
   outputs, and restores the compile mode. Never throws: errors become failures. */
CheckResult check(const Program& p, const CheckOptions& opts = {});

/* A short signature of a failure (its mode, and what threw or differed), for minimizing. */
std::string failure_kind(const std::string& failure);

/* Shrinks a failing program: drops outputs, steps (rewiring their users to one of their
   operands), unused inputs and input layouts while `still_fails` holds for the result.
   The returned program keeps the seed (its input data stream). */
Program minimize(const Program& p, const std::function<bool(const Program&)>& still_fails);

/* Compares one compiled output with the eager one; returns an empty string when
   they agree under `e`, else a description. `inexact` is set when an approximate
   output differed in some bit but within tolerance. */
std::string compare_arrays(const Array& got, const Array& want, Exactness e, bool* inexact = nullptr);

}  // namespace kiln::fuzz
