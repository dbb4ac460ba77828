// GGUF (versions 2 and 3, little-endian): "GGUF", version, tensor and metadata counts; the
// metadata key/value pairs; the tensor infos (name, dims innermost first, type, offset into
// the data section); then the data section, aligned to general.alignment (default 32).
// Every length and offset is checked against the bytes that remain before it is used.
#include <cstring>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "llm/affine.h"
#include "llm/ggml_types.h"
#include "llm/model_file_impl.h"

namespace kiln::llm {

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;  // arrays of arrays nest at most this deep
constexpr uint64_t kMaxElements = uint64_t{1} << 50;
constexpr int64_t kRowsPerTask = 64;  // rows converted by one pool task

enum ValueType : uint32_t { U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64, kNumValueTypes };
constexpr const char* kValueTypeNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                           "bool",  "string", "array",  "uint64", "int64",  "float64"};
// The fewest bytes a value of each type takes: bounds element counts before anything is allocated.
constexpr uint64_t kMinBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

class Reader {
 public:
  explicit Reader(const detail::MappedFile& f) : data_(f.data()), size_(f.size()), path_(f.path()) {}

  size_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <class... Parts>
  [[noreturn]] void error(const std::string& field, const Parts&... msg) const {
    fail("gguf", path_, ": ", field, ": ", msg...);
  }
  template <class T>
  T get(const std::string& field) {
    if (left() < sizeof(T))
      error(field, "truncated: needs ", sizeof(T), " bytes at offset ", pos_, ", file ends at ", size_);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& field) {
    const uint64_t n = get<uint64_t>(field);
    if (n > left()) error(field, "string length ", n, " exceeds the ", left(), " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A count of items each at least `min_bytes` long must fit in what remains of the file.
  uint64_t count(const std::string& field, const char* what, uint64_t min_bytes) {
    const uint64_t n = get<uint64_t>(field);
    if (n > left() / min_bytes) error(field, what, " ", n, " cannot fit in the ", left(), " bytes left in the file");
    return n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
};

MetaValue::Kind kind_of(uint32_t type) {
  switch (type) {
    case F32:
    case F64: return MetaValue::Kind::real;
    case BOOL: return MetaValue::Kind::boolean;
    case STRING: return MetaValue::Kind::string;
    case ARRAY: return MetaValue::Kind::array;
    default: return MetaValue::Kind::integer;
  }
}

uint32_t value_type(Reader& r, const std::string& field) {
  const uint32_t t = r.get<uint32_t>(field);
  if (t >= kNumValueTypes) r.error(field, "unknown value type ", t);
  return t;
}

// One scalar of an integer or boolean type as int64; `out_of_range` is set for a uint64 past INT64_MAX.
int64_t read_integer(Reader& r, uint32_t type, const std::string& field, bool* out_of_range) {
  switch (type) {
    case U8: return r.get<uint8_t>(field);
    case I8: return r.get<int8_t>(field);
    case U16: return r.get<uint16_t>(field);
    case I16: return r.get<int16_t>(field);
    case U32: return r.get<uint32_t>(field);
    case I32: return r.get<int32_t>(field);
    case I64: return r.get<int64_t>(field);
    case BOOL: return r.get<uint8_t>(field) != 0;
    default: {  // U64
      const uint64_t v = r.get<uint64_t>(field);
      if (v > static_cast<uint64_t>(INT64_MAX)) *out_of_range = true;
      return static_cast<int64_t>(v);
    }
  }
}

double read_real(Reader& r, uint32_t type, const std::string& field) {
  return type == F32 ? static_cast<double>(r.get<float>(field)) : r.get<double>(field);
}

MetaValue read_value(Reader& r, uint32_t type, const std::string& field, int depth) {
  MetaValue v;
  v.kind = kind_of(type);
  v.type = kValueTypeNames[type];
  switch (v.kind) {
    case MetaValue::Kind::integer: v.integer = read_integer(r, type, field, &v.out_of_range); break;
    case MetaValue::Kind::boolean: v.boolean = read_integer(r, type, field, &v.out_of_range) != 0; break;
    case MetaValue::Kind::real: v.real = read_real(r, type, field); break;
    case MetaValue::Kind::string: v.str = r.string(field); break;
    case MetaValue::Kind::array: {
      if (depth >= kMaxArrayDepth) r.error(field, "arrays nested deeper than ", kMaxArrayDepth);
      const uint32_t et = value_type(r, field);
      const uint64_t n = r.count(field, "array length", kMinBytes[et]);
      v.elem = kind_of(et);
      v.type = std::string("array of ") + kValueTypeNames[et];
      for (uint64_t i = 0; i < n; ++i) {
        switch (v.elem) {
          case MetaValue::Kind::integer:
          case MetaValue::Kind::boolean: v.ints.push_back(read_integer(r, et, field, &v.out_of_range)); break;
          case MetaValue::Kind::real: v.reals.push_back(read_real(r, et, field)); break;
          case MetaValue::Kind::string: v.strings.push_back(r.string(field)); break;
          case MetaValue::Kind::array: v.nested.push_back(read_value(r, et, field, depth + 1)); break;
        }
      }
      break;
    }
  }
  return v;
}

struct TensorRecord {
  std::string name;
  std::vector<uint64_t> ne;  // innermost first, as stored
  const GgmlTypeInfo* type = nullptr;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
};

TensorRecord read_tensor_info(Reader& r, uint64_t index) {
  TensorRecord t;
  t.name = r.string("tensor #" + std::to_string(index) + " name");
  const std::string field = "tensor '" + t.name + "'";
  const uint32_t nd = r.get<uint32_t>(field);
  if (nd == 0 || nd > kMaxDims) r.error(field, "has ", nd, " dimensions (1 to ", kMaxDims, " allowed)");
  uint64_t elements = 1;
  for (uint32_t i = 0; i < nd; ++i) {
    const uint64_t d = r.get<uint64_t>(field);
    if (d > kMaxElements || (d > 0 && elements > kMaxElements / d))
      r.error(field, "dimension ", i, " of ", d, " makes the tensor absurdly large");
    elements *= d;
    t.ne.push_back(d);
  }
  const uint32_t type = r.get<uint32_t>(field);
  t.type = ggml_type_info(type);
  if (!t.type) r.error(field, "unknown tensor type ", type);
  if (t.ne[0] % t.type->block != 0)
    r.error(field, "row of ", t.ne[0], " elements is not a whole number of ", t.type->name, " blocks of ",
            t.type->block);
  t.bytes = elements / t.type->block * t.type->block_bytes;  // < 2^50 * 292 / 1: no overflow
  t.offset = r.get<uint64_t>(field);
  return t;
}

Shape logical_shape(const std::vector<uint64_t>& ne) {
  Shape s;
  for (size_t i = ne.size(); i-- > 0;) s.push_back(static_cast<int64_t>(ne[i]));
  return s;
}

// Block-quantized rows to affine groups of 32 (exact) or to float32 values.
Weight convert(const std::shared_ptr<const detail::MappedFile>& file, size_t at, const TensorRecord& t) {
  const GgmlType type = static_cast<GgmlType>(t.type->id);
  const int64_t cols = static_cast<int64_t>(t.ne[0]);
  Shape shape = logical_shape(t.ne);
  const int64_t rows = cols == 0 ? 0 : detail::shape_size(shape) / cols;
  const size_t row_bytes = static_cast<size_t>(cols) / t.type->block * t.type->block_bytes;
  const uint8_t* src = file->data() + at;
  if (dequantized_type(type)) {
    detail::Tensor out(shape, float32);
    out.allocate();
    float* dst = out.data<float>();
    detail::parallel_for(rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) dequantize_row(type, src + r * row_bytes, cols, dst + r * cols);
    });
    return Weight{Array::from_tensor(std::move(out), Device::cpu()), {}, {}, 0, 0};
  }
  const int bits = affine_bits(type);
  Shape packed = shape, groups = shape;
  packed.back() = cols * bits / 32;
  groups.back() = cols / 32;
  detail::Tensor w(packed, uint32);
  w.allocate();
  std::vector<float> scales(static_cast<size_t>(rows * (cols / 32))), biases(scales.size());
  uint32_t* words = w.data<uint32_t>();
  detail::parallel_for(rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const size_t g = static_cast<size_t>(r * (cols / 32));
      affine_row(type, src + r * row_bytes, cols, codes.data(), scales.data() + g, biases.data() + g);
      pack_codes(codes.data(), cols, bits, words + r * packed.back());
    }
  });
  auto [s, b] = group_params(scales, biases, groups);
  return Weight{Array::from_tensor(std::move(w), Device::cpu()), s, b, 32, bits};
}

