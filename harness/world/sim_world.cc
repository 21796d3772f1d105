#include "harness/world/sim_world.h"

#include <fmt/format.h>

#include <stdexcept>

#include "harness/world/inproc_ranks.h"
#include "harness/world/sim_watch.h"

namespace collcheck {

// Virtual time starts here in every simulated world: a fixed instant, so that
// what is printed relative to it is the same on every host.
constexpr auto kOrigin = Clock::time_point{} + std::chrono::hours(1);
// How long aborted ranks get to return after a hung run, in virtual time.
constexpr auto kGrace = std::chrono::seconds(2);

struct SimWorld::State {
  State(int n, SimOptions o) : ranks(n), opts(std::move(o)), sched(opts.schedule, kOrigin) {
    ranks.fabric.set_link_model(opts.model);
    ranks.fabric.set_one_thread();  // the ranks are fibers of the thread that runs the world
  }
  InProcRanks ranks;
  SimOptions opts;
  FiberScheduler sched;
  bool broken = false;
};

SimWorld::SimWorld(int nranks, SimOptions opts) {
  if (nranks < 1) throw std::invalid_argument(fmt::format("world size must be >= 1, got {}", nranks));
  state_ = std::make_unique<State>(nranks, std::move(opts));
}
SimWorld::~SimWorld() = default;

int SimWorld::size() const { return state_->ranks.size(); }
Clock::time_point SimWorld::start() { return state_->sched.now(); }
const FiberHost* SimWorld::fiber_host() const { return &state_->sched; }
void SimWorld::set_schedule_seed(uint64_t seed) { state_->sched.reseed(seed); }
void SimWorld::set_sizes_as_nccl(bool on) { state_->ranks.fabric.set_sizes_as_nccl(on); }

WorldRun SimWorld::run(const RankFn& fn, std::chrono::milliseconds limit, int ranks) {
  State& s = *state_;
  if (s.broken) throw std::logic_error("SimWorld::run: a previous run hung; this world cannot be reused");
  const int active = s.ranks.activate(ranks, "SimWorld");
  sched::HostScope host(&s.sched);
  set_current_link_model(&s.opts.model);
  std::vector<RankOutcome> outcomes(static_cast<size_t>(active));
  for (int r = 0; r < active; ++r)
    (void)s.sched.spawn([&s, &fn, &outcomes, r] { outcomes[static_cast<size_t>(r)] = s.ranks.run_rank(fn, r); });
  WorldRun result;
  const SimWatch watch(s.sched.switches(), active);  // a fiber that blocks the thread ends the process (exit 3)
  auto stop = s.sched.run(s.sched.now() + limit);
  if (stop != FiberScheduler::Stop::AllDone) {
    result.hung = true;
    const std::vector<RankOutcome> at_limit = outcomes;
    s.ranks.fabric.abort(stop == FiberScheduler::Stop::Deadlock
                             ? "every rank waits on something no rank will do (a deadlock in virtual time)"
                             : "the world's run limit expired");
    s.ranks.wake_barrier();
    stop = s.sched.run(s.sched.now() + kGrace);
    if (stop != FiberScheduler::Stop::AllDone) s.broken = true;
    result.ranks = outcomes;
    for (size_t r = 0; r < at_limit.size(); ++r)
      if (!at_limit[r].returned) result.ranks[r] = RankOutcome{};  // late ranks count as not returned
  } else {
    result.ranks = std::move(outcomes);
  }
  set_current_link_model(nullptr);
  if (!s.broken) s.ranks.reset();
  return result;
}

WorldFactory sim_worlds(SimOptions opts) {
  return [opts](const WorldSpec& spec) -> std::unique_ptr<World> {
    auto w = std::make_unique<SimWorld>(spec.ranks, opts);
    w->set_sizes_as_nccl(spec.sizes_as_nccl);
    return w;
  };
}

}  // namespace collcheck
