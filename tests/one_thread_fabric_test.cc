// A fabric of one thread (InProcFabric::set_one_thread, what a simulated world
// makes) takes no mailbox lock: its waits come to sched::wait_until without
// the lock, park and return without it. The same exchanges as a locked fabric
// must then give the same bytes, the same α-β times and the same failures:
// a ring of fibers exchanging through waits, through test() polls, requests
// dropped before their match, a deadline that expires, and an abort from the
// scheduler's own context between runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness/world/fiber_scheduler.h"
#include "harness/world/sim_world.h"
#include "impl/inproc_links.h"
#include "impl/sched.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

#define SKIP_WITHOUT_FIBERS() \
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers

// What one run of the ring printed, for comparing a locked and an unlocked fabric.
struct RingLog {
  std::vector<std::string> lines;
  std::vector<Clock::time_point> done_at;
  // Round by round, what each rank sent and what it received (a hash).
  std::vector<std::vector<uint64_t>> sent, received;
};

uint64_t hash_of(std::span<const std::byte> b) {
  uint64_t h = b.size();
  for (auto x : b) h = h * 31 + static_cast<uint64_t>(x);
  return h;
}

// kRanks fibers, each sending kRounds messages to its right neighbour and
// receiving from its left: even rounds through wait, odd ones through test()
// polls; every fifth round first posts a receive on another tag and drops it.
RingLog run_ring(bool one_thread, uint64_t seed) {
  constexpr int kRanks = 7, kRounds = 40;
  ScheduleOptions o;
  o.seed = seed;
  FiberScheduler s(o, Clock::time_point{} + 1h);
  InProcFabric fabric(kRanks);
  fabric.set_link_model(LinkModel{});
  if (one_thread) fabric.set_one_thread();
  std::vector<std::unique_ptr<Links>> links;
  for (int r = 0; r < kRanks; ++r) links.push_back(fabric.links(r));
  RingLog log;
  log.done_at.resize(kRanks);
  log.sent.assign(kRanks, std::vector<uint64_t>(kRounds));
  log.received = log.sent;
  const sched::HostScope host(&s);
  for (int r = 0; r < kRanks; ++r)
    s.spawn([&, r] {
      Links& l = *links[static_cast<size_t>(r)];
      const int right = (r + 1) % kRanks, left = (r + kRanks - 1) % kRanks;
      std::mt19937_64 rng(seed ^ static_cast<uint64_t>(r));
      for (int k = 0; k < kRounds; ++k) {
        std::vector<std::byte> out(1 + rng() % 3000), in(out.size());
        for (auto& b : out) b = static_cast<std::byte>(rng());
        if (k % 5 == 0) {
          std::vector<std::byte> unused(8);
          (void)l.irecv(left, call_tag(1000 + static_cast<uint64_t>(k)), unused);  // dropped unmatched
        }
        // Every rank sends the same size in round k only if sizes agree: the
        // receive takes the left neighbour's size, which each rank sends first.
        const uint64_t size = out.size();
        std::vector<std::byte> left_size(8);
        auto ss = l.isend(right, call_tag(static_cast<uint64_t>(k), 1), std::as_bytes(std::span(&size, 1)));
        auto rs = l.irecv(left, call_tag(static_cast<uint64_t>(k), 1), left_size);
        rs->wait(Deadline::max());
        ss->wait(Deadline::max());
        uint64_t n = 0;
        std::memcpy(&n, left_size.data(), 8);
        in.resize(n);
        auto send = l.isend(right, call_tag(static_cast<uint64_t>(k)), out);
        auto recv = l.irecv(left, call_tag(static_cast<uint64_t>(k)), in);
        if (k % 2 == 0) {
          recv->wait(Deadline::max());
          send->wait(Deadline::max());
        } else {
          while (!recv->test()) {
          }
          while (!send->test()) {
          }
        }
        const uint64_t sum = hash_of(in);
        log.sent[static_cast<size_t>(r)][static_cast<size_t>(k)] = hash_of(out);
        log.received[static_cast<size_t>(r)][static_cast<size_t>(k)] = sum;
        log.lines.push_back(std::to_string(r) + ":" + std::to_string(k) + ":" + std::to_string(n) + ":" +
                            std::to_string(sum) + "@" + std::to_string((s.now() - Clock::time_point{}).count()));
      }
      log.done_at[static_cast<size_t>(r)] = s.now();
    });
  EXPECT_EQ(s.run(Clock::time_point::max()), FiberScheduler::Stop::AllDone);
  EXPECT_EQ(fabric.pending(), 0u);
  return log;
}

