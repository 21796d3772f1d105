// The hierarchical algorithm's inter-node slow links, its sweep with the
// alpha-beta model, and its replay token (hierarchical_test).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <random>

#include "faults/nemesis.h"
#include "harness/peers/peer_registry.h"
#include "harness/run/communicator.h"
#include "harness/run/sweep.h"
#include "harness/world/thread_world.h"
#include "impl/algorithm.h"
#include "impl/kernels.h"
#include "properties/executor.h"
#include "properties/generators.h"
#include "properties/verify.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

TEST(InterNodeSlowLink, EveryRingEdgeSlowDoesNotWaitOnItself) {
  const int p = 4;
  ThreadWorld world(p);
  FaultSpec f;
  f.kind = "slow_link";
  f.fields = {{"edges", "inter-node"}, {"latency_ms", "2"}};
  std::vector<std::vector<float>> out(p, std::vector<float>(1000));
  std::atomic<uint64_t> fired{0};
  const auto t0 = Clock::now();
  auto run = world.run(
      [&](RankContext& ctx) {
        auto nodes = node_links(ctx.links(), 1);
        auto slow = find_nemesis("slow_link")->wrap(*nodes, f, ctx.rank());
        ASSERT_TRUE(slow);
        {
          Communicator comm(*slow, {"ring", 5000ms});
          std::vector<float> in(1000, 1.0f + static_cast<float>(ctx.rank()));
          comm.all_reduce(in.data(), out[static_cast<size_t>(ctx.rank())].data(), 1000, DType::Float32, RedOp::Sum);
        }
        fired += slow->fired();
      },
      20s);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(run.ok()) << run.failures();
  for (const auto& o : out) EXPECT_EQ(o[0], 10.0f);
  EXPECT_EQ(fired.load(), static_cast<uint64_t>(p * 2 * (p - 1)));  // every send of the ring
  EXPECT_LT(s, 4.0) << "a 6-step ring of 2 ms links took " << s << " s: a held send waited for a deadline";
}

// On one node nothing is slowed; with two nodes only the crossing sends are.
TEST(InterNodeSlowLink, SlowsOnlyTheEdgesBetweenNodes) {
  for (int per : {4, 2}) {
    ThreadWorld world(4);
    FaultSpec f;
    f.kind = "slow_link";
    f.fields = {{"edges", "inter-node"}, {"latency_ms", "1"}};
    std::atomic<uint64_t> seen{0};
    auto run = world.run(
        [&](RankContext& ctx) {
          auto nodes = node_links(ctx.links(), per);
          auto slow = find_nemesis("slow_link")->wrap(*nodes, f, ctx.rank());
          {
            Communicator comm(*slow, {"ring", 5000ms});
            std::vector<float> in(64, 1.0f), o(64);
            comm.all_reduce(in.data(), o.data(), 64, DType::Float32, RedOp::Sum);
          }
          seen += slow->seen();
        },
        20s);
    ASSERT_TRUE(run.ok()) << run.failures();
    // Ring edges 1->2 and 3->0 cross with nodes of 2: 2 edges x 6 steps.
    EXPECT_EQ(seen.load(), per == 4 ? 0u : 12u) << "ranks per node " << per;
  }
}

TEST(InterNodeSlowLink, ScenarioFieldsAreChecked) {
  Scenario s;
  s.ranks = 4;
  FaultSpec f;
  f.kind = "slow_link";
  f.fields = {{"edges", "intra"}};
  EXPECT_THROW(find_nemesis("slow_link")->validate(s, f), ScenarioError);
  f.fields = {{"edges", "inter-node"}, {"from", "0"}};
  EXPECT_THROW(find_nemesis("slow_link")->validate(s, f), ScenarioError);
  f.fields = {{"edges", "inter-node"}, {"latency_ms", "5"}};
  EXPECT_NO_THROW(find_nemesis("slow_link")->validate(s, f));
}

// ---- the sweep ----

TEST(HierarchicalSweep, AlphaBetaModel) {
  // p = 8 in 4 nodes, alpha 100 us, no bandwidth cap: 14 and 6 slow steps.
  EXPECT_DOUBLE_EQ(*alpha_beta_seconds("ring", 8, 4, 1 << 20, 1e-4, 0), 14e-4);
  EXPECT_DOUBLE_EQ(*alpha_beta_seconds("hierarchical", 8, 4, 1 << 20, 1e-4, 0), 6e-4);
  // With 1 GB/s: ring moves N/p per step, hierarchical N/L.
  EXPECT_DOUBLE_EQ(*alpha_beta_seconds("ring", 8, 4, 8000, 0, 1e9), 14 * 1000 / 1e9);
  EXPECT_DOUBLE_EQ(*alpha_beta_seconds("hierarchical", 8, 4, 8000, 0, 1e9), 6 * 2000 / 1e9);
  EXPECT_FALSE(alpha_beta_seconds("tree", 8, 4, 8000, 1e-4, 0));
  EXPECT_FALSE(alpha_beta_seconds("ring", 8, 1, 8000, 1e-4, 0));
}

TEST(HierarchicalSweep, PrintsBothAlgorithmsTheModelAndTheWinner) {
  const auto r = testutil::collcheck("sweep --algo ring,hierarchical --ranks 6 --ranks-per-node 3 "
                                     "--inter-node-latency-us 500 -b 4K -e 4K -n 4 -w 1",
                                     120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# nodes: 2 (--ranks-per-node 3, simulated); every inter-node edge slowed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("alpha-beta model of the inter-node links: alpha = 500 us"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ring against hierarchical, same run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
  // 10 slow ring steps against 2 for the leaders: the model says 5x.
  EXPECT_NE(r.out.find("5.00"), std::string::npos) << r.out;
}

TEST(HierarchicalSweep, BadNodeFlagsExitTwoNamingTheFlag) {
  auto r = testutil::collcheck("sweep --ranks 4 --ranks-per-node 5 -b 1K -e 1K", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks-per-node must be between 1 and --ranks (4), got 5"), std::string::npos) << r.out;
  r = testutil::collcheck("sweep --ranks 4 --inter-node-latency-us 100 -b 1K -e 1K", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("all 4 ranks are on one node: give --ranks-per-node below --ranks"), std::string::npos) << r.out;
  r = testutil::collcheck("sweep --ranks 4 --ranks-per-node 2 --inter-node-latency-us -3 -b 1K -e 1K", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--inter-node-latency-us must be in [0, 1000000], got -3"), std::string::npos) << r.out;
}

// The replay token carries the nodes, and a bad one is refused with its field.
TEST(HierarchicalCase, TokenCarriesTheNodes) {
  Case c;
  c.p = 6;
  c.count = 9;
  c.data = DataClass::Random;
  c.seed = 5;
  c.ranks_per_node = 2;
  const std::string t = encode_case(c);
  EXPECT_NE(t.find(",h2"), std::string::npos) << t;
  EXPECT_EQ(decode_case(t), c);
  EXPECT_NE(case_summary(c).find("2 rank(s) per node"), std::string::npos);
  for (const char* bad : {"v1:p6:float32:sum:s1:n9:oop:d:random:5,h0", "v1:p6:float32:sum:s1:n9:oop:d:random:5,h2,h3",
                          "v1:p6:float32:sum:s1:n9:oop:d:random:5,hx", "v1:p6:float32:sum:s1:n9:oop:d:random:5,h99999999999"}) {
    try {
      (void)decode_case(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("ranks-per-node field"), std::string::npos) << e.what();
    }
  }
}
