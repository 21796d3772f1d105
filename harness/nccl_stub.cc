// Built when CMake finds no CUDA toolkit or NCCL (and in sanitizer builds):
// `--impl nccl` then fails with this reason, and GPU tests skip with it.
#include <fmt/format.h>

#include "harness/implementation.h"
#include "harness/nccl_impl.h"

namespace collcheck {

namespace {
constexpr const char* kWhy = COLLCHECK_NO_NCCL_REASON;
}

bool nccl_compiled_in() { return false; }
std::string nccl_version_string() { return fmt::format("not compiled in ({})", kWhy); }
std::optional<std::string> nccl_unavailable() { return fmt::format("NCCL is not compiled in: {}", kWhy); }
int nccl_device_count() { return 0; }

ImplPtr make_nccl_implementation() {
  throw ImplementationError(fmt::format("nccl is not compiled into this build: {}", kWhy));
}

}  // namespace collcheck
