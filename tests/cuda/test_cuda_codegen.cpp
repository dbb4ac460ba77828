// Every variant of the generated CUDA kernels compiles with NVRTC for sm_90, checked
// without a GPU (NVRTC needs none), so a code generator error shows on every machine.
#include <gtest/gtest.h>

#include "backend/common/math.h"
#include "backend/cuda/codegen.h"
#include "backend/cuda/struct_launch.h"
#include "compile/codegen_util.h"
#include "backend/cuda/nvrtc.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

using namespace kiln;
using compiler::FusedOp;
using compiler::FusedProgram;
using compiler::RowOp;
using compiler::RowProgram;

namespace {

class CudaCodegen : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC could not be loaded: generated CUDA source not checked";
  }
  static void compiles(const std::string& source) {
    try {
      EXPECT_FALSE(cuda::cubin_for_arch(source, 9, 0).empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
};

FusedOp input(int k, Dtype d) {
  FusedOp op;
  op.input = k;
  op.dtype = d;
  return op;
}
FusedOp op(std::shared_ptr<Primitive> prim, std::vector<int> args, Dtype d) {
  FusedOp o;
  o.prim = std::move(prim);
  o.args = std::move(args);
  o.dtype = d;
  return o;
}

// exp(a) + float(b) scaled by c, stored as float32, bfloat16 and a bool comparison.
FusedProgram elementwise_program() {
  FusedProgram p;
  p.ops = {input(0, float32), input(1, bfloat16), input(2, float32),
           op(std::make_shared<Unary<math::Exp>>(), {0}, float32),
           op(std::make_shared<AsType>(float32), {1}, float32),
           op(std::make_shared<Binary<math::Add>>(), {3, 4}, float32),
           op(std::make_shared<Binary<math::Multiply>>(), {5, 2}, float32),
           op(std::make_shared<AsType>(bfloat16), {6}, bfloat16),
           op(std::make_shared<Binary<math::Greater>>(), {6, 0}, bool_)};
  p.outputs = {6, 7, 8};
  return p;
}

RowOp row_input(int k, Dtype d, bool per_row = false) {
  RowOp op;
  op.input = k;
  op.dtype = d;
  op.per_row = per_row;
  return op;
}
RowOp row_op(std::shared_ptr<Primitive> prim, std::vector<int> args, Dtype d, bool per_row = false) {
  RowOp o;
  o.prim = std::move(prim);
  o.args = std::move(args);
  o.dtype = d;
  o.per_row = per_row;
  return o;
}

// softmax(x) * w over the last axis, with the row maximum as a second output.
RowProgram softmax_program(Dtype d) {
  RowProgram p;
  p.ops = {row_input(0, d), row_input(1, d),
           row_op(std::make_shared<Reduce<math::Max>>(std::vector<int>{1}), {0}, d, true),
           row_op(std::make_shared<Binary<math::Subtract>>(), {0, 2}, d),
           row_op(std::make_shared<Unary<math::Exp>>(), {3}, d),
           row_op(std::make_shared<Reduce<math::Sum>>(std::vector<int>{1}), {4}, d, true),
           row_op(std::make_shared<Binary<math::Divide>>(), {4, 5}, d),
           row_op(std::make_shared<Binary<math::Multiply>>(), {6, 1}, d)};
  p.outputs = {7, 2};
  return p;
}

// sum(exp(x) * w) and max(x) over the last axis, then the sum divided by a per-row input:
// one pass, per-row outputs only (a program that splits its rows into parts, or its
// columns when the rows lie next to each other).
RowProgram sums_program(Dtype d) {
  RowProgram p;
  p.ops = {row_input(0, d), row_input(1, d), row_input(2, d, true),
           row_op(std::make_shared<Unary<math::Exp>>(), {0}, d),
           row_op(std::make_shared<Binary<math::Multiply>>(), {3, 1}, d),
           row_op(std::make_shared<Reduce<math::Sum>>(std::vector<int>{1}), {4}, d, true),
           row_op(std::make_shared<Reduce<math::Max>>(std::vector<int>{1}), {0}, d, true),
           row_op(std::make_shared<Binary<math::Divide>>(), {5, 2}, d, true)};
  p.outputs = {7, 6};
  return p;
}

}  // namespace

TEST_F(CudaCodegen, ElementwiseVariantsCompile) {
  FusedProgram p = elementwise_program();
  compiles(cuda::elementwise_source(p));
  for (int vec : {1, 2, 4, 8}) {
    compiles(cuda::elementwise_flat_source(p, 0, vec));
    compiles(cuda::elementwise_flat_source(p, 0b100, vec));  // c is one broadcast element
  }
  for (int vec : {1, 4}) {
    for (bool narrow : {false, true}) compiles(cuda::elementwise_rows_source(p, 0b010, 0, vec, narrow));  // b one value a row
  }
  // Operands 1 (an output) and 3 (input a) step along the rows with strides of their own.
  const std::string stepped = cuda::elementwise_rows_source(p, 0b100, 0b1010, 4, true);
  compiles(stepped);
  EXPECT_NE(stepped.find("in0[at[3] + (c + e) * step3]"), std::string::npos) << stepped;
  EXPECT_NE(stepped.find("out1[at[1] + (c + e) * step1] = r1.v[e]"), std::string::npos) << stepped;
  const std::string per_row = cuda::elementwise_tiled_source(p, 0b100, 0b001);  // a through a tile, c one value a row
  compiles(per_row);
  EXPECT_NE(per_row.find("s2 = in2[row2 + k * sr2]"), std::string::npos) << per_row;
  const std::string tiled = cuda::elementwise_tiled_source(p, 0, 0b011);
  compiles(tiled);
  EXPECT_NE(tiled.find("tile1[q][2 * tx + e] = in1[col1"), std::string::npos) << tiled;  // b through a tile too
  EXPECT_NE(tiled.find("in2[row2 + k * sr2 + e]"), std::string::npos) << tiled;  // c along the rows
}

// Every unary and binary row of the op registry in one kernel per input dtype: a new op's
// functor must compile for the device from the math.h that NVRTC is handed.
TEST_F(CudaCodegen, EveryElementwiseRowCompiles) {
  for (Dtype d : {float32, float64, bfloat16, int32}) {
    FusedProgram p;
    p.ops = {input(0, d), input(1, d)};
    auto add = [&](std::shared_ptr<Primitive> prim, std::vector<int> args, DtypeRule rule) {
      if ((rule == DtypeRule::integer) != !is_floating(d)) return;  // ints: only the integer rows (the others cast)
      p.outputs.push_back(static_cast<int>(p.ops.size()));
      p.ops.push_back(op(std::move(prim), std::move(args), rule == DtypeRule::boolean ? bool_ : d));
    };
#define KILN_UNARY(F, n, dtypes, ...) add(std::make_shared<Unary<math::F>>(), {0}, DtypeRule::dtypes);
#define KILN_BINARY(F, n, dtypes, ...) add(std::make_shared<Binary<math::F>>(), {0, 1}, DtypeRule::dtypes);
#include "ops/op_table.def"
    SCOPED_TRACE(dtype_name(d));
    const std::string source = cuda::elementwise_source(p);
    EXPECT_NE(source.find("kiln::math::"), std::string::npos);
    compiles(source);
  }
}

TEST_F(CudaCodegen, RowVariantsCompile) {
  for (Dtype d : {float32, bfloat16, float16}) {
    RowProgram p = softmax_program(d);
    for (int threads : {32, 256, 512}) {
      cuda::RowVariant plain;
      plain.threads = threads;
      compiles(cuda::row_source(p, plain));
      cuda::RowVariant staged = plain;
      staged.cached_inputs = 0b1;
      staged.vector_in = true;
      staged.vector_out = 16 / size_of(d);
      compiles(cuda::row_source(p, staged));
      staged.vector_passes = true;
      compiles(cuda::row_source(p, staged));
      staged.async_stage = true;  // the row copied into shared memory by cp.async
      const std::string async = cuda::row_source(p, staged);
      compiles(async);
      EXPECT_NE(async.find("kiln_stage16("), std::string::npos);
      EXPECT_NE(async.find("kiln_stage_wait();"), std::string::npos);
      staged.cluster = 4;  // a row shared by a cluster of 4 blocks, reductions through distributed shared memory
      const std::string cluster = cuda::row_source(p, staged);
      compiles(cluster);
      EXPECT_NE(cluster.find("__cluster_dims__(4, 1, 1)"), std::string::npos);
      EXPECT_NE(cluster.find("kiln_cluster_reduce<"), std::string::npos);
      EXPECT_NE(cluster.find("(r * n_all + j0)"), std::string::npos) << cluster;
      staged.vector_passes = false;  // element passes of a part
      compiles(cuda::row_source(p, staged));
      for (int vec : {1, 16 / size_of(d)}) {
        for (bool exact : {false, true}) {
          cuda::RowVariant regs = plain;
          regs.chunks = 2;
          regs.vec = vec;
          regs.exact = exact;
          const std::string src = cuda::row_source(p, regs);
          compiles(src);
          // Register rows divide without a branch an element, then retry a chunk exactly.
          EXPECT_NE(src.find("kiln_div_by_fast("), std::string::npos);
          EXPECT_NE(src.find("if (slow)"), std::string::npos);
        }
      }
    }
  }
}

TEST_F(CudaCodegen, SplitRowVariantsCompile) {
  for (Dtype d : {float32, bfloat16, float16, int32}) {
    RowProgram p = sums_program(d == int32 ? float32 : d);
    if (d == int32) {  // integer sums and maxima: other accumulator types
      for (auto& op : p.ops) op.dtype = int32;
      p.ops[3] = row_op(std::make_shared<Unary<math::Abs>>(), {0}, int32);
      p.ops[7] = row_op(std::make_shared<Binary<math::Add>>(), {5, 2}, int32, true);
    }
    for (int split : {1, 2, 3}) {
      for (bool vector_passes : {false, true}) {
        cuda::RowVariant v;
        v.split = split;
        v.vector_passes = vector_passes;
        v.vector_out = vector_passes ? 16 / size_of(d) : 1;
        const std::string src = cuda::row_source(p, v);
        compiles(src);
        // The first kernel writes both reductions' partials and no output; the second reads them.
        // (Column parts with vectors: a lane a vector of rows, the warps folded in shared memory.)
        const bool lanes = split == 3 && vector_passes;
        const char* writes5 = split == 1 ? "part5[w] = " : lanes ? "part5[(r0 + q) * splits + s] = t" : split == 3 ? "part5[r * splits + s] = acc5" : "part5[r * splits + s]);";
        const char* writes6 = split == 1 ? "part6[w] = " : lanes ? "part6[(r0 + q) * splits + s] = t" : split == 3 ? "part6[r * splits + s] = acc6" : "part6[r * splits + s]);";
        EXPECT_NE(src.find(writes5), std::string::npos) << src;
        EXPECT_NE(src.find(writes6), std::string::npos);
        EXPECT_EQ(src.find("out0[r]") == std::string::npos, split != 2);
      }
    }
  }
}

TEST_F(CudaCodegen, ArgReductionsInPartsCompile) {
  for (const char* type : {"float", "double", "kiln::bfloat16_t", "kiln::float16_t", "int32_t", "uint8_t", "int64_t",
                           "uint64_t", "bool"}) {
    for (const char* kernel : {"kiln_argreduce_parts", "kiln_argreduce_fold"}) {
      for (const char* is_max : {"true", "false"}) {
        compiles(cuda::instantiate(std::string(kernel) + "<" + type + ", " + is_max + ">", 26));
      }
    }
  }
}

TEST_F(CudaCodegen, RandomBitsCompile) { compiles(cuda::instantiate("kiln_random_bits", 4)); }

TEST_F(CudaCodegen, TopkCompiles) {
  for (const char* type : {"float", "double", "kiln::bfloat16_t", "kiln::float16_t", "int32_t", "uint8_t", "int64_t",
                           "uint64_t", "bool"}) {
    compiles(cuda::instantiate(std::string("kiln_topk<") + type + ">", 6));
  }
}

TEST_F(CudaCodegen, TransposeTilesCompile) {
  for (size_t itemsize : {1, 2, 4, 8}) compiles(cuda::transpose_source(itemsize));
}

TEST_F(CudaCodegen, BadSourceIsAClearError) {
  try {
    cuda::cubin_for_arch("extern \"C\" __global__ void kiln_kernel() { undefined_name(); }", 9, 0);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NVRTC rejected"), std::string::npos) << e.what();
  }
}

// The GELUs (math.h's double paths under NVRTC) and the program the matmul epilogue falls
// back to: product + bias, then the activation, rounded to the dtype.
TEST_F(CudaCodegen, GeluAndEpilogueFallbackCompile) {
  for (Dtype d : {bfloat16, float16, float32, float64}) {
    FusedProgram p;
    p.ops = {input(0, d), input(1, d), op(std::make_shared<Binary<math::Add>>(), {0, 1}, d),
             op(std::make_shared<Unary<math::Gelu>>(), {2}, d), op(std::make_shared<Unary<math::GeluTanh>>(), {2}, d)};
    p.outputs = {3, 4};
    compiles(cuda::elementwise_source(p));
    compiles(cuda::elementwise_flat_source(p, 0b10, 1));  // the bias broadcast
  }
}

// sin and cos of a 16-bit float with a result of the same type take the short form
// (kiln_sin_narrow, kiln_cos_narrow: math.h's sincos_narrow_f32, and in flat vectors
// kiln_sin_fast, kiln_cos_fast); float32 and a widening sin take the float32 form
// (sincos_fma_f32; kiln_sinf_fast in flat vectors).
TEST_F(CudaCodegen, SixteenBitSinCosCompile) {
  for (Dtype d : {bfloat16, float16, float32}) {
    FusedProgram p;
    p.ops = {input(0, d), op(std::make_shared<Unary<math::Sin>>(), {0}, d),
             op(std::make_shared<Unary<math::Cos>>(), {1}, d), op(std::make_shared<AsType>(float32), {0}, float32),
             op(std::make_shared<Unary<math::Sin>>(), {3}, float32)};
    p.outputs = {2, 4};
    const std::string src = cuda::elementwise_flat_source(p, 0, 8);
    const bool narrow = d != float32;
    EXPECT_EQ(src.find("kiln_sin_narrow(t0)") != std::string::npos, narrow) << src;
    EXPECT_EQ(src.find("kiln_cos_narrow(t1)") != std::string::npos, narrow) << src;
    EXPECT_EQ(src.find("kiln_sin_narrow(t3)"), std::string::npos) << src;
    // Flat vectors take the fast forms first (float32 too) and the full ones only when one
    // sets `slow`.
    EXPECT_NE(src.find(narrow ? "kiln_sin_fast(t0, slow)" : "kiln_sinf_fast(t0, slow)"), std::string::npos) << src;
    EXPECT_NE(src.find("kiln_sinf_fast(t3, slow)"), std::string::npos) << src;
    EXPECT_NE(src.find("if (slow)"), std::string::npos) << src;
    compiles(src);
    EXPECT_EQ(cuda::elementwise_source(p).find("slow"), std::string::npos);
    compiles(cuda::elementwise_source(p));
  }
}

// Every instantiation of the struct-argument kernels (backend/cuda/kernels/*.cuh) that the
// backend launches compiles: each bit width of the products, each activation dtype, each mask,
// each index type of the gathers.
TEST_F(CudaCodegen, LanguageModelKernelsCompile) {
  const std::string f32 = compiler::cpp_type(float32), f16 = compiler::cpp_type(float16),
                    bf16 = compiler::cpp_type(bfloat16), f64 = compiler::cpp_type(float64);
  auto check = [&](const std::string& args, const std::string& call) {
    SCOPED_TRACE(call);
    compiles(cuda::struct_kernel_source("backend/cuda/kernels/llm.cuh", args, "llm::" + call));
  };
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const std::string b = std::to_string(bits);
    check("Dequantize", "dequantize<" + f32 + ", " + f32 + ", " + b + ">");
    check("QuantizedGemv", "quantized_gemv<" + f32 + ", " + f32 + ", " + b + ", 1>");
  }
  check("Dequantize", "dequantize<" + f16 + ", " + f16 + ", 4>");
  for (const std::string& t : {f16, bf16}) {
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + t + ", 4, 8>");
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 8, 3>");
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 4, 2, " + t + ">");  // with a norm
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 4, 1, " + t + ", 2>");  // gated
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 8, 1, " + t + ", 4>");  // four rows a warp
  }
  for (const std::string& t : {f32, f16, bf16}) {
    check("AddInto", "add_into<" + t + ">");
    check("Gated", "gated<" + t + ">");
  }
  for (const std::string& t : {f32, f16, bf16, f64}) {
    check("Norm", "norm<" + t + ", " + t + ", false>");
    check("Norm", "norm<" + t + ", " + f32 + ", true>");
    check("Norm", "norm_warp<" + t + ", " + t + ", false>");
    check("Norm", "norm_warp<" + t + ", " + f32 + ", true>");
    check("Rope", "rope<" + t + ">");
  }
  for (const std::string& t : {f32, f16, bf16}) {
    check("Attention", "attention_split<" + t + ", " + t + ">");
    check("Attention", "attention_split<" + t + ", bool>");
    check("Attention", "attention_combine<" + t + ">");
  }
  for (const char* w : {"uint8_t", "uint16_t", "uint32_t", "uint64_t"}) {
    check("SliceUpdate", std::string("slice_update<") + w + ">");
  }
  for (const char* i : {"int32_t", "int64_t", "uint8_t", "uint32_t"}) {
    SCOPED_TRACE(i);
    compiles(cuda::struct_kernel_source("backend/cuda/kernels/gather.cuh", "Indices",
                                        std::string("gather::normalize_indices<") + i + ">"));
  }
}
