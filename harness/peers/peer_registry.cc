#include "harness/peers/peer_registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "collcheck/plugin.h"
#include "harness/peers/gloo_impl.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/nccl_impl.h"
#include "impl/algorithm.h"

namespace collcheck {
namespace {

// A kind named by a prefix and an argument: "gloo:ring", "plugin:/x.so".
std::function<ImplPtr(std::string_view)> with_prefix(std::string_view prefix,
                                                     std::function<ImplPtr(std::string_view)> make) {
  return [prefix = std::string(prefix), make = std::move(make)](std::string_view spec) -> ImplPtr {
    if (spec.substr(0, prefix.size()) != prefix) return nullptr;
    return make(spec.substr(prefix.size()));
  };
}

std::vector<PeerKind> built_ins() {
  std::vector<PeerKind> v;
  v.push_back({algorithm_choices(), [](std::string_view s) { return reference_implementation(s); },
               [] { return algorithm_choices(); },
               [] { return std::string("reference algorithms (CPU; threads or MPI world)"); }});
  v.push_back({"gloo:<algorithm>", with_prefix("gloo:", [](std::string_view a) { return make_gloo_implementation(a); }),
               [] { return "gloo:{" + gloo_algorithm_choices() + "}"; },
               [] {
                 return fmt::format("Gloo {} over TCP on 127.0.0.1 (threads): {}", gloo_version(),
                                    gloo_algorithm_choices());
               }});
  v.push_back({"mpi", [](std::string_view s) { return s == "mpi" ? make_mpi_implementation() : nullptr; },
               [] { return std::string("mpi"); },
               [] { return fmt::format("MPI_Allreduce of {} (MPI world)", mpi_library_version()); }});
  v.push_back({"nccl", [](std::string_view s) { return s == "nccl" ? make_nccl_implementation() : nullptr; },
               [] { return std::string("nccl"); },
               [] { return fmt::format("ncclAllReduce: {}", nccl_version_string()); }});
  v.push_back({"plugin:<path.so>", with_prefix("plugin:",
                                               [](std::string_view path) {
                                                 if (path.empty())
                                                   throw ImplementationError(
                                                       "--impl plugin: needs a path, as in plugin:/path/libmine.so");
                                                 return load_plugin(std::string(path));
                                               }),
               [] { return std::string("plugin:<path.so>"); },
               [] { return fmt::format("plugin ABI version {}", COLLCHECK_PLUGIN_ABI_VERSION); }});
  return v;
}

std::vector<PeerKind>& table() {
  static std::vector<PeerKind> t = built_ins();
  return t;
}

}  // namespace

const std::vector<PeerKind>& peer_kinds() { return table(); }

void register_peer_kind(PeerKind k) { table().push_back(std::move(k)); }

bool unregister_peer_kind(std::string_view spec) {
  return std::erase_if(table(), [&](const PeerKind& k) { return k.spec == spec; }) > 0;
}

std::string implementation_specs() {
  std::string s;
  const auto& kinds = peer_kinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    s += (i == 0 ? "" : i + 1 == kinds.size() ? ", or " : ", ") + kinds[i].spec;
  return s;
}

std::string implementation_choices() {
  std::string s;
  for (const auto& k : peer_kinds()) s += (s.empty() ? "" : ", ") + k.choices();
  return s;
}

ImplPtr make_implementation(std::string_view spec) {
  for (const auto& k : peer_kinds())
    if (auto impl = k.make(spec)) return impl;
  throw ImplementationError(fmt::format("unknown implementation '{}'; allowed: {}", spec, implementation_choices()));
}

std::vector<ImplPtr> make_implementations(std::string_view specs) {
  std::vector<ImplPtr> out;
  size_t start = 0;
  while (start <= specs.size()) {
    const size_t comma = specs.find(',', start);
    const auto one = specs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (one.empty()) throw ImplementationError(fmt::format("empty name in '{}'; allowed: {}", specs, implementation_choices()));
    out.push_back(make_implementation(one));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace collcheck
