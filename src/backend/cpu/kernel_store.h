// The on-disk kernel cache: one directory, opened once without following a symbolic
// link, used only if this user alone can write it, and then reached only through its
// descriptor (never by path again), so nobody can swap in another directory and have
// their code loaded. Every entry is stored with a checksum beside it and read back only
// when the checksum matches. docs/codegen.md describes the rules.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cpu::detail {

class KernelStore {
 public:
  /* Opens `path` (created 0700 with its parents if missing). Null, with the reason in
     *why, when it cannot be made or opened, is a symbolic link, is not a directory, belongs
     to another user or is writable by group or others. */
  static std::unique_ptr<KernelStore> open(const std::string& path, std::string* why);
  ~KernelStore();
  KernelStore(const KernelStore&) = delete;
  KernelStore& operator=(const KernelStore&) = delete;

  const std::string& path() const { return path_; }

  /* The bytes of entry `name` when it is a regular file of ours whose checksum matches.
     A missing entry is false with *why empty; a damaged one is removed (both files) and
     false with *why saying what was wrong. */
  bool read(const std::string& name, std::string* bytes, std::string* why);
  /* Stores `bytes` as entry `name`: the file, then its checksum, each written under a
     temporary name and renamed into place. When the directory was deleted it is made
     again (with open's checks) and the write retried. False when nothing was stored. */
  bool write(const std::string& name, const std::string& bytes, std::string* why);
  /* Removes entry `name` and its checksum. */
  void remove(const std::string& name);
  /* A path naming entry `name` through the descriptor (/proc/self/fd/N/name), for dlopen;
     empty where /proc does not show the descriptor. */
  std::string fd_path(const std::string& name) const;
  /* Removes temporaries (".tmp-" names) older than max_age_seconds: left by a process
     that died mid-write. */
  void sweep_temporaries(int max_age_seconds);

 private:
  KernelStore(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  bool write_once(int dir, const std::string& name, const std::string& bytes, std::string* why);
  bool reopen(std::string* why);  // after the directory was deleted

  const std::string path_;
  std::atomic<int> fd_;  // the directory now; replaced when it is made again
  std::mutex reopen_mu_;  // guards retired_ and serializes reopen
  std::vector<int> retired_;  // earlier descriptors, kept open: another thread may be using one
};

/* The checksum stored beside an entry: a 128-bit hash of the bytes and their length. */
std::string checksum_text(const std::string& bytes);

}  // namespace kiln::cpu::detail
