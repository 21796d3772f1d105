// verify --jobs at the end of a run: the last cases run heaviest first
// (properties/case_stream.h), and are still taken in index order.
#include <gtest/gtest.h>

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
// nothing left), and verify still takes every outcome, and records the
// history, in index order.
TEST(VerifyJobs, TheLastCasesRunHeaviestFirstAndAreTakenInOrder) {
  // Seed 8's heaviest tail case is drawn 13th from the end: in index order
  // it would start after 498 of the others.
  for (uint64_t seed : {uint64_t{8}, fresh_seed()}) {
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
    std::printf("[ tail    ] heaviest case %zu (%zu bytes x ranks) started before %zu of the other %zu tail cases\n",
                heaviest, weight[heaviest], after, kTail - 1);
    EXPECT_GE(after, kTail / 2) << "case " << heaviest;
    // Before the tail, the cases start in index order (a failure early in a
    // run must not have waited on heavy cases drawn after it).
    for (size_t i = 1; i < tail0 - 2; ++i) EXPECT_LT(at.at(drawn[i - 1]), at.at(drawn[i + 2])) << i;
  }
}