std::string supported_types() { return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K"; }

TensorEntry make_entry(const std::shared_ptr<const detail::MappedFile>& file, size_t data_start,
                       const TensorRecord& t) {
  TensorEntry e;
  e.info = TensorInfo{t.name, t.type->name, logical_shape(t.ne)};
  const size_t at = data_start + static_cast<size_t>(t.offset);
  const GgmlType type = static_cast<GgmlType>(t.type->id);
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: {
      const Dtype dt = type == GgmlType::F32 ? float32 : type == GgmlType::F16 ? float16 : bfloat16;
      Shape shape = e.info.shape;
      e.load = [file, at, shape, dt] { return Weight{detail::mapped_array(file, at, shape, dt), {}, {}, 0, 0}; };
      return e;
    }
    default: break;
  }
  if (affine_bits(type) || dequantized_type(type)) {
    e.converts = true;
    e.dequantizes = dequantized_type(type);
    e.load = [file, at, t] { return convert(file, at, t); };
    return e;
  }
  const std::string path = file->path(), name = t.name, tname = t.type->name;
  e.load = [path, name, tname]() -> Weight {
    fail("gguf", path, ": tensor '", name, "': type ", tname, " is not supported (kiln reads ", supported_types(), ")");
  };
  return e;
}

}  // namespace

