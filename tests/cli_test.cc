// The collcheck binary as a user runs it: exit codes and messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <cstdio>
#include <string>

#include "tests/run_command.h"

namespace {
using Result = testutil::CommandResult;
Result run(const std::string& args) { return testutil::collcheck(args); }
size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }
}  // namespace

TEST(Cli, SmallSweepPassesWithZeroWrong) {
  auto r = run("sweep --algo all -d float32,int8,fp8_e4m3 -o sum,avg --ranks 3 -b 64 -e 4K -f 8 -n 2 -w 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("busbw(GB/s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#wrong"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fp8_e4m3"), std::string::npos);
  EXPECT_NE(r.out.find("dbtree"), std::string::npos);
  EXPECT_NE(r.out.find("peer: memcpy"), std::string::npos);
}

// With ranks as threads the ring's rows stand against its memory-traffic
// bound: 5(p-1)N bytes over memcpy's read+write rate (twice its copy rate),
// both printed. The numbers are checked against each other, not timed.
TEST(Cli, SweepPrintsTheRingsMemoryTrafficBound) {
  auto r = run("sweep --algo ring,tree -d float32 -o sum --ranks 3 -b 1M -e 1M -n 2 -w 1");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto at = r.out.find("# memory-traffic bound of the ring: 5(p-1)N bytes read and written over p = 3 ranks");
  ASSERT_NE(at, std::string::npos) << r.out;
  double copied = 0, traffic = 0;
  const auto rate = r.out.find("GB/s copied", at);
  ASSERT_NE(rate, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + r.out.rfind("): ", rate) + 3, "%lf GB/s copied, %lf GB/s of traffic", &copied, &traffic), 2)
      << r.out;
  EXPECT_NEAR(traffic, 2 * copied, 0.002) << r.out;
  const auto row = r.out.find("ring   float32       sum      1048576 B:", at);
  ASSERT_NE(row, std::string::npos) << r.out;
  double t = 0, bound = 0, pct = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + row + 40, "%lf us, bound %lf us: %lf %%", &t, &bound, &pct), 3) << r.out;
  EXPECT_NEAR(bound, 5.0 * 2 * 1048576 / (traffic * 1e9) * 1e6, 0.01 * bound + 0.1) << r.out;
  // Each printed number is rounded to 0.1: the ratio of the rounded time and
  // bound can differ from the printed percentage by the percentage's own
  // rounding plus the ratio's relative error from the other two roundings.
  const double ratio = 100 * bound / t;
  EXPECT_NEAR(pct, ratio, 0.05 + ratio * (0.05 / bound + 0.05 / t) + 1e-9) << r.out;
  EXPECT_EQ(r.out.find("tree   float32       sum      1048576 B:"), std::string::npos) << "only the ring has the bound";
}

TEST(Cli, InPlaceAndCountAndNoCheck) {
  auto r = run("sweep --inplace -N 1001 -d bfloat16 -o prod --ranks 5 -n 1 -w 0");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("in-place"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1001"), std::string::npos) << r.out;
  auto nc = run("sweep -c 0 -b 1K -e 1K -n 1 -w 0");
  EXPECT_EQ(nc.code, 0) << nc.out;
  EXPECT_NE(nc.out.find("N/A"), std::string::npos) << nc.out;
}

struct BadInput {
  const char* args;
  const char* must_mention;
};
void PrintTo(const BadInput& b, std::ostream* os) { *os << "collcheck " << b.args; }

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ExitsTwoWithOneLineNamingTheField) {
  const auto& p = GetParam();
  auto r = run(p.args);
  EXPECT_EQ(r.code, 2) << p.args << "\n" << r.out;
  EXPECT_EQ(lines(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find(p.must_mention), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Out of bounds"), std::string::npos) << "no table may be printed for bad input";
}

INSTANTIATE_TEST_SUITE_P(
    All, CliBadInput,
    ::testing::Values(BadInput{"sweep -d float128", "unknown dtype 'float128' for -d/--datatype; allowed: int8,"},
                      BadInput{"sweep -d float32,nope", "unknown dtype 'nope'"},
                      BadInput{"sweep -o xor", "unknown op 'xor' for -o/--op; allowed: sum, prod, max, min, avg, premulsum"},
                      BadInput{"sweep --algo butterfly", "--algo: unknown implementation 'butterfly'; allowed: ring, tree, dbtree, hierarchical, gloo:"},
                      BadInput{"sweep -N -5", "-N/--count must be a non-negative integer, got '-5'"},
                      BadInput{"sweep -b -1K", "-b/--minbytes must be a non-negative size"},
                      BadInput{"sweep -e 12Q", "-e/--maxbytes must be a size"},
                      BadInput{"sweep -b 2M -e 1M", "must not exceed"},
                      BadInput{"sweep --ranks 0", "--ranks must be between 1 and"},
                      BadInput{"sweep --ranks -3", "--ranks must be between 1 and"},
                      BadInput{"sweep --ranks 100000", "--ranks must be between 1 and 512"},
                      BadInput{"sweep -c 2", "-c/--check must be 0 or 1"},
                      BadInput{"sweep -n 0", "-n/--iters must be >= 1"},
                      BadInput{"sweep -f 1", "-f/--stepfactor must be > 1"},
                      BadInput{"sweep --data weird", "unknown --data 'weird'"},
                      BadInput{"sweep --ranks many", "--ranks"},
                      BadInput{"sweep --frobnicate", "frobnicate"},
                      BadInput{"run", "command is required"},
                      BadInput{"run --mode loud -- true", "--mode: 'loud'; allowed: guarded, unguarded"},
                      BadInput{"run --deadline 0 -- true", "--deadline: 0 s; allowed: above 0"},
                      BadInput{"run --time-limit -5 -- true", "--time-limit: -5 s; allowed: above 0"},
                      BadInput{"run --mpi-lib /nonexistent/lib.so -- true", "--mpi-lib: /nonexistent/lib.so is not a file"},
                      BadInput{"run --dir /proc/version -- true", "--dir: /proc/version exists and is not a directory"},
                      BadInput{"run --emit-max-count lots -- true", "--emit-max-count"},
                      BadInput{"", "no subcommand given"},
                      BadInput{"explode", "explode"}),
    [](const ::testing::TestParamInfo<BadInput>& i) { return "case" + std::to_string(i.index); });

TEST(Cli, HelpAndVersionExitZero) {
  auto h = run("sweep --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--datatype"), std::string::npos);
  auto v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("collcheck "), std::string::npos) << v.out;
}

// CUDA does not survive fork() once initialised: nccl in a forked child would
// fail every case. Refused as bad input, with or without a GPU here.
TEST(Cli, NcclRefusesIsolateOn) {
  for (const char* args : {"verify --impl nccl --isolate on --cases 1", "verify --impl ring --against nccl --isolate on --cases 1"}) {
    auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--isolate on cannot be used with nccl"), std::string::npos) << r.out;
  }
}

// Long replay tokens travel in a file: --replay @FILE runs the same case.
TEST(Cli, ReplayTokenFromAFile) {
  const std::string path = testing::TempDir() + "collcheck-token-test.token";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("v1:p2:float32:sum:s1:n3:oop:x:3f800000.0.40400000/0.0.3f800000\n", f);
  std::fclose(f);
  auto r = run("verify --impl ring --replay @" + path);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("replaying one case"), std::string::npos) << r.out;
  auto missing = run("verify --impl ring --replay @" + path + ".missing");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find(".missing: cannot read a file holding a replay token: No such file or directory"),
            std::string::npos)
      << missing.out;
}
