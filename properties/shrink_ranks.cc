// Shrinking's rank steps (shrink_ranks.h).
#include "properties/shrink_ranks.h"

#include <algorithm>

namespace collcheck {

namespace {
// Keeps ranks `keep` (in order) of one call.
void keep_ranks(Case& x, const std::vector<int>& keep) {
  if (x.explicit_values) {
    std::vector<std::vector<uint64_t>> v;
    for (int r : keep) v.push_back(x.values[static_cast<size_t>(r)]);
    x.values = std::move(v);
  } else {
    std::vector<int> map;
    for (int r : keep) map.push_back(x.seed_ranks.empty() ? r : x.seed_ranks[static_cast<size_t>(r)]);
    if (!x.seed_p) x.seed_p = x.p;
    x.seed_ranks = std::move(map);
  }
  x.p = static_cast<int>(keep.size());
}
}  // namespace

Case ranks_kept(const Case& b, const std::vector<int>& keep) {
  Case c = b;
  keep_ranks(c, keep);
  for (auto& t : c.then) keep_ranks(t, keep);
  return c;
}

Case with_ranks(const Case& b, int first, int n) {
  std::vector<int> keep;
  for (int r = first; r < first + n; ++r) keep.push_back(r);
  return ranks_kept(b, keep);
}

Case without_rank(const Case& b, int r) {
  std::vector<int> keep;
  for (int k = 0; k < b.p; ++k)
    if (k != r) keep.push_back(k);
  return ranks_kept(b, keep);
}

rc::Maybe<Case> RankShrinks::next() {
  for (;;) {
    const Case& b = b_;
    if (b.p <= 1) return rc::Nothing;
    if (i_ == 0) {
      ++i_;
      return with_ranks(b, 0, 1);
    }
    if (i_ == 1) {
      ++i_;
      if (b.p / 2 > 1) return with_ranks(b, 0, b.p / 2);
      continue;
    }
    // Then the first k ranks for every k from 2 up: a bug that needs a
    // world size that is not a power of two (or at least 9) keeps the
    // smallest such size, where removing one rank at a time could stop
    // at a larger one (9 -> 8 passes, 9 -> 7 would still fail).
    if (i_ < static_cast<size_t>(b.p)) {
      const int k = static_cast<int>(i_);
      ++i_;
      if (k != b.p / 2) return with_ranks(b, 0, k);
      continue;
    }
    const size_t drop = i_ - static_cast<size_t>(b.p);
    if (drop < static_cast<size_t>(b.p) && b.p > 2) {
      ++i_;
      return without_rank(b, static_cast<int>(drop));
    }
    // On two nodes whose second holds one rank, every rank fewer above
    // leaves one node, and a bug that needs two would stop shrinking
    // there. The same removals again, each keeping a one-rank second
    // node: the first k ranks, then each rank left out.
    size_t at = 2 * static_cast<size_t>(b.p);  // the candidates above, when p > 2
    if (b.ranks_per_node > 0 && b.ranks_per_node == b.p - 1 && b.p > 2) {
      const size_t two = i_ - at;
      if (two < static_cast<size_t>(b.p - 2)) {  // k = 2 .. p-1
        ++i_;
        Case c = with_ranks(b, 0, static_cast<int>(two) + 2);
        c.ranks_per_node = c.p - 1;
        return c;
      }
      if (two < static_cast<size_t>(2 * b.p - 2)) {
        ++i_;
        Case c = without_rank(b, static_cast<int>(two - static_cast<size_t>(b.p - 2)));
        c.ranks_per_node = c.p - 1;
        return c;
      }
      at += static_cast<size_t>(2 * b.p - 2);
    }
    // A partial last node kept whole while the full nodes before it
    // shrink to one node of k ranks (partial < k < ranks per node): a
    // bug in how the partial node counts (a node count of p / ranks per
    // node) needs the partial node's ranks and values, and fewer ranks
    // taken one at a time could stop above it (issue 31: p = 6 on nodes
    // of 4 was kept where p = 5 on nodes of 3 fails too).
    if (b.ranks_per_node > 2 && b.p > b.ranks_per_node && b.p % b.ranks_per_node != 0) {
      const int rpn = b.ranks_per_node, partial = b.p % rpn;
      const size_t options = static_cast<size_t>(std::max(0, rpn - 1 - partial));
      const size_t j = i_ - at;
      if (j < options) {
        ++i_;
        const int k = partial + 1 + static_cast<int>(j);
        std::vector<int> keep;
        for (int r = 0; r < k; ++r) keep.push_back(r);
        for (int r = b.p - partial; r < b.p; ++r) keep.push_back(r);
        Case c = ranks_kept(b, keep);
        c.ranks_per_node = k;
        return c;
      }
      at += options;
    }
    // On three nodes or more, a whole node left out: the other nodes,
    // and how full the last one is, stay as they were (a bug in the
    // partial last node, or in the leaders' ring, is still reached).
    if (b.ranks_per_node > 0 && b.ranks_per_node < b.p && b.p > 2) {
      const int rpn = b.ranks_per_node, nodes = (b.p + rpn - 1) / rpn;
      const size_t j = i_ - at;
      if (nodes >= 3 && j < static_cast<size_t>(nodes)) {
        ++i_;
        std::vector<int> keep;
        for (int r = 0; r < b.p; ++r)
          if (r / rpn != static_cast<int>(j)) keep.push_back(r);
        return ranks_kept(b, keep);
      }
    }
    // Smaller nodes: one rank per node, then one rank fewer per node.
    // Where fewer ranks left a single node (and the bug with it), a
    // smaller node lets the ranks go next time round.
    if (b.ranks_per_node > 1 && nodes_tried_ < 2) {
      const int to = nodes_tried_++ == 0 ? 1 : b.ranks_per_node - 1;
      if (nodes_tried_ == 1 || to != 1) {
        Case c = b;
        c.ranks_per_node = to;
        return c;
      }
      continue;
    }
    return rc::Nothing;
  }
}

}  // namespace collcheck
