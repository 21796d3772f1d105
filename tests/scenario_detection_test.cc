// Guarded and unguarded diagnosis of mismatches and missing waits, the
// detection property over random scenarios, and the replay, analyze and
// faults commands' exit codes.

#include <filesystem>

#include "harness/world/sim_world.h"
#include "tests/scenario_test_util.h"

TEST(MissingWait, PoisonedOutputUntilWait) {
  ThreadWorld w(2);
  auto run = w.run(
      [](RankContext& c) {
        CommOptions o("ring", 5000ms);
        o.poison_async = true;
        Communicator comm(c.links(), o);
        std::vector<float> in(64, 1.0f), out(64, 0.0f);
        auto work = comm.all_reduce_async(in.data(), out.data(), 64, DType::Float32, RedOp::Sum);
        std::vector<unsigned char> seen(64 * 4);
        std::memcpy(seen.data(), out.data(), seen.size());  // a read before the wait
        for (unsigned char b : seen)
          if (b != static_cast<unsigned char>(kPoisonByte)) throw std::runtime_error("output not poisoned before wait");
        work->wait();
        for (float v : out)
          if (v != 2.0f) throw std::runtime_error("wrong result after wait");
      },
      10s);
  EXPECT_TRUE(run.ok()) << run.failures();
}

// Replays `s` n times; returns how many runs missed its expectation (or
// failed `also`, which returns why, or "" when the run is fine). The first
// miss is reported in full.
static int replays_missing_the_expectation(const Scenario& s, int n,
                                           const std::function<std::string(const ReplayResult&)>& also = {}) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    const ReplayResult r = replay_scenario(s);
    std::string why;
    if (!expectation_holds(*s.expect, r, &why) || (also && !(why = also(r)).empty())) {
      if (wrong++ == 0) ADD_FAILURE() << "replay " << i << " of " << n << ": " << why;
    }
  }
  return wrong;
}

// Found by the detection property: with 3 ranks, rank 1 swaps its last two
// async calls. The guard saw ranks 1 and 2 disagree at call #3 before rank 0
// got there, and blamed rank 2 on a 1-vs-1 tie (one replay in five). It now
// waits for a strict majority (or every rank) before naming the odd one out.
TEST(Guard, WaitsForAMajorityBeforeNamingTheOddRankOut) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 3}
impl: tree
deadline: 0.3
program:
  - all_reduce: {tag: t0, count: 1064, dtype: float32, op: avg}
  - all_reduce: {tag: t1, count: 2033, dtype: float32, op: max, async: true, wait: end}
  - all_reduce: {tag: t2, count: 216, dtype: int32, op: max, async: true, wait: next}
  - all_reduce: {tag: t3, count: 113, dtype: bfloat16, op: min, async: true, wait: next}
faults:
  - misordered: {ranks: [1], calls: [2, 3]}
expect: {diagnosis: order_mismatch, ranks: [1], seq: 3}
)",
                                    "race.yaml");
  EXPECT_EQ(replays_missing_the_expectation(s, 200), 0);
}

// Found by the detection property (CI, case 220 of shard 1): in unguarded
// mode, 7 ranks, rank 1 calls t1 with float32 where the others use float16.
// The size mismatch failed ranks 1 and 2 while other ranks were still
// finishing call #1; aborting every call cut their records short, and a 1-vs-1
// tie at call #2 blamed rank 2. Only calls from the failed one on are aborted
// now, so every rank's record of call #2 is in its dump.
TEST(Unguarded, AMismatchKeepsItsMajorityWhenOtherRanksAreStillInTheCallBefore) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 7}
impl: ring
deadline: 0.3
mode: unguarded
program:
  - all_reduce: {tag: t0, count: 1817, dtype: float32, op: avg}
  - all_reduce: {tag: t1, count: 569, dtype: float16, op: min}
  - all_reduce: {tag: t2, count: 1055, dtype: float16, op: max}
faults:
  - mismatched_shape: {ranks: [1], calls: [1], dtype: float32}
expect: {diagnosis: shape_mismatch, ranks: [1], seq: 2, fields: [dtype]}
)",
                                    "case220.yaml");
  // Every rank reached call #2 and says what it called there.
  const int wrong = replays_missing_the_expectation(s, 100, [](const ReplayResult& r) -> std::string {
    for (const auto& d : r.dumps)
      if (std::none_of(d.calls.begin(), d.calls.end(), [](const CallRecord& c) { return c.seq == 2; }))
        return "rank " + std::to_string(d.rank) + " has no record of call #2";
    return "";
  });
  EXPECT_EQ(wrong, 0);
}

