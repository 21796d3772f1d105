// The simulated world (issue 33): fibers in virtual time under a seeded
// schedule. Its scheduler and world directly; then the commands as a user runs
// them: one seed gives one output, byte for byte, on an idle host and on one
// running 8 busy processes, and pinned to one CPU.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/world/sim_world.h"
#include "impl/inproc_links.h"
#include "impl/sched.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

// A sanitizer build runs no simulated world (kNoFibers says why): said, not passed.
#define SKIP_WITHOUT_FIBERS() \
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers

namespace {

SimOptions sim(uint64_t seed = 1, SchedulePolicy policy = SchedulePolicy::Random) {
  SimOptions o;
  o.schedule.seed = seed;
  o.schedule.policy = policy;
  return o;
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// A message costs exactly the model's alpha + beta * bytes of virtual time.
TEST(SimWorld, AMessageCostsTheModelsTime) {
  SKIP_WITHOUT_FIBERS();
  SimOptions o = sim();
  SimWorld w(2, o);
  constexpr size_t kBytes = 1 << 20;
  std::vector<std::vector<std::byte>> buf(2, std::vector<std::byte>(kBytes, std::byte{7}));
  Clock::duration took{};
  const auto run = w.run(
      [&](RankContext& ctx) {
        const auto t0 = sched::now();
        auto& b = buf[static_cast<size_t>(ctx.rank())];
        if (ctx.rank() == 0) {
          ctx.links().isend(1, 1, b)->wait(t0 + 10s);
        } else {
          ctx.links().irecv(0, 1, b)->wait(t0 + 10s);
          took = sched::now() - t0;
        }
      },
      60s);
  ASSERT_TRUE(run.ok()) << run.failures();
  const double want = o.model.alpha_node_s + kBytes * o.model.beta_node_s;
  EXPECT_NEAR(secs(took), want, 1e-9) << "virtual time of one 1 MiB message";
  // Between nodes, the network's alpha and beta.
  o.model.ranks_per_node = 1;
  EXPECT_NEAR(secs(o.model.message(0, 1, kBytes)), o.model.alpha_net_s + kBytes * o.model.beta_net_s, 1e-9);
}

// A receive nobody sends times out at its deadline in virtual time, at once
// in wall time; a wait with nothing that can end it is a deadlock, seen at once.
TEST(SimWorld, DeadlinesAndDeadlocksCostNoWallTime) {
  SKIP_WITHOUT_FIBERS();
  SimWorld w(2, sim());
  const auto wall0 = std::chrono::steady_clock::now();
  const auto start = w.start();
  const auto run = w.run(
      [&](RankContext& ctx) {
        std::vector<std::byte> b(8);
        ctx.links().irecv(1 - ctx.rank(), 5, b)->wait(sched::now() + 30s);
      },
      120s);
  EXPECT_FALSE(run.ok());
  EXPECT_FALSE(run.hung);
  EXPECT_NE(run.failures().find("did not complete by its deadline"), std::string::npos) << run.failures();
  EXPECT_NEAR(secs(w.start() - start), 30.0, 1e-6) << "the deadline passed in virtual time";

  std::mutex mu;
  std::condition_variable cv;
  SimWorld w2(3, sim());
  const auto hung = w2.run(
      [&](RankContext&) {
        std::unique_lock<std::mutex> lk(mu);
        sched::wait(cv, lk, [] { return false; });  // nothing will ever notify
      },
      3600s);
  EXPECT_TRUE(hung.hung);
  EXPECT_LT(secs(std::chrono::steady_clock::now() - wall0), 5.0) << "30 s and an hour of virtual time took wall seconds";
}

// The seed decides the interleaving: the same seed, the same order of every
// step of every rank; other seeds, other orders. PCT too.
TEST(SimWorld, TheSeedDecidesTheInterleaving) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t fresh = std::random_device{}();
  std::printf("[ seed ] fresh schedule seed %llu\n", static_cast<unsigned long long>(fresh));
  for (SchedulePolicy pol : {SchedulePolicy::Random, SchedulePolicy::Pct}) {
    auto order = [&](uint64_t seed) {
      std::vector<int> seen;
      SimWorld w(4, sim(seed, pol));
      const auto run = w.run(
          [&](RankContext& ctx) {
            for (int i = 0; i < 20; ++i) {
              seen.push_back(ctx.rank());
              sched::yield();
            }
          },
          60s);
      EXPECT_TRUE(run.ok()) << run.failures();
      return seen;
    };
    std::set<std::vector<int>> distinct;
    for (uint64_t seed : {uint64_t{1}, uint64_t{2}, uint64_t{3}, fresh}) {
      const auto a = order(seed);
      EXPECT_EQ(a, order(seed)) << "seed " << seed << " gave two interleavings";
      distinct.insert(a);
    }
    EXPECT_GE(distinct.size(), 3u) << "four seeds gave fewer than three interleavings";
  }
}

// Async streams are fibers too, and a sleep is virtual: 1,000 s of sleeps
// on 8 ranks end in wall milliseconds, each rank at its own virtual time.
TEST(SimWorld, SleepsAndTasksRunInVirtualTime) {
  SKIP_WITHOUT_FIBERS();
  SimWorld w(8, sim(7));
  std::vector<double> woke(8);
  const auto t0 = w.start();
  const auto wall0 = std::chrono::steady_clock::now();
  const auto run = w.run(
      [&](RankContext& ctx) {
        int done = 0;
        sched::Task t([&] {
          sched::sleep_for(std::chrono::seconds(100 + ctx.rank()));
          done = 1;
        });
        t.join();
        woke[static_cast<size_t>(ctx.rank())] = secs(sched::now() - t0);
        if (done != 1) throw std::runtime_error("the task did not run");
      },
      3600s);
  ASSERT_TRUE(run.ok()) << run.failures();
  for (int r = 0; r < 8; ++r) EXPECT_NEAR(woke[static_cast<size_t>(r)], 100.0 + r, 1e-6);
  EXPECT_LT(secs(std::chrono::steady_clock::now() - wall0), 2.0);
}

TEST(LinkModel, ParsesUnitsAndNamesABadKeyOrValue) {
  const LinkModel m = LinkModel::parse("alpha_node=2us,beta_node=10GB/s,alpha_net=1ms,reduce=500MB/s");
  EXPECT_DOUBLE_EQ(m.alpha_node_s, 2e-6);
  EXPECT_DOUBLE_EQ(m.beta_node_s, 1 / 10e9);
  EXPECT_DOUBLE_EQ(m.alpha_net_s, 1e-3);
  EXPECT_DOUBLE_EQ(m.reduce_bytes_per_s, 500e6);
  EXPECT_EQ(LinkModel::parse(m.describe()).describe(), m.describe()) << "describe() parses back";
  for (const char* bad : {"gamma=1us", "alpha_node=fast", "beta_net=0GB/s", "alpha_node=-1us", "beta_node=5"}) {
    try {
      (void)LinkModel::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--link-model"), std::string::npos) << e.what();
    }
  }
}

// ---- the commands, as a user runs them ----

namespace {

using testutil::BusyHost;

std::vector<std::string> example_bugs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SOURCE_DIR) + "/examples/bugs"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Every example replayed and 1,000 cases of the detection property: what the
// simulated world prints, all of it, but for the progress lines, which say how
// long the host took (a line every 30 s of wall time: the 128-rank example
// under 8 busy processes takes longer than that).
// `prefix` runs them under another command (taskset: one CPU instead of the host's).
std::vector<testutil::CommandResult> the_runs(uint64_t seed, const std::string& prefix = "") {
  std::vector<testutil::CommandResult> out;
  for (const auto& f : example_bugs())
    out.push_back(
        testutil::run_command(prefix + COLLCHECK_BIN + " replay " + f + " --world sim --progress off 2>&1", 300));
  out.push_back(testutil::run_command(
      fmt::format("{}{} faults --world sim --random 1000 --seed {} --progress off 2>&1", prefix, COLLCHECK_BIN, seed),
      300));
  return out;
}

}  // namespace

