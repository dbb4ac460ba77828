// CUDA source of a row kernel: one block per row of a (rows, n) view, a few passes over the
// row (one per level of reductions), then the per-element outputs. Two ways to hold the row:
// staged (elementwise work recomputed in each pass, rows read from shared memory or global
// memory) and register (each thread holds its elements from load to store and computes
// every element op once).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backend/cuda/codegen.h"
#include "compile/codegen_util.h"
#include "core/hash_fields.h"

namespace kiln::cuda {

using compiler::compute_type;
using compiler::cpp_type;
using compiler::functor;
using compiler::RowOp;
using compiler::wide_type;

size_t RowVariant::hash() const {
  return detail::hash_fields(threads, cached_inputs, vector_in, async_stage, cluster, vector_out, vector_passes, chunks,
                             vec, min_blocks, exact, split);
}

namespace {

constexpr int kLoadsInFlight = 4;  // vector loads a thread issues at once in a split reduction's parts

class RowSource {
 public:
  RowSource(const compiler::RowProgram& p, const RowVariant& var)
      : p_(p), ops_(p.ops), var_(var), level_(compiler::row_pass_levels(p)) {
    for (auto& op : ops_) nin_ += op.prim ? 0 : 1;
    passes_ = level_.empty() ? 0 : *std::max_element(level_.begin(), level_.end());
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (divides_by_row_value(i)) divisors_.insert(static_cast<size_t>(ops_[i].args[1]));
      if (compiler::is_row_reduce(ops_[i])) partial_[i] = static_cast<int>(partial_.size());
    }
  }

  std::string str() {
    header();
    if (var_.split == 3) return column_parts();
    if (var_.split == 1) {  // work item w: part w % splits of row w / splits
      s_ << "  for (long w = blockIdx.x; w < rows * splits; w += gridDim.x) {\n";
      s_ << "    const long r = w / splits, j0 = (w % splits) * part_len, n = min(part_len, n_all - j0);\n";
      for (auto& op : ops_) {
        if (!element_input(op)) continue;
        const std::string k = std::to_string(op.input);
        s_ << "    const " << cpp_type(op.dtype) << "* __restrict__ in" << k << " = in" << k << "_all + j0 * cs" << k
           << ";\n";
      }
    } else if (clustered()) {  // row r: cluster r of the grid's clusters
      s_ << "  for (long r = blockIdx.x / " << var_.cluster << "; r < rows; r += gridDim.x / " << var_.cluster
         << ") {\n";
    } else {
      s_ << "  for (long r = blockIdx.x; r < rows; r += gridDim.x) {\n";
    }
    if (registers())
      load_row_registers();
    else
      stage_row();
    emit_row_ops(0);
    for (int pass = 1; pass <= passes_; ++pass) {
      std::vector<size_t> reductions, roots;
      reductions_at(pass, reductions, roots);
      for (size_t i : reductions) s_ << "    " << wide(i) << " acc" << i << " = " << init(i) << ";\n";
      if (var_.split == 2)
        fold_partials(reductions);
      else if (registers())
        register_pass(reductions, roots);
      else
        staged_pass(reductions, roots);
      if (var_.split == 1) {  // this part's partials; the per-row work is the second kernel's
        for (size_t i : reductions) {
          s_ << "    const " << wide(i) << " p" << i << " = " << block_reduce(i) << ";\n";
          s_ << "    if (tid == 0) part" << i << "[w] = p" << i << ";\n";
        }
        s_ << "    __syncthreads();\n  }\n}\n";
        return s_.str();
      }
      for (size_t i : reductions) {
        const char* ct = compute_type(ops_[i].dtype);
        std::string value = block_reduce(i);
        if (clustered()) {  // the blocks' parts folded in rank order
          s_ << "    const " << wide(i) << " b" << i << " = " << value << ";\n";
          s_ << "    if (tid == 0) *reinterpret_cast<" << wide(i) << "*>(&cl" << i << ") = b" << i << ";\n";
          value = std::string("kiln_cluster_reduce<") + functor(kind(i)) + ">(&cl" + std::to_string(i) + ", " +
                  init(i) + ", " + std::to_string(var_.cluster) + ")";
        }
        s_ << "    const " << ct << " t" << i << " = static_cast<" << ct << ">(static_cast<" << cpp_type(ops_[i].dtype)
           << ">(" << value << "));\n";
        row_value_defined(i, "    ");
      }
      s_ << "    __syncthreads();\n";  // sh is rewritten by the next pass or row
      emit_row_ops(pass);
    }
    std::vector<size_t> elem_outputs;
    for (int o : p_.outputs) {
      if (!ops_[static_cast<size_t>(o)].per_row) elem_outputs.push_back(static_cast<size_t>(o));
    }
    if (!elem_outputs.empty()) {
      if (registers())
        register_outputs(elem_outputs);
      else
        staged_outputs(elem_outputs);
    }
    s_ << "    if (tid == 0" << (clustered() ? " && rank == 0" : "") << ") {\n";
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      const RowOp& op = output_op(o);
      if (!op.per_row) continue;
      s_ << "      out" << o << "[r] = kiln_narrow<" << cpp_type(op.dtype) << ">(t" << p_.outputs[o] << ");\n";
    }
    s_ << "    }\n";
    if (var_.cached_inputs && !registers()) s_ << "    __syncthreads();\n";  // the staged row is replaced next
    s_ << "  }\n}\n";
    return s_.str();
  }