// Guarded mode names a rank whose program ended as soon as every other rank
// is in the call it will never join: no deadline is waited out (this one is
// 60 s; the replay takes well under a second). Two ranks end after call #2,
// one rank sleeps before call #3 (the guard waits for it), and one ends
// after call #3 (it joined call #3: not missing there).
TEST(Guard, NamesARankWhoseProgramEndedWithoutWaitingOutTheDeadline) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 6}
deadline: 60
program:
  - all_reduce: {tag: a, count: 64}
  - all_reduce: {tag: b, count: 64}
  - all_reduce: {tag: c, count: 64}
  - all_reduce: {tag: d, count: 64}
ranks:
  1: {skip: [2, 3]}
  4: {skip: [2, 3]}
  3: {skip: [3]}
  5: {program: [{all_reduce: {tag: a, count: 64}}, {all_reduce: {tag: b, count: 64}}, {sleep: 300},
                {all_reduce: {tag: c, count: 64}}, {all_reduce: {tag: d, count: 64}}]}
expect: {diagnosis: missing_rank, ranks: [1, 4], seq: 3}
)",
                                    "ended.yaml");
  for (int i = 0; i < 5; ++i) {
    const ReplayResult r = replay_scenario(s);
    std::string why;
    EXPECT_TRUE(expectation_holds(*s.expect, r, &why)) << why;
    EXPECT_LT(r.seconds, 10.0) << "the replay waited out its 60 s deadline";
    // Not before the sleeping rank 5 arrived at call #3.
    EXPECT_GE(r.time_to_diagnosis, 0.3);
    ASSERT_FALSE(r.diagnoses.empty());
    EXPECT_NE(r.diagnoses.front().text.find("without waiting out the deadline"), std::string::npos)
        << r.diagnoses.front().text;
    EXPECT_NE(r.diagnoses.front().text.find("had ended their program"), std::string::npos) << r.diagnoses.front().text;
    // Call #3 (tag c) is not alike to #2 (tag b): no skip is offered as a cause.
    EXPECT_EQ(r.diagnoses.front().text.find("a skip of any one"), std::string::npos) << r.diagnoses.front().text;
  }
  // Unguarded mode is production: the others wait out the deadline (a short
  // one here), and the dumps name the same ranks.
  Scenario u = s;
  u.guarded = false;
  u.deadline_s = 0.5;
  const ReplayResult r = replay_scenario(u);
  std::string why;
  EXPECT_TRUE(expectation_holds(*u.expect, r, &why)) << why;
  EXPECT_GE(r.seconds, 0.5);
}

// With two ranks a mismatch has no majority: the diagnosis says its choice of
// the odd rank out is a guess.
TEST(Unguarded, ATieSaysThereIsNoMajority) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 2}
impl: ring
deadline: 0.3
mode: unguarded
program:
  - all_reduce: {tag: t0, count: 64, dtype: float32, op: sum}
faults:
  - mismatched_shape: {ranks: [1], calls: [0], count: 65}
)",
                                    "tie.yaml");
  const ReplayResult r = replay_scenario(s);
  ASSERT_FALSE(r.diagnoses.empty());
  EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::ShapeMismatch);
  EXPECT_NE(r.diagnoses.front().text.find("no strict majority (2 of the 2 ranks reached call #1)"),
            std::string::npos)
      << r.diagnoses.front().text;
}

// ---- the detection property ----

// The default world is the simulated one (issue 33): 1,000 cases in each of
// two shards, shard 0 with a fixed seed and shard 1 with a fresh one every
// run, printed (COLLCHECK_TEST_SEED=S reruns it), so that the claim holds for
// seeds nobody chose. Shard 2 runs 150 fresh-seeded cases as OS threads
// against the wall clock (the world of plugins and peers), where most of a
// case's time is spent waiting out a stalled rank's deadline or a slow
// link's delay. COLLCHECK_DETECTION_CASES=N runs N/2 cases in each shard.
// Builds without fibers (the sanitizers) run the simulated shards as threads,
// and say so.
class Detection : public ::testing::TestWithParam<int> {};

