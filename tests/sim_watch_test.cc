// The simulated world's watchdog (harness/world/sim_watch.h): a fiber that
// blocks the world's one thread ends the run with exit 3, not a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "harness/world/sim_world.h"
#include "tests/run_command.h"

using namespace collcheck;

// A plugin that declares its ranks may be fibers and blocks the world's one
// thread in the OS (tests/plugins/blocks_its_thread.cc: a barrier of its own)
// stops virtual time for good. `faults` runs it in process and hung there
// for good; now the watchdog ends it with exit 3 and says why and what to
// do. verify runs it in an isolated child, whose case then fails
// call-completes with the same words, sooner than the parent's backstop. As
// threads the plugin passes. A bad stall limit is a usage error.
TEST(SimCli, AFiberThatBlocksTheThreadEndsTheRunNotAHang) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const std::string so = std::string(PLUGIN_DIR) + "/blocks_its_thread.so";
  const std::string says = "without a switch (COLLCHECK_SIM_STALL_S=2)";
  auto timed = [](const std::string& cmd, int limit_s) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = testutil::run_command(cmd, limit_s);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ stall ] exit %d after %.1f s: %s\n", r.code, wall, cmd.c_str());
    EXPECT_LT(wall, 50.0) << "the plugin's own barrier gives up after 120 s: the watchdog must come first";
    return r;
  };
  const auto faults = timed(
      fmt::format("env COLLCHECK_SIM_STALL_S=2 {} faults --impl plugin:{} 2>&1", COLLCHECK_BIN, so), 100);
  EXPECT_EQ(faults.code, 3) << faults.out;
  for (const std::string& s : {says, std::string("collcheck_plugin_fiber_safe"), std::string("--world threads"),
                               std::string("No verdict (exit 3)")})
    EXPECT_NE(faults.out.find(s), std::string::npos) << s << "\n" << faults.out;

  const auto verify = timed(fmt::format("env COLLCHECK_SIM_STALL_S=2 {} verify --impl plugin:{} --progress off "
                                        "--replay v1:p2:float32:sum:s1:n3:oop:d:exact:1 2>&1",
                                        COLLCHECK_BIN, so),
                            100);
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find("FAIL: property call-completes"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find(says), std::string::npos) << verify.out;
  EXPECT_EQ(verify.out.find("no answer within"), std::string::npos) << "the backstop came first\n" << verify.out;

  const auto threads = testutil::run_command(
      fmt::format("{} verify --impl plugin:{} --world threads --cases 20 --seed 1 --progress off 2>&1", COLLCHECK_BIN, so),
      300);
  EXPECT_EQ(threads.code, 0) << threads.out;

  for (const char* bad : {"0", "soon", "-1", "1e9"}) {
    const auto u = testutil::run_command(
        fmt::format("env COLLCHECK_SIM_STALL_S={} {} verify --cases 2 --progress off 2>&1", bad, COLLCHECK_BIN), 60);
    EXPECT_EQ(u.code, 2) << bad << "\n" << u.out;
    EXPECT_NE(u.out.find("COLLCHECK_SIM_STALL_S"), std::string::npos) << u.out;
    EXPECT_NE(u.out.find("from 0.1 to 86400"), std::string::npos) << u.out;
  }
}

// The fault table of a plugin that declares fibers (the kit's control ring,
// a correct ring written against the plugin ABI) is the reference ring's, row
// for row: every nemesis detected and named in the same virtual time, in a
// world that runs the plugin's ranks as fibers; and the same on a second run.
TEST(SimCli, AFiberDeclaredPluginGetsTheRingsFaultTable) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const std::string so = std::string(MUTANT_DIR) + "/control_ring.so";
  auto table = [](const std::string& args) {
    const auto r = testutil::run_command(fmt::format("{} faults {} 2>&1", COLLCHECK_BIN, args), 300);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("ranks as fibers in virtual time"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << args << "\n" << r.out;
    return r.out.substr(r.out.find('\n') + 1);  // all but the header, which names the implementation
  };
  const std::string ring = table(""), plugin = table("--impl plugin:" + so);
  EXPECT_EQ(plugin, ring);
  EXPECT_EQ(table("--impl plugin:" + so), plugin);
}

// A soak's process runs the reference units' simulated worlds itself, so its
// watchdog thread is running when it forks a plugin's isolated child for a
// verify unit. The child inherits none of that thread, and must start its
// own (pthread_atfork in harness/world/sim_watch.cc): a child that believed
// its parent's thread was watching hung until the parent's backstop (75 s,
// "no answer ... killed") instead of failing call-completes after the stall
// limit, saying why.
TEST(SimCli, ASoaksPluginChildWatchesItsOwnWorldAfterTheParentRanOne) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const std::string dir = testing::TempDir() + "/sim-watch-soak";
  testutil::run_command(fmt::format("rm -rf {0} && mkdir -p {0}", dir), 30);
  {
    std::FILE* f = std::fopen((dir + "/plan.yaml").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "implementations: [ring, \"plugin:%s/blocks_its_thread.so\"]\nranks: {min: 2, max: 4}\n"
                    "workloads:\n  verify: {weight: 1, cases: 3}\n", PLUGIN_DIR);
    std::fclose(f);
  }
  // Seed 5: unit 1 is the ring's verify unit, unit 6 the plugin's.
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = testutil::run_command(
      fmt::format("env COLLCHECK_SIM_STALL_S=2 {1} soak --plan {0}/plan.yaml --world sim --duration 8 --seed 5 "
                  "--results {0}/r.jsonl --progress off 2>&1",
                  dir, COLLCHECK_BIN),
      200);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ stall ] soak exit %d after %.1f s\n", r.code, wall);
  EXPECT_EQ(r.code, 1) << r.out;
  const auto units = testutil::run_command(fmt::format("cat {}/r.jsonl", dir), 30).out;
  const size_t plugin = units.find("\"impl\":\"plugin:");
  ASSERT_NE(plugin, std::string::npos) << "seed 5 no longer draws a plugin unit\n" << units;
  const size_t ring = units.find("\"impl\":\"ring\"");
  ASSERT_LT(ring, plugin) << "seed 5 no longer runs a ring unit (a simulated world in the soak's process) first\n"
                          << units;
  const size_t line = units.rfind('\n', plugin) + 1;  // npos + 1 is 0: the first line
  const std::string unit = units.substr(line, units.find('\n', plugin) - line);
  EXPECT_NE(unit.find("\"property\":\"call-completes\""), std::string::npos) << unit;
  EXPECT_NE(unit.find("without a switch (COLLCHECK_SIM_STALL_S=2)"), std::string::npos) << unit;
  EXPECT_EQ(unit.find("no answer within"), std::string::npos) << "the parent's backstop came first\n" << unit;
  EXPECT_LT(wall, 60.0);
}
