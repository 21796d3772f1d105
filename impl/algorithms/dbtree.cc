// Double binary tree all-reduce, NCCL's "tree" algorithm.
//
// Tree 0 is an in-order binary tree on ranks 0..p-1: a rank's level is its lowest
// set bit, odd ranks are the leaves, and rank 0 is a root with a single child.
// Tree 1 is tree 0 mirrored (p even) or shifted by one (p odd), so that the
// leaves of one tree are interior nodes of the other and every rank sends and
// receives about the same volume. The first half of the buffer is reduced and
// broadcast on tree 0, the second half on tree 1.
//
// As NCCL does, the two trees run at the same time, each on a channel of its
// own: both halves go up and down slice by slice (kTreeSliceBytes), a slice of
// tree 0 then one of tree 1, so a rank that is a leaf of one tree works as an
// interior node of the other meanwhile. Every element's reduction order is
// fixed by the tree that carries it, whatever the slicing.
#include "impl/algorithm.h"
#include "impl/kernels.h"

namespace collcheck {

namespace {

TreeNode in_order_tree(int p, int r) {
  TreeNode n;
  if (r == 0) {
    int top = 1;
    while (top * 2 < p) top *= 2;  // largest power of two below p
    n.children[0] = p > 1 ? top : -1;
    return n;
  }
  const int low = r & -r;  // level of r
  const int up = (r ^ low) | (low << 1);
  n.parent = up < p ? up : (r ^ low);
  int step = low >> 1;
  if (step > 0) {
    n.children[0] = r - step;
    while (step > 0 && r + step >= p) step >>= 1;
    n.children[1] = step > 0 ? r + step : -1;
  }
  return n;
}

TreeNode remap(TreeNode n, int (*map)(int, int), int p) {
  if (n.parent >= 0) n.parent = map(n.parent, p);
  for (int& c : n.children)
    if (c >= 0) c = map(c, p);
  return n;
}

int mirror(int x, int p) { return p - 1 - x; }
int shift_up(int x, int p) { return (x + 1) % p; }

}  // namespace

TreeNode dbtree_node(int p, int r, int tree) {
  if (tree == 0) return in_order_tree(p, r);
  if (p % 2 == 0) return remap(in_order_tree(p, mirror(r, p)), mirror, p);
  return remap(in_order_tree(p, (r + p - 1) % p), shift_up, p);
}

void dbtree_all_reduce(const AllReduceArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  if (begin_all_reduce(a)) return;
  std::vector<TreeShare> shares;
  for (int tree = 0; tree < 2; ++tree) {
    const Chunk half = balanced_chunk(a.count, 2, tree);
    if (half.count > 0) shares.push_back({dbtree_node(p, r, tree), half.offset, half.count, a.tag | static_cast<Tag>(tree)});
  }
  tree_reduce_broadcast(a, shares, static_cast<std::byte*>(a.recv));
}

// The first half of the elements goes up tree 0, the second half up tree 1.
void dbtree_reduction_order(int p, size_t count, size_t index, std::span<const int>, std::vector<int>& postfix) {
  const int tree = chunk_of(count, 2, index);
  tree_postfix(p, [p, tree](int r) { return dbtree_node(p, r, tree); }, postfix);
}

}  // namespace collcheck
