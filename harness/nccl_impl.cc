// ncclAllReduce as an implementation: all 12 dtypes, all 6 ops (ncclAvg, and
// ncclRedOpCreatePreMulSum with a host-immediate scalar of the element type).
//
// One GPU per rank:
// - thread world: ranks are threads of this process; ncclCommInitAll makes the
//   p communicators at once (p <= visible GPUs; NCCL 2.28 refuses two ranks
//   on one GPU);
// - MPI world: one process per rank, GPU = node-local rank modulo the visible
//   GPUs; rank 0 of the case's ranks makes the unique id and MPI_Bcast's it.
// Buffers live on the device, framed by guard bytes that must come back
// untouched; results are copied to the host for checking. Each call polls its
// stream until the call's deadline; past it the communicator is aborted
// (ncclCommAbort), so a hung NCCL call never hangs the harness.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "harness/implementation.h"
#include "harness/mpi_world.h"
#include "harness/nccl_impl.h"

namespace collcheck {

namespace {

constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xA5;
constexpr unsigned char kPoison = 0xEB;

std::string cuda_error(const char* what, cudaError_t e) {
  return fmt::format("{}: CUDA error {} ({}: {})", what, static_cast<int>(e), cudaGetErrorName(e),
                     cudaGetErrorString(e));
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(cuda_error(what, e));
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(fmt::format("{}: NCCL error {} ({}){}", what, static_cast<int>(r), ncclGetErrorString(r),
                                         ncclGetLastError(nullptr) ? fmt::format(": {}", ncclGetLastError(nullptr)) : ""));
}

ncclRedOp_t builtin_op(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Prod: return ncclProd;
    case RedOp::Max: return ncclMax;
    case RedOp::Min: return ncclMin;
    case RedOp::Avg: return ncclAvg;
    case RedOp::PreMulSum: break;
  }
  return ncclSum;
}

int local_rank(int rank) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return rank;
}

// Device memory of one buffer, framed by guards.
struct DeviceBuffer {
  std::byte* base = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    cuda_check(cudaMalloc(&base, n + 2 * kGuard), "cudaMalloc");
    cuda_check(cudaMemset(base, kGuardByte, n + 2 * kGuard), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(base); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() const { return base + kGuard; }
  // Throws when a guard byte changed.
  void check_guards(const char* which) const {
    std::vector<unsigned char> g(kGuard);
    for (int side = 0; side < 2; ++side) {
      cuda_check(cudaMemcpy(g.data(), side ? base + kGuard + bytes : base, kGuard, cudaMemcpyDeviceToHost),
                 "cudaMemcpy (guards)");
      for (size_t i = 0; i < kGuard; ++i)
        if (g[i] != kGuardByte)
          throw std::runtime_error(fmt::format("ncclAllReduce wrote outside its {} buffer on the device: {}", which,
                                               side ? fmt::format("byte {} past the end", i)
                                                    : fmt::format("{} byte(s) before it", kGuard - i)));
    }
  }
};

class NcclImplementation final : public Implementation {
 public:
  const std::string& name() const override { return name_; }

  std::optional<std::string> unsupported(DType t, RedOp) const override {
    if (t == DType::Fp8E4M3 || t == DType::Fp8E5M2) {
      int dev = 0;
      cudaDeviceProp prop{};
      if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess && prop.major < 9)
        return fmt::format("NCCL's fp8 needs sm_90 or newer; GPU {} is sm_{}{}", dev, prop.major, prop.minor);
    }
    return std::nullopt;
  }

  void reset(int p) const override {
    std::lock_guard lk(mu_);
    auto it = comms_.find(p);
    if (it == comms_.end()) return;
    for (ncclComm_t c : it->second)
      if (c) ncclCommAbort(c);
    comms_.erase(it);
  }

