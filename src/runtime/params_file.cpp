// Parameter files in the safetensors layout (runtime/safetensors.h). Loading maps the
// file read-only; arrays view the mapping and keep it alive, so saving replaces the file
// (a new one renamed into place) instead of rewriting it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/checked.h"
#include "kiln/graph.h"
#include "runtime/json.h"
#include "runtime/safetensors.h"

namespace kiln {

std::map<std::string, Array> load_params(const std::string& path) {
  auto file = detail::MappedFile::open(path, "load_params");
  std::map<std::string, Array> out;
  for (const auto& t : runtime::parse_safetensors(*file, "load_params").tensors)
    out[t.name] = runtime::safetensors_array(file, t);
  return out;
}

namespace {

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A new file beside `path` (same directory, so the rename is atomic), created exclusively
// with the umask's mode, or an existing file's mode when `path` exists.
int create_beside(const std::string& path, std::string* tmp) {
  static std::atomic<unsigned> counter{0};
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    *tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (exists) ::fchmod(fd, st.st_mode & 07777);
      return fd;
    }
    if (errno != EEXIST) break;
  }
  return -1;
}

}  // namespace

void save_params(const std::string& path, const std::map<std::string, Array>& params) {
  std::string header = "{";
  uint64_t offset = 0;
  std::vector<std::pair<uint64_t, const Array*>> layout;
  for (const auto& [name, a] : params) {
    if (!a.valid()) fail("save_params", "parameter '", name, "' is empty");
    offset = (offset + 63) / 64 * 64;
    uint64_t bytes = a.nbytes();
    if (header.size() > 1) header += ",";
    // Streamed, not joined with operator+ (which GCC 12 misreads as an overlapping copy, -Wrestrict).
    std::ostringstream entry;
    entry << runtime::json_quote(name) << ":{\"dtype\":\"" << runtime::safetensors_code(a.dtype()) << "\",\"shape\":[";
    for (int i = 0; i < a.ndim(); ++i) entry << (i ? "," : "") << a.shape(i);
    entry << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
    header += entry.str();
    layout.emplace_back(offset, &a);
    offset += bytes;
  }
  header += "}";
  while ((8 + header.size()) % 64 != 0) header += ' ';  // data starts 64-byte aligned
  // A new file renamed over the old one, never the old one truncated: arrays loaded from it
  // map its pages and would fault (SIGBUS) on a shorter file. A link is replaced at its target.
  std::error_code ec;
  std::string target =
      std::filesystem::is_symlink(path, ec) ? std::filesystem::weakly_canonical(path, ec).string() : path;
  if (target.empty()) target = path;
  std::string tmp;
  int fd = create_beside(target, &tmp);
  if (fd < 0) fail("save_params", "cannot write '", path, "': ", std::strerror(errno));
  uint64_t hlen = header.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(hlen >> (8 * i));
  bool ok = write_all(fd, len, 8) && write_all(fd, header.data(), header.size());
  uint64_t written = 0;
  try {
    for (size_t i = 0; ok && i < layout.size(); ++i) {
      const auto& [at, a] = layout[i];
      std::string pad(static_cast<size_t>(at - written), '\0');
      std::vector<char> bytes;
      detail::checked_resize("save_params", bytes, static_cast<int64_t>(a->nbytes()));
      a->copy_to(bytes.data(), a->dtype());
      ok = write_all(fd, pad.data(), pad.size()) && write_all(fd, bytes.data(), bytes.size());
      written = at + bytes.size();
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail("save_params", "write to '", path, "' failed: ", std::strerror(err));
  }
}

}  // namespace kiln
