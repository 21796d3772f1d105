// The peers under mpirun and on the GPU: NCCL (or its skip without one), Open
// MPI and Gloo as verified implementations and as peers of the sweep (peers_test).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <gloo/types.h>

#include <cstdlib>
#include <algorithm>

#include "harness/peers/gloo_impl.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/nccl_impl.h"
#include "properties/properties.h"
#include "properties/verify.h"
#include "tests/peers_test_util.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

TEST(Nccl, VersionIsPrinted) {
  const auto r = testutil::collcheck("--version");
  EXPECT_EQ(r.code, 0);
  if (nccl_compiled_in()) {
    EXPECT_NE(r.out.find("ncclAllReduce: NCCL 2."), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("ncclAllReduce: not compiled in"), std::string::npos) << r.out;
  }
}

TEST(Nccl, EveryDtypeAndOpOnTheGpu) {
  if (auto why = nccl_unavailable()) GTEST_SKIP() << "no GPU for NCCL: " << *why;
  auto impl = make_implementation("nccl");
  CaseRunner runner(RunConfig{impl, {reference_implementation("ring")}, 10000ms, {}});
  const int p = std::min(nccl_device_count(), 8);
  for (DType t : kAllDTypes)
    for (RedOp op : kAllOps) {
      if (auto why = impl->unsupported(t, op)) {
        std::printf("[ skipped ] nccl %s/%s: %s\n", std::string(dtype_name(t)).c_str(), std::string(op_name(op)).c_str(),
                    why->c_str());
        continue;
      }
      for (DataClass d : {DataClass::Exact, DataClass::Random}) {
        Case c = seeded(p, t, op, 1000, d, 42);
        if (op == RedOp::PreMulSum) c.scalar = 0.5;
        const CaseOutcome o = runner.run(c);
        EXPECT_TRUE(o.ok) << case_summary(c) << ": " << o.failure.property << "\n" << o.failure.detail;
      }
    }
}

