// NCCL's communicators as the implementation uses them: errors, versions and
// their findings, and polling with deadlines (nccl_comm.h).
#include "harness/peers/nccl_comm.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "impl/element_ops.h"

namespace collcheck::nccl_detail {

std::string cuda_error(const char* what, cudaError_t e) {
  return fmt::format("{}: CUDA error {} ({}: {})", what, static_cast<int>(e), cudaGetErrorName(e),
                     cudaGetErrorString(e));
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(cuda_error(what, e));
}

// ncclGetLastError keeps the text of an earlier error until a new one replaces
// it, so it is quoted only when it changed since `before`.
std::string nccl_error(ncclResult_t r, const char* what, ncclComm_t comm, const std::string& before) {
  const char* last = ncclGetLastError(comm);
  const std::string detail = last && *last && before != last ? fmt::format(": {}", last) : "";
  return fmt::format("{}: NCCL error {} ({}){}", what, static_cast<int>(r), ncclGetErrorString(r), detail);
}
std::string last_error(ncclComm_t comm) {
  const char* s = ncclGetLastError(comm);
  return s ? s : "";
}

int nccl_version_code() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

// NCCL 2.28.9 findings (README, Findings), keyed to the versions that have them.
// onerank.cu guards fp8 with a __CUDA_ARCH__ test that is false in host code, so
// at p = 1 fp8 avg and premulsum return ncclInvalidArgument; unchanged in 2.30.
bool has_p1_fp8_premul_finding(int v) { return v >= 22800 && v < 23100; }
// NVIDIA/nccl#1950, fixed in 2.29.7: the p = 1 scaling kernel splits the work
// with floor division, so for premulsum or float avg above 16 KiB with
// count = 1 (mod 4) the last elements are left unwritten.
bool has_issue_1950(int v) { return v > 0 && v < 22907; }

bool is_premul_op(DType t, RedOp op) { return op == RedOp::PreMulSum || (op == RedOp::Avg && dtype_is_float(t)); }

// The outcomes of #1950 for one element: NCCL's result, or the element left
// unwritten: the poison pattern (out-of-place) or the input (in-place). Without
// the element's index this accepts an unwritten element anywhere in such a
// call, not only in the tail; it applies to p = 1 only.
std::vector<uint64_t> issue_1950_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  std::vector<uint64_t> out;
  if (values.size() != 1) return out;
  out.push_back(premul_bits(red, values[0]));
  out.push_back(values[0]);
  uint64_t poison = 0;
  std::memset(&poison, kPoison, dtype_size(red.dtype));
  out.push_back(poison);
  return out;
}
const Deviation kIssue1950{
    "nccl-1950-p1-tail",
    "known NCCL finding (NVIDIA/nccl#1950, fixed in 2.29.7): the last elements of a p = 1 premulsum or float avg "
    "above 16 KiB with count = 1 (mod 4) are left unwritten",
    &issue_1950_outcomes};

int local_rank(int rank) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return rank;
}

void release(Comms& c) {
  for (RankComm& rc : c.ranks) {
    cudaSetDevice(rc.device);
    if (rc.comm) ncclCommAbort(rc.comm);  // ends a hung kernel; frees the communicator
    if (rc.stream) cudaStreamDestroy(rc.stream);
    if (rc.mem) cudaFree(rc.mem);
    rc = {};
  }
}

// Waits for every communicator's non-blocking init (or call) to leave ncclInProgress.
void wait_ready(std::vector<RankComm>& ranks, Deadline deadline, const char* what) {
  for (RankComm& rc : ranks) {
    ncclResult_t st = ncclInProgress;
    poll_until(
        [&] {
          const ncclResult_t q = ncclCommGetAsyncError(rc.comm, &st);
          if (q != ncclSuccess) st = q;
          return st != ncclInProgress;
        },
        deadline, nullptr, what);
    if (st != ncclSuccess) throw std::runtime_error(nccl_error(st, what, rc.comm, ""));
  }
}

void finish_rank(RankComm& rc) {
  cuda_check(cudaSetDevice(rc.device), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&rc.stream, cudaStreamNonBlocking), "cudaStreamCreate");
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

void mpi_poll(MPI_Request& req, Deadline deadline, const std::string& what) {
  poll_until(
      [&] {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        return done != 0;
      },
      deadline, nullptr, what);
}

}  // namespace collcheck::nccl_detail
