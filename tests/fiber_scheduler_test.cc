// The simulated world's scheduler (harness/world/fiber_scheduler.h) on its
// own: timers fire at their time, in time order, and a fiber woken early by a
// notify is never woken again by its old timer (the heap keeps such entries,
// stale, until they surface or are swept).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "harness/world/fiber_scheduler.h"
#include "harness/world/sim_world.h"

using namespace collcheck;
using namespace std::chrono_literals;

#define SKIP_WITHOUT_FIBERS() \
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers

TEST(FiberScheduler, TimersFireOnTimeAndAnEarlyWakeLeavesNoTimerBehind) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  std::printf("[ seed     ] %#llx\n", static_cast<unsigned long long>(seed));
  for (SchedulePolicy policy : {SchedulePolicy::Random, SchedulePolicy::Pct}) {
    ScheduleOptions o;
    o.seed = seed;
    o.policy = policy;
    FiberScheduler s(o, Clock::time_point{});
    constexpr int kFibers = 48, kRounds = 300, kKeys = 4;
    int keys[kKeys] = {};
    uint64_t notifies[kKeys] = {};  // how many notifies each key has had
    size_t on_time = 0, early = 0, max_entries = 0, done = 0;
    Clock::time_point last{};
    bool backwards = false, early_without_notify = false, late = false;
    for (int i = 0; i < kFibers; ++i)
      s.spawn([&, i] {
        std::mt19937_64 rng(seed ^ static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
        for (int r = 0; r < kRounds; ++r) {
          const int k = static_cast<int>(rng() % kKeys);
          const Deadline deadline = s.now() + std::chrono::microseconds(1 + rng() % 1000);
          const uint64_t before = notifies[k];
          s.park(&keys[k], deadline);
          const Clock::time_point t = s.now();
          backwards |= t < last;
          last = t;
          late |= t > deadline;
          if (t == deadline && notifies[k] == before) {
            ++on_time;
          } else if (t < deadline) {
            ++early;
            early_without_notify |= notifies[k] == before;  // a stale timer fired
          }
          max_entries = std::max(max_entries, s.timer_entries());
        }
        ++done;
      });
    // Notifies at random times: many waits end before their timer.
    s.spawn([&] {
      std::mt19937_64 rng(~seed);
      while (done < kFibers) {
        s.park(nullptr, s.now() + std::chrono::microseconds(1 + rng() % 40));
        const int k = static_cast<int>(rng() % kKeys);
        ++notifies[k];
        s.notify(&keys[k]);
      }
    });
    EXPECT_EQ(s.run(Clock::time_point{} + 1h), FiberScheduler::Stop::AllDone);
    EXPECT_EQ(done, static_cast<size_t>(kFibers));
    EXPECT_FALSE(backwards) << "virtual time went back";
    EXPECT_FALSE(late) << "a timer fired after its time";
    EXPECT_FALSE(early_without_notify) << "a fiber woke before its time with no notify: an old timer fired";
    EXPECT_GT(on_time, 100u) << "few waits ended by their timer: the test no longer tests timers";
    EXPECT_GT(early, 100u) << "few waits ended by a notify: the test no longer leaves stale timers";
    // Live timers are at most kFibers + 1: stale entries are swept.
    EXPECT_LE(max_entries, 2 * (kFibers + 1) + 256 + 1);
    EXPECT_EQ(s.timer_entries(), 0u) << "a returned fiber's entries stay in the heap";
    std::printf("[ timers   ] %s: %zu waits ended on time, %zu by a notify, at most %zu heap entries\n",
                policy == SchedulePolicy::Random ? "random" : "pct", on_time, early, max_entries);
  }
}

