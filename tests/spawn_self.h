// Runs this test binary again, in a child process, for one disabled test: for what must hold
// across processes or across settings read once per process (KILN_* variables).
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace kt {

/* Starts this binary with --gtest_filter=test (disabled tests included); the child's KILN_*
   variables come from env_extra only. Returns its pid, or -1. */
inline pid_t spawn_self(const std::string& test, const std::vector<std::string>& env_extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("KILN_", 0) != 0) env.push_back(kv);
  }
  env.insert(env.end(), env_extra.begin(), env_extra.end());
  std::vector<std::string> args = {std::filesystem::read_symlink("/proc/self/exe").string(),
                                   "--gtest_also_run_disabled_tests", "--gtest_filter=" + test};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
  return rc == 0 ? pid : -1;
}

/* The child's exit status (128 + the signal when one ended it; -1 when waiting failed). */
inline int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace kt
