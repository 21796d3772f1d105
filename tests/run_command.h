// Runs a shell command as a user would, under a hard time limit, and returns
// its exit code and combined output.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace testutil {

struct CommandResult {
  int code;  // exit status; 124 when the time limit killed it; -1 on a signal
  std::string out;
};

inline CommandResult run_command(const std::string& cmd, int limit_s = 600) {
  const std::string full = "timeout -k 5 " + std::to_string(limit_s) + " " + cmd + " 2>&1";
  FILE* f = popen(full.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The collcheck binary with arguments.
inline CommandResult collcheck(const std::string& args, int limit_s = 600) {
  return run_command(std::string(COLLCHECK_BIN) + " " + args, limit_s);
}

// "mpirun ... -np N <collcheck>", ready for arguments (run it with run_command).
// As root, Open MPI needs --allow-run-as-root; 2 cores need --oversubscribe.
// Under AddressSanitizer, leak checking is off in the MPI processes only:
// Open MPI's own allocations in its dlopen'ed components (unloaded by
// MPI_Finalize, so unsymbolizable and unsuppressible) are reported as leaks.
// Every other check stays on, and the thread-world tests run the same
// collcheck code with leak checking.
inline std::string mpirun(int np) {
  std::string env;
  if (const char* a = std::getenv("ASAN_OPTIONS")) env = std::string("env ASAN_OPTIONS=") + a + ":detect_leaks=0 ";
  return env + "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(np) + " " + COLLCHECK_BIN;
}

// `n` processes that spin until this object goes: a busy host.
class BusyHost {
 public:
  explicit BusyHost(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t p = fork();
      if (p == 0) {
        alarm(600);  // never outlive a crashed test
        volatile unsigned long x = 0;  // spin: the busy host
        for (;;) x = x + 1;  // NOLINT: a busy loop
      }
      pids_.push_back(p);
    }
  }
  ~BusyHost() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
  }
  BusyHost(const BusyHost&) = delete;
  BusyHost& operator=(const BusyHost&) = delete;

 private:
  std::vector<pid_t> pids_;
};

}  // namespace testutil
