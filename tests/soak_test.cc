// collcheck soak (issue 14), run as its users run it: the CLI, real files,
// real signals, real mpirun. Seeds are fresh each run and printed.
#include <gtest/gtest.h>

#include <cmath>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace {

using json = nlohmann::json;

std::string fresh_seed() {
  const uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(s));
  std::printf("[ seed     ] %s\n", buf);
  return buf;
}

std::string temp(const std::string& name) {
  const std::string p = testing::TempDir() + "/soak-" + name;
  std::filesystem::remove_all(p);
  return p;
}

std::vector<json> lines(const std::string& path) {
  std::vector<json> v;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) v.push_back(json::parse(l));
  return v;
}

std::string write_plan(const std::string& name, const std::string& text) {
  const std::string p = temp(name + ".yaml");
  std::ofstream(p) << text;
  return p;
}

// The results file is the record: a start line, one line per unit, an end
// line whose summary agrees with the unit lines.
void expect_consistent(const std::vector<json>& v) {
  ASSERT_GE(v.size(), 2u);
  EXPECT_EQ(v.front().at("type"), "start");
  EXPECT_EQ(v.back().at("type"), "end");
  size_t units = 0, failed = 0;
  for (const auto& j : v)
    if (j.at("type") == "unit") {
      ++units;
      failed += j.at("ok").get<bool>() ? 0 : 1;
    }
  EXPECT_EQ(v.back().at("summary").at("units").get<size_t>(), units);
  EXPECT_EQ(v.back().at("summary").at("failed_units").get<size_t>(), failed);
}

int soak_seconds() {
  // 30 s; the sanitizer presets run shorter and a nightly job longer
  // (COLLCHECK_SOAK_SECONDS), and say so.
  const char* env = std::getenv("COLLCHECK_SOAK_SECONDS");
  const int seconds = env ? std::atoi(env) : 30;
  if (seconds != 30) std::printf("[ note     ] COLLCHECK_SOAK_SECONDS: a %d s soak instead of 30 s\n", seconds);
  return seconds;
}

TEST(Soak, TheDefaultPlanRunsCleanForItsDuration) {
  const auto results = temp("default.jsonl");
  const int seconds = soak_seconds();
  const auto r = testutil::collcheck("soak --duration " + std::to_string(seconds) + " --seed " + fresh_seed() +
                                         " --results " + results,
                                     seconds + 180);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: "), std::string::npos) << r.out;
  const auto v = lines(results);
  expect_consistent(v);
  std::set<std::string> workloads;
  for (const auto& j : v)
    if (j.at("type") == "unit") workloads.insert(j.at("workload"));
  EXPECT_TRUE(workloads.count("verify") && workloads.count("faults")) << r.out;
  EXPECT_EQ(v.back().at("reason"), "duration");
}

// A failure never stops the soak: a mutant fails unit after unit, each
// failure is recorded with its replay line, and they group by signature.
// The replay line, run as printed, fails again.
//
// The plan keeps the signatures few (one dtype, one op, p = 2, counts up to
// 2: at most 4 shapes), so that more failed units than that must share one.
// With every dtype and op, a slow host's 10 units in 8 s could all differ.
TEST(Soak, FailuresAreRecordedGroupedAndTheSoakGoesOn) {
  const auto plan = write_plan("mutant", "implementations:\n  - {impl: \"plugin:" MUTANT_DIR
                                         "/double_contribution.so\", against: ring}\n"
                                         "dtypes: [int32]\nops: [sum]\nranks: {min: 2, max: 2}\n"
                                         "workloads:\n  verify: {weight: 1, cases: 5, max_count: 2, large_bytes: 0}\n"
                                         "  faults: {weight: 0}\n  perf: {weight: 0}\n");
  const auto results = temp("mutant.jsonl");
  const auto r =
      testutil::collcheck("soak --plan " + plan + " --duration 8 --seed " + fresh_seed() + " --results " + results, 180);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL: "), std::string::npos) << r.out;
  const auto v = lines(results);
  expect_consistent(v);
  const auto& s = v.back().at("summary");
  ASSERT_GE(s.at("failed_units").get<size_t>(), 5u) << r.out;
  // Fewer signatures than failures: the same bug is one line with a count.
  EXPECT_LE(s.at("failure_groups").size(), 4u) << r.out;
  EXPECT_LT(s.at("failure_groups").size(), s.at("failed_units").get<size_t>()) << r.out;
  size_t grouped = 0;
  for (const auto& g : s.at("failure_groups")) grouped += g.at("count").get<size_t>();
  EXPECT_EQ(grouped, s.at("failed_units").get<size_t>()) << r.out;
  std::string replay;
  for (const auto& j : v)
    if (j.at("type") == "unit" && !j.at("ok").get<bool>()) {
      EXPECT_FALSE(j.at("signature").get<std::string>().empty());
      EXPECT_FALSE(j.at("minimal").get<std::string>().empty());
      replay = j.at("replay");
    }
  ASSERT_EQ(replay.rfind("collcheck verify ", 0), 0u) << replay;
  const auto again = testutil::run_command(std::string(COLLCHECK_BIN) + replay.substr(9), 120);
  EXPECT_EQ(again.code, 1) << replay << "\n" << again.out;
}

