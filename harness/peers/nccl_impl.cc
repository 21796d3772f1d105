// ncclAllReduce as an implementation: all 12 dtypes, all 6 ops (ncclAvg, and
// ncclRedOpCreatePreMulSum with a host-immediate scalar of the element type).
//
// One GPU per rank:
// - thread world: ranks are threads of this process; the p communicators are
//   made together (ncclGroupStart, one ncclCommInitRankConfig per GPU,
//   ncclGroupEnd); p <= visible GPUs (NCCL 2.28 refuses two ranks on one GPU);
// - MPI world: one process per rank, GPU = node-local rank; main.cc refuses a
//   world with more processes on a node than it has GPUs. Rank 0 makes the
//   unique id and broadcasts it, with its status, on a communicator of its own.
//
// Nothing waits without a deadline. Communicators are non-blocking
// (config.blocking = 0): init and ncclAllReduce return at once (ncclInProgress)
// and are polled with ncclCommGetAsyncError; the stream is polled with
// cudaStreamQuery; MPI exchanges are non-blocking and polled. Past the call's
// deadline the rank marks its group failed (comm_groups.h) and throws; the last
// rank to leave the call aborts the communicators, once, which ends the kernel.
//
// Every copy and memset is on the communicator's own stream, in order with the
// all-reduce (a non-blocking stream does not wait for the legacy default
// stream, and cudaMemset / pageable host-to-device copies may return early).
// Buffers live on the device, framed by guard bytes that must come back
// untouched; they are allocated per communicator and grown, not per call.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "harness/peers/comm_groups.h"
#include "harness/peers/implementation.h"
#include "harness/world/mpi_world.h"
#include "harness/peers/nccl_impl.h"
#include "harness/peers/nccl_comm.h"
#include "harness/peers/nccl_types.h"
#include "impl/element_ops.h"

namespace collcheck {

namespace {

using namespace nccl_detail;

class NcclImplementation final : public Implementation {
 public:
  NcclImplementation() : version_(nccl_version_code()) {}

  const std::string& name() const override { return name_; }

  std::optional<std::string> unsupported(DType t, RedOp op) const override {
    const bool fp8 = t == DType::Fp8E4M3 || t == DType::Fp8E5M2;
    if (fp8) {
      int dev = 0;
      cudaDeviceProp prop{};
      if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess && prop.major < 9)
        return fmt::format("NCCL's fp8 needs sm_90 or newer; GPU {} is sm_{}{}", dev, prop.major, prop.minor);
      // With one GPU in the thread world every case is p = 1.
      // COLLCHECK_NCCL_STRICT=1 runs them anyway (to see whether a version still has the bug).
      if (is_premul_op(t, op) && has_p1_fp8_premul_finding(version_) && !mpi_running() && nccl_device_count() == 1 &&
          !std::getenv("COLLCHECK_NCCL_STRICT"))
        return fmt::format("known NCCL finding nccl-p1-fp8-premul ({}): at p = 1 fp8 avg and premulsum return "
                           "ncclInvalidArgument, and this machine has one GPU",
                           nccl_version_string());
    }
    return std::nullopt;
  }

  const Deviation* deviation(DType t, RedOp op) const override {
    if (is_premul_op(t, op) && has_issue_1950(version_)) return &kIssue1950;
    return nullptr;
  }

  void reset(int p) const override { groups_.reset(p, "reset after a failed call"); }

  std::optional<std::string> unavailable() const override { return nccl_unavailable(); }
  std::optional<std::string> unsupported_world(WorldKind w) const override {
    if (w == WorldKind::Sim) return std::string("nccl ") + kNeedsOwnThreads;
    return std::nullopt;
  }
  std::optional<std::string> threads_by_default() const override { return unsupported_world(WorldKind::Sim); }
  std::optional<std::string> no_fork() const override { return std::string(kNcclNoFork); }

