// The simulated world (issue 33): p ranks as fibers on the one OS thread that
// calls run(), over the in-process transport, in virtual time. A seeded
// scheduler (fiber_scheduler.h) decides every interleaving; a message costs
// the α-β model's time (impl/sched.h's LinkModel) and virtual time moves only
// when every fiber waits. So a deadline, a slow link or a time to diagnosis
// is the same on an idle host and a busy one, and one seed gives one output.
//
// What it cannot do: preempt. A rank that computes forever without a link
// call, a sleep or a test() never gives the others a turn (a plugin that
// spins on test() does yield there).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "harness/world/fiber_scheduler.h"
#include "harness/world/inproc_ranks.h"

namespace collcheck {

// Why this build cannot run the simulated world (nullptr: it can).
#ifdef COLLCHECK_NO_FIBERS
inline constexpr const char* kNoFibers = COLLCHECK_NO_FIBERS;
#else
inline constexpr const char* kNoFibers = nullptr;
#endif

struct SimOptions {
  ScheduleOptions schedule;
  LinkModel model;
};

class SimWorld final : public InProcWorld {
 public:
  SimWorld(int nranks, SimOptions opts);
  ~SimWorld() override;
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  std::string_view kind() const override { return "sim"; }
  std::string_view how() const override { return "as fibers in virtual time"; }
  int size() const override;
  // Virtual time: the origin of the world's clock, moved on by every run.
  Clock::time_point start() override;
  const FiberHost* fiber_host() const override;
  void set_schedule_seed(uint64_t seed) override;
  // Runs fn on every rank (or the first `ranks`) as fibers until all have
  // returned, or until `limit` of virtual time has passed or every rank waits
  // on something that cannot come (a deadlock, seen at once): then hung, the
  // ranks still in their bodies are aborted as the thread world aborts them.
  WorldRun run(const RankFn& fn, std::chrono::milliseconds limit, int ranks = 0) override;

  void set_sizes_as_nccl(bool on);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Simulated worlds of any size, each with the same options (a job's seed
// reaches each world through its schedule's seed).
WorldFactory sim_worlds(SimOptions opts);

}  // namespace collcheck
