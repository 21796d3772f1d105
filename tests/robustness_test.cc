// Hostile input (issue 13): each bad input gets a clean outcome, exit 2 with
// one line naming the field and the limit, or a failure; never a crash, a hang
// or a pass. The scenario files are tests/data/robustness/, copied from the
// shared robustness set.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/robustness_test_util.h"

namespace {

TEST(Robustness, ACountThatOverflowsNamesTheFieldAndTheLargestCount) {
  expect_usage_error(replay(kDir + "count_2p62_float32.yaml.bad"),
                     "count_2p62_float32.yaml.bad:3: program[0].all_reduce.count: 4611686018427387904 float32 "
                     "elements are more than one buffer can hold (2^48 bytes); the largest count of float32 is "
                     "70368744177664");
  expect_usage_error(replay(kDir + "count_2p62_rank1only.yaml.bad"), "ranks.1.program[1].all_reduce.count:");
  expect_usage_error(replay(kDir + "count_1e18_int.yaml.bad"), "program[0].all_reduce.count: 1000000000000000000");
}

TEST(Robustness, ComplexAndDuplicateKeysAreBadInput) {
  expect_usage_error(replay(kDir + "complex_key.yaml.bad"),
                     "complex_key.yaml.bad:2: scenario: expected a plain key (a name)");
  expect_usage_error(replay(kDir + "complex_fault_key.yaml.bad"), "faults[0]: expected a plain key (a name)");
  expect_usage_error(replay(kDir + "dup_keys.yaml.bad"), "dup_keys.yaml.bad:2: scenario: duplicate key 'world'");
  const std::string f = testing::TempDir() + "/dup_rank.yaml";
  std::ofstream(f) << "world: {ranks: 2}\nprogram:\n  - all_reduce: {count: 4}\nranks:\n  1: {program: []}\n"
                      "  1: {program: [{all_reduce: {count: 8}}]}\n";
  expect_usage_error(replay(f), "ranks: duplicate key '1'");
}

TEST(Robustness, SizesFromFlagsAreChecked) {
  expect_usage_error(testutil::collcheck("sweep -N 4611686018427387904", 60),
                     "-N/--count: 4611686018427387904 float32 elements are more than one buffer can hold");
  expect_usage_error(testutil::collcheck("sweep -b 17179869184G -e 17179869184G", 60),
                     "-b/--minbytes is 17179869184G: more than one buffer can hold");
  expect_usage_error(testutil::collcheck("sweep -b 1K -e 17179869188G", 60), "-e/--maxbytes is 17179869188G");
  expect_usage_error(testutil::collcheck("verify --replay v1:p2:float32:sum:s1:n4611686018427387904:oop:d:exact:1", 60),
                     "bad count field 'n4611686018427387904'; expected n<count> with at most 70368744177664 float32");
}

// A program that cannot fit this machine's memory is refused before any work.
TEST(Robustness, AReplayTooBigForMemoryIsRefusedUpFront) {
  const std::string f = testing::TempDir() + "/too_big.yaml";
  std::ofstream(f) << "world: {ranks: 2}\nprogram:\n  - all_reduce: {tag: g, count: 20000000000}\n";
  const auto r = replay(f);
  expect_usage_error(r, "the program's calls need about 596.0 GiB in this process");
  EXPECT_NE(r.out.find("is available"), std::string::npos) << r.out;
}

// Memory that runs out anyway (a ulimit the estimate cannot see): every rank
// fails before its first call is recorded. That was a clean pass; it is exit
// 3 now, with each rank's failure.
TEST(Robustness, RanksThatFailBeforeAnyCallAreNeverACleanRun) {
  const std::string f = testing::TempDir() + "/ulimited.yaml";
  std::ofstream(f) << "world: {ranks: 2}\nprogram:\n  - all_reduce: {tag: g, count: 200000000}\n";
  const auto probe = testutil::run_command("bash -c 'ulimit -v 1000000; exec " COLLCHECK_BIN " --version'", 60);
  if (probe.code != 0)
    GTEST_SKIP() << "this build of collcheck cannot start under a 1 GB address-space limit (a sanitizer build "
                    "reserves more): "
                 << probe.out.substr(0, 200);
  const auto r =
      testutil::run_command("bash -c 'ulimit -v 1000000; exec " COLLCHECK_BIN " replay " + f + "'", 120);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_EQ(r.out.find("clean run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the run did not complete, and no diagnosis explains why (not a verdict; exit 3)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 0: std::bad_alloc"), std::string::npos) << r.out;
}

}  // namespace

