// verify --jobs at the end of a run: the last cases run heaviest first
// (properties/case_stream.h), and are still taken in index order.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "properties/case_stream.h"
#include "properties/earlier_cases.h"

using namespace collcheck;

namespace {
uint64_t fresh_seed() { return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}(); }
}  // namespace

namespace {
// How far apart in the noted order two starts may be from the order the
// workers took them in: each notes its start after it leaves the stream's
// lock, and a worker the host holds back for a few cases' time notes late.
constexpr size_t kJitter = 8;

// Two workers that note the order they start cases in (by the case's
// token), each case taking 1 ms.
class StartOrder final : public CaseExecutor {
 public:
  CaseOutcome run(const Case&) override { return {}; }
  size_t parallel() const override { return 2; }
  CaseOutcome run_on(size_t, const Case& c) override {
    {
      std::lock_guard lock(m_);
      started_.push_back(encode_case(c));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return {};
  }
  std::vector<std::string> started() {
    std::lock_guard lock(m_);
    return started_;
  }

 private:
  std::mutex m_;
  std::vector<std::string> started_;
};
}  // namespace

// In the last kTail cases the workers start the heaviest first (a large case
// drawn near the end would otherwise run on alone while the other worker has
// nothing left), and before them a case that weighs at least the others not
// started, per worker; verify still takes every outcome, and records the
// history, in index order.
TEST(VerifyJobs, AHeavyCaseStartsEarlyTheLastRunHeaviestFirstAndAllAreTakenInOrder) {
  // Seed 8's heaviest tail case is drawn 13th from the end: in index order
  // it would start after 498 of the others. Seed 202 draws a case that
  // weighs more than half the others together.
  for (uint64_t seed : {uint64_t{8}, uint64_t{202}, fresh_seed()}) {
    std::printf("[ seed    ] %#llx\n", static_cast<unsigned long long>(seed));
    VerifyOptions o;
    o.cases = 2000;
    o.seed = seed;
    StartOrder two;
    RecordingExecutor many(two, 4000);
    std::vector<std::string> drawn;
    std::vector<size_t> weight;
    {
      CaseStream stream(o, many);
      for (size_t i = 0; i < o.cases; ++i) {
        const CaseStream::Next n = stream.next(i);
        ASSERT_TRUE(n.outcome.has_value()) << i;
        drawn.push_back(encode_case(n.case_.value()));
        weight.push_back(case_weight(n.case_.value()));
      }
    }
    const auto history = many.history();
    ASSERT_EQ(history.size(), o.cases);
    for (size_t i = 0; i < o.cases; ++i) ASSERT_EQ(encode_case(history[i]), drawn[i]) << "history " << i;
    // Where each tail case started, among the tail's starts.
    const std::vector<std::string> started = two.started();
    ASSERT_EQ(started.size(), o.cases);
    const size_t tail0 = o.cases - kTail;
    std::map<std::string, size_t> at;
    for (size_t k = 0; k < started.size(); ++k) at.emplace(started[k], k);
    size_t heaviest = tail0;
    for (size_t i = tail0; i < o.cases; ++i)
      if (weight[i] > weight[heaviest]) heaviest = i;
    // Started before at least half of the other tail cases: the two workers
    // note their starts outside the stream's lock, so a few may come first
    // (on a busy host, where one waits for a core).
    size_t after = 0;
    for (size_t i = tail0; i < o.cases; ++i) after += i != heaviest && at.at(drawn[i]) > at.at(drawn[heaviest]);
    std::printf("[ tail    ] heaviest case %zu (%zu elements x ranks + fixed) started before %zu of the other %zu tail cases\n",
                heaviest, weight[heaviest], after, kTail - 1);
    EXPECT_GE(after, kTail / 2) << "case " << heaviest;
    // Before the tail, a case starts ahead of cases drawn before it only
    // where it weighs at least the cases not started then, per worker: the
    // cases that start after it (less the next kJitter starts, which the
    // workers may note in either order).
    std::vector<size_t> order(o.cases);  // case index by start position
    for (size_t i = 0; i < o.cases; ++i) order[at.at(drawn[i])] = i;
    std::vector<size_t> later(o.cases + 1, 0);  // weight of the cases starting at position k and later
    for (size_t k = o.cases; k-- > 0;) later[k] = later[k + 1] + weight[order[k]];
    size_t lowest = 0, early = 0;  // the lowest index not started yet
    std::vector<bool> done(o.cases, false);
    for (size_t k = 0; k < o.cases; ++k) {
      const size_t j = order[k];
      done[j] = true;
      if (j > lowest + kJitter && o.cases - lowest > kTail) {
        ++early;
        const size_t others = later[std::min(k + 1 + kJitter, o.cases)];
        EXPECT_LE(others, two.parallel() * weight[j]) << "case " << j << " started at " << k << " ahead of case " << lowest;
      }
      while (lowest < o.cases && done[lowest]) ++lowest;
    }
    std::printf("[ early   ] %zu case(s) started ahead of the index order before the tail\n", early);
    // Seed 202 draws a case of 62 ranks and 524,288 elements (2.2 s alone,
    // against 2.3 s for the other 1,999): in turn it would start as case
    // 1615. It must start once the others not started weigh no more than
    // twice it (the next starts noted in either order aside).
    if (seed == 202) {
      const size_t heavy = static_cast<size_t>(std::max_element(weight.begin(), weight.end()) - weight.begin());
      const size_t w = weight[heavy], pos = at.at(drawn[heavy]);
      size_t due = 0;  // the first start at which it weighs at least the others left, per worker
      while (due < pos && later[due] - w > two.parallel() * w) ++due;
      std::printf("[ heavy   ] case %zu (weight %zu) started %zu-th, due by the %zu-th\n", heavy, w, pos + 1, due + 1);
      ASSERT_GT(heavy, 1000u) << "seed 202 no longer draws the case this test needs";
      EXPECT_LE(pos, due + kJitter);
      EXPECT_LT(pos, 1000u);
    }
  }
}
