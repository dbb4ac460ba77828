// Every embedded device file and every variant of the generated and library CUDA kernels
// compiles with NVRTC for sm_90, checked without a GPU (NVRTC needs none), so an error in
// device code or in a code generator shows on every machine.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>

#include "backend/common/math.h"
#include "backend/cpu/jit_headers.h"
#include "backend/cuda/codegen.h"
#include "backend/cuda/struct_launch.h"
#include "compile/codegen_util.h"
#include "compile/kernel_slots.h"
#include "backend/cuda/interp_program.h"
#include "backend/cuda/precompiled_images.h"
#include "backend/cuda/llm_ops.h"
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
  // A kernel of kernels/<file> taking args::<args_name>, e.g. ("scan.cuh", "Cumsum", "scan::cumsum<float>").
  static void library_compiles(const std::string& file, const std::string& args_name, const std::string& call) {
    SCOPED_TRACE(call);
    compiles(cuda::struct_kernel_source("backend/cuda/kernels/" + file, args_name, call));
  }
};

// The C++ type of every dtype, as kernel source spells it.
std::vector<std::string> every_type() {
  std::vector<std::string> types;
  for (int d = 0; d < kNumDtypes; ++d) types.push_back(compiler::cpp_type(static_cast<Dtype>(d)));
  return types;
}

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
  p.ops = {input(0, float32),
           input(1, bfloat16),
           input(2, float32),
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
  p.ops = {row_input(0, d),
           row_input(1, d),
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
  p.ops = {row_input(0, d),
           row_input(1, d),
           row_input(2, d, true),
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
    for (bool narrow : {false, true})
      compiles(cuda::elementwise_rows_source(p, 0b010, 0, vec, narrow));  // b one value a row
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
        const char* writes5 = split == 1   ? "part5[w] = "
                              : lanes      ? "part5[(r0 + q) * splits + s] = t"
                              : split == 3 ? "part5[r * splits + s] = acc5"
                                           : "part5[r * splits + s]);";
        const char* writes6 = split == 1   ? "part6[w] = "
                              : lanes      ? "part6[(r0 + q) * splits + s] = t"
                              : split == 3 ? "part6[r * splits + s] = acc6"
                                           : "part6[r * splits + s]);";
        EXPECT_NE(src.find(writes5), std::string::npos) << src;
        EXPECT_NE(src.find(writes6), std::string::npos);
        EXPECT_EQ(src.find("out0[r]") == std::string::npos, split != 2);
      }
    }
  }
}

// Every standard-header stand-in compiles on its own, and every file of
// src/backend/cuda/kernels/ after the support header, as kernel modules include them
// (templates are instantiated by the tests below); a failure names the file and carries
// NVRTC's log.
TEST_F(CudaCodegen, EveryEmbeddedDeviceFileCompiles) {
  std::vector<std::string> files;  // as an #include names them
  for (size_t i = 0; i < cpu::detail::nvrtc_std_header_count; ++i) {
    std::string file = "<";  // appended, not "<" + string: GCC 12 warns falsely (-Wrestrict) on that
    file += cpu::detail::nvrtc_std_headers[i].path;
    files.push_back(file + ">");
  }
  for (size_t i = 0; i < cpu::detail::embedded_header_count; ++i) {
    const std::string name = cpu::detail::embedded_headers[i].path;
    // An X-macro list (.def) compiles only inside the file that defines its macros (args.h).
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".def") == 0) continue;
    if (name.rfind("backend/cuda/kernels/", 0) == 0) files.push_back(std::string(1, '"').append(name).append(1, '"'));
  }
  EXPECT_GE(files.size(), 17u) << "the kernel files and standard headers were not all embedded";
  for (const std::string& file : files) {
    const std::string first = file[0] == '<' ? "" : std::string("#include \"") + cuda::kSupportHeader + "\"\n";
    const std::string source = first + "#include " + file + "\n\nextern \"C\" __global__ void kiln_kernel() {}\n";
    try {
      cuda::cubin_for_arch(source, 9, 0);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "embedded device file " << file << " does not compile:\n" << e.what();
    }
  }
}

