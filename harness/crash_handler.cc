#include "harness/crash_handler.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "harness/flight_recorder.h"

namespace collcheck {

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[sizeof kSignals / sizeof kSignals[0]];

// Fixed buffers: the handler only reads them. A writer copies under a
// seqlock-free scheme: a torn context line in a crash message is acceptable.
char g_who[256] = "collcheck";
char g_what[1024] = "";
char g_dump_dir[1024] = "";
std::atomic<bool> g_crashing{false};
int g_request[2] = {-1, -1};  // handler -> dumper
int g_done[2] = {-1, -1};     // dumper -> handler

void copy_into(char* dst, size_t cap, std::string_view src) {
  const size_t n = std::min(cap - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

void say(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void on_crash(int sig) {
  if (g_crashing.exchange(true)) {  // a second crash while handling the first
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  say("\ncollcheck: ");
  say(g_who);
  say(" died of signal ");
  const char* abbrev = sigabbrev_np(sig);
  say(abbrev ? abbrev : "?");
  if (g_what[0]) {
    say(" while ");
    say(g_what);
  }
  say("\n");
  if (g_dump_dir[0] && g_request[1] >= 0 && g_done[0] >= 0) {
    const char b = 1;
    if (::write(g_request[1], &b, 1) == 1) {
      pollfd pfd{g_done[0], POLLIN, 0};
      if (::poll(&pfd, 1, 2000) == 1) {
        say("collcheck: flight-recorder dumps written to ");
        say(g_dump_dir);
        say("\n");
      } else {
        say("collcheck: the flight-recorder dump did not finish within 2 s\n");
      }
    }
  }
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  ::raise(sig);
}

void dumper() {
  for (;;) {
    char b;
    const ssize_t n = ::read(g_request[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    try {
      dump_live_recorders(g_dump_dir, std::string("crash: ") + g_what);
    } catch (...) {
    }
    const char d = 1;
    (void)!::write(g_done[1], &d, 1);
  }
}

}  // namespace

void install_crash_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_crash;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_ONSTACK;
      ::sigaction(kSignals[i], &sa, &g_previous[i]);
    }
  });
}

void set_crash_identity(std::string_view who) { copy_into(g_who, sizeof g_who, who); }
void set_crash_context(std::string_view what) { copy_into(g_what, sizeof g_what, what); }
void set_crash_dump_dir(std::string_view dir) {
  // The dumper thread starts with the first dump directory, not at
  // installation: verify forks its isolated child from a single-threaded process.
  static std::once_flag once;
  if (!dir.empty())
    std::call_once(once, [] {
      if (::pipe(g_request) == 0 && ::pipe(g_done) == 0) {
        std::thread(dumper).detach();
      } else {
        g_request[1] = -1;
      }
    });
  copy_into(g_dump_dir, sizeof g_dump_dir, dir);
}

}  // namespace collcheck