  void all_reduce(const AllReduceArgs& a) const override {
    const int p = a.links.size(), r = a.links.rank();
    const int dev = device_of(r);
    cuda_check(cudaSetDevice(dev), "cudaSetDevice");
    ncclComm_t comm = comm_for(p, r);
    const size_t bytes = a.count * dtype_size(a.red.dtype);
    const bool inplace = a.send == a.recv;
    DeviceBuffer drecv(bytes);
    std::unique_ptr<DeviceBuffer> dsend;
    if (inplace) {
      cuda_check(cudaMemcpy(drecv.data(), a.send, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (input)");
    } else {
      dsend = std::make_unique<DeviceBuffer>(bytes);
      cuda_check(cudaMemcpy(dsend->data(), a.send, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (input)");
      cuda_check(cudaMemset(drecv.data(), kPoison, bytes), "cudaMemset (poison)");
    }
    cudaStream_t stream;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    struct StreamGuard {
      cudaStream_t s;
      ~StreamGuard() { cudaStreamDestroy(s); }
    } sg{stream};
    const auto type = static_cast<ncclDataType_t>(a.red.dtype);  // NCCL's numbering (impl/dtype.h)
    ncclRedOp_t op = builtin_op(a.red.op);
    uint64_t scalar = a.red.scalar_bits;  // little-endian: the element's bytes come first
    if (a.red.op == RedOp::PreMulSum)
      nccl_check(ncclRedOpCreatePreMulSum(&op, &scalar, type, ncclScalarHostImmediate, comm), "ncclRedOpCreatePreMulSum");
    const ncclResult_t rr = ncclAllReduce(inplace ? static_cast<const void*>(drecv.data()) : dsend->data(),
                                          drecv.data(), a.count, type, op, comm, stream);
    if (rr != ncclSuccess) {
      if (a.red.op == RedOp::PreMulSum) ncclRedOpDestroy(op, comm);
      nccl_check(rr, "ncclAllReduce");
    }
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) throw std::runtime_error(cuda_error("cudaStreamQuery", q));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        reset(p);
        nccl_check(async, "ncclAllReduce (asynchronous error)");
      }
      if (Clock::now() >= a.deadline) {
        reset(p);  // aborts the communicators, which ends the kernel
        throw LinkTimeout(fmt::format("rank {}: ncclAllReduce did not complete by the deadline; communicator aborted",
                                      r),
                          r, -1, a.tag, LinkDirection::Recv);
      }
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (a.red.op == RedOp::PreMulSum) ncclRedOpDestroy(op, comm);
    cuda_check(cudaMemcpy(a.recv, drecv.data(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (result)");
    drecv.check_guards("receive");
    if (dsend) dsend->check_guards("send");
  }

 private:
  int device_of(int rank) const {
    const int n = nccl_device_count();
    if (n <= 0) throw std::runtime_error(*nccl_unavailable());
    if (MpiWorld::get()) return local_rank(MpiWorld::get()->rank()) % n;
    if (rank >= n)
      throw std::runtime_error(fmt::format("rank {} has no GPU of its own ({} visible; NCCL needs one GPU per rank)",
                                           rank, n));
    return rank;
  }

  ncclComm_t comm_for(int p, int r) const {
    std::unique_lock lk(mu_);
    auto& v = comms_[p];
    if (v.empty()) {
      v.assign(static_cast<size_t>(p), nullptr);
      if (MpiWorld* w = MpiWorld::get()) {
        ncclUniqueId id;
        if (r == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, w->comm(p));
        nccl_check(ncclCommInitRank(&v[static_cast<size_t>(r)], p, id, r), "ncclCommInitRank");
      } else {
        std::vector<int> devs(static_cast<size_t>(p));
        for (int i = 0; i < p; ++i) devs[static_cast<size_t>(i)] = i;
        const ncclResult_t rc = ncclCommInitAll(v.data(), p, devs.data());
        if (rc != ncclSuccess) {
          comms_.erase(p);
          nccl_check(rc, "ncclCommInitAll");
        }
      }
    }
    return v[static_cast<size_t>(r)];
  }

  std::string name_ = "nccl";
  mutable std::mutex mu_;
  mutable std::map<int, std::vector<ncclComm_t>> comms_;
};

}  // namespace

bool nccl_compiled_in() { return true; }

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
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
