// The peer registry: one row per kind of implementation that --impl and
// --against can name. make_implementation, the lists of choices in errors and
// help, and `collcheck --version` all read this table, so a new peer library
// is its own file plus one row here (and one line in harness/CMakeLists.txt).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/peers/implementation.h"

namespace collcheck {

struct PeerKind {
  // How --impl names it: "mpi", or a pattern such as "gloo:<algorithm>".
  std::string spec;
  // Makes the implementation `spec` names, or returns nullptr when `spec` is
  // not of this kind. Throws ImplementationError when it is of this kind but
  // cannot be made (an unknown Gloo algorithm, a plugin that does not load).
  std::function<ImplPtr(std::string_view spec)> make;
  // The names it accepts, for "allowed: ..." lists: "mpi", "gloo:{ring, ...}".
  std::function<std::string()> choices;
  // One line for --version: what it is, which version, where it runs.
  std::function<std::string()> describe;
};

// The kinds as --impl help writes them: "ring, tree, dbtree, gloo:<algorithm>,
// mpi, nccl, or plugin:<path.so>".
std::string implementation_specs();
// The registered kinds, in the order they are tried and listed.
const std::vector<PeerKind>& peer_kinds();
// Adds a kind (tests add a throwaway peer this way; built-ins are rows in
// peer_registry.cc). Not thread-safe: register before any world runs.
void register_peer_kind(PeerKind k);
// Removes the kind registered with this spec (for tests); true if it existed.
bool unregister_peer_kind(std::string_view spec);

}  // namespace collcheck
