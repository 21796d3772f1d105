// NCCL rules that need no GPU: one GPU per MPI process per node.
#include <gtest/gtest.h>

#include "harness/peers/nccl_impl.h"

using namespace collcheck;

TEST(NcclRules, MoreProcessesThanGpusOnANodeIsBadInput) {
  EXPECT_FALSE(nccl_mpi_gpu_cap_error("node1", 4, 8));
  EXPECT_FALSE(nccl_mpi_gpu_cap_error("node1", 8, 8));
  const auto e = nccl_mpi_gpu_cap_error("node1", 3, 2);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("3 processes on node1 share 2 GPU(s)"), std::string::npos) << *e;
  EXPECT_NE(e->find("at most 2 per node"), std::string::npos) << *e;
}