TEST_F(CudaCodegen, ArgReductionsCompile) {
  for (const std::string& type : every_type()) {
    for (const char* is_max : {"true", "false"}) {
      const std::string args = "<" + type + ", " + is_max + ">";
      library_compiles("argreduce.cuh", "ArgReduce", "argreduce::first_extreme" + args);
      library_compiles("argreduce.cuh", "ArgReduceParts", "argreduce::reduce_parts" + args);
      library_compiles("argreduce.cuh", "ArgReduceParts", "argreduce::fold_parts" + args);
    }
  }
}

TEST_F(CudaCodegen, RandomBitsCompile) { library_compiles("random.cuh", "RandomBits", "random::bits"); }

TEST_F(CudaCodegen, TopkCompiles) {
  for (const std::string& type : every_type()) library_compiles("topk.cuh", "TopK", "topk::largest<" + type + ">");
}

TEST_F(CudaCodegen, CumsumCompiles) {
  for (const std::string& type : every_type()) library_compiles("scan.cuh", "Cumsum", "scan::cumsum<" + type + ">");
}

// The integer and bool products (cuBLASLt takes the floats).
TEST_F(CudaCodegen, NaiveMatmulCompiles) {
  for (const std::string& type : every_type()) library_compiles("matmul.cuh", "Matmul", "matmul::naive<" + type + ">");
}

// The copies move words of an element's size: gathers, transposes; and the graph's byte copies.
TEST_F(CudaCodegen, CopiesAndGathersCompile) {
  for (size_t itemsize : {1, 2, 4, 8}) {
    const std::string word = cuda::word_type(itemsize);
    library_compiles("copy.cuh", "Transpose",
                     (itemsize < 4 ? "copy::transpose_packed<" : "copy::transpose_tiles<") + word + ">");
    for (const char* i : {"int32_t", "int64_t", "uint8_t", "uint32_t"})  // the index types
      library_compiles("gather.cuh", "Gather", "gather::take<" + word + ", " + i + ">");
  }
  library_compiles("copy.cuh", "CopyBytes", "copy::bytes");
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
    for (const char* wide : {"false", "true"})  // integer activations
      check("QuantizedGemv", "quantized_gemv_integer<" + f32 + ", " + f32 + ", " + b + ", 3, " + wide + ", 2>");
  }
  for (const std::string& t : {f32, f16, bf16}) {
    check("QuantizeRows", "quantize_rows<" + t + ", " + t + ", false>");
    check("QuantizeRows", "quantize_rows<" + t + ", " + f32 + ", true>");
    check("QuantizedGemv", "quantized_gemv_integer<" + t + ", " + t + ", 4, 1, true, 4>");
  }
  check("Dequantize", "dequantize<" + f16 + ", " + f16 + ", 4>");
  for (const std::string& t : {f16, bf16}) {
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + t + ", 4, 8>");
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 8, 3>");
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 4, 2, " + t + ">");  // with a norm
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 4, 1, " + t + ", 2>");  // gated
    check("QuantizedGemv", "quantized_gemv<" + t + ", " + f32 + ", 8, 1, " + t + ", 4>");  // four rows a warp
    for (const char* split : {"1", "2", "4", "8"}) {  // one row on the tensor cores, 16-bit and float scales
      for (const char* tiled : {"false", "true"}) {  // weights in row order and in tile order
        check("QuantizedGemv", "quantized_mv<" + t + ", " + t + ", " + t + ", " + split + ", " + tiled + ">");
        check("QuantizedGemv", "quantized_mv<" + t + ", " + f32 + ", " + f32 + ", " + split + ", " + tiled + ">");
      }
    }
    check("QuantizedGemv", "quantized_mma<" + t + ", " + t + ", 2, " + t + ">");
  }
  for (const std::string& t : {f32, f16, bf16}) check("Untile", "untile<" + t + ">");
  for (const std::string& t : {f32, f16, bf16}) {
    check("AddInto", "add_into<" + t + ">");
    check("Gated", "gated<" + t + ">");
  }
  for (const std::string& t : {f32, f16, bf16, f64}) {
    const std::string vec = std::to_string(16 / (t == f64 ? 8 : t == f32 ? 4 : 2));  // 16-byte loads
    for (const std::string& v : {std::string("1"), vec}) {
      check("Norm", "norm<" + t + ", " + t + ", false, " + v + ">");
      check("Norm", "norm<" + t + ", " + f32 + ", true, " + v + ">");
      check("Norm", "norm_warp<" + t + ", " + t + ", false, " + v + ">");
      check("Norm", "norm_warp<" + t + ", " + f32 + ", true, " + v + ">");
    }
    check("Rope", "rope<" + t + ">");
  }
  auto check_attention = [&](const std::string& call, const std::string& attributes = "") {
    SCOPED_TRACE(call);
    compiles(cuda::struct_kernel_source("backend/cuda/kernels/attention.cuh", "Attention", "attention::" + call,
                                        attributes));
  };
  for (const std::string& t : {f32, f16, bf16}) {
    const std::string vec = t == f32 ? "4" : "8";
    check_attention("split<" + t + ", " + t + ", " + vec + ", 16, 1, 4>");  // 16-byte loads
    check_attention("split<" + t + ", bool, 1, 32, 8, 1>");  // one value a load, 256 dims
    check_attention("combine<" + t + ">");
    if (t != f32) {  // the tensor-core kernel: decoding (4 warps over keys) and prompts (4 row tiles)
      check_attention("mma<" + t + ", " + t + ", 128, 4>");
      check_attention("mma<" + t + ", bool, 64, 1>");
      for (const char* d : {"64", "128"}) {  // decoding over a cluster of blocks
        for (const char* c : {"8", "16"})
          check_attention("mma<" + t + ", " + t + ", " + d + ", 4, " + c + ">",
                          std::string("__cluster_dims__(") + c + ", 1, 1)");
      }
    }
  }
  for (const char* w : {"uint8_t", "uint16_t", "uint32_t", "uint64_t"}) {
    check("SliceUpdate", std::string("slice_update<") + w + ">");
    check("CacheUpdate", std::string("cache_update<") + w + ">");
  }
}

