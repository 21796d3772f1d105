// The diagnosis of runs with process groups and point-to-point calls, on
// dumps written here by hand: wait-for cycles across groups (deadlock, every
// rank on the cycle named), a chain that ends at a rank that is not stuck (a
// missing rank, not a deadlock), a cycle of five thousand ranks found whole
// (an iterative search), and the pairing of sends with receives.
#include <gtest/gtest.h>

#include "harness/check/diagnosis.h"

using namespace collcheck;

namespace {

CallRecord call(uint64_t seq, Collective coll, double started, double completed, bool failed, int peer = -1) {
  CallRecord c;
  c.seq = seq;
  c.coll = coll;
  c.peer = peer;
  c.tag = "t" + std::to_string(seq);
  c.count = 8;
  c.t_scheduled = started < 0 ? 0 : started;
  c.t_started = started;
  c.t_completed = completed;
  c.state = failed ? CallState::Failed : completed >= 0 ? CallState::Completed : started >= 0 ? CallState::Started
                                                                                              : CallState::Scheduled;
  return c;
}

RankDump dump(int rank, int size, std::string group, std::vector<int> members, bool p2p = false) {
  RankDump d;
  d.rank = rank;
  d.size = size;
  d.group = std::move(group);
  d.members = std::move(members);
  d.p2p = p2p;
  return d;
}

// Rank r of three is stuck in group g_r's first call, which its other member
// only reaches (queued behind its own stuck call) after the first failure at t = 1.
std::vector<RankDump> three_group_ring(bool third_is_stuck) {
  std::vector<RankDump> ds;
  const char* names[] = {"a", "b", "c"};
  const std::vector<std::vector<int>> members{{0, 1}, {1, 2}, {0, 2}};
  for (int r = 0; r < 3; ++r) ds.push_back(dump(r, 3, "", {}));
  for (int g = 0; g < 3; ++g)
    for (int r : members[static_cast<size_t>(g)]) {
      auto d = dump(r, 3, names[g], members[static_cast<size_t>(g)]);
      // Group g's call is where rank g is stuck; its other member gets there late.
      const bool mine = r == g;
      if (mine) d.calls.push_back(call(1, Collective::AllReduce, 0.01, 1.0, true));
      else if (third_is_stuck || r != 2) d.calls.push_back(call(1, Collective::AllReduce, 1.002, 1.003, true));
      ds.push_back(d);
    }
  // Group c is {0, 2}: rank 2's stuck call is c's (g = 2), rank 0 reaches c late.
  return ds;
}

}  // namespace

TEST(CrossGroup, ACycleThroughThreeGroupsIsADeadlockNamingEveryRank) {
  const auto found = analyze(three_group_ring(true));
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::Deadlock) << found.front().text;
  EXPECT_EQ(found.front().ranks, (std::vector<int>{0, 1, 2}));
  for (const char* part : {"rank 0 waits in group a's all_reduce #1", "rank 1 waits in group b's all_reduce #1",
                           "rank 2 waits in group c's all_reduce #1"})
    EXPECT_NE(found.front().text.find(part), std::string::npos) << found.front().text;
  // The cycle explains the ranks each group misses: no missing_rank beside it.
  for (const auto& d : found) EXPECT_NE(d.kind, DiagnosisKind::MissingRank) << d.text;
}

TEST(CrossGroup, AChainEndingAtARankThatIsNotStuckIsAMissingRankNotADeadlock) {
  auto ds = three_group_ring(false);
  // Rank 2 made no call at all: it is absent from group b's call #1 and group c's.
  for (auto& d : ds)
    if (d.rank == 2) d.calls.clear();
  const auto found = analyze(ds);
  ASSERT_FALSE(found.empty());
  for (const auto& d : found) EXPECT_NE(d.kind, DiagnosisKind::Deadlock) << d.text;
  EXPECT_EQ(found.front().kind, DiagnosisKind::MissingRank) << found.front().text;
  EXPECT_NE(found.front().text.find("process group "), std::string::npos) << found.front().text;
}

TEST(CrossGroup, ACycleOfFiveThousandRanksIsFoundWhole) {
  // Rank i waits in a send to rank i+1, which is itself sending: nobody receives.
  const int n = 5000;
  std::vector<RankDump> ds;
  for (int r = 0; r < n; ++r) {
    ds.push_back(dump(r, n, "", {}));
    auto d = dump(r, n, "", {}, true);
    d.calls.push_back(call(1, Collective::Send, 0.01, 1.0, true, (r + 1) % n));
    ds.push_back(d);
  }
  const auto found = analyze(ds);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::Deadlock);
  EXPECT_EQ(found.front().ranks.size(), static_cast<size_t>(n));
}

TEST(CrossGroup, SendsPairWithReceivesAndAnUnmatchedOneNamesTheOtherSide) {
  auto d0 = dump(0, 2, "", {}, true), d1 = dump(1, 2, "", {}, true);
  d0.calls.push_back(call(1, Collective::Send, 0.0, 0.1, false, 1));
  d1.calls.push_back(call(1, Collective::Recv, 0.0, 0.1, false, 0));
  // Rank 1 waits for a second message that rank 0 never sends.
  d1.calls.push_back(call(2, Collective::Recv, 0.2, 1.2, true, 0));
  auto found = analyze({dump(0, 2, "", {}), dump(1, 2, "", {}), d0, d1});
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::MissingRank) << found.front().text;
  EXPECT_EQ(found.front().ranks, (std::vector<int>{0}));
  EXPECT_NE(found.front().text.find("rank 1 waits to receive message #2"), std::string::npos) << found.front().text;
  // Sizes that differ in a pair are a shape mismatch.
  d1.calls.pop_back();
  d1.calls[0].count = 9;
  found = analyze({dump(0, 2, "", {}), dump(1, 2, "", {}), d0, d1});
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::ShapeMismatch) << found.front().text;
  EXPECT_EQ(found.front().fields, (std::vector<std::string>{"count"}));
}
