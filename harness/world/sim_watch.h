// The simulated world's one OS thread, watched on the wall clock. A fiber
// that blocks that thread (an implementation that declares its ranks may be
// fibers, collcheck_plugin_fiber_safe, but waits on a real lock or condition
// variable, sleeps, or spins without calling test()) stops virtual time for
// good: no deadline in virtual time can fire, and the run would hang. While a
// simulated world runs its fibers (SimWorld::run), a watchdog thread reads its
// scheduler's switch count; where it has not moved for the stall limit, the
// process says what happened and what to do on stderr and ends with exit 3
// (no verdict: the harness could not run the case in this world), or, in
// verify's isolated child, fails the case's call-completes (set_sim_stall_handler).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>

namespace collcheck {

// COLLCHECK_SIM_STALL_S: seconds of wall time a simulated world's thread may
// spend in one fiber without a switch (default 60: one step of the largest
// case takes milliseconds; the sanitizer builds run no fibers). A value
// that is not a number from 0.1 to 86400 ends the process with exit 2,
// naming the variable and the allowed values.
double sim_stall_limit_s();

// What a stall does, in place of the default (the message on stderr, then
// exit 3): an isolated child that runs the implementation for verify
// (properties/executor.h) answers its case as a call that never completed,
// with the message, as the parent's wall-clock backstop would later. The
// handler must end the process; if it returns, the default follows.
using SimStallHandler = void (*)(const char* message);
void set_sim_stall_handler(SimStallHandler h);

class SimWatch {
 public:
  // Watches `switches` (FiberScheduler::switches) of a world of `ranks` ranks
  // until destroyed.
  SimWatch(const std::atomic<uint64_t>& switches, int ranks);
  ~SimWatch();
  SimWatch(const SimWatch&) = delete;
  SimWatch& operator=(const SimWatch&) = delete;

  struct Run;

 private:
  std::list<Run>::iterator run_;
};

}  // namespace collcheck