// A rank's link waits in one call all pass the call's deadline, a notify ends
// nearly each of them, and a sleep (the message's cost) comes between two:
// the fiber's next wait for the same time revives the entry the notify left
// stale, so the heap holds about one entry a fiber, not a stale entry per
// wait until a sweep; and a revived deadline still fires on time.
TEST(FiberScheduler, AWaitForTheSameDeadlineRevivesItsStaleEntryAndStillFires) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  std::printf("[ seed     ] %#llx\n", static_cast<unsigned long long>(seed));
  ScheduleOptions o;
  o.seed = seed;
  FiberScheduler s(o, Clock::time_point{});
  constexpr int kFibers = 8, kRounds = 400;
  const Deadline deadline = Clock::time_point{} + 1s;
  int key = 0, lonely = 0;
  size_t in_final_wait = 0, max_entries = 0, early_without_notify = 0, fired_on_time = 0;
  uint64_t notifies = 0;
  for (int i = 0; i < kFibers; ++i)
    s.spawn([&, i] {
      std::mt19937_64 rng(seed ^ static_cast<uint64_t>(i + 1) * 0x9e3779b97f4a7c15ull);
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t before = notifies;
        s.park(&key, deadline);  // a link wait: a notify ends it
        if (s.now() < deadline && notifies == before) ++early_without_notify;
        s.park(nullptr, s.now() + std::chrono::microseconds(1 + rng() % 5));  // the message's cost
        max_entries = std::max(max_entries, s.timer_entries());
      }
      ++in_final_wait;
      s.park(&lonely, deadline);  // nobody notifies: the revived deadline must fire
      if (s.now() == deadline) ++fired_on_time;
    });
  s.spawn([&] {
    while (in_final_wait < kFibers) {
      s.park(nullptr, s.now() + 1us);
      ++notifies;
      s.notify(&key);
    }
  });
  EXPECT_EQ(s.run(Clock::time_point{} + 1h), FiberScheduler::Stop::AllDone);
  EXPECT_EQ(early_without_notify, 0u) << "a fiber woke before its deadline with no notify: an old timer fired";
  EXPECT_EQ(fired_on_time, static_cast<size_t>(kFibers)) << "a deadline did not fire at its time";
  // Live: a timer per fiber and the notifier's; stale: at most a spare per
  // fiber. A push per wait reached the sweep's threshold (2 x live + 256).
  EXPECT_LE(max_entries, static_cast<size_t>(3 * kFibers + 2));
  EXPECT_EQ(s.timer_entries(), 0u);
  std::printf("[ timers   ] %d fibers x %d waits for one deadline: at most %zu heap entries\n", kFibers, kRounds,
              max_entries);
}

// A spare entry that surfaced and left the heap is not revived: a fiber
// notified before its deadline, then asleep until exactly that time, then
// waiting again for it with nobody to notify, wakes at that time (a revival
// of the entry that left would park it for ever: a deadlock).
TEST(FiberScheduler, ASpareThatLeftTheHeapIsNotRevived) {
  SKIP_WITHOUT_FIBERS();
  FiberScheduler s(ScheduleOptions{}, Clock::time_point{});
  const Deadline d = Clock::time_point{} + 5us;
  int key = 0, lonely = 0;
  bool woke_at_d = false;
  s.spawn([&] {
    s.park(&key, d);      // notified at 1 us: its entry for d stays, stale
    s.park(nullptr, d);   // asleep until d: the stale entry surfaces and leaves
    s.park(&lonely, d);   // nobody notifies: a new entry fires at once
    woke_at_d = s.now() == d;
  });
  s.spawn([&] {
    s.park(nullptr, Clock::time_point{} + 1us);
    s.notify(&key);
  });
  EXPECT_EQ(s.run(Clock::time_point{} + 1h), FiberScheduler::Stop::AllDone);
  EXPECT_TRUE(woke_at_d);
}

// The waiter table under many keys: 30 fibers park 100 times each, every time
// on a key of its own never used before (3,000 keys: the table is rebuilt
// many times over, dropping emptied entries), and a notifier wakes each round's
// 30 keys in reverse order. A lost or misfiled waiter would leave its fiber
// parked for ever (a deadlock); a stray wake would end a park early.
TEST(FiberScheduler, ThousandsOfKeysEachWakeTheirOwnFiber) {
  SKIP_WITHOUT_FIBERS();
  FiberScheduler s(ScheduleOptions{}, Clock::time_point{});
  constexpr int kFibers = 30, kRounds = 100;
  std::vector<int> keys(kFibers * kRounds);
  int parked = 0, stray = 0, woken = 0, round = 0;
  std::vector<int> round_of(kFibers, -1);
  for (int i = 0; i < kFibers; ++i)
    s.spawn([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        round_of[static_cast<size_t>(i)] = r;
        ++parked;
        s.park(&keys[static_cast<size_t>(r * kFibers + i)], Deadline::max());
        if (round != r) ++stray;  // woken before its round's notify
        ++woken;
      }
    });
  s.spawn([&] {
    for (int r = 0; r < kRounds; ++r) {
      // (A lost waiter stops the rounds: the limit below ends the run.)
      while (parked < (r + 1) * kFibers && s.now() < Clock::time_point{} + 100ms) s.park(nullptr, s.now() + 1us);
      round = r;
      for (int i = kFibers - 1; i >= 0; --i) s.notify(&keys[static_cast<size_t>(r * kFibers + i)]);
    }
  });
  EXPECT_EQ(s.run(Clock::time_point{} + 200ms), FiberScheduler::Stop::AllDone);
  EXPECT_EQ(woken, kFibers * kRounds);
  EXPECT_EQ(stray, 0);
}
