// Malformed model files: each defect gives a kiln::Error naming the file and the field, and
// nothing is read out of bounds. GGUF files are built byte by byte here; the fuzzers' seed
// corpus and every crasher they found (tests/llm/regressions) are replayed through the same
// code the fuzzers run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "exercise.h"

using namespace kiln;

namespace {

// A GGUF file assembled from parts, each of which a test may break.
struct GgufBuilder {
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;  // F32
    uint64_t offset = 0;
  };
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::string kv;  // encoded key/value pairs
  uint64_t n_kv = 0;
  std::vector<Tensor> tensors;
  std::string data = std::string(64, '\x01');
  uint64_t alignment = 32;

  template <class T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static void put_string(std::string& s, const std::string& v) {
    put<uint64_t>(s, v.size());
    s += v;
  }
  void add_u32(const std::string& key, uint32_t v) {
    put_string(kv, key);
    put<uint32_t>(kv, 4);
    put<uint32_t>(kv, v);
    ++n_kv;
  }
  void add_raw(const std::string& key, uint32_t type, const std::string& payload) {
    put_string(kv, key);
    put<uint32_t>(kv, type);
    kv += payload;
    ++n_kv;
  }
  std::string bytes() const {
    std::string s;
    put(s, magic);
    put(s, version);
    put<uint64_t>(s, tensors.size());
    put<uint64_t>(s, n_kv);
    s += kv;
    for (const auto& t : tensors) {
      put_string(s, t.name);
      put<uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
      for (auto d : t.ne) put(s, d);
      put(s, t.type);
      put(s, t.offset);
    }
    while (s.size() % alignment) s += '\0';
    return s + data;
  }
};

// A valid file: one F32 tensor [2, 8] at offset 0 (64 bytes of data).
GgufBuilder valid() {
  GgufBuilder b;
  b.add_u32("llama.block_count", 1);
  b.tensors.push_back({"t", {8, 2}, 0, 0});
  return b;
}

std::string open_error(const std::string& bytes) {
  auto file = detail::MappedFile::from_bytes("bad.gguf", std::vector<uint8_t>(bytes.begin(), bytes.end()));
  try {
    llm::ModelFile m(llm::read_gguf(file));
    for (const auto& n : m.tensor_names()) m.weight(n).w.eval();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const GgufBuilder& b, const std::string& want) {
  std::string e = open_error(b.bytes());
  EXPECT_NE(e.find("[gguf] bad.gguf: " + want), std::string::npos) << e;
}

}  // namespace

TEST(GgufMalformed, ValidBaselineOpens) {
  EXPECT_EQ(open_error(valid().bytes()), "(no error)");
  GgufBuilder v2 = valid();
  v2.version = 2;  // the same layout as version 3 for little-endian files
  EXPECT_EQ(open_error(v2.bytes()), "(no error)");
}

TEST(GgufMalformed, HeaderDefects) {
  GgufBuilder b = valid();
  b.magic = 0x58554747;
  expect_error(b, "header: not a GGUF file");
  b = valid();
  b.version = 1;
  expect_error(b, "header: version 1 is not supported");
  b.version = 0x03000000;
  expect_error(b, "header: big-endian GGUF is not supported");
  EXPECT_NE(open_error("GGU").find("bad.gguf: header: truncated"), std::string::npos);
  // Counts the file cannot hold are refused before anything is allocated.
  std::string s = valid().bytes();
  uint64_t huge = uint64_t{1} << 60;
  std::memcpy(s.data() + 8, &huge, 8);
  EXPECT_NE(open_error(s).find("header: tensor count 1152921504606846976 cannot fit"), std::string::npos);
  s = valid().bytes();
  std::memcpy(s.data() + 16, &huge, 8);
  EXPECT_NE(open_error(s).find("header: metadata count 1152921504606846976 cannot fit"), std::string::npos);
}

TEST(GgufMalformed, MetadataDefects) {
  GgufBuilder b = valid();
  std::string huge_string;
  GgufBuilder::put<uint64_t>(huge_string, uint64_t{1} << 62);
  b.add_raw("general.name", 8, huge_string);
  expect_error(b, "metadata 'general.name': string length 4611686018427387904 exceeds");

  b = valid();
  std::string huge_array;
  GgufBuilder::put<uint32_t>(huge_array, 8);  // of strings
  GgufBuilder::put<uint64_t>(huge_array, uint64_t{1} << 40);
  b.add_raw("tokenizer.ggml.tokens", 9, huge_array);
  expect_error(b, "metadata 'tokenizer.ggml.tokens': array length 1099511627776 cannot fit");

  b = valid();
  b.add_raw("x", 99, "");
  expect_error(b, "metadata 'x': unknown value type 99");

  b = valid();
  std::string nested;
  for (int i = 0; i < 10; ++i) {
    GgufBuilder::put<uint32_t>(nested, 9);
    GgufBuilder::put<uint64_t>(nested, 1);
  }
  b.add_raw("deep", 9, nested);
  expect_error(b, "metadata 'deep': arrays nested deeper than 8");

  b = valid();
  b.add_u32("llama.block_count", 2);
  expect_error(b, "metadata 'llama.block_count': duplicate key");

  b = valid();
  b.add_u32("general.alignment", 48);
  expect_error(b, "metadata 'general.alignment': 48 is not a power of two");
  b = valid();
  std::string one;
  GgufBuilder::put<uint64_t>(one, 64);
  b.add_raw("general.alignment", 10, one);
  expect_error(b, "metadata 'general.alignment': is uint64, not uint32");
}

