// The reference all-reduce algorithms and what they share. Each algorithm lives
// in its own file under impl/algorithms/ and is registered by one line in
// impl/algorithm.cc.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impl/links.h"
#include "impl/semantics.h"

namespace collcheck {

struct AllReduceArgs {
  const void* send;  // may equal recv (in-place)
  void* recv;
  size_t count;      // elements
  const Reduction& red;
  Links& links;
  Tag tag;           // base tag of this call; algorithms add a channel in the low 8 bits
  Deadline deadline; // every wait of the call ends by then
};

using AllReduceFn = void (*)(const AllReduceArgs&);

// The reduction order of element `index` of a `count`-element all-reduce over
// p ranks, as a postfix program: r >= 0 pushes rank r's contribution, -1
// replaces the top two entries by their combination. An algorithm that declares
// its order can be checked bit for bit on float sums and products, where the
// oracle's all-orders bound would hide a rounding bug (a truncating store).
// `nodes` is node_map() of the call's links (every rank's node, numbered from
// 0), or empty for one node: the order of a hierarchical algorithm follows it.
using ReductionOrderFn = void (*)(int p, size_t count, size_t index, std::span<const int> nodes,
                                  std::vector<int>& postfix);

struct AlgorithmInfo {
  std::string_view name;
  std::string_view summary;
  AllReduceFn run;
  ReductionOrderFn order;
  bool follows_nodes = false;  // its schedule and order depend on Links::node_of
};

std::span<const AlgorithmInfo> algorithms();
const AlgorithmInfo* find_algorithm(std::string_view name);
std::string algorithm_choices();

// The algorithms (one file each), and their reduction orders.
void ring_all_reduce(const AllReduceArgs& a);
void tree_all_reduce(const AllReduceArgs& a);
void dbtree_all_reduce(const AllReduceArgs& a);
void hierarchical_all_reduce(const AllReduceArgs& a);
void ring_reduction_order(int p, size_t count, size_t index, std::span<const int> nodes, std::vector<int>& postfix);
void tree_reduction_order(int p, size_t count, size_t index, std::span<const int> nodes, std::vector<int>& postfix);
void dbtree_reduction_order(int p, size_t count, size_t index, std::span<const int> nodes, std::vector<int>& postfix);
void hierarchical_reduction_order(int p, size_t count, size_t index, std::span<const int> nodes,
                                  std::vector<int>& postfix);

// ---- shared building blocks ----

// Part i of `count` elements split into `parts` nearly equal, contiguous parts:
// the first count % parts parts get one extra element.
struct Chunk {
  size_t offset;
  size_t count;
};
Chunk balanced_chunk(size_t count, int parts, int i);

// Bytes of `count` elements of the call's dtype starting at element `offset`.
std::span<std::byte> elem_span(void* base, DType t, size_t offset, size_t count);

// The common start of every algorithm: writes this rank's contribution (the
// input, pre-multiplied where the reduction says so) into the receive buffer.
// Returns true when nothing is left to do (p == 1 or count == 0); the post
// step has then been applied too.
bool begin_all_reduce(const AllReduceArgs& a);

// A per-thread scratch buffer of at least `bytes` bytes, reused across calls so
// that large all-reduces do not page-fault a fresh allocation every time. Its
// contents are unspecified; it stays valid until the next call on this thread.
std::byte* scratch_buffer(size_t bytes);

// Posts a send and a recv together, then waits for both (no ordering deadlock).
void send_recv(Links& links, int to, std::span<const std::byte> out, int from, std::span<std::byte> in,
               Tag tag, Deadline deadline);

// A binary tree over some ranks: parent (-1 at the root) and up to two children.
struct TreeNode {
  int parent = -1;
  int children[2] = {-1, -1};
};

// The node of rank r in tree 0 or 1 of NCCL's double binary tree (dbtree.cc).
TreeNode dbtree_node(int p, int r, int tree);
// The node of rank r in a binary heap tree over p ranks: parent (r-1)/2,
// children 2r+1 and 2r+2, root 0 (tree.cc).
TreeNode heap_node(int p, int r);

// One tree's share of a call: elements [offset, offset+count) go up and down
// the tree that `node` (this rank's place in it) describes, on `tag`.
struct TreeShare {
  TreeNode node;
  size_t offset;
  size_t count;
  Tag tag;
};

// Tree passes are pipelined in slices of this many bytes: a node folds and
// forwards slice k + 1 while its parent folds slice k, and several shares
// (dbtree's two trees) advance slice by slice together.
inline constexpr size_t kTreeSliceBytes = size_t{256} << 10;
size_t tree_slice_elements(DType t);

// Reduce each share (its elements of `buf` already holding this rank's
// pre-multiplied contribution) up its tree to its root, slice by slice. Each
// node combines its own partial with child 0's and then child 1's, so the
// order is fixed by the tree, whatever the slicing. A root then holds its
// share's reduction, without the post step.
void tree_reduce(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf);
// Each root's share of `buf` down its tree to every node, slice by slice.
void tree_broadcast(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf);
// tree_reduce, the post step at each root, then tree_broadcast.
void tree_reduce_broadcast(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf);
// The postfix order of tree_reduce_broadcast over the tree that node(p, r)
// describes: each node combines its own partial with child 0's, then child 1's.
void tree_postfix(int p, const std::function<TreeNode(int)>& node, std::vector<int>& postfix);
// Which of `parts` balanced chunks holds element `index`.
int chunk_of(size_t count, int parts, size_t index);

}  // namespace collcheck