TEST(SimCli, OneSeedOneOutputOnAnIdleAndABusyHost) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = std::random_device{}() % 1000000;
  std::printf("[ seed ] detection property seed %llu\n", static_cast<unsigned long long>(seed));
  const auto idle = the_runs(seed);
  const auto again = the_runs(seed);
  std::vector<testutil::CommandResult> busy;
  {
    BusyHost host(8);
    busy = the_runs(seed);
  }
  // A machine with fewer cores, as near as one host comes to another machine:
  // the same runs pinned to one CPU.
  const auto one_cpu = the_runs(seed, "taskset -c 0 ");
  const auto files = example_bugs();
  ASSERT_EQ(idle.size(), files.size() + 1);
  for (size_t i = 0; i < idle.size(); ++i) {
    const std::string what = i < files.size() ? files[i] : "faults --random 1000";
    EXPECT_EQ(idle[i].code, 0) << what << "\n" << idle[i].out;
    EXPECT_EQ(idle[i].out, again[i].out) << what << ": two idle runs differ";
    EXPECT_EQ(idle[i].out, busy[i].out) << what << ": the busy host's run differs";
    EXPECT_EQ(idle[i].code, busy[i].code) << what;
    EXPECT_EQ(idle[i].out, one_cpu[i].out) << what << ": the run on one CPU differs";
  }
  // Every example's expectation held, and the property had no miss and no false alarm.
  for (size_t i = 0; i < files.size(); ++i)
    EXPECT_NE(idle[i].out.find("-> holds"), std::string::npos) << files[i] << "\n" << idle[i].out;
  EXPECT_NE(idle.back().out.find("1000 of 1000 cases diagnosed as injected (no miss, no false alarm: yes)"),
            std::string::npos)
      << idle.back().out;
}

