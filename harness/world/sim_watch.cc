#include "harness/world/sim_watch.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <pthread.h>

namespace collcheck {

using Wall = std::chrono::steady_clock;

struct SimWatch::Run {
  const std::atomic<uint64_t>* switches;
  int ranks;
  uint64_t seen;
  Wall::time_point since;
};

namespace {

struct Watchdog {
  std::mutex mu;
  std::list<SimWatch::Run> runs;
  bool started = false;
};

std::atomic<SimStallHandler> stall_handler{nullptr};

Watchdog* the_watchdog = nullptr;

// A forked child (verify's isolated child, soak's) has no watchdog thread and
// none of its parent's worlds: it starts its own when it runs one. The lock
// is held across the fork, so that the child never inherits it held.
void before_fork() { the_watchdog->mu.lock(); }
void after_fork_parent() { the_watchdog->mu.unlock(); }
void after_fork_child() {
  the_watchdog->mu.unlock();
  the_watchdog->runs.clear();
  the_watchdog->started = false;
}

// Leaked: its thread runs until the process ends.
Watchdog& watchdog() {
  static Watchdog* d = [] {
    the_watchdog = new Watchdog;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    return the_watchdog;
  }();
  return *d;
}

[[noreturn]] void stalled(const SimWatch::Run& r, double limit_s) {
  const std::string message =
               fmt::format("collcheck: a simulated world of {} rank(s) has spent {:.0f} s of wall time in one fiber "
                           "without a switch (COLLCHECK_SIM_STALL_S={:g}): a rank blocks the world's one thread in the "
                           "OS (a lock or condition variable of its own, a sleep, a spin that does not call the links' "
                           "test()), so virtual time cannot move and no deadline can fire. The implementation declares "
                           "that its ranks may be fibers of one thread (collcheck_plugin_fiber_safe returns 1), and "
                           "they may not: run it as threads (--world threads), or have collcheck_plugin_fiber_safe "
                           "return 0.",
                           r.ranks, limit_s, limit_s);
  if (SimStallHandler h = stall_handler.load()) h(message.c_str());
  std::fprintf(stderr, "%s No verdict (exit 3).\n", message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(3);
}

void watch(double limit_s) {
  Watchdog& d = watchdog();
  const auto limit = std::chrono::duration<double>(limit_s);
  const auto period = std::chrono::duration_cast<Wall::duration>(std::min(limit / 4, std::chrono::duration<double>(1)));
  for (;;) {
    std::this_thread::sleep_for(period);
    std::lock_guard lock(d.mu);
    const auto now = Wall::now();
    for (SimWatch::Run& r : d.runs) {
      const uint64_t s = r.switches->load(std::memory_order_relaxed);
      if (s != r.seen) {
        r.seen = s;
        r.since = now;
      } else if (now - r.since > limit) {
        stalled(r, limit_s);
      }
    }
  }
}

}  // namespace

void set_sim_stall_handler(SimStallHandler h) { stall_handler.store(h); }

double sim_stall_limit_s() {
  static const double limit = [] {
    const char* env = std::getenv("COLLCHECK_SIM_STALL_S");
    if (env == nullptr || *env == '\0') return 60.0;
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v >= 0.1 && v <= 86400)) {
      std::fprintf(stderr,
                   "collcheck: COLLCHECK_SIM_STALL_S='%s' is not allowed: seconds of wall time, a number from 0.1 to "
                   "86400 (default 60)\n",
                   env);
      std::_Exit(2);
    }
    return v;
  }();
  return limit;
}

SimWatch::SimWatch(const std::atomic<uint64_t>& switches, int ranks) {
  const double limit_s = sim_stall_limit_s();
  Watchdog& d = watchdog();
  std::lock_guard lock(d.mu);
  run_ = d.runs.insert(d.runs.end(), Run{&switches, ranks, switches.load(std::memory_order_relaxed), Wall::now()});
  if (!d.started) {
    std::thread(watch, limit_s).detach();
    d.started = true;
  }
}

SimWatch::~SimWatch() {
  Watchdog& d = watchdog();
  std::lock_guard lock(d.mu);
  d.runs.erase(run_);
}

}  // namespace collcheck
