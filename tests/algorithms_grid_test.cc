// The grid: ring, tree and double binary tree against the oracle for
// p = 1..9 and 16, all 12 dtypes x 6 ops, counts {0, 1, p-1, p, p+1, 1000, 4099},
// in-place and out-of-place. For every case: the oracle accepts the result,
// every rank holds identical bits, a second run gives identical bits, an
// out-of-place input is untouched, and the canaries around every output buffer
// are intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>

#include "harness/run/communicator.h"
#include "harness/model/data.h"
#include "harness/check/oracle.h"
#include "harness/check/output_check.h"
#include "harness/world/thread_world.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

struct GridParam {
  std::string algo;
  int p;
};
void PrintTo(const GridParam& g, std::ostream* os) { *os << g.algo << " p=" << g.p; }

class Grid : public ::testing::TestWithParam<GridParam> {};

// Runs one case on every rank; returns each rank's output (without canaries).
std::vector<std::vector<std::byte>> run_case(ThreadWorld& world, const std::string& algo, DType t, RedOp op,
                                             size_t count, bool inplace, uint64_t seed,
                                             const std::vector<std::vector<std::byte>>& inputs) {
  const int p = world.size();
  const size_t bytes = count * dtype_size(t);
  std::vector<std::vector<std::byte>> send(static_cast<size_t>(p)), out(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    send[static_cast<size_t>(r)] = inputs[static_cast<size_t>(r)];
    out[static_cast<size_t>(r)] = framed(send[static_cast<size_t>(r)], !inplace);
  }
  auto run = world.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), {algo, 10000ms});
        auto& o = out[static_cast<size_t>(c.rank())];
        const void* s = inplace ? o.data() + kCanary : static_cast<const void*>(send[static_cast<size_t>(c.rank())].data());
        comm.all_reduce(s, o.data() + kCanary, count, t, op, 3.0);
      },
      30s);
  EXPECT_TRUE(run.ok()) << run.failures();
  std::vector<std::vector<std::byte>> results;
  for (int r = 0; r < p; ++r) {
    const auto& o = out[static_cast<size_t>(r)];
    if (auto w = stray_write(o, bytes)) ADD_FAILURE() << "rank " << r << " wrote " << w->where(bytes, t);
    if (!inplace) {
      EXPECT_EQ(send[static_cast<size_t>(r)], inputs[static_cast<size_t>(r)]) << "rank " << r << "'s input was modified";
    }
    results.emplace_back(o.begin() + static_cast<long>(kCanary), o.begin() + static_cast<long>(kCanary + bytes));
  }
  (void)seed;
  return results;
}

TEST_P(Grid, MatchesOracleOnEveryDtypeOpCountAndPlacement) {
  const auto [algo, p] = GetParam();
  ThreadWorld world(p);
  std::vector<size_t> counts = {0, 1, static_cast<size_t>(p > 1 ? p - 1 : 0), static_cast<size_t>(p),
                                static_cast<size_t>(p + 1), 1000, 4099};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  size_t cases = 0;
  size_t kinds[4] = {0, 0, 0, 0};
  for (DType t : kAllDTypes) {
    for (RedOp op : kAllOps) {
      const Reduction red = resolve_reduction(t, op, p, 3.0);
      for (size_t count : counts) {
        const uint64_t seed = 1000 + count;
        std::vector<std::vector<std::byte>> inputs(static_cast<size_t>(p));
        std::vector<const void*> ptrs;
        for (int r = 0; r < p; ++r) {
          inputs[static_cast<size_t>(r)].resize(count * dtype_size(t));
          fill_input(inputs[static_cast<size_t>(r)].data(), count, t, op, p, r, seed, DataClass::Mixed);
          ptrs.push_back(inputs[static_cast<size_t>(r)].data());
        }
        for (bool inplace : {false, true}) {
          SCOPED_TRACE(::testing::Message() << algo << " p=" << p << " " << dtype_name(t) << " " << op_name(op)
                                            << " count=" << count << (inplace ? " in-place" : " out-of-place"));
          auto first = run_case(world, algo, t, op, count, inplace, seed, inputs);
          auto second = run_case(world, algo, t, op, count, inplace, seed, inputs);
          for (int r = 1; r < p; ++r) ASSERT_EQ(first[static_cast<size_t>(r)], first[0]) << "rank " << r << " differs from rank 0";
          ASSERT_EQ(second[0], first[0]) << "a second run gave different bits";
          const CheckSummary cs = check_all_reduce(red, ptrs, first[0].data(), count);
          ASSERT_EQ(cs.wrong, 0u) << cs.first_wrong_detail;
          for (int k = 0; k < 4; ++k) kinds[k] += cs.by_kind[k];
          ++cases;
        }
      }
    }
  }
  std::printf("[ grid    ] %s p=%d: %zu cases; elements checked bitwise %zu, bound %zu, one-of %zu, coarse %zu\n",
              algo.c_str(), p, cases, kinds[0], kinds[1], kinds[2], kinds[3]);
  EXPECT_GT(kinds[0], 0u);
}

std::vector<GridParam> grid_params() {
  std::vector<GridParam> v;
  for (const char* a : {"ring", "tree", "dbtree"})
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) v.push_back({a, p});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, Grid, ::testing::ValuesIn(grid_params()),
                         [](const ::testing::TestParamInfo<GridParam>& i) {
                           return i.param.algo + "_p" + std::to_string(i.param.p);
                         });

// The trees themselves: every rank is reached, parents and children agree, the
// depth is logarithmic, and in the double binary tree at most one rank (odd p)
// is an interior node of both trees.
TEST(DoubleBinaryTree, TreesAreValidAndComplementary) {
  for (int p = 2; p <= 64; ++p) {
    std::vector<int> interior(static_cast<size_t>(p), 0);
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      for (int r = 0; r < p; ++r) {
        const TreeNode n = dbtree_node(p, r, tree);
        if (n.parent < 0) ++roots;
        else {
          const TreeNode up = dbtree_node(p, n.parent, tree);
          EXPECT_TRUE(up.children[0] == r || up.children[1] == r) << "p=" << p << " tree " << tree << " rank " << r;
        }
        if (n.children[0] >= 0 || n.children[1] >= 0) ++interior[static_cast<size_t>(r)];
        // Depth: walk to the root.
        int depth = 0;
        for (int x = r; dbtree_node(p, x, tree).parent >= 0; x = dbtree_node(p, x, tree).parent) ++depth;
        EXPECT_LE(depth, 2 + static_cast<int>(std::log2(p))) << "p=" << p;
      }
      EXPECT_EQ(roots, 1) << "p=" << p << " tree " << tree;
    }
    // Mirroring (even p) makes the trees fully complementary; shifting (odd p)
    // leaves one rank interior in both, as in NCCL.
    const long both = std::count(interior.begin(), interior.end(), 2);
    if (p == 2) continue;
    EXPECT_LE(both, p % 2 == 0 ? 0 : 1) << "p=" << p;
  }
}

TEST(Ring, ChunksCoverTheBufferExactlyForAnyCountAndWorld) {
  for (int p = 1; p <= 17; ++p)
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{16}, size_t{17}, size_t{4099}}) {
      size_t next = 0;
      for (int i = 0; i < p; ++i) {
        const Chunk c = balanced_chunk(count, p, i);
        EXPECT_EQ(c.offset, next);
        EXPECT_LE(c.count, count / static_cast<size_t>(p) + 1);
        next += c.count;
      }
      EXPECT_EQ(next, count);
    }
}

}  // namespace
