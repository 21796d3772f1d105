// Shrinking's rank steps (the first stage of CaseShrinks, shrink.cc), and
// the rank helpers its later stages share. Internal to properties/.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <vector>

#include "properties/case.h"

namespace collcheck {

// `b` with ranks `keep` (in order) of every call: seeded inputs stay seeded,
// as a window on the original world.
Case ranks_kept(const Case& b, const std::vector<int>& keep);
// The ranks first .. first + n - 1 of `b`; `b` without rank r.
Case with_ranks(const Case& b, int first, int n);
Case without_rank(const Case& b, int r);

// Fewer ranks, lazily: one, p/2, then every prefix of the ranks, then each
// rank left out; on simulated nodes also the removals that keep a one-rank
// second node, a partial last node kept whole, each whole node left out,
// and smaller nodes. `b` must outlive it.
class RankShrinks {
 public:
  explicit RankShrinks(const Case& b) : b_(b) {}
  rc::Maybe<Case> next();

 private:
  const Case& b_;
  size_t i_ = 0;
  int nodes_tried_ = 0;  // the smaller-node candidates given so far
};

}  // namespace collcheck
