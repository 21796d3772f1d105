#include "harness/world/inproc_ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "harness/check/guard.h"
#include "impl/sched.h"

namespace collcheck {

namespace {

class InProcRankContext final : public RankContext {
 public:
  InProcRankContext(InProcRanks& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.active; }
  Links& links() override {
    const auto r = static_cast<size_t>(rank_);
    return s_.active == s_.size() ? *s_.links[r] : *s_.sub_links[r];
  }

  void barrier(Deadline deadline) override {
    std::unique_lock<std::mutex> lk(s_.bar_mu);
    const uint64_t gen = s_.bar_generation;
    s_.bar_present[static_cast<size_t>(rank_)] = true;
    if (++s_.bar_arrived == size()) {
      s_.bar_arrived = 0;
      std::fill(s_.bar_present.begin(), s_.bar_present.end(), false);
      ++s_.bar_generation;
      sched::notify_all(s_.bar_cv);
      return;
    }
    // A failed rank aborts the fabric and wakes this wait: nobody waits out a
    // barrier for a rank that is already gone.
    if (!sched::wait_until(s_.bar_cv, lk, deadline,
                           [&] { return s_.bar_generation != gen || s_.fabric.aborted(); }) ||
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
  InProcRanks& s_;
  int rank_;
};

}  // namespace

std::unique_ptr<CallGuard> InProcWorld::call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) {
  return std::make_unique<FingerprintGuard>(size(), epoch, deadline);
}

InProcRanks::InProcRanks(int n) : fabric(n) {
  for (int r = 0; r < n; ++r) links.push_back(fabric.links(r));
  bar_present.assign(static_cast<size_t>(n), false);
}

int InProcRanks::activate(int n, const char* who) {
  const int want = n == 0 ? size() : n;
  if (want < 1 || want > size()) throw std::logic_error(fmt::format("{}::run: {} ranks in a world of {}", who, want, size()));
  active = want;
  if (want != size() && sub_for != want) {
    std::vector<int> members;
    for (int r = 0; r < want; ++r) members.push_back(r);
    sub_links.clear();
    for (int r = 0; r < want; ++r) sub_links.push_back(subset_links(*links[static_cast<size_t>(r)], members));
    sub_for = want;
  }
  return want;
}

void InProcRanks::wake_barrier() {
  std::lock_guard<std::mutex> g(bar_mu);
  sched::notify_all(bar_cv);
}

RankOutcome InProcRanks::run_rank(const World::RankFn& fn, int rank) {
  RankOutcome out;
  try {
    if (rank < active) {
      InProcRankContext ctx(*this, rank);
      fn(ctx);
    }
    out.ok = true;
  } catch (const LinkError& e) {
    // A transfer of call k failed: this rank took part in every earlier
    // call, so only call k and later ones are aborted on the others.
    out.error = e.what();
    fabric.abort(fmt::format("rank {} failed: {}", rank, e.what()), call_of_tag(e.tag()), group_of_tag(e.tag()));
    wake_barrier();
  } catch (const std::exception& e) {
    out.error = e.what();
    fabric.abort(fmt::format("rank {} failed: {}", rank, e.what()));
    wake_barrier();
  } catch (...) {
    out.error = "unknown exception";
    fabric.abort(fmt::format("rank {} failed with an unknown exception", rank));
    wake_barrier();
  }
  out.returned = true;
  return out;
}

void InProcRanks::reset() {
  fabric.reset();
  std::lock_guard<std::mutex> g(bar_mu);
  bar_arrived = 0;
  std::fill(bar_present.begin(), bar_present.end(), false);
}

}  // namespace collcheck