  // One GPU per rank: NCCL 2.28 refuses two ranks on one GPU. The thread world
  // caps p at the visible GPUs; the MPI world gives each process the GPU of
  // its node-local rank, so a node with more processes than GPUs is an error.
  void fit_world(MpiWorld* mpi, int& max_ranks, const std::function<void(const std::string&)>& say) const override {
    const int gpus = nccl_device_count();
    if (mpi) {
      MpiWorld& w = *mpi;
      const int on_node = w.processes_on_node(w.rank() < max_ranks);
      const auto err = nccl_mpi_gpu_cap_error(w.host(), on_node, gpus);
      const bool any = w.any_process(err.has_value());
      if (err) throw ImplementationError(*err);
      if (any) throw ImplementationError("--world mpi with nccl: another node has more processes than GPUs (see its message)");
    } else if (max_ranks > gpus) {
      say(fmt::format("note: {} visible GPU(s) and NCCL needs one per rank: p <= {} (NCCL 2.28 refuses two ranks on "
                      "one GPU)", gpus, gpus));
      max_ranks = gpus;
    }
  }

  void all_reduce(const AllReduceArgs& a) const override {
    const int p = a.links.size(), r = a.links.rank();
    // Under MPI the world's communicator comes with its links.
    MpiLinks* w = a.links.mpi();
    if (w) agree_on_groups(p, *w, a.deadline);
    auto call = groups_.enter(p, [&] { return w ? create_mpi(p, r, *w, a.deadline) : create_threads(p, a.deadline); });
    RankComm& rc = call.state().ranks[w ? 0 : static_cast<size_t>(r)];
    try {
      run(a, rc, call);
    } catch (const LinkTimeout& e) {
      call.fail(e.what());
      throw LinkTimeout(fmt::format("rank {}: {}; the communicators are aborted", r, e.what()), r, -1, a.tag,
                        LinkDirection::Recv);
    } catch (const std::exception& e) {
      call.fail(e.what());
      throw;
    }
  }

