#include "harness/implementation.h"

#include <fmt/format.h>

namespace collcheck {

namespace {

class ReferenceImplementation final : public Implementation {
 public:
  explicit ReferenceImplementation(const AlgorithmInfo& a) : algo_(a), name_(a.name) {}
  const std::string& name() const override { return name_; }
  void all_reduce(const AllReduceArgs& a) const override { algo_.run(a); }

 private:
  const AlgorithmInfo& algo_;
  std::string name_;
};

}  // namespace

ImplPtr reference_implementation(std::string_view name) {
  const AlgorithmInfo* a = find_algorithm(name);
  if (!a) return nullptr;
  return std::make_shared<ReferenceImplementation>(*a);
}

std::string implementation_choices() { return algorithm_choices() + ", plugin:<path.so>"; }

ImplPtr make_implementation(std::string_view spec) {
  constexpr std::string_view kPlugin = "plugin:";
  if (spec.substr(0, kPlugin.size()) == kPlugin) {
    const std::string path(spec.substr(kPlugin.size()));
    if (path.empty()) throw ImplementationError("--impl plugin: needs a path, as in plugin:/path/libmine.so");
    return load_plugin(path);
  }
  if (auto impl = reference_implementation(spec)) return impl;
  throw ImplementationError(fmt::format("unknown implementation '{}'; allowed: {}", spec, implementation_choices()));
}

}  // namespace collcheck
