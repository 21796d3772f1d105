// The implementations under test, behind one small interface: the reference
// algorithms (impl/algorithms/), and external plugins loaded through the C ABI
// of harness/include/collcheck/plugin.h. Later: NCCL, MPI_Allreduce, Gloo.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "impl/algorithm.h"

namespace collcheck {

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
};

using ImplPtr = std::shared_ptr<const Implementation>;

// Thrown for an --impl value that cannot be used: an unknown name, or a plugin
// that cannot be loaded (missing file or symbol, wrong ABI version).
class ImplementationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "ring", "tree", "dbtree" or "plugin:<path.so>".
ImplPtr make_implementation(std::string_view spec);
std::string implementation_choices();

// A reference algorithm by name (nullptr if unknown).
ImplPtr reference_implementation(std::string_view name);

// Loads a plugin (see plugin.h). Throws ImplementationError naming the problem.
ImplPtr load_plugin(const std::string& path);

}  // namespace collcheck
