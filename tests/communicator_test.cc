// The thread world and the communicator API: sync and async calls, Work,
// unwaited work, failure propagation and hang detection.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "harness/run/communicator.h"
#include "harness/world/thread_world.h"

using namespace collcheck;
using namespace std::chrono_literals;

TEST(ThreadWorld, RunsEveryRankAndReusesThreads) {
  ThreadWorld w(4);
  std::atomic<int> sum{0};
  for (int i = 0; i < 3; ++i) {
    auto run = w.run([&](RankContext& c) { sum += c.rank() + 1; }, 5s);
    ASSERT_TRUE(run.ok()) << run.failures();
  }
  EXPECT_EQ(sum.load(), 3 * 10);
}

TEST(ThreadWorld, AFailingRankAbortsThePeersInsteadOfLettingThemWait) {
  ThreadWorld w(3);
  const auto start = Clock::now();
  auto run = w.run(
      [&](RankContext& c) {
        if (c.rank() == 1) throw std::runtime_error("rank 1 exploded");
        std::vector<int> b(1);
        c.links().irecv(1, 1, std::as_writable_bytes(std::span(b)))->wait(Clock::now() + 20s);
      },
      30s);
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_FALSE(run.ok());
  EXPECT_FALSE(run.ranks[1].ok);
  EXPECT_NE(run.ranks[1].error.find("exploded"), std::string::npos);
  EXPECT_NE(run.ranks[0].error.find("aborted"), std::string::npos) << run.ranks[0].error;
  EXPECT_NE(run.failures().find("rank 2:"), std::string::npos);
  // The world is still usable.
  EXPECT_TRUE(w.run([](RankContext&) {}, 5s).ok());
}

// Found by the detection property (unguarded, 7 ranks): rank 1 failed in
// call 2 while other ranks were still finishing call 1. Aborting everything
// failed them in call 1, so their flight recorders never showed what they
// called at #2 and the analyzer lost the majority it names the odd rank with.
// A rank that failed in call k took part in every earlier call, so only call k
// and later ones are aborted.
TEST(ThreadWorld, ARankThatFailsInACallLetsThePeersFinishEarlierCalls) {
  ThreadWorld w(3);
  const auto start = Clock::now();
  auto run = w.run(
      [&](RankContext& c) {
        std::vector<int> b{c.rank()};
        auto buf = std::as_writable_bytes(std::span(b));
        const Tag call1 = call_tag(1), call2 = call_tag(2);
        if (c.rank() == 1) throw LinkError("rank 1: size mismatch in call 2", 1, 2, call2, LinkDirection::Recv);
        if (c.rank() == 2) {
          std::this_thread::sleep_for(100ms);  // still in call 1 when rank 1 fails
          c.links().isend(0, call1, buf)->wait(Clock::now() + 10s);
          return;
        }
        c.links().irecv(2, call1, buf)->wait(Clock::now() + 10s);
        if (b[0] != 2) throw std::runtime_error("call 1 delivered the wrong data");
        c.links().irecv(2, call2, buf)->wait(Clock::now() + 10s);  // aborted at once
      },
      30s);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_TRUE(run.ranks[2].ok) << run.failures();
  EXPECT_FALSE(run.ranks[0].ok);
  EXPECT_NE(run.ranks[0].error.find("call #2"), std::string::npos) << run.ranks[0].error;
  EXPECT_NE(run.ranks[0].error.find("aborted: rank 1 failed"), std::string::npos) << run.ranks[0].error;
}

TEST(ThreadWorld, ARankOverTheLimitIsReportedAsHung) {
  ThreadWorld w(2);
  auto run = w.run(
      [&](RankContext& c) {
        if (c.rank() == 0) std::this_thread::sleep_for(600ms);
      },
      100ms);
  EXPECT_TRUE(run.hung);
  EXPECT_FALSE(run.ok());
  EXPECT_NE(run.failures().find("rank 0: did not return"), std::string::npos) << run.failures();
}

TEST(ThreadWorld, BarrierNamesMissingRanksAtItsDeadline) {
  ThreadWorld w(3);
  auto run = w.run(
      [&](RankContext& c) {
        if (c.rank() != 2) c.barrier(Clock::now() + 150ms);
      },
      5s);
  EXPECT_FALSE(run.ok());
  // The first rank to time out names the missing rank; the other is released
  // by its failure and repeats the reason.
  EXPECT_NE(run.ranks[0].error.find("ranks not arrived: 2"), std::string::npos) << run.failures();
  EXPECT_NE(run.ranks[1].error.find("ranks not arrived: 2"), std::string::npos) << run.failures();
}

TEST(ThreadWorld, AFailingRankReleasesPeersWaitingInABarrier) {
  ThreadWorld w(3);
  const auto start = Clock::now();
  auto run = w.run(
      [&](RankContext& c) {
        if (c.rank() == 2) {
          std::this_thread::sleep_for(50ms);
          throw std::runtime_error("rank 2 gave up");
        }
        c.barrier(Clock::now() + 20s);
      },
      30s);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_FALSE(run.ok());
  EXPECT_NE(run.ranks[0].error.find("barrier aborted: rank 2 failed: rank 2 gave up"), std::string::npos)
      << run.ranks[0].error;
  EXPECT_TRUE(w.run([](RankContext& c) { c.barrier(Clock::now() + 5s); }, 10s).ok());
}