TEST_P(Detection, RandomFaultsAreNamedAndCleanRunsAreClean) {
  const bool sim = GetParam() < 2 && kNoFibers == nullptr;
  if (GetParam() < 2 && !sim) fmt::print("[ note    ] run as threads, not simulated: {}\n", kNoFibers);
  size_t cases = sim ? 1000 : 150;
  if (const char* env = std::getenv("COLLCHECK_DETECTION_CASES")) {
    cases = std::strtoull(env, nullptr, 10) / 2;
    std::printf("[ note    ] COLLCHECK_DETECTION_CASES: %zu cases in this shard (sanitizer builds run fewer; the "
                "default build runs 2 x 1000 simulated and 150 as threads)\n",
                cases);
  }
  const auto gen = gen_detection_case(2, 8);
  uint64_t seed = 5;
  if (GetParam() >= 1) {
    const char* again = std::getenv("COLLCHECK_TEST_SEED");
    seed = again ? std::strtoull(again, nullptr, 0)
                 : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  std::printf("[ seed    ] shard %d (%s): seed %#llx%s\n", GetParam(), sim ? "simulated" : "threads",
              static_cast<unsigned long long>(seed), GetParam() >= 1 ? " (fresh; rerun with COLLCHECK_TEST_SEED)" : " (fixed)");
  std::fflush(stdout);
  std::function<ReplayResult(const Scenario&)> replay;  // empty: the thread world's
  if (sim)
    replay = [](const Scenario& sc) {
      ReplayOptions ro;
      ro.make_world = sim_worlds(SimOptions{});
      return replay_scenario(sc, ro);
    };
  rc::Random rnd(seed);
  std::map<std::string, std::pair<int, int>> by_kind;  // detected, total
  double worst_margin = 0, worst_guarded = 0;
  size_t failures = 0;
  for (size_t i = 0; i < cases; ++i) {
    const DetectionCase c = gen(rnd.split(), 50).value();
    const DetectionOutcome o = check_detection(c, replay);
    const std::string kind = c.fault ? c.fault->kind : "clean";
    auto& k = by_kind[kind];
    ++k.second;
    if (o.ok) {
      ++k.first;
    } else if (failures++ < 5) {
      ADD_FAILURE() << "seed " << seed << " case " << i << " (" << kind << ", " << (c.guarded ? "guarded" : "unguarded") << "): " << o.why
                    << "\nscenario:\n"
                    << scenario_to_yaml(c.scenario())
                    << (o.result.diagnoses.empty() ? "" : format_diagnosis(o.result.diagnoses.front()));
    }
    worst_margin = std::max(worst_margin, o.margin_s);
    if (c.guarded && c.fault && (c.fault->kind == "mismatched_shape" || c.fault->kind == "misordered"))
      worst_guarded = std::max(worst_guarded, o.result.time_to_diagnosis);
  }
  for (const auto& [kind, k] : by_kind)
    std::printf("[ detect  ] %-18s %4d of %4d named correctly\n", kind.c_str(), k.first, k.second);
  std::printf("[ detect  ] stalled ranks: runs ended at most %.3f s after the deadline; guarded mismatches named at "
              "most %.3f s after the start\n",
              worst_margin, worst_guarded);
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(by_kind.size(), nemeses().size() + 1) << "every nemesis and the clean case were drawn";
}

INSTANTIATE_TEST_SUITE_P(Shards, Detection, ::testing::Values(0, 1, 2));

// A run that is right but outlasts its limit is run once more: a loaded
// machine (CI's two cores under a sanitizer) is not a hang. Slow twice is a
// failure, and an MPI replay (rerun_if_slow = false) is never rerun. The
// replay here is the real one, behind a delay that pushes chosen runs past
// the limit.
TEST(Detection, ASlowRightRunIsRunOnceMoreAndSlowTwiceFails) {
  rc::Random rnd(11);
  DetectionCase c = gen_detection_case(2, 3)(rnd, 10).value();
  c.fault.reset();  // clean: its limit is only the compute margin
  int runs = 0;
  std::vector<bool> slow;
  const auto replay = [&](const Scenario& s) {
    const bool this_slow = slow.at(static_cast<size_t>(runs++));
    ReplayResult r = replay_scenario(s);
    if (this_slow) std::this_thread::sleep_for(2500ms);  // past any margin, sanitizers included
    return r;
  };
  slow = {true, false};
  DetectionOutcome o = check_detection(c, replay);
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(o.ok) << o.why;
  EXPECT_NE(o.slow_once.find("longer than its limit"), std::string::npos) << o.slow_once;

  runs = 0;
  slow = {true, true};
  o = check_detection(c, replay);
  EXPECT_EQ(runs, 2);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.slow);
  EXPECT_NE(o.why.find("longer than its limit"), std::string::npos) << o.why;

  runs = 0;
  slow = {true};
  o = check_detection(c, replay, /*rerun_if_slow=*/false);
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.slow_once.empty());

  runs = 0;
  slow = {false};
  o = check_detection(c, replay);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(o.ok) << o.why;
  EXPECT_FALSE(o.slow);
}

