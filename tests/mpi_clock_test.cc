// The MPI world's one time origin (harness/world/mpi_clock.h).
//
// Each process used to take its own origin as it left a barrier; under load
// they left it up to 15 ms apart, a healthy edge looked slow in every call,
// and CI once named it in place of the slow one (examples/bugs/slow_nic.yaml
// under mpirun: "the link from rank 3 to rank 0 is slow", the slow one being
// 2 -> 3). On a busy host a receive then "completed" up to 9 ms before its
// send was posted. Causality is what these tests check.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

#include "harness/report/diagnosis_text.h"
#include "harness/world/mpi_clock.h"
#include "tests/run_command.h"

namespace collcheck {
namespace {

// Rank 0's clock is this process's plus `offset`; each ping-pong's two legs
// take random times, one of them long (a busy host): the estimate is off by
// at most its uncertainty, whatever the sign and size of the offset.
TEST(MpiClock, TheShortestRoundTripGivesTheOffsetToWithinHalfOfIt) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu (fresh)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t offset = std::uniform_int_distribution<int64_t>(-4'000'000'000'000, 4'000'000'000'000)(rng);
    std::uniform_int_distribution<int64_t> leg(1'000, 50'000), stall(0, 20'000'000);
    std::vector<ClockSample> samples(1 + rng() % 16);
    int64_t t = std::uniform_int_distribution<int64_t>(0, 1'000'000'000'000)(rng), shortest = INT64_MAX;
    for (auto& s : samples) {
      const int64_t out = leg(rng) + (rng() % 3 == 0 ? stall(rng) : 0), back = leg(rng) + (rng() % 3 == 0 ? stall(rng) : 0);
      s.sent_ns = t;
      s.peer_ns = t + out + offset;  // rank 0 reads its clock as the ping arrives
      s.back_ns = t + out + back;
      shortest = std::min(shortest, out + back);
      t += out + back + leg(rng);
    }
    const ClockOffset o = offset_from_samples(samples);
    ASSERT_EQ(o.uncertainty_ns, (shortest + 1) / 2) << "trial " << trial;
    ASSERT_LE(std::llabs(o.offset_ns - offset), o.uncertainty_ns) << "trial " << trial << ": offset " << offset;
  }
}

TEST(MpiClock, NoSampleIsAnError) { EXPECT_THROW(offset_from_samples({}), std::logic_error); }

// A clock is named by the kernel's boot and the process's time namespace:
// two processes with both the same read one CLOCK_MONOTONIC.
TEST(MpiClock, AProcessNamesItsClockByItsBootAndTimeNamespace) {
  const std::string id = clock_identity();
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id") >> std::ws, boot);
  if (boot.empty()) {
    EXPECT_EQ(id.substr(0, 10), "no-boot-id");
  } else {
    EXPECT_EQ(id.substr(0, boot.size()), boot) << id;
  }
  struct stat st {};
  if (::stat("/proc/self/ns/time", &st) == 0) {
    EXPECT_NE(id.find(fmt::format(" time-ns {}", static_cast<unsigned long long>(st.st_ino))), std::string::npos) << id;
  } else {
    std::printf("note: /proc/self/ns/time cannot be read here (a kernel before 5.6): the boot id alone names the clock\n");
    EXPECT_EQ(id.find("time-ns"), std::string::npos) << id;
  }
}

// The timeline says whose clock its times are on, and how well the other
// processes' were aligned to it; one process's run says nothing of clocks.
TEST(MpiClock, TheTimelineSaysWhoseClockItsTimesAreOn) {
  std::vector<RankDump> dumps(4);
  for (int r = 0; r < 4; ++r) {
    dumps[r].rank = r;
    dumps[r].size = 4;
  }
  const std::string one_process = "timeline (seconds from the start; B began, D done, W waited):";
  EXPECT_EQ(format_timeline(dumps).substr(0, one_process.size()), one_process);
  for (auto& d : dumps) d.clock_aligned = "shared clock";
  EXPECT_NE(format_timeline(dumps).find("seconds from the start on rank 0's clock, which every process reads; "),
            std::string::npos)
      << format_timeline(dumps);
  dumps[2].clock_aligned = dumps[3].clock_aligned = "ping-pong";
  dumps[2].clock_uncertainty_s = 0.004;
  dumps[3].clock_uncertainty_s = 0.0015;
  EXPECT_NE(format_timeline(dumps).find("on rank 0's clock; ranks 2, 3 aligned to it by ping-pong, to within 4.000 ms; "),
            std::string::npos)
      << format_timeline(dumps);
}