TEST(Nccl, WithoutAGpuVerifySkipsWithTheCudaError) {
  const auto r = testutil::collcheck("verify --impl nccl --against ring --cases 10");
  if (!nccl_unavailable()) {
    EXPECT_EQ(r.code, 0) << r.out;
    return;
  }
  EXPECT_EQ(r.code, 77) << r.out;
  EXPECT_NE(r.out.find("SKIPPED (not a pass)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(*nccl_unavailable()), std::string::npos) << r.out;
  std::printf("[ note    ] nccl skipped as expected here: %s\n", nccl_unavailable()->c_str());
}

// sweep in the MPI world: every row is timed and checked with one rank per
// process; the other ranks' outputs travel to rank 0 for the check (if they
// did not, rank 0 would see them differ and count wrong elements).
TEST(MpiWorld, SweepTimesAndChecksEveryRow) {
  const auto r = testutil::run_command(
      testutil::mpirun(3) + " sweep --world mpi --algo all -d float32,int8,bfloat16 -o sum,max -b 1K -e 64K -n 3 -w 1", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# collcheck sweep: 3 ranks as MPI processes"), std::string::npos) << r.out;
  // 4 algorithms x 3 dtypes x 2 ops x 3 sizes; one host is one node (MPI_Comm_split_type).
  EXPECT_NE(r.out.find("# 72 rows, 0 wrong elements"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# nodes: 1 (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED))"), std::string::npos) << r.out;
  const auto bad = testutil::run_command(testutil::mpirun(2) + " sweep --world mpi --ranks 3", 120);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--ranks is 3, but mpirun started 2 processes"), std::string::npos) << bad.out;
}

// sweep --against: the peers timed on the same rows, and each algorithm's
// busbw over theirs. Under mpirun the MPI peer and Gloo's; with ranks as threads, Gloo's.
TEST(MpiWorld, SweepAgainstMpiPrintsTheRatioOnEveryRow) {
  auto r = testutil::run_command(testutil::mpirun(3) + " sweep --world mpi --algo ring --against mpi -d float32,int8 "
                                                       "-b 4K -e 64K -n 3 -w 1", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# against the peers, same run: busbw(algo) / busbw(peer)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs mpi"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# 8 rows, 0 wrong elements"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# peers' rows: 0 wrong elements"), std::string::npos) << r.out;
  // Open MPI's AVX int8 sum saturates: its documented deviation, checked element by element
  // (the mixed model: the default decision may pick an algorithm whose steps take both paths).
  EXPECT_NE(r.out.find("as the documented deviation ompi-avx-saturating-int8-mixed allows"), std::string::npos) << r.out;
}

// Gloo under mpirun: one rank per process, its contexts connected through a
// store on collcheck's MPI links (each set() an all-gather), TCP on 127.0.0.1
// as every rank is on this node. Verified against the ring, and timed beside
// Open MPI in one sweep.
TEST(MpiWorld, GlooRunsUnderMpirunAsAVerifiedImplementationAndAsAPeer) {
  auto r = testutil::run_command(testutil::mpirun(3) + " verify --world mpi --impl gloo:ring_chunked --against ring "
                                                       "--cases 120 --seed 4", 600);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: 120 cases"), std::string::npos) << r.out;
  r = testutil::run_command(testutil::mpirun(2) + " sweep --world mpi --algo ring --against mpi,gloo:ring -d float32 "
                                                  "-b 4K -e 64K -f 16 -n 3 -w 1", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vs gloo:ring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs mpi"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# peers' rows: 0 wrong elements"), std::string::npos) << r.out;
}

TEST(GlooPeer, SweepAgainstGlooTimesTheSameRowsAndSaysWhatItCannotReduce) {
  auto r = testutil::collcheck("sweep --algo ring --against gloo:ring_chunked -d float32,bfloat16 --ranks 3 -b 4K -e 16K "
                               "-f 4 -n 3 -w 1", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gloo:ring_chunked   skipped: Gloo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs gloo:ring_chunked"), std::string::npos) << r.out;
  // A number on the float32 rows, "skipped" on the bfloat16 ones.
  const size_t block = r.out.find("# against the peers");
  ASSERT_NE(block, std::string::npos) << r.out;
  const std::string tail = r.out.substr(block);
  EXPECT_NE(tail.find("skipped"), std::string::npos) << tail;
  EXPECT_NE(tail.find("float32"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("failed"), std::string::npos) << tail;
  EXPECT_NE(r.out.find("# 8 rows, 0 wrong elements"), std::string::npos) << r.out;
  r = testutil::collcheck("sweep --against mpi -b 1K -e 1K", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--against mpi: cannot run in the thread world"), std::string::npos) << r.out;
  r = testutil::collcheck("sweep --algo ring --against ring -b 1K -e 1K", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--against ring: already swept"), std::string::npos) << r.out;
}

// The hierarchical algorithm in the MPI world: on the host's one node (from
// MPI_Comm_split_type) and on simulated nodes, in verify (each case draws its
// nodes) and in the sweep with a slow inter-node link.
TEST(MpiWorld, HierarchicalOnTheHostsNodesAndOnSimulatedOnes) {
  auto r = testutil::run_command(testutil::mpirun(4) + " verify --world mpi --impl hierarchical --cases 150 --seed 3", 600);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: 150 cases"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes: "), std::string::npos) << r.out;
  r = testutil::run_command(testutil::mpirun(4) + " sweep --world mpi --algo ring,hierarchical --ranks-per-node 2 "
                                                   "--inter-node-latency-us 300 -b 4K -e 64K -n 3 -w 1", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# nodes: 2 (--ranks-per-node 2, simulated)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ring against hierarchical, same run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# 4 rows, 0 wrong elements"), std::string::npos) << r.out;
}

// A rank whose process dies: it names itself, the case and its replay token
// before it goes, and Open MPI ends the job; nothing hangs.
TEST(MpiWorld, ARankThatDiesSaysWhoAndWhatAndTheJobEnds) {
  const auto r = testutil::run_command(testutil::mpirun(2) + " verify --world mpi --impl plugin:" PLUGIN_DIR
                                                   "/crashes.so --cases 300 --seed 1",
                                       120);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_NE(r.out.find("collcheck: rank 1 of 2 (pid "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("died of signal SEGV while running verify case p=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(replay it with --replay v1:p2:"), std::string::npos) << r.out;
}
