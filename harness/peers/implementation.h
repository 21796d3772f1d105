// The implementations under test, behind one small interface: the reference
// algorithms (impl/algorithms/), external plugins loaded through the C ABI of
// harness/include/collcheck/plugin.h, and the collective libraries: Gloo
// (gloo_impl.cc), MPI_Allreduce (mpi_impl.cc) and NCCL (nccl_impl.cc). Every
// one of them can be the thing under test (--impl) or a peer (--against).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/world/world.h"
#include "impl/algorithm.h"

namespace collcheck {

class MpiWorld;

// A documented way in which an implementation's results differ from NCCL's
// semantics. Results it explains are accepted only if they are one of the
// outcomes it lists for that element, and are counted and reported: a known
// deviation is checked, never silently accepted.
struct Deviation {
  std::string name;  // "gloo-max-nan": short, stable, printed in reports
  std::string doc;   // one sentence: what differs and why
  // Every outcome the deviation allows for one element, given each rank's input.
  std::vector<uint64_t> (*outcomes)(const Reduction& red, std::span<const uint64_t> values);
  // Optional: whether `got` is one of those outcomes, where that is much
  // cheaper to answer than listing them (a large set, or a fast common case).
  bool (*admits)(const Reduction& red, std::span<const uint64_t> values, uint64_t got) = nullptr;
  // Whether `got` is an outcome this deviation allows for the element.
  bool allows(const Reduction& red, std::span<const uint64_t> values, uint64_t got) const;
};

// The outcomes of a float max/min written with a comparison (std::max, a > b ?
// a : b) instead of fmax/fmin, in some reduction order. Without a NaN among the
// inputs: NCCL's result, or where it is zero, a zero of either sign from the
// inputs (of two equal values the select keeps one by position). With a NaN:
// any input, since a NaN operand makes the comparison false, so the select
// either keeps the NaN or drops every value reduced before it.
std::vector<uint64_t> compare_select_outcomes(const Reduction& red, std::span<const uint64_t> values);

// Every result a binary `step(left, right)` can give when it reduces `values`
// in any binary tree with any operand order (p <= 8; exact, by dynamic
// programming over subsets), for checking a library's own documented op.
// For more than 8 values: the closure of the values under the step, a sound
// superset that stays small for selecting steps (max/min), the only users.
std::vector<uint64_t> tree_outcomes(std::span<const uint64_t> values, uint64_t (*step)(DType, uint64_t, uint64_t),
                                    DType t);

// Appends NCCL's result for one element where it is one bit pattern (the
// oracle's bitwise case): every deviation's outcome set includes it.
void add_nccl_result(const Reduction& red, std::span<const uint64_t> values, std::vector<uint64_t>& out);


class Implementation {
 public:
  virtual ~Implementation() = default;
  // As given to --impl: "ring", "plugin:/path/libx.so".
  virtual const std::string& name() const = 0;
  // One rank's part of one all-reduce. Throws (with context) on failure.
  virtual void all_reduce(const AllReduceArgs& a) const = 0;
  // Whether a failure can leave the process unusable (a crash or a call that
  // never returns): such implementations run in an isolated child process.
  virtual bool untrusted() const { return false; }
  // Why it cannot reduce (dtype, op), or nullopt when it can. Verify draws only
  // supported pairs and prints every skipped one with this reason.
  virtual std::optional<std::string> unsupported(DType, RedOp) const { return std::nullopt; }
  // Why it cannot run in a world of this kind, or nullopt when it can.
  virtual std::optional<std::string> unsupported_world(WorldKind) const { return std::nullopt; }
  // Why this implementation runs as threads when no --world was given, where
  // the reference algorithms run in the simulated world (nullopt: it runs
  // there too). A plugin may keep thread-local state or make its ranks wait
  // on each other with its own primitives: fibers of one thread would share
  // the one and deadlock on the other. One that declares neither
  // (collcheck_plugin_fiber_safe) runs in the simulated world.
  virtual std::optional<std::string> threads_by_default() const { return std::nullopt; }
  // Why its cases must not run side by side in one process (verify --jobs),
  // or nullopt: what runs on threads of its own, and plugins, which may keep
  // state from one case to the next.
  virtual std::optional<std::string> state_across_cases() const { return threads_by_default(); }
  // Why it cannot run on this machine at all (a GPU library without a GPU, or
  // a build without it), or nullopt. A run that needs it is then skipped
  // (exit 77), never passed.
  virtual std::optional<std::string> unavailable() const { return std::nullopt; }
  // Why it cannot run in a forked child (--isolate on), or nullopt.
  virtual std::optional<std::string> no_fork() const { return std::nullopt; }
  // Whether a process that has run it can fork a child that runs it afresh
  // (verify's fresh-process replay). A library with process-wide state that
  // a fork shares (Gloo's epoll loop, MPI, CUDA) cannot: the child's sockets
  // land in the parent's epoll set.
  virtual bool forks_cleanly_after_use() const { return !no_fork().has_value(); }
  // Before a run in this world (the MPI world, or nullptr for threads), called
  // on every process: lowers
  // `max_ranks` to what this machine can hold (saying why through `say`), or
  // throws ImplementationError for a placement it cannot run (a node with
  // more MPI processes than devices).
  virtual void fit_world(MpiWorld* /*mpi: nullptr for threads*/, int& /*max_ranks*/,
                         const std::function<void(const std::string&)>& /*say*/) const {}
  // The reduction order the implementation declares for element `index`
  // (impl/algorithm.h: ReductionOrderFn), appended to `postfix`; false when it
  // declares none. `nodes`: node_map() of the call's links, or empty (one node).
  virtual bool reduction_order(int /*p*/, size_t /*count*/, size_t /*index*/, std::span<const int> /*nodes*/,
                               std::vector<int>& /*postfix*/) const {
    return false;
  }
  // Whether it follows the links' nodes (Links::node_of): verify then runs its
  // cases on nodes of every size (Case::ranks_per_node).
  virtual bool follows_nodes() const { return false; }
  // The name of a documented finding when the implementation may reduce in
  // another order in place than out of place, or nullopt (the two placements
  // must then give the same bits). With it, inplace-equals-out-of-place holds
  // where the two differ only if each result is right (the oracle or the
  // deviation), and the differing elements are counted under this name.
  virtual std::optional<std::string> placement_reorders() const { return std::nullopt; }
  // The documented deviation from NCCL semantics for (dtype, op), if any.
  virtual const Deviation* deviation(DType, RedOp) const { return nullptr; }
  // After a failed or abandoned call in a world of p ranks: drop any per-world
  // state (Gloo contexts, NCCL communicators) so the next call starts clean.
  // Called when no rank of that world is inside a call.
  virtual void reset(int /*p*/) const {}
};

using ImplPtr = std::shared_ptr<const Implementation>;

// Thrown for an --impl value that cannot be used: an unknown name, or a plugin
// that cannot be loaded (missing file or symbol, wrong ABI version).
class ImplementationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An implementation by its --impl name: "ring", "gloo:ring", "mpi", "plugin:/x.so"
// (harness/peer_registry.h lists the kinds and defines these three).
ImplPtr make_implementation(std::string_view spec);
// A comma list of specs (for --against).
std::vector<ImplPtr> make_implementations(std::string_view specs);
std::string implementation_choices();

// A reference algorithm by name (nullptr if unknown).
ImplPtr reference_implementation(std::string_view name);

// MPI_Allreduce of the MPI library (mpi_impl.cc); runs only in the MPI world.
ImplPtr make_mpi_implementation();
// ncclAllReduce (nccl_impl.cc); throws ImplementationError when built without NCCL.
ImplPtr make_nccl_implementation();

// Loads a plugin (see plugin.h). Throws ImplementationError naming the problem.
ImplPtr load_plugin(const std::string& path);

}  // namespace collcheck