// One seed, one output on every machine: what the simulated world prints is
// compared with what it printed on the machine that recorded
// tests/data/sim_outputs.txt (its header names that machine's CPU). Every
// example, the detection property and verify, all of their output but
// verify's wall time. The machines CI and each session run on differ (CPU
// vendor, vector width, core count), so each run is a check across two
// machines. After a deliberate change of what a run prints, record again:
// COLLCHECK_RECORD_SIM_OUTPUTS=1 ctest --test-dir build/default -R SimCli.EveryMachine
namespace {
std::string this_cpu() {
  const auto r = testutil::run_command(
      "sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1; grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo "
      "no AVX-512; nproc",
      10);
  std::string s = r.out;
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s + "cores";
}
std::vector<std::pair<std::string, std::string>> recorded_runs() {
  std::vector<std::pair<std::string, std::string>> runs;  // (command, what it printed)
  std::vector<std::string> cmds;
  for (const auto& f : example_bugs())
    cmds.push_back("replay examples/bugs/" + std::filesystem::path(f).filename().string() + " --world sim --progress off");
  cmds.push_back("faults --world sim --random 300 --seed 11 --progress off");
  cmds.push_back("verify --seed 9 --cases 500 --progress off");
  for (const auto& c : cmds) {
    const auto r = testutil::run_command(fmt::format("env -C {} {} {}", SOURCE_DIR, COLLCHECK_BIN, c), 300);
    // verify's last line says how long this host took.
    runs.push_back({c, std::regex_replace(r.out, std::regex(R"(cases in [0-9.]+ s \([0-9]+ cases/s\))"),
                                          "cases in T s (R cases/s)")});
    if (!runs.back().second.empty() && runs.back().second.back() != '\n') runs.back().second += '\n';
  }
  return runs;
}
}  // namespace

