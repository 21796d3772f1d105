// A dissemination barrier: in round k every rank signals the rank 2^k ahead
// and waits for the one 2^k behind; after ceil(log2 p) rounds every rank has
// heard, directly or not, from every other. One byte per signal.
#include "impl/algorithm.h"
#include "impl/collective.h"

namespace collcheck {

void barrier_dissemination(const CollectiveArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  std::byte out{1}, in{0};
  unsigned round = 0;
  for (int k = 1; k < p; k <<= 1, ++round)
    send_recv(a.links, (r + k) % p, std::span<const std::byte>(&out, 1), (r - k + p) % p, std::span<std::byte>(&in, 1),
              a.tag | (round & 0xff), a.deadline);
}

}  // namespace collcheck