TEST(Communicator, AsyncThenWaitEqualsSync) {
  ThreadWorld w(3);
  std::vector<std::vector<float>> sync_out(3, std::vector<float>(100)), async_out = sync_out;
  auto run = w.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), {"ring", 5000ms});
        std::vector<float> in(100);
        for (size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * static_cast<float>(i) + static_cast<float>(c.rank());
        const size_t r = static_cast<size_t>(c.rank());
        comm.all_reduce(in.data(), sync_out[r].data(), in.size(), DType::Float32, RedOp::Sum);
        auto work = comm.all_reduce_async(in.data(), async_out[r].data(), in.size(), DType::Float32, RedOp::Sum);
        work->wait();
        EXPECT_TRUE(work->test());
        EXPECT_TRUE(comm.unwaited().empty());
        EXPECT_EQ(comm.calls_issued(), 2u);
      },
      10s);
  ASSERT_TRUE(run.ok()) << run.failures();
  EXPECT_EQ(sync_out, async_out);
  EXPECT_EQ(sync_out[0], sync_out[2]);
}

TEST(Communicator, AsyncCallsRunInIssueOrderBeforeALaterSyncCall) {
  ThreadWorld w(2);
  auto run = w.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), {"tree", 5000ms});
        std::vector<int32_t> x{1}, y{0}, z{0};
        auto w1 = comm.all_reduce_async(x.data(), y.data(), 1, DType::Int32, RedOp::Sum);
        auto w2 = comm.all_reduce_async(y.data(), z.data(), 1, DType::Int32, RedOp::Sum);  // reads w1's output
        comm.all_reduce(z.data(), z.data(), 1, DType::Int32, RedOp::Sum);
        w1->wait();
        w2->wait();
        EXPECT_EQ(y[0], 2);
        EXPECT_EQ(z[0], 8);
      },
      10s);
  ASSERT_TRUE(run.ok()) << run.failures();
}

TEST(Communicator, AWorkNeverWaitedOnIsReported) {
  ThreadWorld w(2);
  std::vector<std::vector<UnwaitedWork>> reports(2);
  auto run = w.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), {"ring", 5000ms});
        std::vector<double> in(10, 1.0), out(10);
        comm.all_reduce(in.data(), out.data(), 10, DType::Float64, RedOp::Sum);
        {
          auto forgotten = comm.all_reduce_async(in.data(), out.data(), 10, DType::Float64, RedOp::Max);
          if (c.rank() == 0) {
            while (!forgotten->test()) std::this_thread::sleep_for(1ms);  // test() is not a wait
          }
        }  // dropped without wait()
        comm.all_reduce(in.data(), out.data(), 10, DType::Float64, RedOp::Sum);
        reports[static_cast<size_t>(c.rank())] = comm.unwaited();
      },
      10s);
  ASSERT_TRUE(run.ok()) << run.failures();
  for (const auto& rep : reports) {
    ASSERT_EQ(rep.size(), 1u);
    EXPECT_EQ(rep[0].call.seq, 2u);
    EXPECT_EQ(rep[0].call.op, RedOp::Max);
    EXPECT_NE(rep[0].call.describe().find("all_reduce_async #2 count=10 dtype=float64 op=max algo=ring"),
              std::string::npos)
        << rep[0].call.describe();
  }
  EXPECT_TRUE(reports[0][0].completed);
}

TEST(Communicator, AMissingPeerFailsTheCallByItsDeadlineNamingWhoWaitsOnWhom) {
  ThreadWorld w(2);
  const auto start = Clock::now();
  auto run = w.run(
      [&](RankContext& c) {
        if (c.rank() == 1) return;  // never calls
        Communicator comm(c.links(), {"ring", 200ms});
        std::vector<float> in(8, 1.0f), out(8);
        auto work = comm.all_reduce_async(in.data(), out.data(), 8, DType::Float32, RedOp::Sum);
        work->wait();
      },
      10s);
  EXPECT_LT(Clock::now() - start, 3s);
  ASSERT_FALSE(run.ok());
  const std::string err = run.ranks[0].error;
  EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("call #1"), std::string::npos) << err;
  EXPECT_NE(err.find("deadline"), std::string::npos) << err;
}

TEST(Communicator, RejectsUnknownAlgorithm) {
  ThreadWorld w(1);
  auto run = w.run([&](RankContext& c) { Communicator comm(c.links(), {"butterfly", 1000ms}); }, 5s);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.ranks[0].error.find("allowed: ring, tree, dbtree"), std::string::npos) << run.ranks[0].error;
}

// ---- The caller progress rule (CommOptions::caller_progress, MPI's) ----

