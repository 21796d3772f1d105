#include "impl/algorithm.h"

#include <array>
#include <memory>
#include <vector>

#include "impl/kernels.h"

namespace collcheck {

namespace {
// The registry: one line per algorithm.
constexpr std::array<AlgorithmInfo, 4> kAlgorithms = {{
    {"ring", "reduce-scatter then all-gather around a ring, 2(p-1) steps of ~N/p bytes", ring_all_reduce,
     ring_reduction_order},
    {"tree", "reduce to rank 0 along a binary heap tree, then broadcast down it", tree_all_reduce,
     tree_reduction_order},
    {"dbtree", "NCCL's double binary tree: two complementary trees, each carrying half the data",
     dbtree_all_reduce, dbtree_reduction_order},
    {"hierarchical", "reduce to each node's leader, ring all-reduce across the leaders, broadcast within each node",
     hierarchical_all_reduce, hierarchical_reduction_order, true},
}};
}  // namespace

std::span<const AlgorithmInfo> algorithms() { return kAlgorithms; }

const AlgorithmInfo* find_algorithm(std::string_view name) {
  for (const auto& a : kAlgorithms)
    if (a.name == name) return &a;
  return nullptr;
}

std::string algorithm_choices() {
  std::string s;
  for (const auto& a : kAlgorithms) {
    if (!s.empty()) s += ", ";
    s += a.name;
  }
  return s;
}

Chunk balanced_chunk(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts);
  const size_t idx = static_cast<size_t>(i);
  const size_t base = count / p;
  const size_t extra = count % p;
  const size_t offset = idx * base + (idx < extra ? idx : extra);
  return Chunk{offset, base + (idx < extra ? 1 : 0)};
}

std::span<std::byte> elem_span(void* base, DType t, size_t offset, size_t count) {
  const size_t es = dtype_size(t);
  return {static_cast<std::byte*>(base) + offset * es, count * es};
}

bool begin_all_reduce(const AllReduceArgs& a) {
  apply_pre(a.red, a.recv, a.send, a.count);
  if (a.links.size() > 1 && a.count > 0) return false;
  apply_post(a.red, a.recv, a.count);
  return true;
}

std::byte* scratch_buffer(size_t bytes) {
  // The rank's own: it is used across link waits, where a fiber of the
  // simulated world lets the other ranks (on the same thread) run.
  struct Scratch {
    std::unique_ptr<std::byte[]> buf;
    size_t capacity = 0;
  };
  static const char key = 0;
  Scratch& s = sched::rank_local<Scratch>(&key);
  if (bytes > s.capacity) {
    s.buf.reset(new std::byte[bytes]);  // uninitialised: callers write before they read
    s.capacity = bytes;
  }
  return s.buf.get();
}

void send_recv(Links& links, int to, std::span<const std::byte> out, int from, std::span<std::byte> in, Tag tag,
               Deadline deadline) {
  auto r = links.irecv(from, tag, in);
  auto s = links.isend(to, tag, out);
  r->wait(deadline);
  s->wait(deadline);
}

size_t tree_slice_elements(DType t) { return std::max<size_t>(1, kTreeSliceBytes / dtype_size(t)); }

namespace {
// Calls visit(share, slice of buf) for slice 0 of every share, then slice 1 of
// every share, ...: the order both tree passes go in.
template <typename Visit>
void for_each_slice(DType t, std::span<const TreeShare> shares, std::byte* buf, Visit visit) {
  const size_t slice = tree_slice_elements(t);
  size_t rounds = 0;
  for (const auto& sh : shares) rounds = std::max(rounds, (sh.count + slice - 1) / slice);
  for (size_t k = 0; k < rounds; ++k)
    for (const auto& sh : shares)
      if (k * slice < sh.count)
        visit(sh, elem_span(buf, t, sh.offset + k * slice, std::min(slice, sh.count - k * slice)));
}
}  // namespace

void tree_reduce(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf) {
  const DType t = a.red.dtype;
  std::byte* incoming = scratch_buffer(tree_slice_elements(t) * dtype_size(t));
  // Sends up are not waited until every slice has gone: a node folds slice
  // k + 1 while its parent folds slice k.
  std::vector<RequestPtr> up;
  for_each_slice(t, shares, buf, [&](const TreeShare& sh, std::span<std::byte> mine) {
    for (int child : sh.node.children) {
      if (child < 0) continue;
      a.links.irecv(child, sh.tag, {incoming, mine.size()})->wait(a.deadline);
      reduce(mine.data(), incoming, mine.size() / dtype_size(t), t, a.red.combine);
    }
    if (sh.node.parent >= 0) up.push_back(a.links.isend(sh.node.parent, sh.tag, mine));
  });
  wait_all(up, a.deadline);  // before anything is written over what went up
}

void tree_broadcast(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf) {
  std::vector<RequestPtr> down;
  for_each_slice(a.red.dtype, shares, buf, [&](const TreeShare& sh, std::span<std::byte> mine) {
    if (sh.node.parent >= 0) a.links.irecv(sh.node.parent, sh.tag, mine)->wait(a.deadline);
    for (int child : sh.node.children)
      if (child >= 0) down.push_back(a.links.isend(child, sh.tag, mine));
  });
  wait_all(down, a.deadline);
}

void tree_reduce_broadcast(const AllReduceArgs& a, std::span<const TreeShare> shares, std::byte* buf) {
  tree_reduce(a, shares, buf);
  for (const auto& sh : shares)
    if (sh.node.parent < 0) apply_post(a.red, elem_span(buf, a.red.dtype, sh.offset, sh.count).data(), sh.count);
  tree_broadcast(a, shares, buf);
}

void tree_postfix(int p, const std::function<TreeNode(int)>& node, std::vector<int>& postfix) {
  int root = 0;
  while (root < p && node(root).parent >= 0) ++root;
  // Iterative post-order: own value, then each child's subtree and a combine.
  struct Frame {
    int rank;
    int next_child;
  };
  std::vector<Frame> stack = {{root, 0}};
  postfix.push_back(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next_child == 2) {
      stack.pop_back();
      if (!stack.empty()) postfix.push_back(-1);
      continue;
    }
    const int child = node(f.rank).children[f.next_child++];
    if (child < 0) continue;
    postfix.push_back(child);
    stack.push_back({child, 0});
  }
}

int chunk_of(size_t count, int parts, size_t index) {
  for (int i = 0; i < parts; ++i) {
    const Chunk c = balanced_chunk(count, parts, i);
    if (index >= c.offset && index < c.offset + c.count) return i;
  }
  return parts - 1;
}

}  // namespace collcheck
