// The mutant suite in the simulated world: the world `collcheck verify
// --impl plugin:...` runs a plugin in when the plugin declares that its ranks
// may be fibers of one thread (collcheck_plugin_fiber_safe), as every kit
// mutant does but thread_plan_cache (per-thread state). Each mutant is caught
// on seeds 1 to 3, shrinks to as small a case as in the thread world, and its
// minimal case fails on every replay: here the schedule is the case's seed's,
// so nothing is left to the host's timing (the race included). The thread
// world's suite is tests/mutants_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/world/sim_world.h"
#include "tests/mutant_suite.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace mutant_suite;

namespace {

class MutantSim : public ::testing::TestWithParam<std::string> {};

constexpr size_t kReplays = 20;

}  // namespace

TEST_P(MutantSim, IsCaughtOnSeedsOneToThreeAndItsMinimalCaseFailsEveryReplay) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const std::string m = GetParam();
  const bool per_thread_state = m == "thread_plan_cache";
  ImplPtr impl = load_plugin(mutant_path(m));
  // Which world the CLI picks without --world: the declaration decides.
  if (per_thread_state) {
    EXPECT_TRUE(impl->threads_by_default().has_value()) << m << " keeps per-thread state and must not declare fibers";
  } else {
    EXPECT_FALSE(impl->threads_by_default().has_value())
        << m << " declares collcheck_plugin_fiber_safe (MK_PLUGIN): " << impl->threads_by_default().value_or("");
  }
  for (uint64_t seed : mutant_seeds()) {
    const VerifyResult r = verify_plugin(mutant_path(m), seed, VerifyOptions{}.cases, per_thread_state,
                                         sim_worlds(SimOptions{}));
    ASSERT_TRUE(r.failed) << m << " survived " << r.cases_run << " cases with seed " << seed;
    EXPECT_LE(r.failing_case, VerifyOptions{}.cases);
    std::printf("[ mutant  ] %-26s seed %llu: caught at case %4zu by %-28s shrunk in %3zu steps (%zu runs) to %s\n",
                m.c_str(), static_cast<unsigned long long>(seed), r.failing_case, r.failure.property.c_str(),
                r.shrink_steps, r.shrink_runs, case_summary(r.minimal).c_str());
    const MinimalLimit lim = minimal_limit(m, r.minimal.dtype);
    EXPECT_LE(r.minimal.p, lim.p) << case_summary(r.minimal);
    EXPECT_LE(r.minimal.count, lim.count) << case_summary(r.minimal);
    // As in the thread world: the shrink may spend its budget where the
    // bug needs two counts to move together (plan_cache_keyed_on_bytes) or
    // on what earlier cases left (thread_plan_cache), not elsewhere.
    if (lim.count <= 16 || m == "late_arrival_race") {
      EXPECT_FALSE(r.shrink_budget_reached) << case_summary(r.minimal);
    }
    if (per_thread_state) {
      // Its fibers share the one map; the cases before it made the plan.
      EXPECT_TRUE(r.depends_on_earlier_cases())
          << "fresh checked " << r.fresh_checked << ", fresh failed " << r.fresh_failed << ": " << case_summary(r.minimal);
      continue;
    }
    // Every replay verify made failed: one schedule per case, the seed's.
    EXPECT_GE(r.replays, 3u);
    EXPECT_EQ(r.replay_failures, r.replays) << case_summary(r.minimal);
    EXPECT_FALSE(r.flaky()) << case_summary(r.minimal);
    // Its replay token, in a runner of its own: the same property fails
    // every time.
    RunConfig cfg{impl, default_peers(*impl), std::chrono::milliseconds(10000), {}};
    cfg.make_world = sim_worlds(SimOptions{});
    CaseRunner runner(cfg);
    const Case replay = decode_case(encode_case(r.minimal));
    size_t failed = 0;
    for (size_t k = 0; k < kReplays; ++k) {
      const CaseOutcome again = runner.run(replay);
      if (again.ok) continue;
      ++failed;
      EXPECT_EQ(again.failure.property, r.failure.property) << "replay " << k << " of " << case_summary(r.minimal);
    }
    EXPECT_EQ(failed, kReplays) << "of " << kReplays << " replays of " << encode_case(r.minimal);
  }
}

INSTANTIATE_TEST_SUITE_P(All, MutantSim, ::testing::ValuesIn(mutants()), [](const auto& i) { return i.param; });

// The controls (the kit without a bug) declare fibers too, and pass there.
TEST(MutantSimControls, TheKitWithoutABugPassesAsFibers) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  for (const char* control : {"control_ring", "control_tree", "control_gather"}) {
    EXPECT_FALSE(load_plugin(mutant_path(control))->threads_by_default().has_value()) << control;
    for (uint64_t seed : mutant_seeds()) {
      const VerifyResult r = verify_plugin(mutant_path(control), seed, VerifyOptions{}.cases, false,
                                           sim_worlds(SimOptions{}));
      EXPECT_FALSE(r.failed) << control << " seed " << seed << ": " << r.failure.property << "\n"
                             << r.failure.detail;
      EXPECT_EQ(r.cases_run, VerifyOptions{}.cases) << control << " seed " << seed;
    }
  }
}