namespace {
CommOptions caller_progress(std::chrono::milliseconds t) {
  CommOptions o("ring", t);
  o.caller_progress = true;
  return o;
}
CallSpec p2p(Collective c, int peer, size_t count) { return CallSpec{c, count, DType::Int32, RedOp::Sum, 1.0, peer, "x"}; }
}  // namespace

// An isend left alone does not move until its rank enters the communicator
// again (here: its wait); on the device's stream it moves by itself.
TEST(CallerProgress, AnIsendMovesOnlyWhenItsRankEntersTheLibrary) {
  for (const bool caller : {true, false}) {
    ThreadWorld w(2);
    std::atomic<bool> received{false};
    std::atomic<bool> received_before_wait{false};
    auto run = w.run(
        [&](RankContext& c) {
          CommOptions o = caller ? caller_progress(5000ms) : CommOptions("ring", 5000ms);
          Communicator comm(c.links(), o);
          std::vector<int32_t> buf(1000, c.rank() + 7);
          if (c.rank() == 0) {
            auto work = comm.call_async(p2p(Collective::Send, 1, buf.size()), buf.data(), nullptr);
            // Up to 300 ms for the receive to complete without this rank.
            for (int i = 0; i < 300 && !received; ++i) std::this_thread::sleep_for(1ms);
            received_before_wait = received.load();
            work->wait();
          } else {
            comm.call(p2p(Collective::Recv, 0, buf.size()), nullptr, buf.data());
            EXPECT_EQ(buf[999], 7);
            received = true;
          }
        },
        10s);
    ASSERT_TRUE(run.ok()) << run.failures();
    EXPECT_EQ(received_before_wait.load(), !caller) << (caller ? "caller progress" : "stream progress");
  }
}

// Two pending sends of one rank move together once it enters the library: a
// receiver that takes the second first does not wait on the first (each
// posts on a lane of its own, as MPI progresses every pending request).
TEST(CallerProgress, PendingSendsDoNotWaitOnEachOther) {
  ThreadWorld w(3);
  auto run = w.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), caller_progress(3000ms));
        std::vector<int32_t> a(64, 1), b(64, 2), in(64, 0);
        if (c.rank() == 0) {
          auto to1 = comm.call_async(p2p(Collective::Send, 1, 64), a.data(), nullptr);
          auto to2 = comm.call_async(p2p(Collective::Send, 2, 64), b.data(), nullptr);
          to1->wait();  // enters the library: both sends move
          to2->wait();
        } else if (c.rank() == 1) {
          comm.call(p2p(Collective::Recv, 2, 64), nullptr, in.data());  // rank 2 sends only after rank 0's to it
          comm.call(p2p(Collective::Recv, 0, 64), nullptr, in.data());
          EXPECT_EQ(in[0], 1);
        } else {
          comm.call(p2p(Collective::Recv, 0, 64), nullptr, in.data());
          EXPECT_EQ(in[0], 2);
          comm.call(p2p(Collective::Send, 1, 64), in.data(), nullptr);
        }
      },
      10s);
  ASSERT_TRUE(run.ok()) << run.failures();
}

// finish() is the rank's last entry (MPI_Finalize): a never-waited isend
// moves. Without it, the communicator going fails the call's Work, never run.
TEST(CallerProgress, FinishMovesWhatIsLeftAndAnUnmovedCallFailsItsWork) {
  {
    ThreadWorld w(2);
    std::atomic<bool> received{false};
    auto run = w.run(
        [&](RankContext& c) {
          Communicator comm(c.links(), caller_progress(3000ms));
          std::vector<int32_t> buf(16, 5);
          if (c.rank() == 0) {
            auto never_waited = comm.call_async(p2p(Collective::Send, 1, 16), buf.data(), nullptr);
            comm.finish();
            // The receive completes with this rank outside the library.
            for (int i = 0; i < 3000 && !received; ++i) std::this_thread::sleep_for(1ms);
            EXPECT_TRUE(received.load()) << "finish() did not move the pending send";
          } else {
            std::vector<int32_t> in(16, 0);
            comm.call(p2p(Collective::Recv, 0, 16), nullptr, in.data());
            EXPECT_EQ(in[15], 5);
            received = true;
          }
        },
        10s);
    ASSERT_TRUE(run.ok()) << run.failures();
  }
  {
    ThreadWorld w(2);
    std::string error;
    auto run = w.run(
        [&](RankContext& c) {
          if (c.rank() != 0) return;
          std::vector<int32_t> buf(16, 5);
          std::unique_ptr<Work> work;
          {
            Communicator comm(c.links(), caller_progress(3000ms));
            work = comm.call_async(p2p(Collective::Send, 1, 16), buf.data(), nullptr);
          }
          try {
            work->wait();
          } catch (const std::exception& e) {
            error = e.what();
          }
        },
        10s);
    ASSERT_TRUE(run.ok()) << run.failures();
    EXPECT_NE(error.find("never progressed"), std::string::npos) << error;
  }
}
