#include "harness/session/supervisor.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/world/crash_handler.h"

namespace collcheck {

namespace {

int g_verdict_fd = -1;  // the child's end of the pipe to the supervising parent
volatile sig_atomic_t g_child = 0;

const int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

extern "C" void forward_signal(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return fmt::format("died of signal {}", name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

}  // namespace

void verdict_reached(int code) {
  exit_is_verdict();
  if (g_verdict_fd < 0) return;
  const unsigned char c = static_cast<unsigned char>(code);
  (void)!::write(g_verdict_fd, &c, 1);
  ::close(g_verdict_fd);
  g_verdict_fd = -1;
}

// The child died of a signal: it said why (the crash handler, or the
// signal's own handling); die of the same signal, as a shell expects.
[[noreturn]] static void die_as_the_child(const std::string& what, int status, bool verdict_sent) {
  const int sig = WTERMSIG(status);
  if (!verdict_sent && sig != SIGTERM && sig != SIGINT && sig != SIGKILL && sig != SIGHUP && sig != SIGQUIT)
    std::fprintf(stderr, "collcheck: error: %s %s before a verdict; no verdict\n", what.c_str(), describe(status).c_str());
  rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);  // the child's core, if any, is the one that matters
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

void supervise(const std::string& what, const std::function<void(const std::string& why)>& no_verdict) {
  int fds[2];
  if (::pipe(fds) != 0) return;  // run unsupervised; the exit guard still holds
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    // Killed with the parent, whatever kills it; a signal sent to the
    // parent's process group reaches this process once, through the parent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitNoVerdict);
    ::setpgid(0, 0);
    // Out of the terminal's foreground group, a write to it with `stty
    // tostop` would stop this process; ignored, the write goes through.
    ::signal(SIGTTOU, SIG_IGN);
    g_verdict_fd = fds[1];
    return;
  }
  ::close(fds[1]);
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : kForwarded) ::sigaction(s, &sa, nullptr);
  // A terminal's Ctrl-C reaches only the foreground group, this process's:
  // forwarded like any other. SIGPIPE: the child writes; this process only reads.
  ::signal(SIGPIPE, SIG_IGN);
  // Wait for the child itself, not for the pipe's end: an isolated child it
  // forked holds the pipe too, and may outlive it. The verdict, when there
  // is one, was written before the child ended.
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  unsigned char code = 0;
  ssize_t n;
  while ((n = ::read(fds[0], &code, 1)) < 0 && errno == EINTR) {
  }
  if (n == 1 && WIFEXITED(status) && WEXITSTATUS(status) == code) ::_exit(code);
  const std::string why = fmt::format("{} {} before a verdict", what, describe(status));
  if (no_verdict) no_verdict(why);
  if (WIFSIGNALED(status)) die_as_the_child(what, status, n == 1);
  if (WEXITSTATUS(status) == kExitNoVerdict) ::_exit(kExitNoVerdict);  // the exit guard said why
  std::fprintf(stderr,
               "collcheck: error: %s %s before a verdict: something in the process (a plugin's constructor or call, "
               "or a library it loads) ended it; no verdict (exit %d)\n",
               what.c_str(), describe(status).c_str(), kExitNoVerdict);
  ::_exit(kExitNoVerdict);
}

}  // namespace collcheck