// A case's dumps are removed after it, unless it was missed and they are to
// be kept (faults --random --keep-dumps): then result.dump_dir names them,
// and analyze reads them. The replay is the real one, with its diagnoses
// dropped to make a miss.
TEST(Detection, AMissedCaseKeepsItsDumpsWhenAskedAndOnlyThen) {
  rc::Random rnd(11);
  DetectionCase c = gen_detection_case(2, 3)(rnd, 10).value();
  c.fault.reset();
  const std::string dir = ::testing::TempDir() + "/kept-case";
  bool miss = false;
  const auto replay = [&](const Scenario& s) {
    ReplayOptions ro;
    ro.dump_dir = dir;
    ReplayResult r = replay_scenario(s, ro);
    if (miss) {
      Diagnosis d;
      d.kind = DiagnosisKind::SlowLink;  // a false alarm
      r.diagnoses.push_back(d);
    }
    return r;
  };
  for (const bool keep : {false, true})
    for (const bool missed : {false, true}) {
      std::filesystem::remove_all(dir);
      miss = missed;
      const DetectionOutcome o = check_detection(c, replay, true, keep);
      EXPECT_EQ(o.ok, !missed) << o.why;
      const bool kept = keep && missed;
      EXPECT_EQ(std::filesystem::exists(dir + "/rank-0.json"), kept) << "keep " << keep << ", missed " << missed;
      EXPECT_EQ(o.result.dump_dir, kept ? dir : "") << "keep " << keep << ", missed " << missed;
    }
}

// ---- the CLI ----

TEST(ReplayCli, ExitCodes) {
  const std::string dir = ::testing::TempDir();
  auto r = testutil::collcheck("replay " + std::string(SOURCE_DIR) + "/examples/bugs/bucket_off_by_one.yaml");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("-> holds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("timeline"), std::string::npos) << r.out;
  // An expectation that does not hold: exit 1, and the reason.
  {
    std::ofstream f(dir + "/wrong.yaml");
    f << "world: {ranks: 3}\nprogram: [{all_reduce: {count: 8}}]\nexpect: {diagnosis: slow_link, edge: [0, 1]}\n";
  }
  r = testutil::collcheck("replay " + dir + "/wrong.yaml");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("DOES NOT HOLD: expected slow_link, got no diagnosis"), std::string::npos) << r.out;
  // Bad input: exit 2, one line with file, line and field.
  {
    std::ofstream f(dir + "/bad.yaml");
    f << "world: {ranks: 3}\nprogram:\n  - all_reduce: {count: 8, dtype: float99}\n";
  }
  r = testutil::collcheck("replay " + dir + "/bad.yaml");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.yaml:3: program[0].all_reduce.dtype: unknown dtype 'float99'"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = testutil::collcheck("replay /nonexistent.yaml");
  EXPECT_EQ(r.code, 2) << r.out;
  r = testutil::collcheck("replay " + std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml --mode sometimes");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(AnalyzeCli, SameDiagnosisFromTheDumps) {
  const std::string dir = ::testing::TempDir() + "/stuck-dumps";
  std::filesystem::remove_all(dir);
  auto r = testutil::collcheck("replay " + std::string(SOURCE_DIR) +
                               "/examples/bugs/rank_stuck_in_dataloader.yaml --mode unguarded --dump-dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  r = testutil::collcheck("analyze " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing_rank [rank 1] [call #2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blocked on"), std::string::npos) << r.out;
  r = testutil::collcheck("analyze /nonexistent-dir");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a directory"), std::string::npos) << r.out;
  // An incomplete set is bad input that names what is missing.
  std::filesystem::remove(dir + "/rank-0.json");
  r = testutil::collcheck("analyze " + dir);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("dumps of a world of 3 ranks, but rank 0 is missing"), std::string::npos) << r.out;
}

TEST(FaultsCli, EveryNemesisDetectedInBothModes) {
  const auto r = testutil::collcheck("faults --ranks 4");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << r.out;
  for (const auto& n : nemeses()) EXPECT_NE(r.out.find(std::string(n.name)), std::string::npos) << n.name;
  const auto bad = testutil::collcheck("faults --ranks 1");
  EXPECT_EQ(bad.code, 2) << bad.out;
}

// In a large world a slow link's own delay (60 ms on each of 2(p-1) ring
// steps) outlasts the table's 1 s deadline: the slow link's row gets a
// deadline that fits, and says so, instead of a "deadlock" diagnosis.
TEST(FaultsCli, ALargeWorldGivesTheSlowLinkRoom) {
  const auto r = testutil::collcheck("faults --ranks 32 --mode guarded", 600);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(deadline 7.4 s per call for this fault: its own delays need it)"), std::string::npos)
      << r.out;
}
