// All-gather around the ring: rank r's block lands at offset r * count of
// every output; in step s rank r passes block (r - s) to its right neighbour
// and receives block (r - s - 1) from its left; p - 1 steps.
#include "impl/algorithm.h"
#include "impl/collective.h"

#include <cstring>

namespace collcheck {

void all_gather_ring(const CollectiveArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  const DType t = a.red.dtype;
  auto block = [&](int i) { return elem_span(a.recv, t, static_cast<size_t>((i % p + p) % p) * a.count, a.count); };
  const auto mine = block(r);
  if (!mine.empty() && a.send != mine.data()) std::memmove(mine.data(), a.send, mine.size());
  if (a.count == 0) return;
  for (int s = 0; s < p - 1; ++s)
    send_recv(a.links, (r + 1) % p, block(r - s), (r + p - 1) % p, block(r - s - 1), a.tag, a.deadline);
}

}  // namespace collcheck