TEST(SimCli, EveryMachinePrintsWhatTheRecordingMachinePrinted) {
  SKIP_WITHOUT_FIBERS();
  const std::string path = std::string(SOURCE_DIR) + "/tests/data/sim_outputs.txt";
  const auto runs = recorded_runs();
  if (std::getenv("COLLCHECK_RECORD_SIM_OUTPUTS")) {
    std::string text = "# recorded on: " + this_cpu() + "\n";
    for (const auto& [c, out] : runs) text += "=== " + c + "\n" + out;
    std::ofstream(path) << text;
    GTEST_SKIP() << "recorded " << runs.size() << " runs to " << path;
  }
  const std::string text = testutil::slurp(path);
  const auto nl = text.find('\n');
  ASSERT_EQ(text.rfind("# recorded on: ", 0), 0u) << path;
  std::printf("[ machines ] recorded on %s; this one: %s\n", text.substr(15, nl - 15).c_str(), this_cpu().c_str());
  std::map<std::string, std::string> want;
  std::string cur;
  std::istringstream in(text.substr(nl + 1));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("=== ", 0) == 0) cur = line.substr(4);
    else want[cur] += line + "\n";
  }
  ASSERT_EQ(want.size(), runs.size()) << "the recorded runs are not this test's: record again";
  for (const auto& [c, out] : runs) {
    ASSERT_TRUE(want.count(c)) << c << " was not recorded";
    EXPECT_EQ(out, want[c]) << c << ": differs from the recording machine's output";
  }
}

TEST(SimCli, BadScheduleOrLinkModelIsAUsageError) {
  SKIP_WITHOUT_FIBERS();
  for (const char* args : {"--schedule sometimes", "--schedule pct:0", "--link-model alpha_node=soon",
                           "--link-model jitter=1us", "--schedule-seed -3"}) {
    const auto r = testutil::run_command(std::string(COLLCHECK_BIN) + " verify --world sim --cases 5 " + args, 60);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    const std::string flag = std::string(args).substr(0, std::string(args).find(' '));
    EXPECT_NE(r.out.find(flag), std::string::npos) << args << ": the error names the flag\n" << r.out;
  }
}

// verify in the simulated world: every reference algorithm against the
// others and the oracle, fresh seed; the replay line carries --world sim.
TEST(SimCli, VerifyPassesOnAFreshSeedAndItsReplayLineNamesTheWorld) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = std::random_device{}() % 1000000;
  std::printf("[ seed ] verify seed %llu\n", static_cast<unsigned long long>(seed));
  for (const char* impl : {"ring", "tree", "dbtree", "hierarchical"}) {
    const auto r = testutil::run_command(
        fmt::format("{} verify --world sim --impl {} --cases 150 --seed {} --progress off", COLLCHECK_BIN, impl, seed), 300);
    EXPECT_EQ(r.code, 0) << impl << "\n" << r.out;
    EXPECT_NE(r.out.find("as fibers in virtual time"), std::string::npos) << r.out;
  }
  const auto bad = testutil::run_command(
      fmt::format("{} verify --world sim --impl plugin:{}/chunk_off_by_one.so --cases 300 --seed {} --progress off",
                  COLLCHECK_BIN, MUTANT_DIR, seed), 300);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--world sim"), std::string::npos) << "the replay line must name the world\n" << bad.out;
}