// Many operands: the widest argument blocks the backend builds (eval.cpp: flat programs of up
// to 48 inputs, rows and tiles of up to 24 operands) fit a kernel's parameters.
TEST_F(CudaCodegen, WidestArgumentBlocksCompile) {
  FusedProgram p;
  for (int k = 0; k < 48; ++k) p.ops.push_back(input(k, float32));
  int sum = 0;
  for (int k = 1; k < 48; ++k) {
    p.ops.push_back(op(std::make_shared<Binary<math::Add>>(), {sum, k}, float32));
    sum = static_cast<int>(p.ops.size()) - 1;
  }
  p.outputs = {sum};
  compiles(cuda::elementwise_flat_source(p, 0b101, 4));
  compiles(cuda::elementwise_source(p));
  FusedProgram q;  // 23 inputs and one output
  for (int k = 0; k < 23; ++k) q.ops.push_back(input(k, float32));
  sum = 0;
  for (int k = 1; k < 23; ++k) {
    q.ops.push_back(op(std::make_shared<Binary<math::Add>>(), {sum, k}, float32));
    sum = static_cast<int>(q.ops.size()) - 1;
  }
  q.outputs = {sum};
  compiles(cuda::elementwise_rows_source(q, 0b10, 0b100, 4, false));
  compiles(cuda::elementwise_tiled_source(q, 0b10, 0b1));
}

