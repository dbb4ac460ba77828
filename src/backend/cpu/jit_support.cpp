#include "backend/cpu/jit_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include "core/config.h"

extern char** environ;

namespace kiln::cpu::detail {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string temp_root() {
  std::string t = config::system_variable("TMPDIR");
  return t.empty() ? std::string("/tmp") : t;
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, std::string* out) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

// An anonymous, close-on-exec file for a child's output; above fd 2 so dup2 onto 1 and 2 works.
int make_output_file() {
  int fd = ::memfd_create("kiln-jit-output", MFD_CLOEXEC);
  if (fd < 0) {
    std::string path = temp_root() + "/kiln-jit-output-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(path.c_str());
  }
  if (fd >= 0 && fd <= 2) {
    int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    fd = moved;
  }
  return fd;
}

}  // namespace

Hash128& Hash128::update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t f = fnv_, m = mix_;
  for (size_t i = 0; i < n; ++i) {
    f = (f ^ p[i]) * 0x100000001b3ull;
    m = (m + p[i] + 1) * 0xff51afd7ed558ccdull;
    m ^= m >> 29;
  }
  fnv_ = f;
  mix_ = m;
  length_ += n;
  return *this;
}

Hash128& Hash128::field(const std::string& s) {
  unsigned char len[8];
  uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  update(len, 8);
  return update(s.data(), s.size());
}

std::string Hash128::hex() const {
  // Finish the second hash with a full avalanche so every input bit reaches every output bit.
  uint64_t m = mix_ ^ length_;
  m ^= m >> 33;
  m *= 0xc4ceb9fe1a85ec53ull;
  m ^= m >> 33;
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(fnv_),
                static_cast<unsigned long long>(m));
  return out;
}

bool make_dirs(const std::string& path) {
  if (path.empty()) return false;
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos == path.size() || path[pos] == '/') {
      std::string prefix = path.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
    }
  }
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool read_file(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  bool ok = read_all(fd, out);
  ::close(fd);
  return ok;
}

std::string write_unique_file(const std::string& dir, const std::string& stem, const std::string& suffix,
                              const std::string& text, std::string* why) {
  std::string path = dir + "/" + stem + "XXXXXX" + suffix;
  int fd = ::mkostemps(path.data(), static_cast<int>(suffix.size()), O_CLOEXEC);
  if (fd < 0) {
    if (why) *why = errno_text(errno);
    return {};
  }
  bool ok = write_all(fd, text);
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(path.c_str());
    if (why) *why = errno_text(err);
    return {};
  }
  return path;
}

bool write_file_atomic(const std::string& path, const std::string& text) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp = write_unique_file(dir, "." + base + ".tmp-", "", text, nullptr);
  if (tmp.empty()) return false;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::string new_private_temp_dir() {
  static std::mutex mu;
  static std::vector<std::string>* made = nullptr;  // guarded by mu; never destroyed (read at exit)
  std::string templ = temp_root() + "/kiln-jit-XXXXXX";
  if (!::mkdtemp(templ.data())) return {};
  std::lock_guard<std::mutex> lock(mu);
  if (!made) {
    made = new std::vector<std::string>;
    // Loaded kernels stay mapped after their files go, so removing the directories at exit is safe.
    std::atexit([] {
      std::lock_guard<std::mutex> l(mu);
      std::error_code ec;
      for (const std::string& d : *made) std::filesystem::remove_all(d, ec);
    });
  }
  made->push_back(templ);
  return templ;
}

bool ProcessResult::succeeded() const { return started && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string ProcessResult::describe() const {
  if (!started) return "could not be started: " + error;
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "was killed by signal " + std::to_string(WTERMSIG(wait_status));
  return "ended with wait status " + std::to_string(wait_status);
}

void ProcessCanceller::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

bool ProcessCanceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

// Publishes the child to its canceller while it runs (and may be killed), and withdraws it
// before it is reaped, so that a late cancel() never signals a reused process id.
struct ProcessRun {
  static bool start(ProcessCanceller* c, pid_t pid) {
    if (!c) return true;
    std::lock_guard<std::mutex> lock(c->mu_);
    c->pid_ = pid;
    if (c->cancelled_) ::kill(-pid, SIGKILL);
    return true;
  }
  static void finish(ProcessCanceller* c) {
    if (!c) return;
    std::lock_guard<std::mutex> lock(c->mu_);
    c->pid_ = -1;
  }
};

ProcessResult run_process(const std::vector<std::string>& argv, ProcessCanceller* canceller, int niceness) {
  ProcessResult r;
  if (argv.empty()) {
    r.error = "no program given";
    return r;
  }
  if (canceller && canceller->cancelled()) {
    r.error = "cancelled";
    return r;
  }
  int out = make_output_file();
  if (out < 0) {
    r.error = "cannot create a file for its output: " + errno_text(errno);
    return r;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // posix_spawn rather than fork: forking a threaded (or sanitized) process is not safe.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (canceller) {
    // A group of its own, so that cancel() reaches the compiler proper behind the driver.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ::close(out);
    r.error = errno_text(rc);
    return r;
  }
  // posix_spawnp returns once the child has exec'd, long before a compiler driver starts
  // the compiler proper, which inherits this priority.
  if (niceness > 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), niceness);
  ProcessRun::start(canceller, pid);
  // Wait for the exit without reaping, withdraw the id from the canceller, then reap.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ProcessRun::finish(canceller);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      r.error = "waitpid: " + errno_text(errno);
      ::close(out);
      return r;
    }
  }
  r.started = true;
  r.wait_status = status;
  if (::lseek(out, 0, SEEK_SET) == 0) read_all(out, &r.output);
  ::close(out);
  // Older C libraries report a failed exec as exit status 127 instead of an error.
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && r.output.empty()) {
    r.started = false;
    r.error = "program not found or not executable";
  }
  return r;
}

}  // namespace kiln::cpu::detail
