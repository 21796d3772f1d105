// The hierarchical all-reduce (impl/algorithms/hierarchical.cc) and the nodes
// it follows: its declared order against ring and tree at the two extremes of
// the topology, its results replayed in that order on contiguous and
// interleaved nodes, the property suite on cases that draw their nodes, three
// mutants verify must catch, the slow-link nemesis on inter-node edges, and
// the sweep's --ranks-per-node with its alpha-beta block.
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
#include "tests/verify_quietly.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

std::vector<int> blocks(int p, int per_node) {
  std::vector<int> n;
  for (int r = 0; r < p; ++r) n.push_back(r / per_node);
  return n;
}

std::vector<int> order(ReductionOrderFn f, int p, size_t count, size_t i, std::span<const int> nodes) {
  std::vector<int> out;
  f(p, count, i, nodes, out);
  return out;
}

// Links whose nodes interleave (rank r on node r % k), as mpirun --map-by node
// places ranks: a node's ranks are not consecutive.
class InterleavedNodes final : public LinksDecorator {
 public:
  InterleavedNodes(Links& inner, int k) : LinksDecorator(inner), k_(k) {}
  int node_of(int peer) const override { return peer % k_; }

 private:
  int k_;
};

}  // namespace

// The order a hand derivation gives for p = 5 in nodes of 2 ({0,1} {2,3} {4}):
// three leaders 0, 2, 4; element 0 is in chunk 0 of 3, so the ring starts at
// node 0 (0 then 1 combined), adds node 1's (2 then 3 combined), then node 2's.
TEST(HierarchicalOrder, FollowsTheNodesAsDerivedByHand) {
  const auto nodes = blocks(5, 2);
  EXPECT_EQ(order(hierarchical_reduction_order, 5, 3, 0, nodes), (std::vector<int>{0, 1, -1, 2, 3, -1, -1, 4, -1}));
  // Element 2 is in chunk 2: the ring starts at node 2 (rank 4).
  EXPECT_EQ(order(hierarchical_reduction_order, 5, 3, 2, nodes), (std::vector<int>{4, 0, 1, -1, -1, 2, 3, -1, -1}));
}

// Node ids (an MPI world's lowest rank per host, say) numbered by first appearance.
TEST(HierarchicalOrder, NodesAreNumberedByTheirLowestRank) {
  const std::vector<int> ids = {7, 7, 3, 7, 3, 9};
  EXPECT_EQ(number_nodes(ids), (std::vector<int>{0, 0, 1, 0, 1, 2}));
  EXPECT_TRUE(number_nodes({}).empty());
}

// One rank per node is the ring over everyone; one node is the heap tree.
TEST(HierarchicalOrder, IsTheRingWithOneRankPerNodeAndTheTreeOnOneNode) {
  for (int p = 1; p <= 12; ++p)
    for (size_t count : {size_t{1}, size_t{7}, size_t{100}})
      for (size_t i = 0; i < count; i += 3) {
        const auto single = blocks(p, 1);
        EXPECT_EQ(order(hierarchical_reduction_order, p, count, i, single),
                  order(ring_reduction_order, p, count, i, single))
            << "p=" << p << " count=" << count << " i=" << i;
        EXPECT_EQ(order(hierarchical_reduction_order, p, count, i, blocks(p, p)),
                  order(tree_reduction_order, p, count, i, {}))
            << "p=" << p;
        EXPECT_EQ(order(hierarchical_reduction_order, p, count, i, {}), order(tree_reduction_order, p, count, i, {}));
      }
}

