// The rule that keeps NCCL's communicators safe to abort (harness/peers/comm_groups.h),
// checked with plain threads: a failing rank only marks its group; the last rank
// out aborts it, once; a failed creation caches nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "harness/peers/comm_groups.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {
struct FakeComms {
  std::atomic<bool> freed{false};  // what an abort does to NCCL's communicators
  int id = 0;
};
}  // namespace

TEST(CommGroups, AFailingRankLeavesTheAbortToTheLastRankOut) {
  std::atomic<int> aborts{0};
  CommGroups<FakeComms> groups([&](FakeComms& c) {
    c.freed = true;
    ++aborts;
  });
  const int p = 4;
  std::atomic<int> used_after_free{0}, saw_failure{0};
  std::latch entered(p);  // as in a world: every rank is inside the call before one passes its deadline
  std::vector<std::thread> ranks;
  for (int r = 0; r < p; ++r) {
    ranks.emplace_back([&, r] {
      auto call = groups.enter(p, [] { return std::make_unique<FakeComms>(); });
      entered.count_down();
      entered.wait();
      if (r == 0) {
        call.fail("rank 0 passed its deadline");
        return;
      }
      // The others poll their communicator until they see the failure; every
      // poll touches it, as ncclCommGetAsyncError would.
      for (int i = 0; i < 2000 && !call.failed(); ++i) {
        if (call.state().freed) ++used_after_free;
        std::this_thread::sleep_for(100us);
      }
      if (call.state().freed) ++used_after_free;
      if (call.failed()) ++saw_failure;
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * r));  // leave at different times
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(used_after_free.load(), 0) << "a rank polled a communicator that was already aborted";
  EXPECT_EQ(saw_failure.load(), p - 1);
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_FALSE(groups.cached(p)) << "the failed group must not be reused";
  // The next call creates a fresh group.
  auto again = groups.enter(p, [] {
    auto c = std::make_unique<FakeComms>();
    c->id = 2;
    return c;
  });
  EXPECT_EQ(again.state().id, 2);
}

TEST(CommGroups, AFailedCreationCachesNothing) {
  int aborts = 0;
  CommGroups<FakeComms> groups([&](FakeComms&) { ++aborts; });
  EXPECT_THROW(groups.enter(2, []() -> std::unique_ptr<FakeComms> { throw std::runtime_error("init failed"); }),
               std::runtime_error);
  EXPECT_FALSE(groups.cached(2));
  int created = 0;
  {
    auto call = groups.enter(2, [&] {
      ++created;
      return std::make_unique<FakeComms>();
    });
  }
  EXPECT_EQ(created, 1) << "the failed creation was cached";
  EXPECT_TRUE(groups.cached(2)) << "a successful call keeps its communicators";
  EXPECT_EQ(aborts, 0);
}

TEST(CommGroups, ResetAbortsAtOnceWhenIdleAndLaterWhenNot) {
  int aborts = 0;
  CommGroups<FakeComms> groups([&](FakeComms&) { ++aborts; });
  { auto c = groups.enter(1, [] { return std::make_unique<FakeComms>(); }); }
  groups.reset(1);
  EXPECT_EQ(aborts, 1);
  EXPECT_FALSE(groups.cached(1));
  {
    auto c = groups.enter(1, [] { return std::make_unique<FakeComms>(); });
    groups.reset(1);
    EXPECT_EQ(aborts, 1) << "aborted under a rank that is still inside its call";
    EXPECT_TRUE(c.failed());
    EXPECT_THROW(groups.enter(1, [] { return std::make_unique<FakeComms>(); }), std::runtime_error);
  }
  EXPECT_EQ(aborts, 2);
  EXPECT_FALSE(groups.cached(1));
}
