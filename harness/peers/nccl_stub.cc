// Built when CMake finds no CUDA toolkit or NCCL (and in sanitizer builds):
// a run with `--impl nccl` is then skipped with this reason, and so are GPU tests.
#include <fmt/format.h>

#include "harness/peers/implementation.h"
#include "harness/peers/nccl_impl.h"

namespace collcheck {

namespace {
constexpr const char* kWhy = COLLCHECK_NO_NCCL_REASON;
}

bool nccl_compiled_in() { return false; }
std::string nccl_version_string() { return fmt::format("not compiled in ({})", kWhy); }
std::optional<std::string> nccl_unavailable() { return fmt::format("NCCL is not compiled in: {}", kWhy); }
int nccl_device_count() { return 0; }

namespace {
// `--impl nccl` in a build without it: a run that needs it is skipped with the reason.
class NcclNotCompiledIn final : public Implementation {
 public:
  const std::string& name() const override { return name_; }
  std::optional<std::string> unavailable() const override { return nccl_unavailable(); }
  std::optional<std::string> no_fork() const override { return std::string(kNcclNoFork); }
  void all_reduce(const AllReduceArgs&) const override {
    throw ImplementationError(fmt::format("nccl is not compiled into this build: {}", kWhy));
  }

 private:
  std::string name_ = "nccl";
};
}  // namespace

ImplPtr make_nccl_implementation() { return std::make_shared<NcclNotCompiledIn>(); }

}  // namespace collcheck
