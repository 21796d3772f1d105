// Hierarchical all-reduce: the nodes of the links (Links::node_of) first.
//
//   1. Within each node, reduce to the node's leader (its lowest rank) along a
//      binary heap tree over the node's ranks in ascending order.
//   2. Across nodes, the leaders (in ascending rank order) run the ring
//      all-reduce on the node partials; the post step (integer avg) follows.
//   3. Within each node, the leader broadcasts the result down the same tree.
//
// Only one rank per node crosses the (slow) inter-node links, 2(L-1) times for
// L nodes, where a flat ring crosses a node boundary on every one of its
// 2(p-1) steps: the latency term shrinks from 2(p-1)a to 2(L-1)a plus the tree's
// intra-node steps, at the price of a full buffer moving up and down each tree.
//
// Element i's reduction order: the ring's over the L leaders (chunk c of L
// starts at leader c), where each leader's contribution is its node's tree
// reduction. With one node this is the heap tree; with one rank per node, the
// ring. Channels: 1 the reduce, 2 the ring, 3 the broadcast.
#include <algorithm>

#include "impl/algorithm.h"
#include "impl/kernels.h"

namespace collcheck {

namespace {

struct Layout {
  std::vector<int> members;  // the ranks of this rank's node, ascending
  std::vector<int> leaders;  // the lowest rank of every node, ascending
};

Layout layout(std::span<const int> nodes, int r) {
  Layout l;
  std::vector<int> seen;
  for (int q = 0; q < static_cast<int>(nodes.size()); ++q) {
    const int n = nodes[static_cast<size_t>(q)];
    if (n == nodes[static_cast<size_t>(r)]) l.members.push_back(q);
    if (std::find(seen.begin(), seen.end(), n) == seen.end()) {
      seen.push_back(n);
      l.leaders.push_back(q);
    }
  }
  return l;
}

// The postfix of one node's tree reduction, in world ranks.
void node_postfix(std::span<const int> nodes, int leader, std::vector<int>& postfix) {
  const Layout l = layout(nodes, leader);
  const int k = static_cast<int>(l.members.size());
  const size_t from = postfix.size();
  tree_postfix(k, [k](int r) { return heap_node(k, r); }, postfix);
  for (size_t i = from; i < postfix.size(); ++i)
    if (postfix[i] >= 0) postfix[i] = l.members[static_cast<size_t>(postfix[i])];
}

}  // namespace

void hierarchical_all_reduce(const AllReduceArgs& a) {
  const int r = a.links.rank();
  if (begin_all_reduce(a)) return;
  const std::vector<int> nodes = node_map(a.links);
  const Layout l = layout(nodes, r);
  auto* buf = static_cast<std::byte*>(a.recv);

  auto local = subset_links(a.links, l.members);
  const AllReduceArgs in_node{a.recv, a.recv, a.count, a.red, *local, a.tag, a.deadline};
  const TreeShare up{heap_node(local->size(), local->rank()), 0, a.count, a.tag | 1};
  tree_reduce(in_node, {&up, 1}, buf);

  if (l.members.front() == r) {
    // The partials are already pre-multiplied; the ring must not scale them
    // again, and the post step is applied once, here, after it.
    Reduction across = a.red;
    across.premul = false;
    across.postdiv = false;
    auto leaders = subset_links(a.links, l.leaders);
    if (leaders->size() > 1)
      ring_all_reduce(AllReduceArgs{a.recv, a.recv, a.count, across, *leaders, a.tag | 2, a.deadline});
    apply_post(a.red, a.recv, a.count);
  }
  TreeShare down = up;
  down.tag = a.tag | 3;
  tree_broadcast(in_node, {&down, 1}, buf);
}

void hierarchical_reduction_order(int p, size_t count, size_t index, std::span<const int> nodes,
                                  std::vector<int>& postfix) {
  std::vector<int> one_node;
  if (nodes.empty()) {
    one_node.assign(static_cast<size_t>(p), 0);
    nodes = one_node;
  }
  const std::vector<int> leaders = layout(nodes, 0).leaders;
  const int n = static_cast<int>(leaders.size());
  const int c = chunk_of(count, n, index);
  node_postfix(nodes, leaders[static_cast<size_t>(c)], postfix);
  for (int k = 1; k < n; ++k) {
    node_postfix(nodes, leaders[static_cast<size_t>((c + k) % n)], postfix);
    postfix.push_back(-1);
  }
}

}  // namespace collcheck
