#include "harness/world/thread_world.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "harness/world/crash_handler.h"
#include "harness/world/inproc_ranks.h"

namespace collcheck {

struct ThreadWorld::State {
  explicit State(int n) : ranks(n) {}
  InProcRanks ranks;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable start_cv;
  std::condition_variable done_cv;
  uint64_t generation = 0;
  bool stopping = false;
  bool broken = false;
  const RankFn* fn = nullptr;
  std::vector<RankOutcome> outcomes;
  int done = 0;
};

namespace {

void rank_main(std::shared_ptr<ThreadWorld::State> s, int rank) {
  set_crash_thread_rank(rank);  // a crash on this thread names the rank
  uint64_t seen = 0;
  for (;;) {
    const ThreadWorld::RankFn* fn;
    {
      std::unique_lock<std::mutex> lk(s->mu);
      s->start_cv.wait(lk, [&] { return s->stopping || s->generation != seen; });
      if (s->stopping) return;
      seen = s->generation;
      fn = s->fn;
    }
    RankOutcome out = s->ranks.run_rank(*fn, rank);
    std::lock_guard<std::mutex> g(s->mu);
    s->outcomes[static_cast<size_t>(rank)] = std::move(out);
    ++s->done;
    s->done_cv.notify_all();
  }
}

}  // namespace

ThreadWorld::ThreadWorld(int nranks) {
  if (nranks < 1) throw std::invalid_argument(fmt::format("world size must be >= 1, got {}", nranks));
  state_ = std::make_shared<State>(nranks);
  state_->outcomes.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) state_->threads.emplace_back(rank_main, state_, r);
}

ThreadWorld::~ThreadWorld() {
  {
    std::lock_guard<std::mutex> g(state_->mu);
    state_->stopping = true;
    state_->start_cv.notify_all();
  }
  for (auto& t : state_->threads) {
    // A rank that hung in user code cannot be joined; it keeps the shared state
    // alive and is abandoned (reported as hung when it happened).
    if (state_->broken) {
      t.detach();
    } else {
      t.join();
    }
  }
}

int ThreadWorld::size() const { return state_->ranks.size(); }
void ThreadWorld::set_sizes_as_nccl(bool on) { state_->ranks.fabric.set_sizes_as_nccl(on); }

WorldFactory thread_worlds() {
  return [](const WorldSpec& spec) -> std::unique_ptr<World> {
    auto w = std::make_unique<ThreadWorld>(spec.ranks);
    w->set_sizes_as_nccl(spec.sizes_as_nccl);
    return w;
  };
}

WorldRun ThreadWorld::run(const RankFn& fn, std::chrono::milliseconds limit, int ranks) {
  State& s = *state_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.broken) throw std::logic_error("ThreadWorld::run: a previous run hung; this world cannot be reused");
  const int active = s.ranks.activate(ranks, "ThreadWorld");
  s.fn = &fn;
  s.done = 0;
  for (auto& o : s.outcomes) o = RankOutcome{};
  ++s.generation;
  s.start_cv.notify_all();
  const int n = size();
  WorldRun result;
  std::vector<RankOutcome> at_limit;
  if (!s.done_cv.wait_until(lk, Clock::now() + limit, [&] { return s.done == n; })) {
    result.hung = true;
    at_limit = s.outcomes;
    // Abort every transfer so ranks blocked in links return, then give them a
    // short grace period; a rank stuck elsewhere is abandoned.
    lk.unlock();
    s.ranks.fabric.abort("the world's run limit expired");
    s.ranks.wake_barrier();
    lk.lock();
    if (!s.done_cv.wait_until(lk, Clock::now() + std::chrono::seconds(2), [&] { return s.done == n; })) {
      s.broken = true;
    }
  }
  result.ranks.assign(s.outcomes.begin(), s.outcomes.begin() + active);
  for (size_t r = 0; r < at_limit.size() && r < result.ranks.size(); ++r) {
    if (!at_limit[r].returned) result.ranks[r] = RankOutcome{};  // late ranks count as not returned
  }
  lk.unlock();
  if (!s.broken) s.ranks.reset();
  return result;
}

}  // namespace collcheck