// --schedules K: each case under K schedules of the simulated world; the
// header and the replay line say so; a world without schedules refuses it.
TEST(SimCli, SchedulesRunEachCaseUnderSeveralInterleavings) {
  SKIP_WITHOUT_FIBERS();
  const auto r = testutil::run_command(std::string(COLLCHECK_BIN) + " verify --cases 60 --seed 5 --schedules 4 --progress off", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ranks as fibers in virtual time, 4 schedules a case"), std::string::npos) << r.out;
  const auto bad = testutil::run_command(
      fmt::format("{} verify --impl plugin:{}/chunk_off_by_one.so --world sim --schedules 3 --cases 200 --seed 5 --progress off",
                  COLLCHECK_BIN, MUTANT_DIR), 300);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--world sim --schedules 3 --replay"), std::string::npos) << bad.out;
  for (const char* args : {"--world threads --schedules 2", "--schedules 0", "--schedules 1001"}) {
    const auto e = testutil::run_command(std::string(COLLCHECK_BIN) + " verify --cases 5 " + args, 60);
    EXPECT_EQ(e.code, 2) << args << "\n" << e.out;
    EXPECT_NE(e.out.find("--schedules"), std::string::npos) << args << "\n" << e.out;
  }
}

// The project's race mutant (a late-arrival path that drops a rank's own
// partial result) is caught in the simulated world on seeds 1, 2 and 3, and
// the replay line it prints fails 20 times in 20: the schedule is the seed's.
TEST(SimCli, TheRaceMutantIsCaughtOnSeedsOneToThreeAndItsReplayFailsEveryTime) {
  SKIP_WITHOUT_FIBERS();
  for (int seed : {1, 2, 3}) {
    const auto r = testutil::run_command(
        fmt::format("{} verify --impl plugin:{}/late_arrival_race.so --world sim --seed {} --progress off 2>&1",
                    COLLCHECK_BIN, MUTANT_DIR, seed), 300);
    ASSERT_EQ(r.code, 1) << "seed " << seed << "\n" << r.out;
    // Shrunk small: here the schedule is the seed's, so the shrink is too.
    std::smatch min;
    ASSERT_TRUE(std::regex_search(r.out, min, std::regex(R"(minimal case: p=([0-9]+) [^\n]*? count=([0-9]+))"))) << r.out;
    EXPECT_LE(std::stoi(min[1]), 16) << min[0];
    EXPECT_LE(std::stoi(min[2]), 64) << min[0];
    EXPECT_EQ(r.out.find("stopped by the shrink budget"), std::string::npos) << r.out;
    const size_t at = r.out.find("replay: collcheck verify ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
    const std::string bin_line = std::string(COLLCHECK_BIN) + line.substr(std::string("collcheck").size());
    const auto again = testutil::run_command(bin_line + " --repeat 20 2>&1", 300);
    EXPECT_EQ(again.code, 1) << bin_line << "\n" << again.out;
    EXPECT_NE(again.out.find("20 runs of the case: 20 failed"), std::string::npos) << bin_line << "\n" << again.out;
  }
}

namespace {
// verify's output without what the wall clock decides ("in 2.0 s (100 cases/s)").
std::string without_timing(const std::string& out) {
  static const std::regex timing(R"( in [0-9.]+ s \([0-9.]+ cases/s\))");
  return std::regex_replace(out, timing, "");
}
}  // namespace

// A plugin that bounds its polling by the world's clock (ABI version 2's
// now_ns) and checks it against ns_left passes; in the simulated world its
// run is the same, byte for byte, on an idle and a busy host. Its version-1
// build (no now_ns) runs too, and the version-2 build passes in the thread
// world, where the clock is the host's.
TEST(SimCli, APluginPollingByTheWorldsClockRunsTheSameOnABusyHost) {
  SKIP_WITHOUT_FIBERS();
  const uint64_t seed = std::random_device{}() % 1000000;
  std::printf("[ seed ] clock_poll verify seed %llu\n", static_cast<unsigned long long>(seed));
  auto run = [&](const char* so, const char* world, int cases) {
    return testutil::run_command(fmt::format("{} verify --world {} --impl plugin:{}/{} --cases {} --seed {} "
                                             "--progress off 2>&1",
                                             COLLCHECK_BIN, world, PLUGIN_DIR, so, cases, seed),
                                 600);
  };
  const auto idle = run("clock_poll.so", "sim", 200);
  testutil::CommandResult busy;
  {
    BusyHost host(8);
    busy = run("clock_poll.so", "sim", 200);
  }
  EXPECT_EQ(idle.code, 0) << idle.out;
  EXPECT_EQ(without_timing(idle.out), without_timing(busy.out)) << "the busy host's run differs";
  const auto v1 = run("clock_poll_v1.so", "sim", 100);
  EXPECT_EQ(v1.code, 0) << v1.out;
  const auto threads = run("clock_poll.so", "threads", 40);
  EXPECT_EQ(threads.code, 0) << threads.out;
}