std::unique_ptr<ModelFile::Impl> read_gguf(std::shared_ptr<const detail::MappedFile> file) {
  Reader r(*file);
  auto impl = std::make_unique<ModelFile::Impl>();
  impl->path = file->path();
  impl->format = "gguf";
  impl->files.push_back(file);

  const uint32_t magic = r.get<uint32_t>("header");
  if (std::memcmp(&magic, "GGUF", 4) != 0) r.error("header", "not a GGUF file (no 'GGUF' magic)");
  const uint32_t version = r.get<uint32_t>("header");
  if (version == 0x02000000u || version == 0x03000000u) r.error("header", "big-endian GGUF is not supported");
  if (version != 2 && version != 3) r.error("header", "version ", version, " is not supported (2 and 3 are)");
  const uint64_t n_tensors = r.count("header", "tensor count", 32);  // name length, rank, a dim, type, offset
  const uint64_t n_kv = r.count("header", "metadata count", 13);  // key length, type, one byte

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("metadata #" + std::to_string(i) + " key");
    const std::string field = "metadata '" + key + "'";
    const uint32_t type = value_type(r, field);
    MetaValue v = read_value(r, type, field, 0);
    if (impl->meta.count(key)) r.error(field, "duplicate key");
    impl->meta.emplace(std::move(key), std::move(v));
  }

  uint64_t alignment = 32;
  if (auto it = impl->meta.find("general.alignment"); it != impl->meta.end()) {
    const MetaValue& a = it->second;
    if (a.type != "uint32") r.error("metadata 'general.alignment'", "is ", a.type, ", not uint32");
    if (a.integer == 0 || (a.integer & (a.integer - 1)) != 0)
      r.error("metadata 'general.alignment'", a.integer, " is not a power of two");
    alignment = static_cast<uint64_t>(a.integer);
  }

  std::vector<TensorRecord> records;
  for (uint64_t i = 0; i < n_tensors; ++i) records.push_back(read_tensor_info(r, i));
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;  // pos < 2^63, alignment < 2^32
  const uint64_t data_size = data_start <= file->size() ? file->size() - data_start : 0;

  for (const auto& t : records) {
    const std::string field = "tensor '" + t.name + "'";
    if (t.offset % alignment != 0)
      r.error(field, "offset ", t.offset, " is not a multiple of the alignment ", alignment);
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      r.error(field, "data [", t.offset, ", +", t.bytes, ") runs past the end of the file (the data section holds ",
              data_size, " bytes)");
    if (impl->tensors.count(t.name)) r.error(field, "duplicate tensor name");
    impl->tensors.emplace(t.name, make_entry(file, static_cast<size_t>(data_start), t));
  }
  std::vector<detail::ByteRange> ranges;
  for (const auto& t : records) ranges.push_back({&t.name, t.offset, t.bytes});
  if (auto clash = detail::first_overlap(std::move(ranges)))
    r.error("tensor '" + clash->first + "'", "data overlaps tensor '", clash->second, "'");

  std::map<std::string, int> dequantized;
  for (const auto& t : records)
    if (dequantized_type(static_cast<GgmlType>(t.type->id))) ++dequantized[t.type->name];
  if (!dequantized.empty()) {
    int n = 0;
    std::string types;
    for (const auto& [name, count] : dequantized) n += count, types += (types.empty() ? "" : ", ") + name;
    impl->dequantize_note = detail::concat("kiln: ", file->path(), ": ", n, " tensor", n == 1 ? "" : "s", " (", types,
                                           ") dequantized to float32 at load: the affine format cannot hold ",
                                           n == 1 ? "it" : "them", " exactly");
  }
  return impl;
}

}  // namespace kiln::llm