 private:
  void run(const AllReduceArgs& a, RankComm& rc, const CommGroups<Comms>::Call& call) const {
    const int p = a.links.size();
    cuda_check(cudaSetDevice(rc.device), "cudaSetDevice");
    const size_t bytes = a.count * dtype_size(a.red.dtype);
    if (!rc.mem || bytes > rc.capacity) {  // a first call of count 0 allocates too (the guards live there)
      if (rc.mem) cuda_check(cudaFree(rc.mem), "cudaFree");
      rc.mem = nullptr;
      rc.capacity = 0;
      // A multiple of 4 KiB, so that both buffers stay aligned (cudaMalloc gives
      // 256 bytes) for NCCL's vector loads: an odd capacity made the receive
      // buffer misaligned and the kernel fault ("misaligned address") on the
      // first GPU run.
      const size_t cap = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
      cuda_check(cudaMalloc(&rc.mem, 2 * cap + 3 * kGuard), "cudaMalloc");
      rc.capacity = cap;
    }
    const bool inplace = a.send == a.recv;
    cudaStream_t s = rc.stream;
    // Guards around both buffers, then the input, then poison where NCCL must write.
    cuda_check(cudaMemsetAsync(rc.mem, kGuardByte, 2 * rc.capacity + 3 * kGuard, s), "cudaMemsetAsync (guards)");
    std::byte* in = inplace ? rc.recv() : rc.send();
    cuda_check(cudaMemcpyAsync(in, a.send, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (input)");
    if (!inplace) cuda_check(cudaMemsetAsync(rc.recv(), kPoison, bytes, s), "cudaMemsetAsync (poison)");

    const ncclDataType_t type = nccl_dtype(a.red.dtype);
    ncclRedOp_t op = nccl_builtin_op(a.red.op);
    uint64_t scalar = a.red.scalar_bits;  // little-endian: the element's bytes come first
    const std::string before = last_error(rc.comm);
    struct OpGuard {  // the premulsum op is destroyed on every path while the communicator lives
      ncclRedOp_t op;
      ncclComm_t comm;
      const CommGroups<Comms>::Call& call;
      bool made = false;
      ~OpGuard() {
        if (made && !call.failed()) ncclRedOpDestroy(op, comm);
      }
    } guard{op, rc.comm, call};
    if (a.red.op == RedOp::PreMulSum) {
      const ncclResult_t q = ncclRedOpCreatePreMulSum(&guard.op, &scalar, type, ncclScalarHostImmediate, rc.comm);
      if (q != ncclSuccess) throw std::runtime_error(nccl_error(q, "ncclRedOpCreatePreMulSum", rc.comm, before));
      guard.made = true;
      op = guard.op;
    }
    const ncclResult_t rr = ncclAllReduce(in, rc.recv(), a.count, type, op, rc.comm, s);
    if (rr != ncclSuccess && rr != ncclInProgress) throw std::runtime_error(with_findings(
        nccl_error(rr, "ncclAllReduce", rc.comm, before), a, p));
    // Enqueued (non-blocking: the enqueue itself may still be in progress), then run.
    ncclResult_t st = ncclInProgress;
    poll_until(
        [&] {
          const ncclResult_t q = ncclCommGetAsyncError(rc.comm, &st);
          if (q != ncclSuccess) st = q;
          if (st != ncclSuccess && st != ncclInProgress)
            throw std::runtime_error(with_findings(nccl_error(st, "ncclAllReduce (asynchronous error)", rc.comm, before), a, p));
          if (st == ncclInProgress) return false;
          const cudaError_t e = cudaStreamQuery(s);
          if (e == cudaSuccess) return true;
          if (e != cudaErrorNotReady) throw std::runtime_error(cuda_error("cudaStreamQuery", e));
          return false;
        },
        a.deadline, &call, "ncclAllReduce");
    // The stream is idle now, so these copies start at once.
    cuda_check(cudaMemcpyAsync(a.recv, rc.recv(), bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (result)");
    // The guards right before and after both buffers (the rest of a larger
    // capacity is guard bytes too, from the memset above).
    const std::byte* regions[4] = {rc.send() - kGuard, rc.send() + bytes, rc.recv() - kGuard, rc.recv() + bytes};
    std::vector<unsigned char> g(4 * kGuard);
    for (int i = 0; i < 4; ++i)
      cuda_check(cudaMemcpyAsync(g.data() + i * kGuard, regions[i], kGuard, cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync (guards)");
    poll_until(
        [&] {
          const cudaError_t e = cudaStreamQuery(s);
          if (e == cudaSuccess) return true;
          if (e != cudaErrorNotReady) throw std::runtime_error(cuda_error("cudaStreamQuery", e));
          return false;
        },
        a.deadline, &call, "copying the result back");
    static const char* const kWhere[4] = {"before the send buffer", "past the end of the send buffer",
                                          "before the receive buffer", "past the end of the receive buffer"};
    for (int i = 0; i < 4; ++i)
      for (size_t k = 0; k < kGuard; ++k)
        if (g[i * kGuard + k] != kGuardByte)
          throw std::runtime_error(fmt::format("ncclAllReduce wrote outside its buffers on the device: {} (guard byte {})",
                                               kWhere[i], k));
  }

  // Names a known NCCL finding when the error is the one it predicts.
  std::string with_findings(std::string msg, const AllReduceArgs& a, int p) const {
    const bool fp8 = a.red.dtype == DType::Fp8E4M3 || a.red.dtype == DType::Fp8E5M2;
    if (p == 1 && fp8 && is_premul_op(a.red.dtype, a.red.op) && has_p1_fp8_premul_finding(version_))
      msg += " [known NCCL finding nccl-p1-fp8-premul: at p = 1 NCCL 2.28-2.30 reject fp8 avg and premulsum]";
    return msg;
  }

  int device_of(int rank) const {
    const int n = nccl_device_count();
    if (n <= 0) throw std::runtime_error(*nccl_unavailable());
    if (rank >= n)
      throw std::runtime_error(fmt::format("rank {} has no GPU of its own ({} visible; NCCL needs one GPU per rank)",
                                           rank, n));
    return rank;
  }

  std::unique_ptr<Comms> create_threads(int p, Deadline deadline) const {
    auto c = std::make_unique<Comms>();
    c->ranks.resize(static_cast<size_t>(p));
    try {
      ncclUniqueId id;
      ncclResult_t q = ncclGetUniqueId(&id);
      if (q != ncclSuccess) throw std::runtime_error(nccl_error(q, "ncclGetUniqueId", nullptr, ""));
      ncclConfig_t cfg = nonblocking_config();
      q = ncclGroupStart();
      if (q != ncclSuccess) throw std::runtime_error(nccl_error(q, "ncclGroupStart", nullptr, ""));
      for (int i = 0; i < p; ++i) {
        RankComm& rc = c->ranks[static_cast<size_t>(i)];
        rc.device = device_of(i);
        cuda_check(cudaSetDevice(rc.device), "cudaSetDevice");
        q = ncclCommInitRankConfig(&rc.comm, p, id, i, &cfg);
        if (q != ncclSuccess && q != ncclInProgress) {
          ncclGroupEnd();
          throw std::runtime_error(nccl_error(q, "ncclCommInitRankConfig", nullptr, ""));
        }
      }
      q = ncclGroupEnd();
      if (q != ncclSuccess && q != ncclInProgress) throw std::runtime_error(nccl_error(q, "ncclGroupEnd", nullptr, ""));
      wait_ready(c->ranks, deadline, "ncclCommInitRankConfig");
      for (RankComm& rc : c->ranks) finish_rank(rc);
    } catch (...) {
      release(*c);
      throw;
    }
    return c;
  }

  MPI_Comm id_comm(int p, MpiLinks& w) const {
    std::lock_guard lk(mpi_mu_);
    auto& c = id_comms_[p];
    if (c == MPI_COMM_NULL) MPI_Comm_dup(w.collectives(), &c);  // collective: every rank's first nccl call of world p
    return c;
  }

  // In the MPI world every rank agrees before communicators are (re)created:
  // if one rank has none (its first call, or its last call failed), all drop
  // theirs and create anew together.
  void agree_on_groups(int p, MpiLinks& links, Deadline deadline) const {
    const MPI_Comm comm = id_comm(p, links);
    int need = groups_.cached(p) ? 0 : 1, any = 0;
    MPI_Request req;
    MPI_Iallreduce(&need, &any, 1, MPI_INT, MPI_MAX, comm, &req);
    mpi_poll(req, deadline, "agreeing on NCCL communicators with the other ranks");
    if (any && !need) groups_.reset(p, "another rank re-creates its communicator");
  }

  std::unique_ptr<Comms> create_mpi(int p, int r, MpiLinks& w, Deadline deadline) const {
    auto c = std::make_unique<Comms>();
    c->ranks.resize(1);
    try {
      IdMessage m;
      if (r == 0) m.status = static_cast<int>(ncclGetUniqueId(&m.id));
      MPI_Request req;
      MPI_Ibcast(&m, sizeof m, MPI_BYTE, 0, id_comm(p, w), &req);
      mpi_poll(req, deadline, "receiving the NCCL unique id from rank 0");
      if (m.status != ncclSuccess)
        throw std::runtime_error(fmt::format("rank 0 could not make the NCCL unique id: NCCL error {} ({})", m.status,
                                             ncclGetErrorString(static_cast<ncclResult_t>(m.status))));
      RankComm& rc = c->ranks[0];
      const int n = nccl_device_count();
      if (n <= 0) throw std::runtime_error(*nccl_unavailable());
      rc.device = local_rank(r) % n;  // rank r of the world (its first p ranks); fit_world keeps local ranks < n
      cuda_check(cudaSetDevice(rc.device), "cudaSetDevice");
      ncclConfig_t cfg = nonblocking_config();
      const ncclResult_t q = ncclCommInitRankConfig(&rc.comm, p, m.id, r, &cfg);
      if (q != ncclSuccess && q != ncclInProgress) throw std::runtime_error(nccl_error(q, "ncclCommInitRankConfig", nullptr, ""));
      wait_ready(c->ranks, deadline, "ncclCommInitRankConfig");
      finish_rank(rc);
    } catch (...) {
      release(*c);
      throw;
    }
    return c;
  }

  std::string name_ = "nccl";
  int version_ = 0;
  mutable CommGroups<Comms> groups_{[](Comms& c) { release(c); }};
  mutable std::mutex mpi_mu_;
  mutable std::map<int, MPI_Comm> id_comms_;
};

}  // namespace

bool nccl_compiled_in() { return true; }

std::string nccl_version_string() {
  const int v = nccl_version_code();
  if (v == 0) return "NCCL (version unknown)";
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

std::optional<std::string> nccl_unavailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return cuda_error("cudaGetDeviceCount", e);
  if (n == 0) return "cudaGetDeviceCount: no CUDA device is visible";
  return std::nullopt;
}

int nccl_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

ImplPtr make_nccl_implementation() { return std::make_shared<NcclImplementation>(); }

}  // namespace collcheck
