#include "harness/model/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace collcheck {

namespace {
int code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }
}  // namespace

ChildProcess start_child(const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env, bool capture) {
  if (args.empty()) throw std::runtime_error("no command to start");
  int fds[2] = {-1, -1};
  if (capture && ::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  // A pipe that exec closes: what comes through it is exec's errno.
  int errs[2];
  if (::pipe2(errs, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(errs[0]);
    ::setpgid(0, 0);                     // its own group: a launcher and its ranks end together
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and with us, if we are killed
    if (capture) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
    }
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int e = errno;
    if (::write(errs[1], &e, sizeof e) < 0) {}
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(errs[1]);
  if (capture) ::close(fds[1]);
  int e = 0;
  ssize_t n;
  while ((n = ::read(errs[0], &e, sizeof e)) < 0 && errno == EINTR) {}
  ::close(errs[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (capture) ::close(fds[0]);
    throw std::runtime_error("cannot run " + args[0] + ": " + std::strerror(e));
  }
  return ChildProcess{pid, capture ? fds[0] : -1};
}

std::optional<int> poll_child(const ChildProcess& c) {
  int status = 0;
  const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
  if (r == c.pid) return code_of(status);
  return std::nullopt;
}

int stop_child(const ChildProcess& c, double grace_s) {
  ::kill(-c.pid, SIGTERM);
  int status = 0;
  for (double t = 0; t < grace_s; t += 0.1) {
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      ::kill(-c.pid, SIGKILL);  // what the launcher left behind
      return code_of(status);
    }
    ::usleep(100000);
  }
  ::kill(-c.pid, SIGKILL);
  ::waitpid(c.pid, &status, 0);
  return code_of(status);
}

int wait_child(const ChildProcess& c) {
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
  return code_of(status);
}

std::string command_text(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty()) s.push_back(' ');
    if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) {
      s.append(a);
      continue;
    }
    s.push_back('\'');
    for (char ch : a) {
      if (ch == '\'') s.append("'\\''");
      else s.push_back(ch);
    }
    s.push_back('\'');
  }
  return s;
}

}  // namespace collcheck
