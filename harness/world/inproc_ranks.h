// What the two worlds of one process share (threads, and fibers in virtual
// time): the in-process fabric, each rank's links (and those of a run of the
// first k ranks), the barrier, and one rank's run, whose failure aborts the
// others' transfers so they fail fast. Every wait goes through impl/sched.h,
// so the same code blocks a thread or parks a fiber.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "harness/world/world.h"
#include "impl/inproc_links.h"

namespace collcheck {

// What the two worlds of one process answer alike: every rank is here, the
// root's texts and buffers are already everyone's, and the guard is shared
// memory (the rank that arrives second at a mismatching call sees it at once).
class InProcWorld : public World {
 public:
  bool holds(int) const override { return true; }
  bool root() const override { return true; }
  std::optional<std::string> broadcast(const std::string& text, Deadline) override { return text; }
  std::vector<std::optional<std::string>> gather(const std::vector<std::string>& local, Deadline) override {
    return {local.begin(), local.end()};
  }
  void gather_bytes(const std::vector<std::byte*>&, size_t) override {}
  std::unique_ptr<CallGuard> call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) override;
};

struct InProcRanks {
  explicit InProcRanks(int n);
  InProcFabric fabric;
  std::vector<std::unique_ptr<Links>> links;
  // A run of the first `active` ranks only (World::run's `ranks`): they see
  // a world of that size through sub_links.
  int active = 0;
  std::vector<std::unique_ptr<Links>> sub_links;
  int sub_for = 0;

  std::mutex bar_mu;
  std::condition_variable bar_cv;
  uint64_t bar_generation = 0;
  int bar_arrived = 0;
  std::vector<bool> bar_present;

  int size() const { return static_cast<int>(links.size()); }
  // Readies a run of `n` ranks (0: all); throws std::logic_error out of range.
  int activate(int n, const char* who);
  // Runs fn as rank `rank` (nothing when the rank sits the run out); a
  // failure aborts the fabric (from its call on, for a link error) and wakes
  // the barrier.
  RankOutcome run_rank(const World::RankFn& fn, int rank);
  void wake_barrier();
  // Between runs: the fabric's abort and unmatched transfers cleared, the barrier emptied.
  void reset();
};

}  // namespace collcheck
