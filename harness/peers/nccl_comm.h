// What nccl_impl.cc shares with nccl_comm.cc: a rank's communicator and its
// buffers, and the helpers around them. Not for use outside the NCCL peer.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/peers/comm_groups.h"
#include "harness/peers/implementation.h"

namespace collcheck::nccl_detail {

constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xA5;
constexpr unsigned char kPoison = 0xEB;

// One rank's communicator with its stream and its device buffers:
// guard | send | guard | recv | guard, grown as calls need.
struct RankComm {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::byte* mem = nullptr;
  size_t capacity = 0;  // bytes of send and of recv
  std::byte* send() const { return mem + kGuard; }
  std::byte* recv() const { return mem + 2 * kGuard + capacity; }
};

// This process's communicators of one world size.
struct Comms {
  std::vector<RankComm> ranks;  // thread world: all p; MPI world: this rank's only
};

// Polls until `done` says so, the deadline passes, or the group failed.
template <typename Done>
void poll_until(Done&& done, Deadline deadline, const CommGroups<Comms>::Call* call, const std::string& what) {
  for (int spins = 0;; ++spins) {
    if (done()) return;
    if (call && call->failed())
      throw std::runtime_error(fmt::format("{}: abandoned, another rank of this world failed: {}", what, call->why()));
    if (Clock::now() >= deadline) throw LinkTimeout(fmt::format("{} did not complete by the deadline", what), -1, -1, 0, LinkDirection::Recv);
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The unique id and rank 0's status, sent as one message.
struct IdMessage {
  int status = 0;  // ncclResult_t of ncclGetUniqueId on rank 0
  ncclUniqueId id{};
};

std::string cuda_error(const char* what, cudaError_t e);
void cuda_check(cudaError_t e, const char* what);
// ncclGetLastError keeps the text of an earlier error until a new one replaces
// it, so it is quoted only when it changed since `before`.
std::string nccl_error(ncclResult_t r, const char* what, ncclComm_t comm, const std::string& before);
std::string last_error(ncclComm_t comm);
int nccl_version_code();
// NCCL 2.28.9 findings (docs/peers.md), keyed to the versions that have them.
bool has_p1_fp8_premul_finding(int v);
bool has_issue_1950(int v);
bool is_premul_op(DType t, RedOp op);
extern const Deviation kIssue1950;
int local_rank(int rank);
void release(Comms& c);
// Waits for every communicator's non-blocking init (or call) to leave ncclInProgress.
void wait_ready(std::vector<RankComm>& ranks, Deadline deadline, const char* what);
void finish_rank(RankComm& rc);
ncclConfig_t nonblocking_config();
void mpi_poll(MPI_Request& req, Deadline deadline, const std::string& what);

}  // namespace collcheck::nccl_detail