// The host's packing of a generated kernel's arguments (OperandArgs) is the layout of the
// struct the kernel reads (args::WithOperands): filled by name on the host, the same words.
// Which decode attention runs as a thread-block cluster (no GPU needed: the host's choice).
TEST(CudaAttention, ClustersForDecodingOverLongCachesThatFitOneWave) {
  using cuda::attention_cluster;
  // An H100: 132 SMs. SmolLM2 (3 key/value heads) and the 8B shape (8), one session.
  EXPECT_EQ(attention_cluster(9, 132, 1024, 3, true, 8), 8);
  EXPECT_EQ(attention_cluster(9, 132, 1024, 3, true, 16), 16);
  EXPECT_EQ(attention_cluster(9, 132, 4096, 8, true, 16), 16);
  EXPECT_EQ(attention_cluster(9, 132, 512, 12, true, 16), 8);  // 16 a head would not fit one wave
  EXPECT_EQ(attention_cluster(9, 132, 4096, 32, true, 8), 0);  // 4 sessions of 8 heads: splits and a combine
  EXPECT_EQ(attention_cluster(9, 132, 256, 3, true, 8), 0);  // a small cache: one block a head
  EXPECT_EQ(attention_cluster(9, 132, 1024, 3, false, 8), 0);  // rows of a prompt
  EXPECT_EQ(attention_cluster(8, 108, 1024, 3, true, 8), 0);  // no clusters before sm_90
  EXPECT_EQ(attention_cluster(9, 132, 1024, 3, true, 0), 0);  // KILN_CUDA_ATTENTION_CLUSTER=0
}

TEST(CudaArgs, OperandArgsMatchTheKernelsStruct) {
  void* const p0 = reinterpret_cast<void*>(0x1000);
  void* const p1 = reinterpret_cast<void*>(0x2008);
  void* const p2 = reinterpret_cast<void*>(0x3010);
  cuda::OperandArgs<cuda::args::RowHead, cuda::args::RowOperand> host(3);
  host.head = {7, 129, 4, 33};
  host.operand[0] = {129, 1, p0};
  host.operand[1] = {0, 5, p1};
  host.operand[2].data = p2;
  cuda::args::Row<3> kernel{};
  kernel.head.rows = 7;
  kernel.head.n = 129;
  kernel.head.splits = 4;
  kernel.head.part_len = 33;
  kernel.operand[0].row_stride = 129;
  kernel.operand[0].col_stride = 1;
  kernel.operand[0].data = p0;
  kernel.operand[1].col_stride = 5;
  kernel.operand[1].data = p1;
  kernel.operand[2].data = p2;
  const std::vector<long> words = host.words();
  ASSERT_EQ(words.size() * sizeof(long), sizeof(kernel));
  EXPECT_EQ(std::memcmp(words.data(), &kernel, sizeof(kernel)), 0);

  cuda::OperandArgs<cuda::args::ElementwiseHead, cuda::args::StridedOperand> strided(2);
  strided.head.n = 12;
  strided.head.nd = 2;
  strided.head.shape[1] = 3;
  strided.operand[1].strides[0] = 9;
  strided.operand[1].data = p1;
  cuda::args::Elementwise<2> e{};
  e.head.n = 12;
  e.head.nd = 2;
  e.head.shape[1] = 3;
  e.operand[1].strides[0] = 9;
  e.operand[1].data = p1;
  ASSERT_EQ(strided.words().size() * sizeof(long), sizeof(e));
  EXPECT_EQ(std::memcmp(strided.words().data(), &e, sizeof(e)), 0);
}

