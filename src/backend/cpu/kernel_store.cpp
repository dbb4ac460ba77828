#include "backend/cpu/kernel_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <system_error>

#include "backend/cpu/jit_support.h"

namespace kiln::cpu::detail {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// Creates each missing component of path (0700); errors show up when it is opened.
void make_path(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos == path.size() || path[pos] == '/') ::mkdir(path.substr(0, pos).c_str(), 0700);
  }
}

// Why a file or directory of the store may not be trusted: empty when it is ours alone.
std::string untrusted(const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return "it belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " + std::to_string(::geteuid()) +
           ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("it is writable by group or others (mode ") + mode + ")";
  }
  return {};
}

bool deleted(int dir) {
  struct stat st;
  return ::fstat(dir, &st) == 0 && st.st_nlink == 0;
}

// Reads entry `name` of dir if it is a regular file of ours; false with *why empty when absent.
bool read_at(int dir, const std::string& name, std::string* out, std::string* why) {
  // O_NONBLOCK: a FIFO in place of an entry must not block the open.
  int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT) *why = "cannot open " + name + ": " + errno_text(errno);
    return false;
  }
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok && !S_ISREG(st.st_mode))
    *why = name + " is not a regular file";
  else if (ok)
    *why = untrusted(st);
  ok = ok && why->empty();
  out->clear();
  char buf[65536];
  while (ok) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) *why = "cannot read " + name + ": " + errno_text(errno);
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ok && why->empty();
}

// Writes text to dir/name through a temporary name and rename, so readers never see part of it.
bool write_at(int dir, const std::string& name, const std::string& text, std::string* why) {
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = ".tmp-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
          std::to_string(std::time(nullptr));
    fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    *why = "cannot create a file in the cache directory: " + errno_text(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  int err = done == text.size() ? 0 : errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlinkat(dir, tmp.c_str(), 0);
    *why = "cannot write " + name + " in the cache directory: " + errno_text(err);
    return false;
  }
  return true;
}

}  // namespace

std::string checksum_text(const std::string& bytes) {
  Hash128 h;
  h.field("kiln-cache-entry-1").field(bytes);
  return h.hex() + " " + std::to_string(bytes.size()) + "\n";
}

std::unique_ptr<KernelStore> KernelStore::open(const std::string& path, std::string* why) {
  if (path.empty()) {
    *why = "no directory given";
    return nullptr;
  }
  make_path(path);
  // O_NOFOLLOW: a symbolic link could be re-pointed after any check made through it.
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      *why = "it is a symbolic link";
    else
      *why = "it is not writable: cannot create or open it (" + errno_text(err) + ")";
    return nullptr;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0)
    *why = "cannot stat it: " + errno_text(errno);
  else if ((*why = untrusted(st)).empty() && (st.st_mode & S_IRWXU) != S_IRWXU)
    *why = "it is not writable";
  if (!why->empty()) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<KernelStore>(new KernelStore(path, fd));
}

KernelStore::~KernelStore() {
  ::close(fd_.load());
  for (int fd : retired_) ::close(fd);
}

bool KernelStore::read(const std::string& name, std::string* bytes, std::string* why) {
  why->clear();
  const int dir = fd_.load();
  std::string sum;
  if (!read_at(dir, name + ".sum", &sum, why) || !read_at(dir, name, bytes, why)) {
    if (!why->empty()) remove(name);
    return false;
  }
  if (sum != checksum_text(*bytes)) {
    *why = "its checksum does not match its contents";
    remove(name);
    return false;
  }
  return true;
}

bool KernelStore::write(const std::string& name, const std::string& bytes, std::string* why) {
  if (write_once(fd_.load(), name, bytes, why)) return true;
  // Deleted while this process runs: make it again, with the checks open makes, and retry.
  return deleted(fd_.load()) && reopen(why) && write_once(fd_.load(), name, bytes, why);
}

bool KernelStore::write_once(int dir, const std::string& name, const std::string& bytes, std::string* why) {
  // The entry first, its checksum last: a reader that sees the new checksum sees the new entry.
  return write_at(dir, name, bytes, why) && write_at(dir, name + ".sum", checksum_text(bytes), why);
}

bool KernelStore::reopen(std::string* why) {
  std::lock_guard<std::mutex> lock(reopen_mu_);
  if (!deleted(fd_.load())) return true;  // another thread made it again
  std::unique_ptr<KernelStore> fresh = open(path_, why);
  if (!fresh) return false;
  retired_.push_back(fd_.exchange(fresh->fd_.exchange(-1)));
  return true;
}

void KernelStore::remove(const std::string& name) {
  const int dir = fd_.load();
  ::unlinkat(dir, (name + ".sum").c_str(), 0);
  ::unlinkat(dir, name.c_str(), 0);
}

std::string KernelStore::fd_path(const std::string& name) const {
  const int dir = fd_.load();
  std::string proc = "/proc/self/fd/" + std::to_string(dir);
  struct stat via_proc, via_fd;
  if (::stat(proc.c_str(), &via_proc) != 0 || ::fstat(dir, &via_fd) != 0 || via_proc.st_dev != via_fd.st_dev ||
      via_proc.st_ino != via_fd.st_ino)
    return {};
  return proc + "/" + name;
}

void KernelStore::sweep_temporaries(int max_age_seconds) {
  int fd = ::fcntl(fd_.load(), F_DUPFD_CLOEXEC, 3);  // closedir closes its descriptor: give it a copy
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!d) {
    if (fd >= 0) ::close(fd);
    return;
  }
  ::rewinddir(d);
  const std::time_t now = std::time(nullptr);
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    struct stat st;
    if (name.find(".tmp-") == std::string::npos || ::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (now - st.st_mtime > max_age_seconds) ::unlinkat(fd, e->d_name, 0);
  }
  ::closedir(d);
}

}  // namespace kiln::cpu::detail