TEST(OneThreadFabric, ExchangesAsALockedFabricDoesThroughWaitsPollsAndDrops) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  std::printf("[ seed     ] %#llx\n", static_cast<unsigned long long>(seed));
  const RingLog locked = run_ring(false, seed), unlocked = run_ring(true, seed);
  ASSERT_EQ(locked.lines.size(), 7u * 40u);
  for (const RingLog* log : {&locked, &unlocked})
    for (size_t r = 0; r < 7; ++r)  // each rank received what its left neighbour sent
      EXPECT_EQ(log->received[r], log->sent[(r + 6) % 7]) << "rank " << r;
  EXPECT_EQ(unlocked.lines, locked.lines);
  EXPECT_EQ(unlocked.done_at, locked.done_at);
}

TEST(OneThreadFabric, ADeadlineAndAnAbortFailAsOnALockedFabric) {
  SKIP_WITHOUT_FIBERS();
  for (bool one_thread : {false, true}) {
    SCOPED_TRACE(one_thread ? "one thread" : "locked");
    FiberScheduler s(ScheduleOptions{}, Clock::time_point{} + 1h);
    InProcFabric fabric(3);
    if (one_thread) fabric.set_one_thread();
    auto l0 = fabric.links(0), l1 = fabric.links(1), l2 = fabric.links(2);
    std::string timeout, aborted;
    const sched::HostScope host(&s);
    std::vector<std::byte> buf(16);
    s.spawn([&] {
      // Rank 1 posts the matching send and drops it (at time 0, before this
      // receive is posted): rank 0's wait expires and says so.
      sched::sleep_for(1ms);
      try {
        l0->irecv(1, call_tag(1), buf)->wait(s.now() + 5ms);
      } catch (const LinkTimeout& e) {
        timeout = e.what();
      }
      // Rank 2 never sends: only the abort ends this wait.
      try {
        l0->irecv(2, call_tag(2), buf)->wait(Deadline::max());
      } catch (const LinkAborted& e) {
        aborted = e.what();
      }
    });
    s.spawn([&] { (void)l1->isend(0, call_tag(1), std::span<const std::byte>(buf)); });
    EXPECT_EQ(s.run(Clock::time_point::max()), FiberScheduler::Stop::Deadlock);
    fabric.abort("the test's abort");  // from the scheduler's context, as SimWorld::run does
    EXPECT_EQ(s.run(Clock::time_point::max()), FiberScheduler::Stop::AllDone);
    EXPECT_NE(timeout.find("did not complete by its deadline"), std::string::npos) << timeout;
    EXPECT_NE(timeout.find("rank 1 posted the matching send and then cancelled it before it matched"), std::string::npos)
        << timeout;
    EXPECT_NE(aborted.find("the test's abort"), std::string::npos) << aborted;
  }
}

// sched::wait_until in a fiber without the lock parks and returns without it;
// outside a fiber it takes the lock first (a condition variable's wait needs it).
TEST(OneThreadFabric, AWaitWithoutTheLockParksWithoutItAndAThreadsWaitTakesIt) {
  SKIP_WITHOUT_FIBERS();
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false, owned_after = true, woke = false;
  FiberScheduler s(ScheduleOptions{}, Clock::time_point{} + 1h);
  {
    const sched::HostScope host(&s);
    s.spawn([&] {
      std::unique_lock<std::mutex> lk(mu, std::defer_lock);
      woke = sched::wait_until(cv, lk, Deadline::max(), [&] { return ready; });
      owned_after = lk.owns_lock();
    });
    s.spawn([&] {
      ready = true;
      sched::notify_all(cv);
    });
    EXPECT_EQ(s.run(Clock::time_point::max()), FiberScheduler::Stop::AllDone);
  }
  EXPECT_TRUE(woke);
  EXPECT_FALSE(owned_after);
  std::unique_lock<std::mutex> lk(mu, std::defer_lock);
  EXPECT_TRUE(sched::wait_until(cv, lk, Clock::now() + 1s, [&] { return ready; }));
  EXPECT_TRUE(lk.owns_lock());
}

}  // namespace

// A thread that is not one of the world's fibers (a plugin's own) cannot use
// the unlocked mailboxes: its transfers are refused, with what to do, rather
// than raced. A locked fabric still serves it.
TEST(OneThreadFabric, ATransferFromAThreadOutsideTheFibersIsRefused) {
  for (bool one_thread : {false, true}) {
    InProcFabric fabric(2);
    if (one_thread) fabric.set_one_thread();
    auto l0 = fabric.links(0);
    std::string error;
    std::vector<std::byte> buf(8);
    std::thread([&] {
      try {
        (void)l0->isend(1, call_tag(1), std::span<const std::byte>(buf));
      } catch (const LinkError& e) {
        error = e.what();
      }
    }).join();
    if (one_thread) {
      EXPECT_NE(error.find("came from outside the simulated world's fibers"), std::string::npos) << error;
      EXPECT_NE(error.find("--world threads"), std::string::npos) << error;
    } else {
      EXPECT_EQ(error, "");
    }
  }
}
