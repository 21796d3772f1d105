// The simulated world's scheduler: fibers (Boost.Context) on the one OS thread
// that runs it, virtual time, and a seeded choice of which runnable fiber goes
// next. Virtual time moves only when every fiber is parked: to the earliest
// wake-up asked for (a deadline, a sleep, a message's α-β cost). So the seed
// decides every interleaving, and the host's load decides nothing.
//
// Schedules (issue 33):
//   - random: each switch picks a runnable fiber uniformly with the seed's
//     generator;
//   - PCT (Burckhardt et al., ASPLOS 2010): fibers get distinct random
//     priorities, the highest runnable one runs, and at depth-1 random steps
//     the running fiber drops below all others: a bug of depth d is found
//     with probability at least 1/(n k^(d-1)) per run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "impl/sched.h"

namespace collcheck {

enum class SchedulePolicy : uint8_t { Random, Pct };

struct ScheduleOptions {
  uint64_t seed = 1;
  SchedulePolicy policy = SchedulePolicy::Random;
  int pct_depth = 3;           // PCT's d
  uint64_t pct_steps = 20000;  // PCT's k: the change points fall in [1, k]
  // "random", "pct" or "pct:D"; throws std::invalid_argument naming the field.
  static ScheduleOptions parse(const std::string& spec, uint64_t seed);
  std::string describe() const;
};

class FiberScheduler final : public FiberHost {
 public:
  FiberScheduler(ScheduleOptions opts, Clock::time_point origin);
  ~FiberScheduler() override;
  FiberScheduler(const FiberScheduler&) = delete;
  FiberScheduler& operator=(const FiberScheduler&) = delete;

  Clock::time_point now() const override { return now_; }
  bool in_fiber() const override { return current_ != nullptr; }
  void park(const void* key, Deadline wake) override;
  void notify(const void* key) override;
  std::shared_ptr<const bool> spawn(std::function<void()> fn) override;
  std::shared_ptr<void>& local_slot(const void* key) override;

  enum class Stop : uint8_t { AllDone, Limit, Deadlock };
  // Runs the fibers until every one has returned (AllDone), virtual time
  // would pass `until` (Limit: the clock stops at `until`), or every live
  // fiber is parked with nothing that can wake it (Deadlock: virtual time
  // does not move). Called from outside any fiber.
  Stop run(Clock::time_point until);
  // The schedule from here on comes from `seed` mixed with the options'
  // seed (PCT: new change points, counted from here).
  void reseed(uint64_t seed);
  // Entries in the timer heap, stale ones included (for tests: bounded by
  // twice the live timers plus 256, and 0 once every fiber has returned).
  size_t timer_entries() const { return timers_.size(); }
  // Fibers resumed so far: read by another thread (SimWatch, on the wall
  // clock) to see that the world's one thread still switches between them.
  const std::atomic<uint64_t>& switches() const { return switches_; }

  struct Fiber;

 private:
  Fiber* pick();
  void plan_changes();
  void wake(Fiber* f);
  void resume(Fiber* f);

  ScheduleOptions opts_;
  Clock::time_point now_;
  std::mt19937_64 rng_;
  uint64_t next_id_ = 0;
  uint64_t steps_ = 0;  // switches since the last (re)seed: PCT's step count
  std::vector<uint64_t> change_points_;  // PCT, sorted
  std::vector<std::unique_ptr<Fiber>> fibers_;  // live, in spawn order
  std::vector<Fiber*> runnable_;
  // Parked fibers by key, in the order they parked: an open-addressed table
  // (linear probing) of keys and their lists. An entry whose list empties
  // stays (with its vector's room) for the key's next wait: a map node and a
  // vector made and freed per wait were a tenth of a verify of small cases,
  // and a node-based map's lookups a twentieth. When half the slots are
  // taken the table is rebuilt without its empty entries, twice as large if
  // still a quarter full.
  struct WaitList {
    const void* key = nullptr;  // nullptr: a free slot
    std::vector<Fiber*> fibers;
  };
  std::vector<WaitList> waiters_ = std::vector<WaitList>(256);
  size_t waiter_keys_ = 0;  // slots taken
  WaitList* find_waiters(const void* key);
  WaitList& waiters_of(const void* key);  // adds the key if absent
  void rebuild_waiters();
  std::vector<Fiber*> woken_;  // notify's list, reused
  // Wake-ups: a binary min-heap on (time, fiber id), the order a multimap of
  // them had (a fiber has at most one live timer, so the keys are distinct).
  // A timer whose fiber woke first is left in place and skipped when it
  // comes to the top (its fiber's has_timer is false or its generation has
  // moved on); the heap is rebuilt without them when they outnumber the rest.
  // The fiber's next wait for the same time revives it (its spare): a rank's
  // link waits in a call all pass the call's deadline, and a notify ends
  // nearly every one of them, so a push per wait left the heap mostly stale.
  struct Timer {
    Clock::time_point at;
    uint64_t id;
    Fiber* fiber;
    uint64_t gen;
  };
  std::vector<Timer> timers_;
  size_t live_timers_ = 0;
  uint64_t next_gen_ = 0;  // timer generations, unique in the scheduler
  bool stale(const Timer& t) const;
  static void forget_spare(const Timer& t);
  void drop_stale_tops();
  void compact_timers(const Fiber* gone);
  Fiber* current_ = nullptr;
  std::atomic<uint64_t> switches_{0};
};

}  // namespace collcheck
