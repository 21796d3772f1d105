// Tree all-reduce: reduce to rank 0 along a binary heap tree (parent of r is
// (r-1)/2, children 2r+1 and 2r+2), then broadcast the result down the same
// tree. Depth is floor(log2 p); every element travels the whole tree, so this is
// the latency-optimal, bandwidth-poor reference.
#include "impl/algorithm.h"
#include "impl/kernels.h"

namespace collcheck {

TreeNode heap_node(int p, int r) {
  TreeNode node;
  node.parent = r == 0 ? -1 : (r - 1) / 2;
  node.children[0] = 2 * r + 1 < p ? 2 * r + 1 : -1;
  node.children[1] = 2 * r + 2 < p ? 2 * r + 2 : -1;
  return node;
}

void tree_all_reduce(const AllReduceArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  if (begin_all_reduce(a)) return;
  const TreeShare all{heap_node(p, r), 0, a.count, a.tag};
  tree_reduce_broadcast(a, {&all, 1}, static_cast<std::byte*>(a.recv));
}

void tree_reduction_order(int p, size_t, size_t, std::span<const int>, std::vector<int>& postfix) {
  tree_postfix(p, [p](int r) { return heap_node(p, r); }, postfix);
}

}  // namespace collcheck
