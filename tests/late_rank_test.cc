// Issue 31, item 3: the rank that arrived late, not the one that waited. A
// report modelled on a real one (examples/bugs/late_rank_after_checkpoint.yaml):
// rank 0 reads a checkpoint after a barrier while ranks 1 and 2 enter their
// group's all-reduce and rank 3 waits for rank 2's activations. Before, the
// only finding was `missing_rank [rank 2]`, in both modes. Now:
// - rank 0 arriving after the deadline: late_rank [rank 0] in group stage0,
//   with how late, and the hand-off finding says rank 2 was itself stuck;
// - rank 0 never arriving: missing_rank [rank 0] in group stage0 (as before);
// - rank 0 a little late, within the deadline (the control): no finding.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "harness/run/scenario_runner.h"

using namespace collcheck;

namespace {

std::string example() {
  std::ifstream in(std::string(SOURCE_DIR) + "/examples/bugs/late_rank_after_checkpoint.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The example with rank 0's checkpoint read replaced by `step` and its
// expectation by `expect`.
Scenario variant(const std::string& step, const std::string& expect) {
  std::string y = example();
  const std::string sleep = "{sleep: 1500}";
  y.replace(y.find(sleep), sleep.size(), step);
  y = y.substr(0, y.find("expect:")) + "expect: " + expect + "\n";
  return parse_scenario(y, "late-variant.yaml");
}

void expect_in_both_modes(const Scenario& s, const std::string& what) {
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(s, o);
    std::string why;
    EXPECT_TRUE(expectations_hold(s, r, &why)) << what << (guarded ? ", guarded: " : ", unguarded: ") << why;
  }
}

}  // namespace

TEST(LateRank, TheLateRankIsNamedWithHowLateAndTheGroup) {
  const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/late_rank_after_checkpoint.yaml");
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(s, o);
    std::string why;
    ASSERT_TRUE(expectations_hold(s, r, &why)) << why;
    ASSERT_FALSE(r.diagnoses.empty());
    const Diagnosis& first = r.diagnoses.front();
    EXPECT_EQ(first.kind, DiagnosisKind::LateRank);
    EXPECT_EQ(first.ranks, std::vector<int>{0});
    EXPECT_EQ(first.group, "stage0");
    EXPECT_NE(first.text.find("after the first of them gave up waiting"), std::string::npos) << first.text;
    // The hand-off's finding comes after it, and says rank 2 was itself stuck.
    bool downstream_said = false;
    for (const auto& f : r.diagnoses)
      if (f.kind == DiagnosisKind::MissingRank && f.ranks == std::vector<int>{2})
        downstream_said = f.text.find("rank 2 was itself stuck in process group stage0's call #1") != std::string::npos;
    EXPECT_TRUE(downstream_said) << (guarded ? "guarded" : "unguarded");
  }
}

TEST(LateRank, ARankThatNeverArrivesIsMissingNotLate) {
  expect_in_both_modes(variant("{stall: true}", "{diagnosis: missing_rank, ranks: [0], group: stage0}"), "never arrives");
}

TEST(LateRank, ALittleLateWithinTheDeadlineIsNoFinding) {
  expect_in_both_modes(variant("{sleep: 100}", "{diagnosis: none}"), "100 ms late, deadline 500 ms");
}