namespace {
// Runs float32 sum with hierarchical over `wrap`ped links and checks every
// rank's result bit for bit against the declared order replayed with float
// adds (NCCL's float32 sum: one rounding per add).
void run_and_replay(int p, size_t count, const std::function<std::unique_ptr<Links>(Links&)>& wrap, uint64_t seed,
                    const std::string& algo = "hierarchical", ReductionOrderFn order_fn = hierarchical_reduction_order) {
  ThreadWorld world(p);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<std::vector<float>> in(static_cast<size_t>(p), std::vector<float>(count));
  for (auto& v : in)
    for (auto& x : v) x = d(rng);
  std::vector<std::vector<float>> out(static_cast<size_t>(p), std::vector<float>(count));
  std::vector<int> nodes;
  std::mutex mu;
  auto run = world.run(
      [&](RankContext& ctx) {
        auto links = wrap(ctx.links());
        if (ctx.rank() == 0) {
          std::lock_guard<std::mutex> g(mu);
          nodes = node_map(*links);
        }
        Communicator comm(*links, {algo, 10000ms});
        const auto r = static_cast<size_t>(ctx.rank());
        comm.all_reduce(in[r].data(), out[r].data(), count, DType::Float32, RedOp::Sum);
      },
      30s);
  ASSERT_TRUE(run.ok()) << run.failures();
  for (size_t i = 0; i < count; ++i) {
    std::vector<float> stack;
    for (int op : order(order_fn, p, count, i, nodes)) {
      if (op >= 0) {
        stack.push_back(in[static_cast<size_t>(op)][i]);
      } else {
        const float b = stack.back();
        stack.pop_back();
        stack.back() = stack.back() + b;
      }
    }
    ASSERT_EQ(stack.size(), 1u);
    for (int r = 0; r < p; ++r) {
      uint32_t got, want;
      std::memcpy(&got, &out[static_cast<size_t>(r)][i], 4);
      std::memcpy(&want, &stack[0], 4);
      ASSERT_EQ(got, want) << algo << " p=" << p << " element " << i << " rank " << r;
    }
  }
}
}  // namespace

TEST(Hierarchical, ContiguousNodesGiveTheDeclaredOrderBitForBit) {
  for (int p : {2, 3, 5, 8, 9})
    for (int per : {1, 2, 3, p})
      run_and_replay(p, 257, [per](Links& l) { return node_links(l, per); }, static_cast<uint64_t>(p * 31 + per));
}

// The tree passes go in slices (kTreeSliceBytes), dbtree's two trees slice by
// slice together: over several slices and a ragged tail, every element is
// still reduced in its declared order, on every rank.
TEST(TreeSlices, SeveralSlicesKeepTheDeclaredOrderBitForBit) {
  const size_t slice = tree_slice_elements(DType::Float32);
  auto same = [](Links& l) { return node_links(l, 1 << 20); };
  for (int p : {2, 3, 6}) {
    run_and_replay(p, 3 * slice + 7, same, static_cast<uint64_t>(p), "tree", tree_reduction_order);
    run_and_replay(p, 5 * slice + 3, same, static_cast<uint64_t>(p + 100), "dbtree", dbtree_reduction_order);
    run_and_replay(p, 2 * slice + 1, [](Links& l) { return node_links(l, 2); }, static_cast<uint64_t>(p + 200));
  }
}

// Nodes whose ranks are not consecutive (the MPI world under --map-by node).
TEST(Hierarchical, InterleavedNodesGiveTheDeclaredOrderBitForBit) {
  for (int p : {4, 5, 7})
    for (int k : {2, 3})
      run_and_replay(p, 100, [k](Links& l) { return std::make_unique<InterleavedNodes>(l, k); },
                     static_cast<uint64_t>(p * 7 + k));
}

// Every property, on cases that draw their nodes (Case::ranks_per_node).
RC_GTEST_PROP(HierarchicalProperties, HoldsEveryPropertyOnEveryTopology, ()) {
  static CaseRunner runner([] {
    auto impl = reference_implementation("hierarchical");
    return RunConfig{impl, default_peers(*impl), 10000ms, {}};
  }());
  CaseSpace s;
  s.max_count = 600;
  s.max_ranks = 16;
  s.nodes = true;
  const Case c = *gen_case(s);
  const CaseOutcome o = runner.run(c);
  if (!o.ok) RC_FAIL(o.failure.property + "\n" + o.failure.detail + "replay token: " + encode_case(c));
}

