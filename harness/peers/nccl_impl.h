// ncclAllReduce as an implementation (--impl / --against nccl).
#pragma once

#include <optional>
#include <string>

namespace collcheck {

// Why a forked child cannot run NCCL (--isolate on is refused).
inline constexpr const char* kNcclNoFork =
    "CUDA does not survive fork() once initialised, and collcheck initialises it to find the GPUs; run nccl without "
    "--isolate (a hung NCCL call is aborted at its deadline)";

// Whether this build has NCCL compiled in.
bool nccl_compiled_in();
// "NCCL 2.28.9" of the library linked, or why there is none.
std::string nccl_version_string();
// Why NCCL cannot run here (no GPU: the CUDA error of cudaGetDeviceCount; not
// compiled in), or nullopt when it can.
std::optional<std::string> nccl_unavailable();
// GPUs visible to this process (0 when unavailable).
int nccl_device_count();

// The MPI world gives each process the GPU of its node-local rank, and NCCL
// refuses two ranks on one GPU: a node with more processes than GPUs is bad
// input. Returns the error (naming the host, the counts and the cap), or
// nullopt when every process has a GPU of its own.
inline std::optional<std::string> nccl_mpi_gpu_cap_error(const std::string& host, int procs_on_host, int gpus_on_host) {
  if (procs_on_host <= gpus_on_host) return std::nullopt;
  return "--world mpi with nccl needs one GPU per process: " + std::to_string(procs_on_host) + " processes on " + host +
         " share " + std::to_string(gpus_on_host) + " GPU(s); start at most " + std::to_string(gpus_on_host) +
         " per node (mpirun --map-by ppr:" + std::to_string(gpus_on_host) + ":node), or pass --max-ranks";
}

}  // namespace collcheck
