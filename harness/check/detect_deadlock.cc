// Ranks waiting on each other in a cycle.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

// Ranks blocked on each other in a cycle (each in a call the others have not reached or left).
std::optional<Diagnosis> deadlock(const Dumps& dumps) {
  std::map<int, int> waits_on;
  for (const auto& d : dumps)
    if (d.blocked_on.blocked) waits_on[d.rank] = d.blocked_on.peer;
  for (const auto& [start, _] : waits_on) {
    std::vector<int> path{start};
    int cur = start;
    while (waits_on.count(cur)) {
      cur = waits_on[cur];
      auto it = std::find(path.begin(), path.end(), cur);
      if (it != path.end()) {
        Diagnosis dg;
        dg.kind = DiagnosisKind::Deadlock;
        dg.ranks.assign(it, path.end());
        std::sort(dg.ranks.begin(), dg.ranks.end());
        std::string chain;
        for (auto x = it; x != path.end(); ++x) chain += fmt::format("rank {} -> ", *x);
        dg.text = fmt::format("a wait-for cycle: {}rank {}", chain, cur);
        return dg;
      }
      path.push_back(cur);
    }
  }
  return std::nullopt;
}

}  // namespace collcheck::detect
