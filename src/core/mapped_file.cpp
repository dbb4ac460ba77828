#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/error.h"

namespace kiln::detail {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, const char* tag) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below as not regular.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(tag, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(tag, "cannot stat '", path, "': ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(tag, "'", path, "' is not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile);
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {  // mmap rejects a length of 0
    void* addr = mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (addr == MAP_FAILED) fail(tag, "cannot map '", path, "': ", std::strerror(e));
    f->data_ = static_cast<const uint8_t*>(addr);
    f->mapped_ = true;
  } else {
    ::close(fd);
  }
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::string path, std::vector<uint8_t> bytes) {
  std::shared_ptr<MappedFile> f(new MappedFile);
  f->path_ = std::move(path);
  f->bytes_ = std::move(bytes);
  f->data_ = f->bytes_.data();
  f->size_ = f->bytes_.size();
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

Array mapped_array(const std::shared_ptr<const MappedFile>& file, size_t offset, Shape shape, Dtype dtype) {
  const uint8_t* at = file->data() + offset;
  bool empty = false;
  for (auto d : shape) empty |= d == 0;
  if (empty || reinterpret_cast<uintptr_t>(at) % static_cast<uintptr_t>(size_of(dtype)) != 0)
    return array(at, std::move(shape), dtype);  // unaligned: copy rather than hand kernels an odd address
  return external_array(at, std::move(shape), dtype, file);
}

std::optional<std::pair<std::string, std::string>> first_overlap(std::vector<ByteRange> ranges) {
  std::erase_if(ranges, [](const ByteRange& r) { return r.bytes == 0; });
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin - ranges[i - 1].begin < ranges[i - 1].bytes)
      return std::pair(*ranges[i].name, *ranges[i - 1].name);
  return std::nullopt;
}

}  // namespace kiln::detail
