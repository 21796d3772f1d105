#include "harness/world/crash_handler.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "harness/history/flight_recorder.h"

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
// The rank whose thread this is (threads world), else the process's rank (MPI
// world), else -1. A plain int: the handler reads it.
thread_local int t_rank = -1;
// The context set on this thread (verify --jobs runs cases on several
// threads at once): a crash on the thread that runs the case names its own.
thread_local char t_what[1024] = "";
int g_process_rank = -1;

// What the handler asks the dumper for.
struct DumpRequest {
  int sig;
  int rank;
};
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

// Async-signal-safe decimal.
void say_int(int v) {
  char buf[16];
  int i = sizeof buf;
  buf[--i] = '\0';
  const bool neg = v < 0;
  unsigned u = neg ? 0u - static_cast<unsigned>(v) : static_cast<unsigned>(v);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (neg && i > 0) buf[--i] = '-';
  say(buf + i);
}

void on_crash(int sig) {
  if (g_crashing.exchange(true)) {
    // A second crash (another rank's thread) while the first is being
    // handled: let the first finish its dumps, which ends the process; only
    // if it never does, die here.
    const timespec tick{0, 10 * 1000 * 1000};
    for (int i = 0; i < 500; ++i) ::nanosleep(&tick, nullptr);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  const int rank = t_rank >= 0 ? t_rank : g_process_rank;
  say("\ncollcheck: ");
  say(g_who);
  if (g_process_rank < 0) {  // ranks are threads of this process: say whose thread died
    if (t_rank >= 0) {
      say(", on rank ");
      say_int(t_rank);
      say("'s thread,");
    } else {
      say(", on a thread that is not a rank's,");
    }
  }
  say(" died of signal ");
  const char* abbrev = sigabbrev_np(sig);
  say(abbrev ? abbrev : "?");
  if (const char* what = t_what[0] ? t_what : g_what; what[0]) {
    say(" while ");
    say(what);
  }
  say("\n");
  if (g_dump_dir[0] && g_request[1] >= 0 && g_done[0] >= 0) {
    const DumpRequest req{sig, rank};
    if (::write(g_request[1], &req, sizeof req) == static_cast<ssize_t>(sizeof req)) {
      pollfd pfd{g_done[0], POLLIN, 0};
      int written = 0;
      if (::poll(&pfd, 1, 2000) == 1 && ::read(g_done[0], &written, sizeof written) == sizeof written) {
        if (written > 0) {
          say("collcheck: flight-recorder dumps written to ");
          say(g_dump_dir);
          say(" (collcheck analyze ");
          say(g_dump_dir);
          say(" names the rank and the call)\n");
        } else {
          say("collcheck: no flight recorder was live, so no dump was written\n");
        }
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
    DumpRequest req{};
    const ssize_t n = ::read(g_request[0], &req, sizeof req);  // one write of under PIPE_BUF bytes: whole
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof req)) return;
    int written = 0;
    try {
      const char* abbrev = sigabbrev_np(req.sig);
      const CrashNote note{req.rank, abbrev ? abbrev : std::to_string(req.sig)};
      written = dump_live_recorders(g_dump_dir, std::string("crash: ") + g_what, &note);
    } catch (...) {
    }
    (void)!::write(g_done[1], &written, sizeof written);
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
void set_crash_process_rank(int rank) { g_process_rank = rank; }
void set_crash_thread_rank(int rank) { t_rank = rank; }
void set_crash_context(std::string_view what) {
  copy_into(t_what, sizeof t_what, what);
  // The process's last one, for a crash on a thread that set none (a rank
  // thread of the case the main thread runs). Cases side by side set it
  // from several threads: one writes at a time, and a writer that finds
  // another at it leaves the other's (each also has its own, above).
  static std::atomic_flag writing = ATOMIC_FLAG_INIT;
  if (writing.test_and_set(std::memory_order_acquire)) return;
  copy_into(g_what, sizeof g_what, what);
  writing.clear(std::memory_order_release);
}

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

namespace {
std::atomic<bool> g_exit_is_verdict{false};

extern "C" void exit_guard() {
  if (g_exit_is_verdict.load()) return;
  static const char msg[] =
      "collcheck: error: the process was ended by a call to exit() before a verdict (a plugin or a library it "
      "loads called exit?); no verdict (exit 3)\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(3);
}
}  // namespace

void install_exit_guard() { std::atexit(exit_guard); }

void exit_is_verdict() { g_exit_is_verdict = true; }

}  // namespace collcheck
