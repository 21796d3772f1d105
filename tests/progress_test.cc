// The progress sink (harness/report/progress.h): a bar redrawn in place on a
// terminal, a plain line every so often elsewhere, nothing when off; the
// ticker keeps the elapsed time moving while the run is stuck in one step;
// and the commands show it on stderr, never on stdout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "harness/report/progress.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

// What `body` wrote through a Progress of `style` into a temporary file.
template <typename Body>
std::string written(ProgressStyle style, Body body) {
  std::FILE* f = std::tmpfile();
  {
    Progress p("x", "things", style, f, 50ms);
    body(p);
  }
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace

TEST(Progress, LinesComeWhileTheRunIsStuckAndEndDone) {
  const std::string out = written(ProgressStyle::Lines, [](Progress& p) {
    p.count(3, 10);
    p.phase("shrinking");
    std::this_thread::sleep_for(500ms);  // no update: the ticker still prints (every 50 ms)
  });
  EXPECT_NE(out.find("[x] 3/10 things, "), std::string::npos) << out;
  EXPECT_NE(out.find("; shrinking\n"), std::string::npos) << out;
  EXPECT_GE(std::count(out.begin(), out.end(), '\n'), 2) << out;  // a tick at least, and the last line
  EXPECT_NE(out.find("(done)\n"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "lines never redraw in place";
}

TEST(Progress, TheBarRedrawsInPlaceAndLeavesNothingBehind) {
  const std::string out = written(ProgressStyle::Bar, [](Progress& p) {
    p.count(5, 10);
    std::this_thread::sleep_for(500ms);  // the bar redraws every 200 ms
  });
  EXPECT_NE(out.find("\r[x] [##########..........] 5/10 things"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << "a bar never scrolls";
  // Cleared at the end: blanks, then the cursor back at the line's start.
  ASSERT_GE(out.size(), 2u);
  EXPECT_EQ(out.back(), '\r');
  EXPECT_EQ(out[out.size() - 2], ' ');
}

TEST(Progress, OffWritesNothingAndAShortRunPrintsNoLine) {
  EXPECT_EQ(written(ProgressStyle::Off, [](Progress& p) { p.count(1, 2); }), "");
  // Lines every 50 ms, a run of none: nothing shown, so no final line either.
  EXPECT_EQ(written(ProgressStyle::Lines, [](Progress& p) { p.count(1, 2); }), "");
}

TEST(Progress, TimeLeftComesFromTheRateOrTheBudget) {
  std::FILE* f = std::tmpfile();
  Progress p("x", "things", ProgressStyle::Off, f);
  p.count(0, 10);
  EXPECT_EQ(p.line().find("left"), std::string::npos) << p.line();  // no rate yet, no budget
  p.budget(100);
  EXPECT_NE(p.line().find("about 1:39 min left"), std::string::npos) << p.line();  // 100 s less the time so far
  p.limit_from_now(0);
  EXPECT_EQ(p.line().find("left"), std::string::npos) << p.line();
  std::fclose(f);
}

TEST(Progress, TheFlagsValuesAreChecked) {
  EXPECT_EQ(progress_style("off"), ProgressStyle::Off);
  EXPECT_EQ(progress_style("bar"), ProgressStyle::Bar);
  EXPECT_EQ(progress_style("lines"), ProgressStyle::Lines);
  std::FILE* f = std::tmpfile();  // not a terminal
  EXPECT_EQ(progress_style("auto", f), ProgressStyle::Lines);
  std::fclose(f);
  try {
    progress_style("sometimes");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--progress must be auto"), std::string::npos) << e.what();
  }
  const auto r = testutil::collcheck("verify --cases 1 --progress sometimes");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--progress must be auto"), std::string::npos) << r.out;
}

// As a CI log shows it: lines on stderr, the verdict alone on stdout.
TEST(Progress, VerifyAndReplayShowItOnStderrOnly) {
  const std::string err = testing::TempDir() + "/progress.err";
  // run_command sends stderr to the output: the shell inside keeps it apart.
  const auto v = testutil::run_command("sh -c 'COLLCHECK_PROGRESS_EVERY=0.2 " COLLCHECK_BIN
                                       " verify --cases 300 --seed 3 --progress lines 2>" + err + "'", 300);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_EQ(v.out.find("[verify]"), std::string::npos) << v.out;
  const std::string lines = testutil::slurp(err);
  EXPECT_NE(lines.find("[verify] "), std::string::npos) << lines;
  EXPECT_NE(lines.find("/300 cases, "), std::string::npos) << lines;
  const auto r = testutil::run_command("sh -c 'COLLCHECK_PROGRESS_EVERY=0.2 " COLLCHECK_BIN " replay " SOURCE_DIR
                                       "/examples/bugs/late_rank_after_checkpoint.yaml --world threads --progress lines 2>" + err + "'", 120);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(testutil::slurp(err).find("[replay] "), std::string::npos) << testutil::slurp(err);
  EXPECT_NE(testutil::slurp(err).find("the run's limit is 8 s"), std::string::npos) << testutil::slurp(err);
}

// The soak's progress is the same sink's: lines on stderr every
// --progress-interval with the units, the time left and the failures so far;
// nothing of it on stdout, where the summary goes.
TEST(Progress, SoakDrawsItThroughTheSink) {
  const std::string err = testing::TempDir() + "/soak-progress.err";
  const std::string results = testing::TempDir() + "/soak-progress.jsonl";
  std::remove(results.c_str());
  std::remove((results + "-off").c_str());  // a soak does not overwrite a results file
  const auto s = testutil::run_command("sh -c '" COLLCHECK_BIN " soak --duration 3 --seed 7 --progress lines "
                                       "--progress-interval 0.5 --results " + results + " 2>" + err + "'", 120);
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(s.out.find("[soak]"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("collcheck soak: done after"), std::string::npos) << s.out;
  const std::string lines = testutil::slurp(err);
  size_t n = 0;
  for (size_t at = lines.find("[soak] "); at != std::string::npos; at = lines.find("[soak] ", at + 1)) ++n;
  EXPECT_GE(n, 3u) << lines;  // about one every 0.5 s for 3 s, and the last
  EXPECT_NE(lines.find(" units, "), std::string::npos) << lines;
  EXPECT_NE(lines.find(" left; "), std::string::npos) << lines;
  EXPECT_NE(lines.find("failed units (0 signatures), last: "), std::string::npos) << lines;
  EXPECT_NE(lines.find("(done)"), std::string::npos) << lines;
  // off: nothing at all
  const auto o = testutil::run_command("sh -c '" COLLCHECK_BIN " soak --duration 1 --seed 7 --progress off --results " +
                                       results + "-off 2>" + err + "'", 120);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(testutil::slurp(err).find("[soak]"), std::string::npos) << testutil::slurp(err);
}
