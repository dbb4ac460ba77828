// Helpers for the CPU JIT: a 128-bit content hash, small file operations, and running
// the compiler as a child process with its output captured.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cpu::detail {

/* Two independent 64-bit hashes run side by side (FNV-1a and a multiply-xorshift),
   rendered as 32 hex digits. Not cryptographic: it names cache files. */
class Hash128 {
 public:
  Hash128& update(const void* data, size_t n);
  // Hashes the length too, so consecutive fields cannot run into each other.
  Hash128& field(const std::string& s);
  std::string hex() const;

 private:
  uint64_t fnv_ = 0xcbf29ce484222325ull;
  uint64_t mix_ = 0x9e3779b97f4a7c15ull;
  uint64_t length_ = 0;
};

/* Creates `path` and its parents (mode 0700 for new ones). True when it exists as a directory. */
bool make_dirs(const std::string& path);
/* Whether `path` names an existing regular file. */
bool file_exists(const std::string& path);
/* Reads a whole file; false when it cannot be opened. */
bool read_file(const std::string& path, std::string* out);
/* Writes `text` to a unique temporary file next to `path`, then renames it over `path`,
   so readers never see a partial file. False (and nothing left behind) on failure. */
bool write_file_atomic(const std::string& path, const std::string& text);
/* Creates `<dir>/<stem>XXXXXX<suffix>` exclusively, writes `text` into it and returns its
   path; empty on failure (errno-based reason in *why). */
std::string write_unique_file(const std::string& dir, const std::string& stem, const std::string& suffix,
                              const std::string& text, std::string* why);
/* A fresh directory private to this process (mkdtemp under $TMPDIR or /tmp, mode 0700),
   removed at exit; empty if none could be made. */
std::string new_private_temp_dir();

struct ProcessResult {
  bool started = false;  // false: the program could not be run at all (see error)
  int wait_status = 0;  // as waitpid reports it
  std::string output;  // stdout and stderr, interleaved
  std::string error;  // why it did not start
  bool succeeded() const;
  std::string describe() const;  // "exited with 1", "killed by signal 9", ...
};
/* Lets another thread stop a child that run_process is waiting for: a background compile of
   a function that was freed, or one still running when the process exits. */
class ProcessCanceller {
 public:
  /* Kills the child's process group (the compiler driver and what it started), now or as
     soon as it starts; every later run_process given this canceller fails at once. */
  void cancel();
  bool cancelled() const;

 private:
  friend struct ProcessRun;
  mutable std::mutex mu_;  // guards pid_ and cancelled_
  pid_t pid_ = -1;  // the running child, not yet reaped (so its id is not reused)
  bool cancelled_ = false;
};

/* Runs argv (argv[0] looked up in PATH) through posix_spawnp, with stdin from /dev/null and
   stdout+stderr captured into an anonymous file, and waits for it. Safe in threaded programs.
   With a canceller the child runs in a process group of its own, which cancel() kills.
   `niceness` above 0 lowers the child's priority (set before it can start children). */
ProcessResult run_process(const std::vector<std::string>& argv, ProcessCanceller* canceller = nullptr,
                          int niceness = 0);

}  // namespace kiln::cpu::detail