 private:
  bool registers() const { return var_.chunks > 0; }
  bool clustered() const { return var_.cluster > 1 && !registers() && var_.split == 0; }
  bool parted() const { return var_.split == 1 || clustered(); }  // a block holds a part of a row
  // The offset of this block's first output element of row r.
  std::string out_row() const { return clustered() ? "(r * n_all + j0)" : "r * n"; }
  OpKind kind(size_t i) const { return ops_[i].prim->kind(); }
  const char* wide(size_t i) const { return wide_type(kind(i), ops_[i].dtype); }
  // The reductions of pass `pass`, and the element values they fold.
  void reductions_at(int pass, std::vector<size_t>& reductions, std::vector<size_t>& roots) const {
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!compiler::is_row_reduce(ops_[i]) || level_[i] != pass) continue;
      reductions.push_back(i);
      roots.push_back(static_cast<size_t>(ops_[i].args[0]));
    }
  }
  // Reduction i's starting value in its accumulator type, and its fold over the block.
  std::string init(size_t i) const {
    return std::string("static_cast<") + wide(i) + ">(" + functor(kind(i)) + "::init<" + compute_type(ops_[i].dtype) +
           ">())";
  }
  std::string block_reduce(size_t i) const {
    return std::string("kiln_block_reduce<") + functor(kind(i)) + ">(acc" + std::to_string(i) + ", " + init(i) +
           ", sh" + std::to_string(i) + ")";
  }
  const RowOp& output_op(size_t o) const { return ops_[static_cast<size_t>(p_.outputs[o])]; }
  bool cached(int k) const { return ((var_.cached_inputs >> k) & 1) != 0; }
  // An input read per element (not one value per row, not one constant).
  static bool element_input(const RowOp& op) { return !op.prim && !op.per_row && !op.uniform; }
  std::string vec_type(Dtype d, int v) const {
    return "kiln_vec<" + std::string(cpp_type(d)) + ", " + std::to_string(v) + ">";
  }

  // A float division of every element by one value of the row: one reciprocal per row.
  bool divides_by_row_value(size_t i) const {
    const RowOp& op = ops_[i];
    if (!op.prim || op.per_row || op.prim->kind() != OpKind::Divide) return false;
    const RowOp& b = ops_[static_cast<size_t>(op.args[1])];
    const bool float_math = op.dtype == float32 || op.dtype == bfloat16 || op.dtype == float16;
    return b.per_row && float_math && b.dtype == op.dtype && ops_[static_cast<size_t>(op.args[0])].dtype == op.dtype;
  }

  // After per-row value t<i> is defined: its divisor form when elements are divided by it.
  void row_value_defined(size_t i, const std::string& indent) {
    if (divisors_.count(i)) s_ << indent << "const KilnDivisor d" << i << " = kiln_divisor(t" << i << ");\n";
  }

  // Operand k of the kernel's args::Row: inputs first, then outputs, then partials.
  static std::string operand(int k) { return "a.operand[" + std::to_string(k) + "]"; }

  void header() {
    const int nout = static_cast<int>(p_.outputs.size());
    s_ << "#include \"" << kSupportHeader << "\"\n\n";
    const int nred = var_.split ? static_cast<int>(partial_.size()) : 0;
    s_ << "extern \"C\" __global__ void __launch_bounds__(" << var_.threads
       << (registers() && var_.min_blocks > 0 ? ", " + std::to_string(var_.min_blocks) : "") << ")"
       << (clustered() ? " __cluster_dims__(" + std::to_string(var_.cluster) + ", 1, 1)" : "")
       << " kiln_kernel(const kiln::cuda::args::Row<" << nin_ + nout + nred << "> a) {\n";
    s_ << "  const long rows = a.head.rows, " << (parted() ? "n_all" : "n")
       << " = a.head.n;\n  const int tid = threadIdx.x;\n";
    if (clustered()) {  // block `rank` of each cluster holds elements j0 ... of its row (n of them)
      s_ << "  const unsigned rank = blockIdx.x % " << var_.cluster << ";\n";
      s_ << "  const long n_part = ((n_all + " << var_.cluster - 1 << ") / " << var_.cluster << " + 15) / 16 * 16;\n";
      s_ << "  const long j0 = rank * n_part, n = max(0L, min(n_part, n_all - j0));\n";
    }
    if (var_.cached_inputs && !registers()) {
      s_ << "  extern __shared__ __align__(16) unsigned char kiln_smem[];\n  long smem_at = 0;\n";
    }
    for (auto& op : ops_) {
      if (op.prim) continue;
      const char* t = cpp_type(op.dtype);
      std::string k = std::to_string(op.input);
      const bool offset = parted() && element_input(op);  // each part points in<k> at its start
      s_ << "  const " << t << "* __restrict__ in" << k << (offset ? "_all" : "") << " = static_cast<const " << t
         << "*>(" << operand(op.input) << ".data);\n";
      s_ << "  const long rs" << k << " = " << operand(op.input) << ".row_stride, cs" << k << " = " << operand(op.input)
         << ".col_stride;\n";
      if (clustered() && element_input(op)) {
        s_ << "  const " << t << "* __restrict__ in" << k << " = in" << k << "_all + j0 * cs" << k << ";\n";
      }
      if (cached(op.input) && !registers()) {  // this row of the input, staged in shared memory (cs == 1)
        s_ << "  " << t << "* c" << k << " = reinterpret_cast<" << t << "*>(kiln_smem + smem_at);\n";
        s_ << "  smem_at += (" << (clustered() ? "n_part" : "n") << " * static_cast<long>(sizeof(" << t
           << ")) + 15) / 16 * 16;\n";
      }
    }
    for (int o = 0; o < nout; ++o) {
      const char* t = cpp_type(output_op(static_cast<size_t>(o)).dtype);
      s_ << "  " << t << "* __restrict__ out" << o << " = static_cast<" << t << "*>(" << operand(nin_ + o)
         << ".data);\n";
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!compiler::is_row_reduce(ops_[i])) continue;
      s_ << "  __shared__ " << wide(i) << " sh" << i << "[32];\n";
      if (clustered()) s_ << "  __shared__ unsigned long long cl" << i << ";  // this block's part of the reduction\n";
    }
    if (var_.split) {
      for (auto [i, slot] : partial_) {
        s_ << "  " << wide(i) << "* __restrict__ part" << i << " = static_cast<" << wide(i) << "*>("
           << operand(nin_ + nout + slot) << ".data);\n";
      }
      s_ << "  const long splits = a.head.splits, part_len = a.head.part_len;\n";
    }
    if (registers()) {
      // Chunk c of a thread holds elements (c * threads + tid) * vec ...; only the last chunk
      // can run past the row.
      if (var_.exact)
        s_ << "  constexpr bool last_ok = true;\n";
      else
        s_ << "  const bool last_ok = (" << (var_.chunks - 1) << "L * " << var_.threads << " + tid) * " << var_.vec
           << " < n;\n";
    }
  }

  // This row of every per-element input into registers a<k>[c], all loads issued at once.
  void load_row_registers() {
    for (auto& op : ops_) {
      if (!element_input(op)) continue;
      const std::string k = std::to_string(op.input), vt = vec_type(op.dtype, var_.vec);
      s_ << "    " << vt << " a" << k << "[" << var_.chunks << "];\n";
      for (int c = 0; c < var_.chunks; ++c) {
        const std::string dst = "a" + k + "[" + std::to_string(c) + "]";
        const std::string at = "(" + std::to_string(c) + "L * " + std::to_string(var_.threads) + " + tid)";
        s_ << "    " << dst << " = {};\n    " << (c == var_.chunks - 1 ? "if (last_ok) " : "");
        if (var_.vec > 1) {  // cs == 1 and aligned rows: one vector access
          s_ << dst << " = reinterpret_cast<const " << vt << "*>(in" << k << " + r * rs" << k << ")[" << at << "];\n";
        } else {
          s_ << dst << ".v[0] = in" << k << "[r * rs" << k << " + " << at << " * cs" << k << "];\n";
        }
      }
    }
    // Every element op of the row, one slot per element of the thread.
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].per_row || !ops_[i].prim) continue;
      s_ << "    " << compute_type(ops_[i].dtype) << " v" << i << "[" << var_.chunks * var_.vec << "];\n";
    }
  }

  void stage_row() {
    for (auto& op : ops_) {
      if (op.prim || !cached(op.input)) continue;
      std::string k = std::to_string(op.input);
      if (var_.vector_in) {
        const int v = 16 / size_of(op.dtype);
        std::string vec = vec_type(op.dtype, v);
        const std::string to = "reinterpret_cast<" + vec + "*>(c" + k + ") + j";
        const std::string from = "reinterpret_cast<const " + vec + "*>(in" + k + " + r * rs" + k + ") + j";
        s_ << "    for (long j = tid; j < n / " << v << "; j += blockDim.x) ";
        if (var_.async_stage)
          s_ << "kiln_stage16(" << to << ", " << from << ");\n";
        else
          s_ << "*(" << to << ") = *(" << from << ");\n";
      } else {
        s_ << "    for (long j = tid; j < n; j += blockDim.x) c" << k << "[j] = in" << k << "[r * rs" << k
           << " + j];\n";
      }
    }
    if (var_.vector_in && var_.async_stage) s_ << "    kiln_stage_wait();\n";
    if (var_.cached_inputs) s_ << "    __syncthreads();\n";
  }

  // `const ct t<i> = ...;` for op i; element inputs read at `element` (staged: j; register: c, e).
  void emit_op(size_t i, const std::string& indent, int c = 0, int e = 0) {
    const RowOp& op = ops_[i];
    const char* ct = compute_type(op.dtype);
    s_ << indent << "const " << ct << " t" << i << " = ";
    if (op.prim && divides_by_row_value(i)) {
      const std::string a = std::to_string(op.args[0]), b = std::to_string(op.args[1]);
      std::vector<std::string> args{"t" + a, "d" + b};
      std::string fn = "kiln_div_by";
      if (division_ == Division::fast) {
        args.push_back("slow");
        fn = "kiln_div_by_fast";
      } else if (division_ == Division::plain) {
        args[1] = "t" + b;
        fn.clear();
      }
      s_ << compiler::rounded_expr(OpKind::Divide, *op.prim, op.dtype, args, {op.dtype, op.dtype}, fn) << ";\n";
      return;
    }
    if (op.prim) {
      s_ << row_member_expr(ops_, i) << ";\n";
      if (op.per_row) row_value_defined(i, indent);
      return;
    }
    std::string k = std::to_string(op.input);
    if (op.per_row || op.uniform) {
      s_ << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << "]);\n";
      row_value_defined(i, indent);
    } else if (registers())
      s_ << "static_cast<" << ct << ">(a" << k << "[" << c << "].v[" << e << "]);\n";
    else if (var_.vector_passes)
      s_ << "static_cast<" << ct << ">(a" << k << ".v[" << e << "]);\n";
    else if (cached(op.input))
      s_ << "static_cast<" << ct << ">(c" << k << "[j]);\n";
    else
      s_ << "static_cast<" << ct << ">(in" << k << "[r * rs" << k << " + j * cs" << k << "]);\n";
  }

  void emit_row_ops(int lvl) {
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].per_row && !compiler::is_row_reduce(ops_[i]) && level_[i] == lvl) emit_op(i, "    ");
    }
  }

  // Split rows whose neighbours lie next to each other (a sum over the first axis): a thread
  // a row, so a warp reads 32 neighbouring addresses at each j; block w covers rows
  // (w % row_blocks) * threads ... of part w / row_blocks of their length. No block
  // reduction: each thread writes its row's partial. Rows aligned to vectors take
  // column_vector_parts instead.
  std::string column_parts() {
    if (var_.vector_passes) return column_vector_parts();
    std::vector<size_t> reductions, roots;
    reductions_at(1, reductions, roots);  // split programs have one pass
    s_ << "  const long row_blocks = (rows + blockDim.x - 1) / blockDim.x;\n";
    s_ << "  for (long w = blockIdx.x; w < row_blocks * splits; w += gridDim.x) {\n";
    s_ << "    const long r = (w % row_blocks) * blockDim.x + tid, s = w / row_blocks;\n";
    s_ << "    if (r >= rows) continue;\n";
    s_ << "    const long j0 = s * part_len, j1 = min(n, j0 + part_len);\n";
    emit_row_ops(0);
    for (size_t i : reductions) s_ << "    " << wide(i) << " acc" << i << " = " << init(i) << ";\n";
    // 8 loads in flight a thread (4 measured 5-18% slower, 16 no faster).
    s_ << "#pragma unroll 8\n    for (long j = j0; j < j1; ++j) {\n";
    for (size_t i : compiler::row_element_closure(p_, roots)) emit_op(i, "      ");
    for (size_t i : reductions) fold(i, "      ");
    s_ << "    }\n";
    for (size_t i : reductions) s_ << "    part" << i << "[r * splits + s] = acc" << i << ";\n";
    s_ << "  }\n}\n";
    return s_.str();
  }

  // Split rows next to each other, a vector of v of them a lane (every input's rows aligned
  // to v, rows a multiple of v, no per-row values): a warp reads 32 v neighbouring rows at
  // each j in one access a lane, the block's 8 warps take every 8th j of the part, and the
  // warps' accumulators are folded through shared memory at the part's end. Block w covers
  // rows (w % row_blocks) * 32 v ... of part w / row_blocks.
  std::string column_vector_parts() {
    const int v = var_.vector_out, span = 32 * v;
    std::vector<size_t> reductions, roots;
    reductions_at(1, reductions, roots);
    const std::set<size_t> closure = compiler::row_element_closure(p_, roots);
    s_ << "  __shared__ __align__(8) unsigned char kiln_colsh[8 * " << span + 1
       << " * 8];  // a warp's row of 8-byte slots\n";
    s_ << "  const int lane = tid & 31, warp = tid >> 5;\n";
    s_ << "  const long row_blocks = (rows + " << span - 1 << ") / " << span << ";\n";
    s_ << "  for (long w = blockIdx.x; w < row_blocks * splits; w += gridDim.x) {\n";
    s_ << "    const long r0 = (w % row_blocks) * " << span << ", r = r0 + lane * " << v << ", s = w / row_blocks;\n";
    s_ << "    const long j0 = s * part_len, j1 = min(n, j0 + part_len);\n";
    for (size_t i : reductions) {
      s_ << "    " << wide(i) << " acc" << i << "v[" << v << "];\n";
      s_ << "    for (int e = 0; e < " << v << "; ++e) acc" << i << "v[e] = " << init(i) << ";\n";
    }
    // 4 vector loads in flight a thread (the loop is unrolled, the folds wait on the loads).
    s_ << "    if (r < rows) {\n#pragma unroll 4\n      for (long j = j0 + warp; j < j1; j += 8) {\n";
    for (size_t i : closure) {
      const RowOp& op = ops_[i];
      if (!element_input(op)) continue;
      const std::string k = std::to_string(op.input), vt = vec_type(op.dtype, v);
      s_ << "        const " << vt << " a" << k << " = *reinterpret_cast<const " << vt << "*>(in" << k
         << " + r + j * cs" << k << ");\n";
    }
    fold_vector(closure, reductions, v, "        ", true);
    s_ << "      }\n    }\n";
    for (size_t i : reductions) {
      const std::string sh = "sh" + std::to_string(i) + "c";
      s_ << "    {\n      " << wide(i) << "* " << sh << " = reinterpret_cast<" << wide(i) << "*>(kiln_colsh);\n";
      s_ << "      for (int e = 0; e < " << v << "; ++e) " << sh << "[warp * " << span + 1 << " + lane * " << v
         << " + e] = acc" << i << "v[e];\n";
      s_ << "      __syncthreads();\n";
      s_ << "      for (int q = tid; q < " << span << " && r0 + q < rows; q += blockDim.x) {\n";
      s_ << "        " << wide(i) << " t = " << sh << "[q];\n";
      s_ << "        for (int k = 1; k < 8; ++k) t = " << functor(kind(i)) << "{}(t, " << sh << "[k * " << span + 1
         << " + q]);\n";
      s_ << "        part" << i << "[(r0 + q) * splits + s] = t;\n      }\n";
      s_ << "      __syncthreads();  // the slots are written again next\n    }\n";
    }
    s_ << "  }\n}\n";
    return s_.str();
  }

  // Split rows, second kernel: the row's partials folded by each thread, then by the block.
  void fold_partials(const std::vector<size_t>& reductions) {
    s_ << "    for (long s = tid; s < splits; s += blockDim.x) {\n";
    for (size_t i : reductions) {
      s_ << "      acc" << i << " = " << functor(kind(i)) << "{}(acc" << i << ", part" << i << "[r * splits + s]);\n";
    }
    s_ << "    }\n";
  }

  void fold(size_t i, const std::string& indent, const std::string& guard = "") {
    s_ << indent << "acc" << i << " = " << guard << functor(kind(i)) << "{}(acc" << i << ", static_cast<" << wide(i)
       << ">(t" << ops_[i].args[0] << "))" << (guard.empty() ? "" : " : acc" + std::to_string(i)) << ";\n";
  }

  void staged_pass(const std::vector<size_t>& reductions, const std::vector<size_t>& roots) {
    const std::set<size_t> closure = compiler::row_element_closure(p_, roots);
    if (var_.vector_passes) {
      const int v = var_.vector_out;
      s_ << "    {\n    long jv = tid;\n";  // a scope a pass: each pass declares jv
      if (var_.split == 1) {
        // A part is many vectors a thread: kLoadsInFlight loads issued before the folds, which
        // wait on each other (one load in flight left the bfloat16 sum at 0.87 of a copy).
        s_ << "    for (; jv + " << kLoadsInFlight - 1 << " * blockDim.x < n / " << v << "; jv += " << kLoadsInFlight
           << " * blockDim.x) {\n";
        for (int u = 0; u < kLoadsInFlight; ++u)
          load_vectors(closure, "_" + std::to_string(u), " + " + std::to_string(u) + " * blockDim.x");
        for (int u = 0; u < kLoadsInFlight; ++u) {
          s_ << "      {\n";
          for (size_t i : closure) {
            if (!element_input(ops_[i])) continue;
            const std::string k = std::to_string(ops_[i].input);
            s_ << "        const auto& a" << k << " = a" << k << "_" << u << ";\n";
          }
          fold_vector(closure, reductions, v);
          s_ << "      }\n";
        }
        s_ << "    }\n";
      }
      s_ << "    for (; jv < n / " << v << "; jv += blockDim.x) {\n";
      load_vectors(closure);
      fold_vector(closure, reductions, v);
      s_ << "    }\n    }\n";
      return;
    }
    s_ << "    for (long j = tid; j < n; j += blockDim.x) {\n";
    for (size_t i : closure) emit_op(i, "      ");
    for (size_t i : reductions) fold(i, "      ");
    s_ << "    }\n";
  }

  // The elements of vectors a<k> folded into the reductions, unrolled: constant indices
  // keep the vectors in registers. `per_element`: element e folds into acc<i>v[e], not acc<i>.
  void fold_vector(const std::set<size_t>& closure, const std::vector<size_t>& reductions, int v,
                   const std::string& indent = "      ", bool per_element = false) {
    for (int e = 0; e < v; ++e) {
      s_ << indent << "{\n";
      for (size_t i : reductions) {
        if (per_element) s_ << indent << "  " << wide(i) << "& acc" << i << " = acc" << i << "v[" << e << "];\n";
      }
      for (size_t i : closure) emit_op(i, indent + "  ", 0, e);
      for (size_t i : reductions) fold(i, indent + "  ");
      s_ << indent << "}\n";
    }
  }

  // Vector passes: elements (jv + ahead) * v ... of every per-element input the ops read, one
  // load each (from the staged row in shared memory, or from global memory), as a<k><suffix>.
  void load_vectors(const std::set<size_t>& closure, const std::string& suffix = "", const std::string& ahead = "") {
    for (size_t i : closure) {
      const RowOp& op = ops_[i];
      if (!element_input(op)) continue;
      const std::string k = std::to_string(op.input), vt = vec_type(op.dtype, var_.vector_out);
      s_ << "      const " << vt << " a" << k << suffix << " = reinterpret_cast<const " << vt << "*>("
         << (cached(op.input) ? "c" + k : "in" + k + " + r * rs" + k) << ")[jv" << ahead << "];\n";
    }
  }

  void staged_outputs(const std::vector<size_t>& elem_outputs) {
    // With vector stores each thread computes vector_out neighbouring elements.
    const int v = std::max(var_.vector_out, 1);
    s_ << "    for (long jv = tid; jv < n / " << v << "; jv += blockDim.x) {\n";
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (!output_op(o).per_row) s_ << "      " << vec_type(output_op(o).dtype, v) << " r" << o << ";\n";
    }
    const std::set<size_t> closure = compiler::row_element_closure(p_, elem_outputs);
    if (var_.vector_passes) load_vectors(closure);
    for (int e = 0; e < v; ++e) {  // unrolled here: constant indices keep the vector in registers
      s_ << "      {\n";
      if (!var_.vector_passes) s_ << "        const long j = jv * " << v << " + " << e << ";\n";
      for (size_t i : closure) emit_op(i, "        ", 0, e);
      store_element("", e, "        ");
      s_ << "      }\n";
    }
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (!output_op(o).per_row)
        s_ << "      reinterpret_cast<decltype(r" << o << ")*>(out" << o << " + " << out_row() << ")[jv] = r" << o
           << ";\n";
    }
    s_ << "    }\n";
  }

  // Element e of every per-element output into its vector r<o><chunk> ("" or "[c]").
  void store_element(const std::string& chunk, int e, const std::string& indent) {
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (output_op(o).per_row) continue;
      s_ << indent << "r" << o << chunk << ".v[" << e << "] = kiln_narrow<" << cpp_type(output_op(o).dtype) << ">(t"
         << p_.outputs[o] << ");\n";
    }
  }

  void register_elements(const std::set<size_t>& closure, const std::function<void(int, int, const std::string&)>& body,
                         const std::string& indent) {
    for (int c = 0; c < var_.chunks; ++c) register_chunk(closure, c, body, indent);
  }

  // Chunk c's elements, one scope each: earlier element values are read back from their
  // slots v<i>[q], new ones computed once and kept there for later passes (constant indices
  // keep the slots in registers).
  void register_chunk(const std::set<size_t>& closure, int c,
                      const std::function<void(int, int, const std::string&)>& body, const std::string& indent) {
    const std::string in = indent + "  ";
    for (int e = 0; e < var_.vec; ++e) {
      const int q = c * var_.vec + e;
      s_ << indent << "{\n";
      for (size_t i : closure) {
        if (!ops_[i].prim) {
          emit_op(i, in, c, e);  // a register of the loaded row
        } else if (done_.count(i)) {
          s_ << in << "const " << compute_type(ops_[i].dtype) << " t" << i << " = v" << i << "[" << q << "];\n";
        } else {
          emit_op(i, in, c, e);
          s_ << in << "v" << i << "[" << q << "] = t" << i << ";\n";
        }
      }
      body(c, e, in);
      s_ << indent << "}\n";
    }
  }

  void register_pass(const std::vector<size_t>& reductions, const std::vector<size_t>& roots) {
    const std::set<size_t> closure = compiler::row_element_closure(p_, roots);
    register_elements(
        closure,
        [&](int c, int, const std::string& in) {
          for (size_t i : reductions) fold(i, in, c == var_.chunks - 1 ? "last_ok ? " : "");
        },
        "    ");
    done_.insert(closure.begin(), closure.end());
  }

  void register_outputs(const std::vector<size_t>& elem_outputs) {
    for (size_t o = 0; o < p_.outputs.size(); ++o) {
      if (!output_op(o).per_row)
        s_ << "    " << vec_type(output_op(o).dtype, var_.vec) << " r" << o << "[" << var_.chunks << "];\n";
    }
    const std::set<size_t> closure = compiler::row_element_closure(p_, elem_outputs);
    auto store = [&](int c, int e, const std::string& in) { store_element("[" + std::to_string(c) + "]", e, in); };
    std::string any_slow_divisor;  // "!d3.fast || ..." over the divisors these elements use
    for (size_t i : closure) {
      if (done_.count(i) || !divides_by_row_value(i)) continue;
      any_slow_divisor += (any_slow_divisor.empty() ? "!d" : " || !d") + std::to_string(ops_[i].args[1]) + ".fast";
    }
    if (!any_slow_divisor.empty()) {
      // Divisions by a row value without a branch each; a chunk with any element outside the
      // fast form's range is computed again with the full form. (Per chunk, not per thread:
      // the chunk's dividends are all that must stay live for the second try.)
      for (int c = 0; c < var_.chunks; ++c) {
        s_ << "    {\n      bool slow = " << any_slow_divisor << ";\n";
        division_ = Division::fast;
        register_chunk(closure, c, store, "      ");
        division_ = Division::plain;  // no per-element check here: it would keep 8 flags live
        s_ << "      if (slow) {\n";
        register_chunk(closure, c, store, "        ");
        s_ << "      }\n    }\n";
        division_ = Division::checked;
      }
    } else {
      register_elements(closure, store, "    ");
    }
    done_.insert(closure.begin(), closure.end());
    for (int c = 0; c < var_.chunks; ++c) {
      s_ << "    " << (c == var_.chunks - 1 ? "if (last_ok) {\n" : "{\n");
      for (size_t o = 0; o < p_.outputs.size(); ++o) {
        if (output_op(o).per_row) continue;
        s_ << "      reinterpret_cast<" << vec_type(output_op(o).dtype, var_.vec) << "*>(out" << o << " + r * n)[" << c
           << "L * " << var_.threads << " + tid] = r" << o << "[" << c << "];\n";
      }
      s_ << "    }\n";
    }
  }

  const compiler::RowProgram& p_;
  const std::vector<RowOp>& ops_;
  const RowVariant& var_;
  const std::vector<int> level_;
  int nin_ = 0;
  int passes_ = 0;
  std::set<size_t> divisors_;  // per-row values that elements are divided by
  std::map<size_t, int> partial_;  // split rows: reduction op -> its partials among the operands after the outputs
  std::set<size_t> done_;  // register mode: element ops already computed this row
  // How an element is divided by a row value: kiln_div_by, kiln_div_by_fast, or a / b.
  enum class Division { checked, fast, plain } division_ = Division::checked;
  std::ostringstream s_;
};

}  // namespace

int64_t cluster_part(int64_t n, int cluster) {
  return ((n + cluster - 1) / cluster + 15) / 16 * 16;
}  // as header() emits

std::string row_source(const compiler::RowProgram& p, const RowVariant& variant) { return RowSource(p, variant).str(); }

}  // namespace kiln::cuda