TEST(HierarchicalProperties, DefaultPeersAreTheOtherAlgorithmsAndNotAPeerOfThem) {
  std::vector<std::string> names;
  for (const auto& p : default_peers(*reference_implementation("hierarchical"))) names.push_back(p->name());
  EXPECT_EQ(names, (std::vector<std::string>{"ring", "tree", "dbtree"}));
  for (const auto& p : default_peers(*reference_implementation("ring"))) EXPECT_NE(p->name(), "hierarchical");
  EXPECT_TRUE(reference_implementation("hierarchical")->follows_nodes());
  EXPECT_FALSE(reference_implementation("ring")->follows_nodes());
}

// ---- mutants: a hierarchical all-reduce with one bug each ----

namespace {

enum class Bug { None, PremulTwice, FloorNodeCount, ChildrenSwapped };

// The algorithm again, from the same building blocks, with `bug` put in.
class HierMutant final : public Implementation {
 public:
  HierMutant(Bug b, std::string name) : bug_(b), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  bool follows_nodes() const override { return true; }
  bool reduction_order(int p, size_t count, size_t index, std::span<const int> nodes,
                       std::vector<int>& postfix) const override {
    hierarchical_reduction_order(p, count, index, nodes, postfix);
    return true;
  }
  void all_reduce(const AllReduceArgs& a) const override {
    const int r = a.links.rank();
    if (begin_all_reduce(a)) return;
    const std::vector<int> nodes = node_map(a.links);
    std::vector<int> members, leaders;
    int node_count = 0;
    for (int q = 0; q < a.links.size(); ++q) node_count = std::max(node_count, nodes[static_cast<size_t>(q)] + 1);
    // The bug of a node count computed as p / ranks-per-node: the partial last node is left out.
    if (bug_ == Bug::FloorNodeCount) {
      const int per = static_cast<int>(std::count(nodes.begin(), nodes.end(), 0));
      node_count = a.links.size() / per;
    }
    for (int q = 0; q < a.links.size(); ++q) {
      if (nodes[static_cast<size_t>(q)] == nodes[static_cast<size_t>(r)]) members.push_back(q);
      if ((q == 0 || nodes[static_cast<size_t>(q)] != nodes[static_cast<size_t>(q - 1)]) &&
          nodes[static_cast<size_t>(q)] < node_count)
        leaders.push_back(q);
    }
    auto local = subset_links(a.links, members);
    const AllReduceArgs in_node{a.recv, a.recv, a.count, a.red, *local, a.tag, a.deadline};
    TreeNode tn = heap_node(local->size(), local->rank());
    if (bug_ == Bug::ChildrenSwapped) std::swap(tn.children[0], tn.children[1]);
    const TreeShare up{tn, 0, a.count, a.tag | 1};
    tree_reduce(in_node, {&up, 1}, static_cast<std::byte*>(a.recv));
    const bool leader = std::find(leaders.begin(), leaders.end(), r) != leaders.end();
    if (leader) {
      Reduction across = a.red;
      across.premul = bug_ == Bug::PremulTwice ? a.red.premul : false;  // the bug: scaled again
      across.postdiv = false;
      auto lead = subset_links(a.links, leaders);
      if (lead->size() > 1) ring_all_reduce(AllReduceArgs{a.recv, a.recv, a.count, across, *lead, a.tag | 2, a.deadline});
    }
    if (members.front() == r) apply_post(a.red, a.recv, a.count);
    const TreeShare down{tn, 0, a.count, a.tag | 3};
    tree_broadcast(in_node, {&down, 1}, static_cast<std::byte*>(a.recv));
  }

