// Runs a shell command as a user would, under a hard time limit, and returns
// its exit code and combined output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

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

// The collcheck binary with arguments.
inline CommandResult collcheck(const std::string& args, int limit_s = 600) {
  return run_command(std::string(COLLCHECK_BIN) + " " + args, limit_s);
}

}  // namespace testutil