using Key = std::tuple<int, int, uint64_t, uint64_t>;  // src, dst, tag, ordinal

// examples/bugs/slow_nic.yaml under mpirun, 4 processes beside 8 busy ones,
// with its dumps kept: every receive completes after its send was posted, to
// within the two ranks' stated uncertainty (0 on one host's shared clock), and
// every dump says how its clock was aligned.
void every_transfer_is_causal(const std::string& how, const std::string& aligned) {
  const std::string dir = testing::TempDir() + "mpi-clock-" + how;
  std::filesystem::remove_all(dir);
  std::string cmd = testutil::mpirun(4) + " replay " SOURCE_DIR "/examples/bugs/slow_nic.yaml --world mpi --dump-dir " + dir;
  if (how == "estimate") cmd = "env COLLCHECK_MPI_CLOCK=estimate " + cmd.replace(cmd.find("mpirun "), 7, "mpirun -x COLLCHECK_MPI_CLOCK ");
  testutil::CommandResult r;
  {
    testutil::BusyHost host(8);
    r = testutil::run_command(cmd, 120);
  }
  ASSERT_NE(r.code, 124) << "timed out:\n" << r.out;
  std::map<Key, nlohmann::json> sends, recvs;
  std::map<int, double> uncertainty;
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    const auto j = nlohmann::json::parse(testutil::slurp(f.path().string()));
    ++files;
    ASSERT_TRUE(j.contains("clock")) << f.path() << ": no clock note";
    const int rank = j["rank"];
    EXPECT_EQ(j["clock"]["aligned"], rank == 0 ? "shared clock" : aligned) << f.path();  // rank 0's is the origin
    uncertainty[rank] = j["clock"]["uncertainty_s"];
    if (how == "shared") {
      EXPECT_EQ(uncertainty[rank], 0.0) << f.path();
    }
    for (const auto& t : j["transfers"])
      (t["send"].get<bool>() ? sends : recvs)[Key{t["src"], t["dst"], t["tag"], t["ordinal"]}] = t;
  }
  ASSERT_EQ(files, 4) << r.out;
  int pairs = 0;
  double closest = 1e9;
  for (const auto& [k, s] : sends) {
    const auto it = recvs.find(k);
    if (it == recvs.end() || it->second["t_completed"].get<double>() < 0) continue;
    ++pairs;
    const double gap = it->second["t_completed"].get<double>() - s["t_posted"].get<double>();
    const double slack = uncertainty[std::get<0>(k)] + uncertainty[std::get<1>(k)] + 1e-6;
    closest = std::min(closest, gap + slack);
    EXPECT_GE(gap, -slack) << "the receive " << std::get<1>(k) << " <- " << std::get<0>(k) << " (ordinal "
                           << std::get<3>(k) << ") completed " << -gap * 1e3 << " ms before its send was posted";
  }
  std::printf("%s: %d transfers, the closest a receive came to its send's post: %.3f ms (uncertainty included); "
              "rank 1's uncertainty %.3f ms\n",
              how.c_str(), pairs, closest * 1e3, uncertainty[1] * 1e3);
  EXPECT_GE(pairs, 4 * 18) << r.out;  // 3 calls, 6 steps, 4 edges
  EXPECT_NE(r.out.find("-> holds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(how == "shared" ? "seconds from the start on rank 0's clock, which every process reads"
                                       : "on rank 0's clock; ranks 1-3 aligned to it by ping-pong, to within "),
            std::string::npos)
      << r.out;
}

// A value the variable does not know is bad input: every process says so and
// exits 2, and nothing runs.
TEST(MpiClock, AnUnknownClockModeIsExit2NamingTheVariable) {
  std::string cmd = testutil::mpirun(4) + " replay " SOURCE_DIR "/examples/bugs/swapped_buckets.yaml --world mpi";
  cmd = "env COLLCHECK_MPI_CLOCK=estmate " + cmd.replace(cmd.find("mpirun "), 7, "mpirun -x COLLCHECK_MPI_CLOCK ");
  const auto r = testutil::run_command(cmd, 120);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("COLLCHECK_MPI_CLOCK: 'estmate': allowed: auto"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("diagnosis"), std::string::npos) << r.out;
}

TEST(MpiClock, OneHostsProcessesShareRankZerosOriginExactlyOnABusyHost) {
  every_transfer_is_causal("shared", "shared clock");
}

TEST(MpiClock, ThePingPongEstimateKeepsEveryTransferCausalOnABusyHost) {
  every_transfer_is_causal("estimate", "ping-pong");
}

}  // namespace
}  // namespace collcheck