 private:
  Bug bug_;
  std::string name_;
};

VerifyResult verify_mutant(Bug b, const char* name, size_t cases, uint64_t seed) {
  auto impl = std::make_shared<HierMutant>(b, name);
  std::vector<ImplPtr> peers = {reference_implementation("ring")};
  InProcessExecutor exec(RunConfig{impl, peers, 10000ms, {}});
  VerifyOptions o;
  o.impl_spec = name;
  o.cases = cases;
  o.seed = seed;
  o.space.max_ranks = 16;
  o.space.nodes = true;
  return testutil::run_verify_quietly(o, exec);
}

}  // namespace

// The copy without a bug passes: what the mutants fail on is their bug.
TEST(HierarchicalMutants, TheControlPasses) {
  const auto r = verify_mutant(Bug::None, "hier_control", 400, 11);
  EXPECT_FALSE(r.failed) << r.failure.property << "\n" << r.failure.detail;
}

struct MutantCase {
  Bug bug;
  const char* name;
  std::vector<std::string> properties;  // any of them may be the one that fails first
  bool needs_nodes;                     // the bug is reached only across two nodes or more
  // The largest minimal world the shrink may stop at. 5 where the bug is in
  // how nodes are counted or scaled (a partial node, a second scaling: a few
  // ranks on two nodes show it). A swapped pair of children shows only where
  // the two subtrees' products round differently: on fp8 inputs near 1
  // (0.875 and 1) no tree of 5 ranks or fewer differs, and 1,000 fresh seeds
  // stopped at 6 to 8 ranks 6 times (issue 31); no prefix, subset or fresh
  // input of fewer ranks fails there.
  int max_p = 5;
};

void PrintTo(const MutantCase& m, std::ostream* os) { *os << m.name; }

class HierarchicalMutant : public ::testing::TestWithParam<MutantCase> {};

TEST_P(HierarchicalMutant, IsCaughtAndShrinksToAFewRanksOnTwoOrMoreNodes) {
  const MutantCase m = GetParam();
  // A fresh seed every run beside a fixed one, printed.
  // COLLCHECK_SEED replays a fresh seed that failed.
  const char* replay = std::getenv("COLLCHECK_SEED");
  const uint64_t fresh = replay ? std::strtoull(replay, nullptr, 0)
                                : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (uint64_t seed : {uint64_t{1}, fresh}) {
    std::printf("[ seed    ] %s: seed %#llx\n", m.name, static_cast<unsigned long long>(seed));
    const auto r = verify_mutant(m.bug, m.name, 2000, seed);
    ASSERT_TRUE(r.failed) << m.name << " was not caught in 2000 cases (seed " << seed << ")";
    EXPECT_NE(std::find(m.properties.begin(), m.properties.end(), r.failure.property), m.properties.end())
        << r.failure.property << "\n" << r.failure.detail;
    const Case& c = r.minimal;
    EXPECT_LE(c.p, m.max_p) << r.failure.property << " on " << describe_case(c, 4) << "shrink steps " << r.shrink_steps << ", runs " << r.shrink_runs;
    // The minimal case keeps two nodes or more where on one node the bug is not reached.
    if (m.needs_nodes) {
      EXPECT_TRUE(c.ranks_per_node > 0 && c.ranks_per_node < c.p) << case_summary(c);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, HierarchicalMutant,
    ::testing::Values(MutantCase{Bug::PremulTwice, "premul_twice",
                                 {"agrees-with-oracle", "matches-declared-order", "peers-agree"}, true},
                      MutantCase{Bug::FloorNodeCount, "floor_node_count",
                                 {"agrees-with-oracle", "matches-declared-order", "ranks-identical", "peers-agree"}, true},
                      MutantCase{Bug::ChildrenSwapped, "children_swapped", {"matches-declared-order"}, false, 8}),
    [](const auto& i) { return std::string(i.param.name); });

// ---- the slow-link nemesis on the edges between nodes ----

// Every rank its own node: every ring edge is slow, and every rank waits to
// receive before it waits on its send. The held sends go out from the
// receive's wait, so the ring neither hangs nor reaches its deadline.
