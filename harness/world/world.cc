#include "harness/world/world.h"

#include <fmt/format.h>

namespace collcheck {

bool WorldRun::ok() const {
  if (hung) return false;
  for (const auto& r : ranks)
    if (!r.ok) return false;
  return true;
}

std::string WorldRun::failures() const {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    if (!r.returned) {  // a world that knows more (which process, where) says so in error
      s += r.error.empty() ? fmt::format("rank {}: did not return before the run's limit\n", i) : r.error + "\n";
    } else if (!r.ok) {
      s += fmt::format("rank {}: {}\n", i, r.error);
    }
  }
  return s;
}

}  // namespace collcheck