// --resume continues the same soak: the next unit, the same seed; a last line
// cut short by a kill is dropped; the totals count both parts.
TEST(Soak, ResumeContinuesFromTheResultsFile) {
  const auto results = temp("resume.jsonl");
  const std::string seed = fresh_seed();
  auto r = testutil::collcheck("soak --duration 3 --seed " + seed + " --results " + results, 120);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto first = lines(results);
  const size_t first_units = first.back().at("summary").at("units");
  std::ofstream(results, std::ios::app) << "{\"type\":\"unit\",\"i\":99999,\"wo";  // killed mid-line
  // The duration counts both parts: leave the second 3 s more than the first
  // took (a unit may run well past a 3 s soak under a sanitizer; CI's tsan
  // stage saw the first part end after 6 s, and "--duration 6" then left
  // the resumed soak nothing to run).
  const double first_took = first.back().at("t").get<double>();
  const long second = static_cast<long>(std::ceil(first_took)) + 3;
  r = testutil::collcheck("soak --duration " + std::to_string(second) + " --resume --results " + results, 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("dropped an unfinished last line"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming " + results + ": " + std::to_string(first_units) + " units done"), std::string::npos)
      << r.out;
  const auto all = lines(results);
  size_t starts = 0, units = 0, expect_i = 0;
  for (const auto& j : all) {
    starts += j.at("type") == "start";
    if (j.at("type") == "unit") {
      EXPECT_EQ(j.at("i").get<size_t>(), expect_i++) << "unit indices continue without a gap or a repeat";
      ++units;
    }
  }
  EXPECT_EQ(starts, 1u);
  EXPECT_GT(units, first_units);
  EXPECT_EQ(all.back().at("summary").at("units").get<size_t>(), units);
  EXPECT_EQ(all.back().at("summary").at("seed"), first.front().at("seed"));
}

// SIGTERM (a scheduler's end of allocation): the unit in flight ends, the
// summary is written, and the exit code is 1 when a failure was found, else
// 143: a run cut short, never 0.
TEST(Soak, SigtermEndsWithTheSummary) {
  const auto results = temp("sigterm.jsonl");
  const auto out = temp("sigterm.out");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Small perf rows: the unit in flight ends soon after the signal.
    std::ofstream(out + ".plan") << "workloads:\n  perf: {max_bytes: 256K}\n";
    const std::string cmd = std::string(COLLCHECK_BIN) + " soak --duration 300 --plan " + out + ".plan --results " +
                            results + " > " + out + " 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(4));
  kill(pid, SIGTERM);
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the soak did not end within 60 s of SIGTERM";
  }
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << text;
  // A cut run is never a pass (it printed PASS and exited 0): 128 + SIGTERM.
  EXPECT_EQ(WEXITSTATUS(status), 143) << text;
  EXPECT_NE(text.find("stopped by SIGTERM"), std::string::npos) << text;
  EXPECT_NE(text.find("STOPPED: "), std::string::npos) << text;
  EXPECT_EQ(text.find("PASS"), std::string::npos) << text;
  const auto v = lines(results);
  expect_consistent(v);
  EXPECT_EQ(v.back().at("reason"), "SIGTERM");
}

// Bad input: exit 2, one line naming the field and what is allowed.
TEST(Soak, BadPlansAndFlagsAreBadInput) {
  struct Bad {
    std::string plan, what;
  };
  const std::vector<Bad> bad = {
      {"workloads:\n  verify: {wieght: 2}\n", ":2: workloads.verify: unknown key 'wieght'; allowed: weight, cases, max_count, large_bytes"},
      {"dtypes: [float32, float33]\n", ":1: dtypes: unknown dtype 'float33'; allowed: "},
      {"implementations: [ring, nosuch]\n", ":1: implementations: "},
      {"ranks: {min: 5, max: 2}\n", ":1: ranks: min (5) is more than max (2)"},
      {"workloads:\n  perf: {max_bytes: 17179869184G}\n", "workloads.perf.max_bytes"},
      {"workloads: {verify: {weight: 0}, faults: {weight: 0}, perf: {weight: 0}}\n", "every weight is 0"},
      {"seed: -1\n", ":1: seed: expected a non-negative integer"},
      {"? [a, b]\n: 1\n", "expected a plain key"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const auto plan = write_plan("bad" + std::to_string(i), bad[i].plan);
    const auto r = testutil::collcheck("soak --duration 1 --plan " + plan + " --results " + temp("bad.jsonl"), 60);
    EXPECT_EQ(r.code, 2) << bad[i].plan << r.out;
    EXPECT_NE(r.out.find("collcheck: error: " + plan), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(bad[i].what), std::string::npos) << bad[i].plan << r.out;
  }
  const auto results = temp("exists.jsonl");
  std::ofstream(results) << "{}\n";
  auto r = testutil::collcheck("soak --duration 1 --results " + results, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the file exists; --resume continues that soak"), std::string::npos) << r.out;
  r = testutil::collcheck("soak --duration 1 --resume --results " + results, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a collcheck soak results file"), std::string::npos) << r.out;
  r = testutil::collcheck("soak --duration 0", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  r = testutil::collcheck("soak --duration 1 --pushgateway nohost", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--pushgateway must be HOST:PORT"), std::string::npos) << r.out;
  // The plan in examples/ is a good one.
  r = testutil::collcheck("soak --plan " SOURCE_DIR "/examples/soak/nightly.yaml --duration 1 --results " +
                              temp("nightly.jsonl"), 120);
  EXPECT_EQ(r.code, 0) << r.out;
}

// Under mpirun: one rank per process, rank 0 draws and judges, every process
// exits with its code; the metrics it writes pass promtool.
TEST(Soak, UnderMpirunFourProcesses) {
  const auto results = temp("mpi.jsonl");
  const auto prom = temp("mpi.prom");
  const int seconds = soak_seconds();
  const auto r = testutil::run_command(testutil::mpirun(4) + " soak --world mpi --duration " + std::to_string(seconds) + " --seed " + fresh_seed() +
                                           " --results " + results + " --metrics-textfile " + prom,
                                       300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("MPI world of 4 processes"), std::string::npos) << r.out;
  const auto v = lines(results);
  expect_consistent(v);
  EXPECT_LT(v.back().at("t").get<double>(), seconds + 45) << "a unit ran far past the duration";
  if (std::system("command -v promtool > /dev/null") != 0) {
    std::printf("[ SKIPPED  ] promtool check: promtool is not installed (ci/install-deps installs prometheus)\n");
    return;
  }
  const auto check = testutil::run_command("promtool check metrics < " + prom, 60);
  EXPECT_EQ(check.code, 0) << check.out;
}

}  // namespace

// Issue 31: the default --results was one fixed name, so a nightly job in one
// directory failed on its second night (the file exists). Each run now gets
// its own file (UTC date and time, seed); --resume needs the file named.
TEST(Soak, EachRunGetsItsOwnDefaultResultsFile) {
  const std::string dir = testing::TempDir() + "soak-default-names";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* seed : {"1", "2"}) {
    const auto r = testutil::run_command("sh -c 'cd " + dir + " && " + std::string(COLLCHECK_BIN) +
                                             " soak --duration 1 --seed " + seed + "'", 120);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("results: collcheck-soak-"), std::string::npos) << r.out;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_TRUE(files[0].starts_with("collcheck-soak-") && files[0].ends_with("-0000000000000001.jsonl")) << files[0];
  EXPECT_TRUE(files[1].ends_with("-0000000000000002.jsonl")) << files[1];
  const auto r = testutil::run_command("sh -c 'cd " + dir + " && " + std::string(COLLCHECK_BIN) + " soak --duration 1 --resume'", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--resume continues the soak of a results file: name it with --results PATH"), std::string::npos)
      << r.out;
}
