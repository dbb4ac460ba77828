// A whole file mapped read-only and shared (MAP_SHARED, PROT_READ): every reader sees the
// same pages, and arrays over it keep it alive through a shared_ptr to this object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln::detail {

class MappedFile {
 public:
  /* Maps `path`; errors are kiln::Error tagged with `tag` and naming the file. */
  static std::shared_ptr<const MappedFile> open(const std::string& path, const char* tag);
  /* The same interface over bytes held in memory (tests and fuzzers); `path` names it in errors. */
  static std::shared_ptr<const MappedFile> from_bytes(std::string path, std::vector<uint8_t> bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // munmap on destruction
  std::vector<uint8_t> bytes_;  // the contents when made from_bytes
};

/* `bytes` of the file from `offset` as an array of `shape` and `dtype`: a view of the file when
   aligned to the dtype's size (the array keeps the file alive), else a copy. The caller has
   checked that the range lies inside the file and matches the shape. */
Array mapped_array(const std::shared_ptr<const MappedFile>& file, size_t offset, Shape shape, Dtype dtype);

/* The bytes one named tensor takes in a file. */
struct ByteRange {
  const std::string* name;
  uint64_t begin, bytes;
};
/* Names of two ranges that share a byte (the later-starting one first), or nullopt when none do;
   each tensor's data must be its own. */
std::optional<std::pair<std::string, std::string>> first_overlap(std::vector<ByteRange> ranges);

}  // namespace kiln::detail