// Without --world, `collcheck verify` runs a plugin as fibers in virtual time
// only where it exports collcheck_plugin_fiber_safe() returning 1; one that
// answers 0, or does not export it, runs as threads; --world overrides. The
// replay line of a plugin run as fibers by default names no world, and fails
// 20 times in 20.
TEST(PluginWorld, FibersByDefaultOnlyWhereThePluginDeclaresIt) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  auto header = [](const std::string& so, const std::string& flags) {
    const auto r = testutil::run_command(
        fmt::format("{} verify --impl plugin:{} --cases 5 --seed 1 --progress off {} 2>&1", COLLCHECK_BIN, so, flags), 120);
    EXPECT_EQ(r.code, 0) << so << " " << flags << "\n" << r.out;
    return r.out.substr(0, r.out.find('\n'));
  };
  const std::string fibers = "ranks as fibers in virtual time", threads = "ranks as threads";
  EXPECT_NE(header(std::string(PLUGIN_DIR) + "/clock_poll.so", "").find(fibers), std::string::npos);  // 1
  EXPECT_NE(header(std::string(PLUGIN_DIR) + "/clock_poll_v1.so", "").find(threads), std::string::npos);  // 0
  EXPECT_NE(header(mutant_path("thread_plan_cache"), "").find(threads), std::string::npos);  // not exported
  EXPECT_NE(header(EXAMPLE_PLUGIN, "").find(fibers), std::string::npos);  // the example a user copies
  EXPECT_NE(header(mutant_path("control_ring"), "--world threads").find(threads), std::string::npos);
  EXPECT_NE(header(std::string(PLUGIN_DIR) + "/clock_poll_v1.so", "--world sim").find(fibers), std::string::npos);

  const auto r = testutil::run_command(fmt::format("{} verify --impl plugin:{} --seed 1 --progress off 2>&1",
                                                   COLLCHECK_BIN, mutant_path("chunk_off_by_one")), 120);
  ASSERT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(fibers), std::string::npos) << r.out;
  const size_t at = r.out.find("replay: collcheck verify ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
  EXPECT_EQ(line.find("--world"), std::string::npos) << line;
  const auto again = testutil::run_command(
      std::string(COLLCHECK_BIN) + line.substr(std::string("collcheck").size()) + " --repeat 20 2>&1", 120);
  EXPECT_EQ(again.code, 1) << line << "\n" << again.out;
  EXPECT_NE(again.out.find("20 runs of the case: 20 failed"), std::string::npos) << line << "\n" << again.out;
}

// A case keeps shrinking while it fails the property it first failed, even
// where a smaller world fails an earlier property first (CaseOutcome::
// also_failed). Fresh seed 5866380635165282537 found plan_cache_keyed_on_bytes
// failing ranks-identical at p = 15: at p <= 6 its fp8 call fails
// agrees-with-oracle first (the bound is tighter there), ranks-identical
// behind it, and the shrink that refused those stopped at p = 7, past the
// suite's limit of 4.
TEST(MutantSimShrink, KeepsShrinkingWhereASmallerWorldFailsAnEarlierPropertyFirst) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const std::string m = "plan_cache_keyed_on_bytes";
  // p = 6: the oracle's row fails first, and the later rows still run.
  const Case six = decode_case(
      "v1:p6:uint32:sum:s1:n1:oop:x:0/0/0/0/0/0,fp8_e5m2:sum:s1:n4:ip:sync:x:0*4/0*4/0*4/0*4/0.2.2.3c/0.3c.3c.1");
  ImplPtr impl = load_plugin(mutant_path(m));
  for (bool isolate : {false, true}) {  // in process, and through the forked executor's JSON
    RunConfig cfg{impl, default_peers(*impl), std::chrono::milliseconds(10000), {}};
    if (!isolate) cfg.make_world = sim_worlds(SimOptions{});
    const CaseOutcome o = make_executor(std::move(cfg), isolate)->run(six);
    ASSERT_FALSE(o.ok) << "isolate " << isolate;
    EXPECT_EQ(o.failure.property, "agrees-with-oracle") << "isolate " << isolate;
    auto also = [&](const std::string& p) {
      return std::find(o.also_failed.begin(), o.also_failed.end(), p) != o.also_failed.end();
    };
    EXPECT_TRUE(also("ranks-identical")) << "isolate " << isolate << ", also failed: " << fmt::format("{}", fmt::join(o.also_failed, ", "));
    EXPECT_FALSE(also(o.failure.property));
    EXPECT_TRUE(shrink_keeps(o, Failure{"ranks-identical", ""}));
    EXPECT_FALSE(shrink_keeps(o, Failure{"deterministic", ""}));
  }
  const VerifyResult r = verify_plugin(mutant_path(m), 5866380635165282537ull, VerifyOptions{}.cases, false,
                                       sim_worlds(SimOptions{}));
  ASSERT_TRUE(r.failed);
  EXPECT_EQ(r.original_property, "ranks-identical");
  EXPECT_EQ(r.failure.property, "agrees-with-oracle") << case_summary(r.minimal);
  const MinimalLimit lim = minimal_limit(m, r.minimal.dtype);
  EXPECT_LE(r.minimal.p, lim.p) << case_summary(r.minimal);
  EXPECT_LE(r.minimal.count, lim.count) << case_summary(r.minimal);
  EXPECT_EQ(r.replay_failures, r.replays);
  std::printf("[ mutant  ] %s seed 5866380635165282537: first failed %s, shrunk in %zu runs to %s, failing %s\n",
              m.c_str(), r.original_property.c_str(), r.shrink_runs, case_summary(r.minimal).c_str(),
              r.failure.property.c_str());
}
