// The stall meter sees a rank's thread wait in the run queue (a busy host),
// except while that thread waits on a transfer anyway (it polls: a slow link
// it waits on must stay slow). Made real: the thread shares one CPU with
// busy threads pinned there.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "harness/history/flight_recorder.h"

namespace collcheck {
namespace {

int first_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

void spin_for(std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

// The part of [lo, hi] that the recorder's stalls cover.
double stalled(const FlightRecorder& r, double lo, double hi) {
  double t = 0;
  for (const Stall& s : r.stalls()) t += std::max(0.0, std::min(s.end, hi) - std::max(s.begin, lo));
  return t;
}

// Busy threads pinned to one CPU while the test lives.
struct Hogs {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  Hogs(int cpu, int n) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this, cpu] {
        pin(cpu);
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
  }
  ~Hogs() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

TEST(StallMeter, ARankThreadWaitingForACpuIsAStallUnlessItWaitsOnATransfer) {
  if (!std::ifstream("/proc/thread-self/schedstat"))
    GTEST_SKIP() << "this kernel has no /proc/<tid>/schedstat (CONFIG_SCHED_INFO): the meter sees the process's "
                    "stalls only";
  const int cpu = first_cpu();
  ASSERT_GE(cpu, 0);
  Hogs hogs(cpu, 4);  // each slice of theirs is a wait of several ms for the rank's thread
  const auto epoch = Clock::now();
  FlightRecorder working(0, 2, epoch), waiting(1, 2, epoch);
  double a0 = 0, a1 = 0, b0 = 0, b1 = 0, c1 = 0;
  std::thread rank([&] {
    ASSERT_TRUE(pin(cpu));
    // A rank's thread that computes: every wait for the CPU delays it.
    working.transfer(TransferRecord{0, 1, 1, 0, 8, working.now(), working.now(), 0, true});
    a0 = working.now();
    spin_for(std::chrono::milliseconds(400));
    a1 = working.now();
    // The same thread polling a transfer: its waits for the CPU delay
    // nothing (the transfer had not come) and are left out...
    waiting.blocked(0, false, 1);
    b0 = waiting.now();
    spin_for(std::chrono::milliseconds(400));
    b1 = waiting.now();
    // ...until it leaves the wait: the wait that ended as it saw the
    // transfer complete, and what follows, count again.
    waiting.unblocked();
    spin_for(std::chrono::milliseconds(200));
    c1 = waiting.now();
  });
  rank.join();
  const double a = stalled(working, a0, a1) / (a1 - a0);
  const double b = stalled(waiting, b0 + 0.03, b1) / (b1 - b0);  // past the wait it entered the poll in
  const double c = stalled(waiting, b1, c1) / (c1 - b1);
  std::printf("stalled: computing %.0f%%, polling %.0f%%, after the poll %.0f%% (the thread shares CPU %d with 4 busy "
              "threads)\n",
              a * 100, b * 100, c * 100, cpu);
  EXPECT_GE(a, 0.4) << "a thread that shared its CPU with 4 busy ones was seen waiting for it only this much";
  EXPECT_LE(b, 0.1) << "waits for the CPU while polling a transfer were counted as stalls";
  EXPECT_GE(c, 0.2) << "after its wait ended, the thread's waits for the CPU were not counted";
}

}  // namespace
}  // namespace collcheck
