// Reduce-scatter around the ring: the input is p blocks of count elements,
// and rank r ends with the reduction of block r over every rank. In step s
// rank r sends its partial of block (r - s - 1) to the right and folds the
// partial of block (r - s - 2) arriving from the left into its own; after
// p - 1 steps block r is complete on rank r. The same semantics as the
// all-reduce (impl/semantics.h): inputs pre-multiplied where the reduction
// says, the post step on the finished block.
#include <vector>

#include "impl/algorithm.h"
#include "impl/collective.h"
#include "impl/kernels.h"

namespace collcheck {

void reduce_scatter_ring(const CollectiveArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  const DType t = a.red.dtype;
  const size_t es = dtype_size(t);
  std::vector<std::byte> work(a.count * static_cast<size_t>(p) * es);
  apply_pre(a.red, work.data(), a.send, a.count * static_cast<size_t>(p));
  auto block = [&](int i) { return elem_span(work.data(), t, static_cast<size_t>((i % p + p) % p) * a.count, a.count); };
  std::vector<std::byte> incoming(a.count * es);
  for (int s = 0; s < p - 1 && a.count > 0; ++s) {
    const auto in = block(r - s - 2);
    send_recv(a.links, (r + 1) % p, block(r - s - 1), (r + p - 1) % p, incoming, a.tag, a.deadline);
    reduce(in.data(), incoming.data(), a.count, t, a.red.combine);
  }
  const auto owned = block(r);
  apply_post(a.red, owned.data(), a.count);
  std::copy(owned.begin(), owned.end(), static_cast<std::byte*>(a.recv));
}

}  // namespace collcheck