namespace {

// An empty value is bad input, never the same as leaving the flag out.
TEST(Robustness, EmptyFlagValuesAreBadInput) {
  for (const std::string args : {"verify --replay ''", "verify --seed ''", "sweep -N ''", "verify --timeout ''",
                                 "faults --seed ''", "replay ''"}) {
    const auto r = testutil::collcheck(args, 60);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("needs a value, and an empty one is not a value"), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(Robustness, NumbersOutOfRangeAreBadInput) {
  // A deadline shorter than the millisecond deadlines count in would be 0 ms.
  expect_usage_error(testutil::collcheck("verify --timeout 0.0005 --cases 1", 60),
                     "--timeout must be in [0.001, 86400] seconds, got 0.0005");
  expect_usage_error(testutil::collcheck("sweep --seed -1 -b 1K -e 1K", 60),
                     "--seed must be a non-negative integer (decimal or 0x hex), got '-1'");
  expect_usage_error(testutil::collcheck("sweep --scalar nan -o premulsum -b 1K -e 1K", 60),
                     "--scalar must be a finite number");
  // ...and the scalar a sweep uses is in its header.
  const auto r = testutil::collcheck("sweep --scalar 2 -o premulsum -b 1K -e 1K --ranks 2", 60);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("premulsum scalar 2,"), std::string::npos) << r.out;
}

// A report path that is a directory fails before the run, not after it.
TEST(Robustness, AReportPathThatIsADirectoryFailsBeforeTheRun) {
  const std::string dir = testing::TempDir();
  auto r = testutil::collcheck("verify --junit " + dir + " --cases 5", 60);
  expect_usage_error(r, "--junit: '" + dir + "' is a directory; give a file");
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << "the run went ahead:\n" << r.out;
  r = testutil::collcheck("sweep -b 1K -e 1K --report junit=" + dir + "/", 60);
  expect_usage_error(r, "is a directory; give a file");
  EXPECT_EQ(r.out.find("# collcheck sweep"), std::string::npos) << "the run went ahead:\n" << r.out;
}

// A failing case's replay line carries the deadline the run used (it said
// nothing of it, and a replay ran at the default 10 s).
TEST(Robustness, TheReplayLineKeepsTheTimeout) {
  const auto r = testutil::collcheck("verify --impl plugin:" MUTANT_DIR "/double_contribution.so --timeout 2.5 --cases 200 "
                                     "--seed 1",
                                     120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--timeout 2.5 --replay v1:"), std::string::npos) << r.out;
}

}  // namespace

namespace {

// An implementation the world cannot run is not a call_failed diagnosis: MPI
// in the thread world is bad input (exit 2, naming the world to use); NCCL
// without a GPU is a skip (exit 77), as verify says both.
TEST(Robustness, AnImplementationThisWorldCannotRunIsNotADiagnosis) {
  expect_usage_error(replay(kDir + "impl_mpi.yaml.bad"),
                     "impl: mpi (MPI_Allreduce) needs one process per rank: run under mpirun with --world mpi");
  const std::string f = testing::TempDir() + "/nccl.yaml";
  std::ofstream(f) << "world: {ranks: 1}\nimpl: nccl\nprogram:\n  - all_reduce: {tag: g, count: 16}\n";
  const auto r = replay(f);
  if (r.out.find("cannot run here") == std::string::npos) {
    EXPECT_EQ(r.code, 0) << "NCCL runs here, and the scenario should pass:\n" << r.out;
    return;
  }
  EXPECT_EQ(r.code, 77) << r.out;
  EXPECT_NE(r.out.find("collcheck replay: SKIPPED (not a pass): "), std::string::npos) << r.out;
  std::printf("[ note    ] nccl replay skipped here, as expected without a GPU\n");
}

}  // namespace

namespace {

// What a scenario file may hold is bounded, and each bound is named.
TEST(Robustness, ScenarioInputIsBounded) {
  expect_usage_error(replay(testing::TempDir()), "is a directory; give a scenario file");
  // A device that never ends is not read at all: only a regular file is (a
  // FIFO would block until a writer came).
  expect_usage_error(replay("/dev/zero"), "/dev/zero: is a character device, not a regular file; give a scenario file");
  const std::string nul = testing::TempDir() + "/nul.yaml";
  std::ofstream(nul, std::ios::binary) << "world: {ranks: 2}\nname: \"a" << '\0' << "b\"\nprogram: []\n";
  expect_usage_error(replay(nul), "nul.yaml:2: a NUL byte: this is not a YAML text file");
  const std::string deep = testing::TempDir() + "/deep.yaml";
  std::ofstream(deep) << "world: {ranks: 2}\nprogram: " << std::string(5000, '[') << std::string(5000, ']') << "\n";
  expect_usage_error(replay(deep), "deep.yaml:2: lists and mappings nested deeper than 64 levels, the input limit");
  // One 1,000-step list named by 300 ranks' programs: 300,000 steps once the
  // alias is expanded, from 31 KB of text.
  const std::string alias = testing::TempDir() + "/alias.yaml";
  {
    std::ofstream a(alias);
    a << "world: {ranks: 300}\nprogram: &p [";
    for (int i = 0; i < 1000; ++i) a << (i ? "," : "") << "{all_reduce: {count: 1}}";
    a << "]\nranks:\n";
    for (int r = 0; r < 300; ++r) a << "  " << r << ": {program: *p}\n";
  }
  expect_usage_error(replay(alias), "the programs hold more than 200000 steps in all, the input limit (--max-steps raises it)");
  // The flags move the limits.
  expect_usage_error(testutil::collcheck("replay " SOURCE_DIR "/examples/bugs/bucket_off_by_one.yaml --max-input-bytes 100", 60),
                     "larger than 100 bytes, the input limit");
  const std::string small = testing::TempDir() + "/three_steps.yaml";
  std::ofstream(small) << "world: {ranks: 2}\nprogram:\n  - all_reduce: {count: 1}\n  - all_reduce: {count: 1}\n"
                          "  - all_reduce: {count: 1}\n";
  expect_usage_error(testutil::collcheck("replay " + small + " --max-steps 2", 60), "more than 2 steps in all");
  EXPECT_EQ(testutil::collcheck("replay " + small + " --max-steps 3", 60).code, 0);
}

}  // namespace

namespace {

// ---- damaged dumps, for analyze (the shared make_bad_dumps.sh, in C++) ----

std::string make_dumps(const std::string& name, const std::string& example) {
  const std::string dir = testing::TempDir() + "/dumps-" + name;
  std::filesystem::remove_all(dir);
  const auto r = testutil::collcheck("replay " SOURCE_DIR "/examples/bugs/" + example + " --mode unguarded --dump-dir " + dir,
                                     120);
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank-3.json")) << r.out;
  return dir;
}

std::string fmt_rank(const std::string& dir, int r) { return dir + "/rank-" + std::to_string(r) + ".json"; }
nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(); }

// A copy of `good` with `edit` applied to rank `rank`'s dump (-1: every rank's).
std::string damaged(const std::string& good, const std::string& name, int rank,
                    const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = testing::TempDir() + "/bad-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::copy(good, dir);
  for (int r = 0; r < 4; ++r) {
    if (rank >= 0 && r != rank) continue;
    const std::string f = dir + "/rank-" + std::to_string(r) + ".json";
    auto j = read_json(f);
    edit(j);
    write_json(f, j);
  }
  return dir;
}

TEST(Robustness, DamagedDumpsAreRefusedWithWhatIsWrong) {
  const std::string good = make_dumps("good", "swapped_buckets.yaml");
  const auto analyze = [](const std::string& dir) { return testutil::collcheck("analyze " + dir, 60); };
  ASSERT_EQ(analyze(good).code, 1);  // the order mismatch the example has
  struct Bad {
    std::string name;
    int rank;
    std::function<void(nlohmann::json&)> edit;
    std::string says;
  } bad[] = {
      {"huge_seq", 1, [](nlohmann::json& j) { j["calls"].back()["seq"] = ~uint64_t{0}; },
       "calls[].seq: 18446744073709551615 is outside 1..9007199254740992"},
      {"seq_gap", 1, [](nlohmann::json& j) { j["calls"].back()["seq"] = 1000000000; },
       "calls[].seq: 1000000000 follows"},
      {"neg_seq", 1, [](nlohmann::json& j) { j["calls"][0]["seq"] = -3; }, "calls[].seq: -3 is outside"},
      {"frac_seq", 1, [](nlohmann::json& j) { j["calls"][0]["seq"] = 1.5; }, "calls[].seq: expected a whole number, got 1.5"},
      {"huge_size", -1, [](nlohmann::json& j) { j["size"] = 2147483647; }, "size: 2147483647 is outside 1..1048576"},
      {"crash_rank", 1, [](nlohmann::json& j) { j["crash"] = {{"rank", 12345}, {"signal", "SEGV"}}; },
       "crash.rank: 12345 is outside -1..3"},
  };
  for (const auto& b : bad) {
    const auto r = analyze(damaged(good, b.name, b.rank, b.edit));
    expect_usage_error(r, b.says);
    EXPECT_NE(r.out.find("not a collcheck flight-recorder dump"), std::string::npos) << b.name << "\n" << r.out;
  }
}

// Dumps carry their run's identity; a set mixed from two runs of the same
// world size is refused, naming which ranks came from which run.
TEST(Robustness, DumpsOfTwoRunsAreNotAnalyzedTogether) {
  const std::string a = make_dumps("run-a", "swapped_buckets.yaml");
  const std::string b = make_dumps("run-b", "clean_training_step.yaml");
  EXPECT_NE(read_json(a + "/rank-0.json").at("run").at("id"), read_json(b + "/rank-0.json").at("run").at("id"));
  const std::string mixed = testing::TempDir() + "/mixed-runs";
  std::filesystem::remove_all(mixed);
  std::filesystem::create_directories(mixed);
  for (int r = 0; r < 4; ++r)
    std::filesystem::copy(fmt_rank(r < 2 ? a : b, r), fmt_rank(mixed, r));
  const auto r = testutil::collcheck("analyze " + mixed, 60);
  expect_usage_error(r, "the dumps come from 2 different runs (");
  EXPECT_NE(r.out.find("ranks 0, 1 of run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ranks 2, 3 of run"), std::string::npos) << r.out;
}

// 100,000 calls per dump: analyzed in linear time (the scan was quadratic),
// and the timeline stays short.
TEST(Robustness, LongDumpsAreAnalyzedAndTheTimelineIsBounded) {
  const std::string good = make_dumps("long", "clean_training_step.yaml");
  const std::string dir = damaged(good, "long", -1, [](nlohmann::json& j) {
    const nlohmann::json c = j["calls"][0];
    j["calls"] = nlohmann::json::array();
    for (uint64_t i = 1; i <= 100000; ++i) {
      j["calls"].push_back(c);
      j["calls"].back()["seq"] = i;
    }
  });
  const auto r = testutil::collcheck("analyze " + dir, 280);
  EXPECT_EQ(r.code, 0) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("... 99976 calls not shown ..."), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_LT(std::count(r.out.begin(), r.out.end(), '\n'), 200) << r.out.substr(0, 2000);
}

}  // namespace

namespace {

// Every rank's thread dies at about the same time: the first crash's handler
// writes every rank's dump, and the others wait for it instead of ending the
// process first (2 runs in 5 wrote nothing). Five runs, all with dumps.
TEST(Robustness, CrashesOnEveryRankAtOnceStillWriteTheDumps) {
  const std::string file = testing::TempDir() + "/all_crash.yaml";
  std::ofstream(file) << "world: {ranks: 4}\nimpl: plugin:" PLUGIN_DIR "/all_crash.so\ndeadline: 2\nprogram:\n"
                         "  - all_reduce: {tag: warmup, count: 2}\n  - all_reduce: {tag: grads, count: 100}\n";
  for (int run = 0; run < 5; ++run) {
    const std::string dir = testing::TempDir() + "/all-crash-" + std::to_string(run);
    std::filesystem::remove_all(dir);
    const auto r = testutil::collcheck("replay " + file + " --dump-dir " + dir, 60);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.code, 124) << r.out;
    EXPECT_NE(r.out.find("died of signal SEGV"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("flight-recorder dumps written to " + dir), std::string::npos) << "run " << run << "\n" << r.out;
    for (int q = 0; q < 4; ++q)
      EXPECT_TRUE(std::filesystem::exists(dir + "/rank-" + std::to_string(q) + ".json")) << "run " << run << "\n" << r.out;
  }
}

}  // namespace

namespace {

// A receive posted for fewer bytes than the peer sends (above the eager
// limit) corrupted the receiving process's heap under Open MPI: it died after
// the diagnosis (exit 139 or 134). The MPI links match the message first
// (MPI_Improbe) and never post a receive it can overrun: the mismatch is
// diagnosed and every process exits with the agreed code.
TEST(Robustness, ATruncatedMpiReceiveIsTheMismatchItIs) {
  const std::string dir = testing::TempDir() + "/truncation-dumps";
  std::filesystem::remove_all(dir);
  const auto r = testutil::run_command(testutil::mpirun(2) + " replay " + kDir +
                                           "mpi_truncation.yaml.bad --world mpi --mode unguarded --dump-dir " + dir,
                                       120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("shape_mismatch [rank 1] [call #1]: mismatched shapes at call #1: rank 0 called x count=2048"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("size mismatch: rank 0 sent 4096 bytes, 1024 were expected"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("malloc"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("died of signal"), std::string::npos) << r.out;
}

// Eight processes, two halves calling two collectives in opposite orders,
// unguarded: this crashed every run the same way (7 in 7). Three runs here,
// each diagnosed as the order mismatch it is, every process exiting 0 with
// the verdict agreed.
TEST(Robustness, OppositeOrdersInEightMpiProcessesAreDiagnosedNotCrashed) {
  for (int run = 0; run < 3; ++run) {
    const std::string dir = testing::TempDir() + "/opposite-dumps-" + std::to_string(run);
    std::filesystem::remove_all(dir);
    const auto r = testutil::run_command(testutil::mpirun(8) + " replay " + kDir +
                                             "opposite_order_8.yaml --world mpi --mode unguarded --dump-dir " + dir,
                                         180);
    EXPECT_EQ(r.code, 0) << "run " << run << ":\n" << r.out;
    EXPECT_NE(r.out.find("expected: order_mismatch ranks [4, 5, 6, 7] call #1 -> holds"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("malloc"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("signal"), std::string::npos) << r.out;
  }
}

}  // namespace
