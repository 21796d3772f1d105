// The MPI world's slow-link detector on a busy host (issue 33: "in the thread
// and MPI worlds, make the slow-link detector hold under load"). Real
// processes under mpirun while 8 other processes spin on the 2 cores: a rank
// that polls waits its turn behind them for 10-20 ms at a time, which made
// clean cases name a slow link before the stall meter read each rank
// thread's run-queue wait (harness/history/stall_meter.h).
//
// Measured on the 2-core host under 8 busy processes: the build before that
// change erred on a slow link in about 1 case in 100 (8 in about 900 cases);
// this one in 1 case of about 2,400 (a missing_wait case of seed
// 11536334950609931101 named edge 2 -> 1 at 18.9 ms while every other edge's
// median was 0: eager sends complete before their receive is posted). So the
// test allows at most one such error in its 200 cases: the build before
// fails that about 6 times in 10 (2 or more expected), this one about 3 times
// in 1,000. Each error is printed in full.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <regex>
#include <string>

#include "tests/run_command.h"

namespace {

TEST(DetectionMpi, NoSlowLinkFalseAlarmOrMissOnABusyHost) {
  const uint64_t seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  std::printf("seed %llu (fresh; rerun: mpirun -np 3 collcheck faults --world mpi --random 200 --seed %llu, with 8 "
              "busy processes)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  testutil::CommandResult r;
  {
    testutil::BusyHost host(8);
    r = testutil::run_command(testutil::mpirun(3) + " faults --world mpi --random 200 --progress off --seed " +
                                  std::to_string(seed),
                              600);
  }
  ASSERT_NE(r.code, 124) << "timed out:\n" << r.out;
  const std::smatch tally = [&] {
    std::smatch m;
    std::regex_search(r.out, m, std::regex(R"((\d+) of 200 cases diagnosed as injected)"));
    return m;
  }();
  ASSERT_FALSE(tally.empty()) << "no tally line:\n" << r.out;
  // The slow-link cases drawn: each must be named (no miss).
  std::smatch drawn;
  ASSERT_TRUE(std::regex_search(r.out, drawn, std::regex(R"(slow_link (\d+)/(\d+))"))) << r.out;
  std::printf("slow-link cases drawn: %s, named: %s\n", drawn[2].str().c_str(), drawn[1].str().c_str());
  EXPECT_GE(std::stoi(drawn[2]), 1) << "no slow-link case was drawn: the test checked no miss";
  // Every case that was not as injected, one line each. A slow link must
  // neither be missed nor named where none was injected. Whatever else a
  // host this busy does to a real-time run (a call past its 0.3 s
  // deadline, a run past its time limit twice) is printed, not asserted:
  // the simulated world is the one whose verdicts do not depend on the
  // host (SimCli.OneSeedOneOutputOnAnIdleAndABusyHost).
  const std::regex missed(R"(case (\d+): (\S+)[^\n]*?: ([^\n]*))");
  int slow_link_wrong = 0, other = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), missed); it != std::sregex_iterator(); ++it) {
    const std::string fault = (*it)[2], why = (*it)[3];
    if (fault == "slow_link" || why.find("slow_link") != std::string::npos) {
      ++slow_link_wrong;
      std::printf("slow-link error: case %s: %s: %s\n", (*it)[1].str().c_str(), fault.c_str(), why.c_str());
    } else {
      ++other;
      std::printf("not asserted on a host this busy: case %s: %s: %s\n", (*it)[1].str().c_str(), fault.c_str(),
                  why.c_str());
    }
  }
  std::printf("%s of 200 cases as injected; slow-link errors %d (at most 1 allowed); other errors %d\n",
              tally[1].str().c_str(), slow_link_wrong, other);
  if (slow_link_wrong > 0) std::printf("%s\n", r.out.c_str());
  EXPECT_LE(slow_link_wrong, 1) << "slow links missed or named where none was injected, on a busy host";
}

}  // namespace
