// The reference collectives besides all-reduce (impl/collectives/), through
// the communicator on a thread world: every collective, for p = 1..6, odd
// counts and every rank as root, against what each collective must deliver,
// computed here from the inputs; point-to-point pairing; process groups
// (subset links, their own sequence numbers and tags); and the device stream
// that one rank's groups share. Random seeds are printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "harness/run/communicator.h"
#include "harness/world/thread_world.h"
#include "impl/kernels.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

// Rank r's input element i of a call: distinct per (rank, index), exact in float.
float value(int r, size_t i, uint32_t salt) { return static_cast<float>((r * 7919 + static_cast<int>(i) * 31 + static_cast<int>(salt)) % 1000); }

struct Case {
  Collective coll;
  int p;
  size_t count;
  int root;
};

void run_case(const Case& k, uint32_t salt) {
  ThreadWorld w(k.p);
  std::vector<std::vector<float>> outs(static_cast<size_t>(k.p));
  auto run = w.run(
      [&](RankContext& ctx) {
        const int r = ctx.rank();
        Communicator comm(ctx.links(), CommOptions("ring", 10000ms));
        std::vector<float> in(send_elements(k.coll, k.count, k.p));
        for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i, salt);
        auto& out = outs[static_cast<size_t>(r)];
        out.assign(recv_elements(k.coll, k.count, k.p), -1.0f);
        comm.call(CallSpec{k.coll, k.count, DType::Float32, RedOp::Sum, 1.0, k.root, "t"}, in.data(), out.data());
      },
      30s);
  ASSERT_TRUE(run.ok()) << run.failures();
  const size_t n = k.count, m = n / static_cast<size_t>(k.p);
  for (int r = 0; r < k.p; ++r) {
    const auto& out = outs[static_cast<size_t>(r)];
    for (size_t i = 0; i < out.size(); ++i) {
      float want = 0;
      switch (k.coll) {
        case Collective::Broadcast: want = value(k.root, i, salt); break;
        case Collective::AllGather: want = value(static_cast<int>(i / n), i % n, salt); break;
        case Collective::ReduceScatter:
          for (int q = 0; q < k.p; ++q) want += value(q, static_cast<size_t>(r) * n + i, salt);
          break;
        case Collective::AllToAll: want = value(static_cast<int>(i / m), static_cast<size_t>(r) * m + i % m, salt); break;
        default: FAIL();
      }
      ASSERT_EQ(out[i], want) << collective_name(k.coll) << " p=" << k.p << " count=" << n << " root=" << k.root
                              << " rank " << r << " element " << i;
    }
  }
}

}  // namespace

TEST(Collectives, EveryCollectiveDeliversWhatItMustForEveryWorldSizeAndRoot) {
  // A fresh seed each run; COLLCHECK_TEST_SEED=<n> runs that one again.
  const char* again = std::getenv("COLLCHECK_TEST_SEED");
  const uint32_t seed = again ? static_cast<uint32_t>(std::strtoul(again, nullptr, 10)) : std::random_device{}();
  std::printf("[ seed    ] %u (COLLCHECK_TEST_SEED=%u runs it again)\n", seed, seed);
  std::mt19937 gen(seed);
  auto g = [&] { return static_cast<uint32_t>(gen()); };
  int cases = 0;
  for (int p = 1; p <= 6; ++p) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(1 + g() % 300)}) {
      for (int root = 0; root < p; ++root, ++cases) run_case({Collective::Broadcast, p, count, root}, g());
      run_case({Collective::AllGather, p, count, -1}, g());
      run_case({Collective::ReduceScatter, p, count, -1}, g());
      run_case({Collective::AllToAll, p, count * static_cast<size_t>(p), -1}, g());
      cases += 3;
    }
  }
  std::printf("[ cases   ] %d\n", cases);
}

TEST(Collectives, BarrierHoldsEveryRankUntilTheLastArrives) {
  for (int p : {1, 2, 3, 5, 8}) {
    ThreadWorld w(p);
    std::atomic<int> arrived{0}, early{0};
    auto run = w.run(
        [&](RankContext& ctx) {
          Communicator comm(ctx.links(), CommOptions("ring", 10000ms));
          if (ctx.rank() == p - 1) std::this_thread::sleep_for(50ms);
          ++arrived;
          comm.call(CallSpec{Collective::Barrier, 0, DType::Float32, RedOp::Sum, 1.0, -1, "b"}, nullptr, nullptr);
          if (arrived.load() != p) ++early;
        },
        30s);
    ASSERT_TRUE(run.ok()) << run.failures();
    EXPECT_EQ(early.load(), 0) << "p=" << p;
  }
}