TEST(GgufMalformed, TensorDefects) {
  GgufBuilder b = valid();
  b.tensors[0].ne = {1, 1, 1, 1, 1};
  expect_error(b, "tensor 't': has 5 dimensions");
  b.tensors[0].ne = {};
  expect_error(b, "tensor 't': has 0 dimensions");
  b.tensors[0].ne = {uint64_t{1} << 40, uint64_t{1} << 40};
  expect_error(b, "tensor 't': dimension 1 of 1099511627776 makes the tensor absurdly large");
  b.tensors[0].ne = {~uint64_t{0}};
  expect_error(b, "tensor 't': dimension 0 of 18446744073709551615");

  b = valid();
  b.tensors[0].type = 99;
  expect_error(b, "tensor 't': unknown tensor type 99");
  b.tensors[0].type = 2;  // Q4_0 rows are whole blocks of 32
  expect_error(b, "tensor 't': row of 8 elements is not a whole number of Q4_0 blocks of 32");

  b = valid();
  b.tensors[0].offset = 32;
  expect_error(b, "tensor 't': data [32, +64) runs past the end of the file (the data section holds 64 bytes)");
  b.tensors[0].offset = ~uint64_t{0} - 31;  // offset + size would wrap around
  expect_error(b, "tensor 't': data [18446744073709551584, +64) runs past the end");
  b.tensors[0].offset = 4;
  expect_error(b, "tensor 't': offset 4 is not a multiple of the alignment 32");

  b = valid();
  b.tensors.push_back({"u", {8}, 0, 32});
  expect_error(b, "tensor 'u': data overlaps tensor 't'");
  b.tensors[1] = {"t", {8}, 0, 64};
  b.data += std::string(64, '\0');
  expect_error(b, "tensor 't': duplicate tensor name");

  b = valid();
  b.data.resize(63);  // truncated data
  expect_error(b, "tensor 't': data [0, +64) runs past the end");
}

TEST(GgufMalformed, EveryTruncationIsAnErrorNamingTheFile) {
  GgufBuilder b = valid();
  std::string tokens;
  GgufBuilder::put<uint32_t>(tokens, 8);
  GgufBuilder::put<uint64_t>(tokens, 2);
  GgufBuilder::put_string(tokens, "ab");
  GgufBuilder::put_string(tokens, "c");
  b.add_raw("tokenizer.ggml.tokens", 9, tokens);
  const std::string full = b.bytes();
  ASSERT_EQ(open_error(full), "(no error)");
  for (size_t n = 0; n < full.size(); ++n) {
    std::string e = open_error(full.substr(0, n));
    EXPECT_NE(e.find("[gguf] bad.gguf: "), std::string::npos) << n << ": " << e;
  }
}

TEST(SafetensorsMalformed, HeaderDefectsNameTheFileAndTensor) {
  auto error_for = [](const std::string& header, size_t data_bytes) {
    std::string s;
    GgufBuilder::put<uint64_t>(s, header.size());
    s += header + std::string(data_bytes, '\0');
    auto file = detail::MappedFile::from_bytes("bad.safetensors", std::vector<uint8_t>(s.begin(), s.end()));
    try {
      llm::ModelFile m(llm::read_safetensors("bad", {file}, ""));
      for (const auto& n : m.tensor_names()) m.weight(n).w.eval();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  auto expect = [&](const std::string& header, size_t data, const std::string& want) {
    std::string e = error_for(header, data);
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  expect(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8, "(no error)");
  expect(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 7,
         "[safetensors] bad.safetensors: tensor 'a': data_offsets [0, 8] exceed the 7 data bytes");
  expect(R"({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", 8, "tensor 'a': unknown dtype 'F33'");
  expect(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, "tensor 'a': holds 8 bytes");
  expect(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8,
         "tensor 'a': shape is too large");
  expect(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
         12, "tensor 'b': data overlaps tensor 'a'");
  expect(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
         16, "duplicate key 'a'");
  expect(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}})", 8, "shape entries must be non-negative");
  expect(R"({"a": {"dtype": "F32", "shape": [0, 4611686018427387904], "data_offsets": [0, 0]}})", 0,
         "tensor 'a': shape is too large");
  expect(R"({"a": )", 0, "bad.safetensors (header)");
  EXPECT_NE(error_for("", 0).find("bad.safetensors"), std::string::npos);
}

// The fuzzers' seeds and every input that once crashed them, through the fuzzers' own code.
TEST(ModelFileFuzzCorpus, SeedsAndRegressionsOnlyEverGiveErrors) {
  namespace fs = std::filesystem;
  const std::string root = std::string(KILN_SOURCE_DIR) + "/tests/llm/";
  int files = 0;
  for (const char* kind : {"gguf", "safetensors"}) {
    for (const std::string& dir : {root + "corpus/" + kind, root + "regressions/" + kind}) {
      if (!fs::exists(dir)) continue;
      for (const auto& entry : fs::directory_iterator(dir)) {
        SCOPED_TRACE(entry.path().string());
        std::ifstream in(entry.path(), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
        if (std::string(kind) == "gguf")
          kiln_test::exercise_gguf(p, bytes.size());
        else
          kiln_test::exercise_safetensors(p, bytes.size());
        ++files;
      }
    }
  }
  EXPECT_GE(files, 12);
}
