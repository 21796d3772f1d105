// The process's stall meter: when this process, or one of a rank's threads,
// was not running. On an oversubscribed node or under a sanitizer a rank
// that is not running delays the transfers it is part of; the slow-link
// analysis leaves those times out (harness/check/detect_slow_link.cc).
//
// Two measures, one thread (while any flight recorder on the wall clock
// lives), a tick of kStallTick:
// - the process: the meter sleeps a tick; a wake-up more than kStallSlack
//   late is a stall of the whole process (it was stopped, or every thread was
//   off the CPUs);
// - a watched thread (a rank's: FlightRecorder::note_thread): its time
//   waiting in the run queue, the second field of
//   /proc/self/task/<tid>/schedstat, read at each tick. A wait of 2 ms or
//   more is a stall of that thread. This is what the first measure misses on
//   a busy host: Linux runs a sleeper such as the meter on time while a rank
//   thread that polls waits its turn behind other processes, for 10-20 ms at
//   a time under 8 busy ones.
//   Except a wait that began and ended while the thread was waiting on a
//   transfer (polling: set_polling): it waited anyway, and only the wait
//   that ended as it saw the transfer complete delayed anything. A thread
//   that polls a slow link under load spends most of that time in the run
//   queue; leaving all of it out would hide the slow link.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "impl/sched.h"

namespace collcheck {

inline constexpr auto kStallTick = std::chrono::milliseconds(1);
// A sleeper on a busy node routinely wakes a few ms late (every tick, so
// short lateness would tile the whole run); 10 ms late means the process was
// descheduled, which is what the slow-link analysis must not blame on a link.
inline constexpr auto kStallSlack = std::chrono::milliseconds(10);

class StallMeter {
 public:
  using Span = std::pair<Clock::time_point, Clock::time_point>;
  static StallMeter& get();
  void acquire();  // the meter runs while acquisitions outnumber releases
  void release();
  // A watched thread's state, which its own thread sets without a lock.
  struct Thread {
    std::atomic<bool> polling{false};  // in a wait on a transfer
    std::atomic<uint64_t> waits_left{0};  // how many such waits it has left
  };
  // Watches thread `tid` of this process until as many unwatch calls
  // (nullptr when its run-queue delay cannot be read: a kernel without
  // schedstat). The Thread lives until the last unwatch.
  Thread* watch(pid_t tid);
  void unwatch(pid_t tid);
  static void set_polling(Thread* t, bool polling) {
    if (t == nullptr) return;
    if (!polling && t->polling.load(std::memory_order_relaxed)) t->waits_left.fetch_add(1, std::memory_order_relaxed);
    t->polling.store(polling, std::memory_order_relaxed);
  }
  // The process's stalls, and thread `tid`'s, that end after `from`.
  std::vector<Span> since(Clock::time_point from) const;
  std::vector<Span> thread_since(pid_t tid, Clock::time_point from) const;
  static pid_t this_thread_id();

 private:
  struct Watched {
    Thread state;
    int fd = -1;
    int users = 0;
    bool gone = false;  // the thread ended: its file no longer reads
    long long delay_ns = -1;
    Clock::time_point read_at;
    bool polled = false;     // at read_at
    uint64_t waits_left = 0;  // at read_at
    std::deque<Span> stalls;
  };
  StallMeter() = default;
  void loop(uint64_t gen);
  void read_threads(std::unique_lock<std::mutex>& lk);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;  // the running meter (one), until release joins it
  int users_ = 0;
  uint64_t generation_ = 0;
  std::deque<Span> stalls_;
  std::map<pid_t, std::unique_ptr<Watched>> watched_;
  pid_t next_read_ = 0;  // read_threads goes on from here
};

}  // namespace collcheck