TEST(Collectives, SendsPairWithReceivesInOrderPerDirection) {
  ThreadWorld w(3);
  std::vector<float> got(4 * 5, -1);
  auto run = w.run(
      [&](RankContext& ctx) {
        Communicator comm(ctx.links(), CommOptions("ring", 10000ms));
        const int r = ctx.rank();
        auto spec = [](Collective c, int peer) { return CallSpec{c, 5, DType::Float32, RedOp::Sum, 1.0, peer, "m"}; };
        if (r == 0) {
          // Two messages to rank 1, async, then one to rank 2: each pair keeps its order.
          std::vector<float> a(5, 1), b(5, 2), c(5, 3);
          auto w1 = comm.call_async(spec(Collective::Send, 1), a.data(), nullptr);
          auto w2 = comm.call_async(spec(Collective::Send, 1), b.data(), nullptr);
          comm.call(spec(Collective::Send, 2), c.data(), nullptr);
          w1->wait();
          w2->wait();
          EXPECT_EQ(comm.calls_issued(), 0u);  // point-to-point calls are numbered apart
          EXPECT_EQ(comm.p2p_calls_issued(), 3u);
        } else if (r == 1) {
          comm.call(spec(Collective::Recv, 0), nullptr, got.data());
          comm.call(spec(Collective::Recv, 0), nullptr, got.data() + 5);
        } else {
          comm.call(spec(Collective::Recv, 0), nullptr, got.data() + 10);
        }
      },
      30s);
  ASSERT_TRUE(run.ok()) << run.failures();
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[5], 2);
  EXPECT_EQ(got[10], 3);
}

TEST(Collectives, ASendToItselfOrOutsideTheGroupIsRefused) {
  ThreadWorld w(2);
  auto run = w.run(
      [&](RankContext& ctx) {
        Communicator comm(ctx.links(), CommOptions("ring", 2000ms));
        float x = 0;
        EXPECT_THROW(comm.call(CallSpec{Collective::Send, 1, DType::Float32, RedOp::Sum, 1.0, ctx.rank(), "m"}, &x, nullptr),
                     std::invalid_argument);
        EXPECT_THROW(comm.call(CallSpec{Collective::Broadcast, 1, DType::Float32, RedOp::Sum, 1.0, 2, "m"}, &x, &x),
                     std::invalid_argument);
      },
      10s);
  ASSERT_TRUE(run.ok()) << run.failures();
}

// Two groups over the same ranks, each with its own sequence: their calls of
// the same number do not meet on the wire, and a group of a subset numbers
// its ranks from 0.
TEST(Collectives, ProcessGroupsHaveTheirOwnRanksSequencesAndTags) {
  ThreadWorld w(4);
  std::vector<float> odd_sum(4, -1), all_sum(4, -1);
  auto run = w.run(
      [&](RankContext& ctx) {
        const int r = ctx.rank();
        const std::vector<int> odd{1, 3};
        std::unique_ptr<Links> sub;
        std::unique_ptr<Communicator> g;
        if (r % 2 == 1) {
          sub = subset_links(ctx.links(), odd);
          CommOptions o("ring", 10000ms);
          o.group_id = 1;
          g = std::make_unique<Communicator>(*sub, o);
          EXPECT_EQ(g->rank(), r / 2);
          EXPECT_EQ(g->size(), 2);
        }
        Communicator world(ctx.links(), CommOptions("ring", 10000ms));
        float in = static_cast<float>(r + 1), out = 0;
        if (g) {
          g->all_reduce(&in, &out, 1, DType::Float32, RedOp::Sum, 1.0, "x");
          odd_sum[static_cast<size_t>(r)] = out;
          EXPECT_EQ(g->calls_issued(), 1u);
        }
        world.all_reduce(&in, &out, 1, DType::Float32, RedOp::Sum, 1.0, "x");
        all_sum[static_cast<size_t>(r)] = out;
      },
      30s);
  ASSERT_TRUE(run.ok()) << run.failures();
  EXPECT_EQ(odd_sum[1], 2 + 4);
  EXPECT_EQ(odd_sum[3], 2 + 4);
  for (float s : all_sum) EXPECT_EQ(s, 1 + 2 + 3 + 4);
  EXPECT_EQ(group_of_tag(call_tag(5, 3)), 3u);
  EXPECT_EQ(call_of_tag(call_tag(5, 3) | 7), 5u);
}

// One stream shared by a rank's two communicators runs their calls in issue
// order: two ranks issuing the groups' calls in opposite orders deadlock
// (each call ends at its deadline), while separate streams would not.
TEST(Collectives, ASharedStreamSerialisesTheGroupsOfARank) {
  for (bool shared : {true, false}) {
    ThreadWorld w(2);
    std::atomic<int> failed{0};
    const auto start = Clock::now();
    auto run = w.run(
        [&](RankContext& ctx) {
          const int r = ctx.rank();
          auto stream = make_stream(r);
          auto sa = subset_links(ctx.links(), {0, 1});
          auto sb = subset_links(ctx.links(), {0, 1});
          CommOptions oa("ring", 500ms), ob("ring", 500ms);
          oa.group_id = 1;
          ob.group_id = 2;
          if (shared) oa.stream = ob.stream = stream;
          Communicator a(*sa, oa), b(*sb, ob);
          float x = 1, ya = 0, yb = 0;
          auto first = r == 0 ? &a : &b;
          auto second = r == 0 ? &b : &a;
          auto w1 = first->all_reduce_async(&x, r == 0 ? &ya : &yb, 1, DType::Float32, RedOp::Sum);
          auto w2 = second->all_reduce_async(&x, r == 0 ? &yb : &ya, 1, DType::Float32, RedOp::Sum);
          try {
            w1->wait();
            w2->wait();
          } catch (const std::exception&) {
            ++failed;
          }
        },
        30s);
    (void)run;
    if (shared) {
      EXPECT_GT(failed.load(), 0) << "opposite orders on one stream must deadlock";
      EXPECT_GE(Clock::now() - start, 450ms);
    } else {
      EXPECT_EQ(failed.load(), 0) << "separate streams run the groups independently";
    }
  }
}
