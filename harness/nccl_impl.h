// ncclAllReduce as an implementation (--impl / --against nccl).
#pragma once

#include <optional>
#include <string>

namespace collcheck {

// Whether this build has NCCL compiled in.
bool nccl_compiled_in();
// "NCCL 2.28.9" of the library linked, or why there is none.
std::string nccl_version_string();
// Why NCCL cannot run here (no GPU: the CUDA error of cudaGetDeviceCount; not
// compiled in), or nullopt when it can.
std::optional<std::string> nccl_unavailable();
// GPUs visible to this process (0 when unavailable).
int nccl_device_count();

}  // namespace collcheck
