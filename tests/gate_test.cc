// collcheck gate (issue 14): the correctness gate on a good and a broken
// implementation, and the performance gate's noise test: the same plugin as
// baseline and candidate, timed side by side, passes (this machine is shared
// and noisy), the same plugin made twice as slow fails, every time. COLLCHECK_GATE_RUNS sets how
// many pairs each runs (3 here; the closing note of issue 14 reports 20).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"

namespace {

const std::string kPlugins = PLUGIN_DIR;

int runs() {
  const char* e = std::getenv("COLLCHECK_GATE_RUNS");
  const int n = e ? std::atoi(e) : 3;
  return n > 0 ? n : 3;
}

std::string tmp(const std::string& name) { return testing::TempDir() + "/gate-" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Two sweeps, one after the other as CI would make them, then the gate.
testutil::CommandResult perf_pair(const std::string& base_impl, const std::string& cand_impl, int i) {
  // 50 calls a sample: each sample spans long enough that a scheduling hiccup
  // of this shared machine is a small part of it.
  // Rows of 64 KiB and up: below, one call is mostly latency, which a
  // loaded machine's scheduler dominates.
  const std::string sweep = " sweep -b 64K -e 1M -f 4 -n 50 --reps 11 --json ";
  const auto b = tmp("base" + std::to_string(i) + ".json"), c = tmp("cand" + std::to_string(i) + ".json");
  auto r = testutil::collcheck(sweep.substr(1) + b + " --algo " + base_impl, 300);
  if (r.code != 0) return r;
  r = testutil::collcheck(sweep.substr(1) + c + " --algo " + cand_impl, 300);
  if (r.code != 0) return r;
  return testutil::collcheck("gate --baseline " + b + " --candidate " + c + " --markdown " + tmp("perf.md"), 60);
}

// Side by side: both timed in one sweep, round by round (the drift of a
// shared machine between two runs made one after the other reached 30 % here,
// and same-against-same pairs of files failed 46 times in 240: the file gate
// cannot be sound on this machine at 5 %, the side-by-side one is).
testutil::CommandResult side_by_side(const std::string& base_impl, const std::string& cand_impl, int i) {
  return testutil::collcheck("gate --baseline-impl " + base_impl + " --candidate-impl " + cand_impl + " --json " +
                                 tmp("side" + std::to_string(i) + ".json") + " --markdown " + tmp("side.md"),
                             300);
}

TEST(Gate, SameAgainstSamePassesDespiteNoise) {
  const int n = runs();
  int failed = 0;
  std::string last_failure;
  for (int i = 0; i < n; ++i) {
    const auto r = side_by_side("plugin:" + kPlugins + "/gate_naive.so", "plugin:" + kPlugins + "/gate_naive.so", i);
    ASSERT_TRUE(r.code == 0 || r.code == 1) << r.out;
    if (r.code == 1) {
      ++failed;
      last_failure = r.out;
    }
  }
  std::printf("[ gate     ] same against same, side by side: %d of %d runs passed\n", n - failed, n);
  // At least 19 of 20: one false alarm in 20 runs at most (one in any fewer).
  EXPECT_LE(failed, std::max(1, n / 20)) << last_failure;
  const std::string md = slurp(tmp("side.md"));
  EXPECT_NE(md.find("side by side"), std::string::npos) << md;
  EXPECT_NE(slurp(tmp("side0.json")).find("busbw_samples"), std::string::npos) << "--json keeps the measured rows";
}

TEST(Gate, TwiceAsSlowFailsEveryTimeSideBySide) {
  const int n = runs();
  for (int i = 0; i < n; ++i) {
    const auto r = side_by_side("plugin:" + kPlugins + "/gate_naive.so", "plugin:" + kPlugins + "/gate_naive_twice.so", i);
    EXPECT_EQ(r.code, 1) << "run " << i << ":\n" << r.out;
    EXPECT_NE(r.out.find("REGRESSED"), std::string::npos) << r.out;
  }
  const std::string md = slurp(tmp("side.md"));
  EXPECT_NE(md.find("| float32 sum 65536 B |"), std::string::npos) << md;
}

// Two files: the same file against itself passes (a sweep compared with its
// own samples shows no change), and the plugin made twice as slow fails.
TEST(Gate, TheSameFileAgainstItselfPasses) {
  auto r = testutil::collcheck("sweep -b 64K -e 256K -f 4 -n 20 --reps 9 --json " + tmp("self.json") + " --algo plugin:" +
                                   kPlugins + "/gate_naive.so",
                               300);
  ASSERT_EQ(r.code, 0) << r.out;
  r = testutil::collcheck("gate --baseline " + tmp("self.json") + " --candidate " + tmp("self.json"), 60);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: no row regressed"), std::string::npos) << r.out;
}

TEST(Gate, TwiceAsSlowFailsEveryTime) {
  const int n = runs();
  for (int i = 0; i < n; ++i) {
    const auto r = perf_pair("plugin:" + kPlugins + "/gate_naive.so", "plugin:" + kPlugins + "/gate_naive_twice.so", i);
    EXPECT_EQ(r.code, 1) << "run " << i << ":\n" << r.out;
    EXPECT_NE(r.out.find("REGRESSED"), std::string::npos) << r.out;
  }
  const std::string md = slurp(tmp("perf.md"));
  EXPECT_NE(md.find("row(s) regressed"), std::string::npos) << md;
  EXPECT_NE(md.find("| float32 sum 65536 B out-of-place |"), std::string::npos) << md;
}

TEST(Gate, CorrectnessGatePassesRingAndFailsAMutant) {
  // --report FORMAT=PATH, as on every command (issue 32), beside --junit.
  auto r = testutil::collcheck("gate --impl ring --budget 40 --markdown " + tmp("ring.md") + " --junit " + tmp("ring.xml") +
                                   " --report text=" + tmp("ring.txt"),
                               300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(tmp("ring.txt")).find("PASS  verify: agrees-with-oracle"), std::string::npos) << slurp(tmp("ring.txt"));
  EXPECT_NE(slurp(tmp("ring.md")).find("### collcheck gate ring — passed"), std::string::npos) << slurp(tmp("ring.md"));
  EXPECT_NE(slurp(tmp("ring.xml")).find("verify: agrees-with-oracle"), std::string::npos);
  EXPECT_NE(slurp(tmp("ring.xml")).find("faults: "), std::string::npos);
  r = testutil::collcheck("gate --impl plugin:" MUTANT_DIR "/double_contribution.so --against ring --budget 20 --markdown " +
                              tmp("mutant.md") + " --junit " + tmp("mutant.xml"),
                          300);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string md = slurp(tmp("mutant.md"));
  EXPECT_NE(md.find("FAILED"), std::string::npos) << md;
  EXPECT_NE(md.find("--replay"), std::string::npos) << "the failure's body carries its replay line\n" << md;
  EXPECT_NE(slurp(tmp("mutant.xml")).find("<failure"), std::string::npos);
}

TEST(Gate, BadInputIsExit2) {
  std::ofstream(tmp("notjson.json")) << "not json";
  std::ofstream(tmp("few.json")) << R"({"results":[{"algo":"ring","type":"float32","redop":"sum","size":4096,)"
                                    R"("out-of-place":{},"busbw_samples":[1,2,3]}]})";
  const struct {
    std::string args, what;
  } bad[] = {
      {"gate", "nothing to gate"},
      {"gate --baseline " + tmp("few.json"), "--baseline and --candidate go together"},
      {"gate --baseline " + tmp("notjson.json") + " --candidate " + tmp("few.json"), "not a sweep --json file"},
      {"gate --baseline " + tmp("few.json") + " --candidate " + tmp("few.json"),
       "results[0].busbw_samples: 3 sample(s); the gate needs at least 9 (sweep --reps 9)"},
      {"gate --baseline " + tmp("few.json") + " --candidate " + tmp("few.json") + " --min-samples 3 --max-regression 5x",
       "--max-regression must be a fraction"},
      {"gate --impl ring --baseline a --candidate b", "not both"},
      {"gate --baseline-impl ring", "--baseline-impl and --candidate-impl go together"},
      {"gate --baseline-impl ring --candidate-impl tree --baseline a --candidate b", "not both"},
      {"gate --baseline-impl ring --candidate-impl bogus", "--algo"},
      {"gate --baseline-impl ring --candidate-impl tree --reps 5", "--reps is 5; the gate needs at least --min-samples 9"},
      {"gate --baseline-impl ring --candidate-impl tree -b 2M -e 1M", "-b/--minbytes (2097152) must not exceed"},
      {"gate --impl ring --report bogus=" + tmp("x"), "--report: unknown format 'bogus'; formats: junit, text, markdown"},
  };
  for (const auto& b : bad) {
    const auto r = testutil::collcheck(b.args, 60);
    EXPECT_EQ(r.code, 2) << b.args << "\n" << r.out;
    EXPECT_NE(r.out.find(b.what), std::string::npos) << b.args << "\n" << r.out;
  }
}

}  // namespace

namespace {

// A sweep --json file of one row, float32 sum 4096 B, with these samples and
// these extra fields on the row (its perf object is `perf`).
std::string sweep_file(const std::string& name, const std::string& samples, const std::string& perf = "{}",
                       const std::string& extra = "") {
  const std::string path = tmp(name);
  std::ofstream(path) << R"({"results":[{"algo":"ring","type":"float32","redop":"sum","size":4096,"out-of-place":)"
                      << perf << R"(,"busbw_samples":)" << samples << extra << "}]}";
  return path;
}

const std::string kNine = "[5,5,5,5,5,5,5,5,5]";

}  // namespace

// Rows the candidate file itself marks as wrong, failed or skipped were
// compared on their samples and passed. Now each is a failed row (exit 1),
// named with why; in the baseline, such a row is refused (exit 2).
TEST(Gate, WrongFailedOrSkippedCandidateRowsFail) {
  const auto base = sweep_file("good.json", kNine, R"({"wrong":0})");
  const struct {
    std::string name, perf, extra, why;
  } bad[] = {
      {"wrong.json", R"({"wrong":12345})", "", "the candidate row is wrong (\"wrong\": 12345 elements out of bounds)"},
      {"failed.json", R"({"wrong":0})", R"(,"error":"rank 1: timed out")", "the candidate row is failed (\"error\": \"rank 1: timed out\")"},
      {"skipped.json", R"({"wrong":0})", R"(,"skipped":"no GPU")", "the candidate row is skipped (\"skipped\": \"no GPU\")"},
  };
  for (const auto& b : bad) {
    const auto cand = sweep_file(b.name, kNine, b.perf, b.extra);
    auto r = testutil::collcheck("gate --baseline " + base + " --candidate " + cand + " --markdown " + tmp("bad.md"), 60);
    EXPECT_EQ(r.code, 1) << b.name << "\n" << r.out;
    EXPECT_NE(r.out.find(b.why), std::string::npos) << b.name << "\n" << r.out;
    EXPECT_NE(r.out.find("FAIL: 1 candidate row(s) wrong, failed or skipped"), std::string::npos) << r.out;
    EXPECT_NE(slurp(tmp("bad.md")).find("**FAILED**"), std::string::npos) << slurp(tmp("bad.md"));
    r = testutil::collcheck("gate --baseline " + cand + " --candidate " + base, 60);
    EXPECT_EQ(r.code, 2) << b.name << " as the baseline\n" << r.out;
    EXPECT_NE(r.out.find("a baseline must be a correct, measured run"), std::string::npos) << r.out;
  }
  // The same file, correct, against itself: compared and passed (the rows above fail on their marks alone).
  const auto r = testutil::collcheck("gate --baseline " + base + " --candidate " + base, 60);
  EXPECT_EQ(r.code, 0) << r.out;
}

// busbw 1e308 against 1e-308 (over memcpy samples) printed "change -nan%",
// verdict ok, exit 0. Now a ratio that is not a finite number is bad input.
TEST(Gate, ANonFiniteRatioIsBadInputNotNan) {
  const std::string tiny = "[1e-308,1e-308,1e-308,1e-308,1e-308,1e-308,1e-308,1e-308,1e-308]";
  const std::string huge = "[1e308,1e308,1e308,1e308,1e308,1e308,1e308,1e308,1e308]";
  const auto base = sweep_file("tiny.json", tiny, "{}", R"(,"memcpy_samples":)" + huge);
  const auto cand = sweep_file("huge.json", huge, "{}", R"(,"memcpy_samples":)" + tiny);
  auto r = testutil::collcheck("gate --baseline " + base + " --candidate " + cand, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a finite number"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  const auto zero = sweep_file("zero.json", "[0,0,0,0,0,0,0,0,0]");
  r = testutil::collcheck("gate --baseline " + zero + " --candidate " + sweep_file("five.json", kNine), 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("median busbw of 0"), std::string::npos) << r.out;
}

// An unwritable $GITHUB_STEP_SUMMARY was ignored silently. Now the summary
// that cannot be written is an error (exit 5, output lost, on a pass), named.
TEST(Gate, AnUnwritableStepSummaryIsAnError) {
  const auto base = sweep_file("sum.json", kNine);
  auto r = testutil::run_command("env GITHUB_STEP_SUMMARY=/nonexistent-dir/summary.md " + std::string(COLLCHECK_BIN) +
                                     " gate --baseline " + base + " --candidate " + base,
                                 60);
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_NE(r.out.find("$GITHUB_STEP_SUMMARY: cannot write /nonexistent-dir/summary.md"), std::string::npos) << r.out;
  const std::string ok = tmp("summary.md");
  std::filesystem::remove(ok);
  r = testutil::run_command("env GITHUB_STEP_SUMMARY=" + ok + " " + std::string(COLLCHECK_BIN) + " gate --baseline " +
                                base + " --candidate " + base,
                            60);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(ok).find("no regression"), std::string::npos) << slurp(ok);
}
