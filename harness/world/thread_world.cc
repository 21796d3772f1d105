#include "harness/world/thread_world.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "harness/check/guard.h"
#include "harness/world/crash_handler.h"
#include "impl/inproc_links.h"

namespace collcheck {

struct ThreadWorld::State {
  explicit State(int n) : fabric(n) {
    for (int r = 0; r < n; ++r) links.push_back(fabric.links(r));
  }
  InProcFabric fabric;
  std::vector<std::unique_ptr<Links>> links;
  std::vector<std::thread> threads;
  // A run of the first `active` ranks only (World::run's `ranks`): they see
  // a world of that size through sub_links; the others sit the run out.
  int active = 0;
  std::vector<std::unique_ptr<Links>> sub_links;
  int sub_for = 0;

  std::mutex mu;
  std::condition_variable start_cv;
  std::condition_variable done_cv;
  uint64_t generation = 0;
  bool stopping = false;
  bool broken = false;
  const RankFn* fn = nullptr;
  std::vector<RankOutcome> outcomes;
  int done = 0;

  // Barrier state.
  std::mutex bar_mu;
  std::condition_variable bar_cv;
  uint64_t bar_generation = 0;
  int bar_arrived = 0;
  std::vector<bool> bar_present;
};

namespace {

class ThreadRankContext final : public RankContext {
 public:
  ThreadRankContext(ThreadWorld::State& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.active; }
  Links& links() override {
    const auto r = static_cast<size_t>(rank_);
    return s_.active == static_cast<int>(s_.links.size()) ? *s_.links[r] : *s_.sub_links[r];
  }

  void barrier(Deadline deadline) override {
    std::unique_lock<std::mutex> lk(s_.bar_mu);
    const uint64_t gen = s_.bar_generation;
    s_.bar_present[static_cast<size_t>(rank_)] = true;
    if (++s_.bar_arrived == size()) {
      s_.bar_arrived = 0;
      std::fill(s_.bar_present.begin(), s_.bar_present.end(), false);
      ++s_.bar_generation;
      s_.bar_cv.notify_all();
      return;
    }
    // A failed rank aborts the fabric and wakes this wait: nobody waits out a
    // barrier for a rank that is already gone.
    if (!s_.bar_cv.wait_until(lk, deadline, [&] { return s_.bar_generation != gen || s_.fabric.aborted(); }) ||
        s_.bar_generation == gen) {
      if (s_.fabric.aborted())
        throw std::runtime_error(fmt::format("rank {}: barrier aborted: {}", rank_, s_.fabric.abort_reason()));
      std::string missing;
      for (size_t r = 0; r < static_cast<size_t>(size()); ++r)
        if (!s_.bar_present[r]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      throw std::runtime_error(
          fmt::format("rank {}: barrier deadline expired; ranks not arrived: {}", rank_, missing));
    }
  }

  // Released by the failure of any other rank (it aborts this barrier).
  void wait_for_others(Deadline deadline) override {
    try {
      barrier(deadline);
    } catch (const std::exception&) {
    }
  }
  void announce_end() override {}

 private:
  ThreadWorld::State& s_;
  int rank_;
};

void wake_barrier(ThreadWorld::State& s) {
  std::lock_guard<std::mutex> g(s.bar_mu);
  s.bar_cv.notify_all();
}

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
    RankOutcome out;
    try {
      if (rank < s->active) {
        ThreadRankContext ctx(*s, rank);
        (*fn)(ctx);
      }
      out.ok = true;
    } catch (const LinkError& e) {
      // A transfer of call k failed: this rank took part in every earlier
      // call, so only call k and later ones are aborted on the others.
      out.error = e.what();
      s->fabric.abort(fmt::format("rank {} failed: {}", rank, e.what()), call_of_tag(e.tag()), group_of_tag(e.tag()));
      wake_barrier(*s);
    } catch (const std::exception& e) {
      out.error = e.what();
      s->fabric.abort(fmt::format("rank {} failed: {}", rank, e.what()));
      wake_barrier(*s);
    } catch (...) {
      out.error = "unknown exception";
      s->fabric.abort(fmt::format("rank {} failed with an unknown exception", rank));
      wake_barrier(*s);
    }
    out.returned = true;
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
  state_->bar_present.assign(static_cast<size_t>(nranks), false);
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

std::vector<std::optional<std::string>> ThreadWorld::gather(const std::vector<std::string>& local, Deadline) {
  return {local.begin(), local.end()};
}

std::unique_ptr<CallGuard> ThreadWorld::call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) {
  return std::make_unique<FingerprintGuard>(size(), epoch, deadline);
}

int ThreadWorld::size() const { return static_cast<int>(state_->links.size()); }
void ThreadWorld::set_sizes_as_nccl(bool on) { state_->fabric.set_sizes_as_nccl(on); }

WorldFactory thread_worlds() {
  return [](const WorldSpec& spec) -> std::unique_ptr<World> {
    auto w = std::make_unique<ThreadWorld>(spec.ranks);
    w->set_sizes_as_nccl(spec.sizes_as_nccl);
    return w;
  };
}

WorldRun ThreadWorld::run(const RankFn& fn, std::chrono::milliseconds limit, int ranks) {
  const int active = ranks == 0 ? size() : ranks;
  if (active < 1 || active > size())
    throw std::logic_error(fmt::format("ThreadWorld::run: {} ranks in a world of {}", active, size()));
  State& s = *state_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.broken) throw std::logic_error("ThreadWorld::run: a previous run hung; this world cannot be reused");
  s.active = active;
  if (active != size() && s.sub_for != active) {
    std::vector<int> members;
    for (int r = 0; r < active; ++r) members.push_back(r);
    s.sub_links.clear();
    for (int r = 0; r < active; ++r) s.sub_links.push_back(subset_links(*s.links[static_cast<size_t>(r)], members));
    s.sub_for = active;
  }
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
    s.fabric.abort("the world's run limit expired");
    wake_barrier(s);
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
  if (!s.broken) {
    s.fabric.reset();
    std::lock_guard<std::mutex> g(s.bar_mu);
    s.bar_arrived = 0;
    std::fill(s.bar_present.begin(), s.bar_present.end(), false);
  }
  return result;
}

}  // namespace collcheck