// Kernel variants are keys of named fields: variants that differ in any one field are told
// apart (by the program's kernel slots too), and equal ones hash alike.
TEST(CudaArgs, VariantKeysTellEveryFieldApart) {
  std::vector<cuda::RowVariant> rows(13);
  rows[1].threads = 512;
  rows[2].cached_inputs = uint64_t{1} << 40;
  rows[3].vector_in = true;
  rows[4].async_stage = true;
  rows[5].cluster = 8;
  rows[6].vector_out = 2;
  rows[7].vector_passes = true;
  rows[8].chunks = 2;
  rows[9].vec = 8;
  rows[10].min_blocks = 2;
  rows[11].exact = true;
  rows[12].split = 3;
  compiler::KernelSlots slots;
  std::vector<std::shared_ptr<const int>> kernels;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows.size(); ++j) EXPECT_EQ(rows[i] == rows[j], i == j) << i << " " << j;
    kernels.push_back(std::make_shared<const int>(static_cast<int>(i)));
    slots.put(rows[i], kernels.back());
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const void* k = slots.find(rows[i]);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(*static_cast<const int*>(k), static_cast<int>(i));
    cuda::RowVariant copy = rows[i];
    EXPECT_EQ(copy.hash(), rows[i].hash());
  }
  cuda::ElementwiseVariant flat, tiled;
  flat.form = cuda::ElementwiseVariant::Form::flat;
  tiled.form = cuda::ElementwiseVariant::Form::tiled;
  EXPECT_EQ(slots.find(flat), nullptr) << "a key of another type never matches";
  slots.put(flat, kernels[0]);
  EXPECT_EQ(slots.find(flat), kernels[0].get());
  EXPECT_EQ(slots.find(tiled), nullptr);
  flat.scalar_inputs = uint64_t{1} << 63;  // every input of 64 has its bit
  EXPECT_EQ(slots.find(flat), nullptr);
}

namespace {

namespace embedded = cuda::embedded;

bool holds(const embedded::PrecompiledImage& im, const std::string& text) {
  return std::string(reinterpret_cast<const char*>(im.bytes), im.size).find(text) != std::string::npos;
}
bool is_elf(const embedded::PrecompiledImage& im) {
  return im.size > 4 && std::memcmp(im.bytes,
                                    "\x7f"
                                    "ELF",
                                    4) == 0;
}

/* The list's kernels (precompiled.list) as module sources, as kiln makes them. */
std::vector<std::string> listed_sources() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/src/backend/cuda/precompiled.list");
  return cuda::listed_kernel_sources(in);
}

}  // namespace

// The interpreter kiln was built with: cubins for sm_80 and sm_90 (ELF files naming the
// kernel) and PTX for compute_90 (an entry of that name), made at build time by NVRTC.
TEST(CudaInterp, EmbeddedImagesHoldTheInterpreter) {
  if (embedded::precompiled_image_count == 0)
    GTEST_SKIP() << "built without precompiled kernels: " << embedded::precompiled_unavailable;
  std::set<std::string> archs;
  for (size_t i = 0; i < embedded::precompiled_image_count; ++i) {
    const auto& im = embedded::precompiled_images[i];
    if (std::string(im.name) != embedded::kInterpKernel) continue;
    EXPECT_EQ(std::string(im.source), embedded::kInterpSource);
    archs.insert(im.arch);
    ASSERT_GT(im.size, 4u) << im.arch;
    if (im.ptx) {
      EXPECT_TRUE(holds(im, ".entry kiln_interp")) << im.arch;
      EXPECT_EQ(im.bytes[im.size - 1], 0) << "PTX is handed to the driver as a C string";
    } else {
      EXPECT_TRUE(is_elf(im)) << im.arch;
      EXPECT_TRUE(holds(im, embedded::kInterpKernel)) << im.arch;
    }
  }
  EXPECT_EQ(archs, (std::set<std::string>{"sm_80", "sm_90", "compute_90"}));
}

// Every kernel of precompiled.list is built in as a cubin for sm_80 (but thread-block
// clusters) and sm_90 under the
// source kiln makes for it at run time (a kernel the list names but NVRTC rejects, because the
// list is older than the kernels, is left out: run scripts/list_gpu_kernels).
TEST(CudaPrecompiled, EveryListedKernelIsBuiltIn) {
  if (embedded::precompiled_image_count == 0)
    GTEST_SKIP() << "built without precompiled kernels: " << embedded::precompiled_unavailable;
  const std::vector<std::string> listed = listed_sources();
  ASSERT_GE(listed.size(), 10u) << "the list names the language models' kernels";
  for (const std::string& source : listed) {
    for (int major : {8, 9}) {
      if (major < 9 && source.find("__cluster_dims__") != std::string::npos) continue;  // clusters: sm_90 on
      const embedded::PrecompiledImage* im = embedded::precompiled_image("kiln_kernel", source, major, 0);
      ASSERT_NE(im, nullptr) << "sm_" << major << "0 lacks:\n" << source;
      EXPECT_FALSE(im->ptx);
      EXPECT_EQ(im->major, major);
      EXPECT_TRUE(is_elf(*im) && holds(*im, "kiln_kernel")) << source;
    }
  }
}

// Which image a device runs: a cubin of its major version and no newer minor one, else PTX of an
// older or equal capability (the interpreter's only), else none; and only for the same kernel.
TEST(CudaPrecompiled, ImageForEachDevice) {
  if (embedded::precompiled_image_count == 0)
    GTEST_SKIP() << "built without precompiled kernels: " << embedded::precompiled_unavailable;
  auto interp = [](int major, int minor) {
    const auto* im = embedded::precompiled_image(embedded::kInterpKernel, embedded::kInterpSource, major, minor);
    return im ? std::string(im->arch) : std::string("none");
  };
  EXPECT_EQ(interp(8, 0), "sm_80");
  EXPECT_EQ(interp(8, 6), "sm_80");
  EXPECT_EQ(interp(9, 0), "sm_90");
  EXPECT_EQ(interp(10, 0), "compute_90");
  EXPECT_EQ(interp(12, 0), "compute_90");
  EXPECT_EQ(interp(7, 5), "none");
  const std::string source = listed_sources().at(0);
  EXPECT_NE(embedded::precompiled_image("kiln_kernel", source, 9, 0), nullptr);
  EXPECT_EQ(embedded::precompiled_image("kiln_kernel", source, 10, 0), nullptr) << "library kernels: cubins only";
  EXPECT_EQ(embedded::precompiled_image("kiln_other", source, 9, 0), nullptr);
  EXPECT_EQ(embedded::precompiled_image("kiln_kernel", source + " ", 9, 0), nullptr);
}

// sin(x) * y > x, where(that, x, y), as interpreter words: loads of the inputs (operands
// after the two outputs), the members in order, then a store of each output.
TEST(CudaInterp, ProgramOfASmallRegion) {
  FusedProgram p;
  p.ops = {input(0, float32),
           input(1, float32),
           op(std::make_shared<Unary<math::Sin>>(), {0}, float32),
           op(std::make_shared<Binary<math::Multiply>>(), {2, 1}, float32),
           op(std::make_shared<Binary<math::Greater>>(), {3, 0}, bool_),
           op(std::make_shared<Where>(), {4, 0, 1}, float32)};
  p.outputs = {5, 4};
  auto prog = cuda::interp_program(p);
  ASSERT_TRUE(prog.has_value());
  using namespace cuda::args;
  auto w = [](long code, long a = 0, long b = 0, long c = 0) { return code | a << 8 | b << 16 | c << 24; };
  EXPECT_EQ(prog->words, (std::vector<long>{w(kInterpLoad, 2), w(kInterpLoad, 3), w(kInterpSin, 0),
                                            w(kInterpMultiply, 2, 1), w(kInterpGreater, 3, 0), w(kInterpWhere, 4, 0, 1),
                                            w(kInterpStore, 5, 0), w(kInterpStore, 4, 1)}));
  EXPECT_EQ(prog->dtypes, (std::vector<long>{0, kInterpBool, 0, 0}));
}

// What the interpreter leaves to NVRTC: other dtypes (a bfloat16 value here), ops it lacks.
TEST(CudaInterp, RegionsItCannotRunAreLeftToTheKernels) {
  EXPECT_FALSE(cuda::interp_program(elementwise_program()).has_value());
  FusedProgram p;
  p.ops = {input(0, int32), op(std::make_shared<Binary<math::BitwiseAnd>>(), {0, 0}, int32)};
  p.outputs = {1};
  EXPECT_FALSE(cuda::interp_program(p).has_value());
}
