// Broadcast along a binomial tree rooted at the root: in round k the ranks
// that already hold the data (relative ranks below 2^k) send it to the rank
// 2^k further on; log2(p) rounds.
#include "impl/algorithm.h"
#include "impl/collective.h"

#include <cstring>

namespace collcheck {

void broadcast_binomial(const CollectiveArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  const size_t bytes = a.count * dtype_size(a.red.dtype);
  auto data = std::span<std::byte>(static_cast<std::byte*>(a.recv), bytes);
  if (r == a.peer && a.send != a.recv && bytes) std::memcpy(a.recv, a.send, bytes);
  const int v = (r - a.peer + p) % p;  // rank relative to the root
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (v & mask) {
      a.links.irecv((v - mask + a.peer) % p, a.tag, data)->wait(a.deadline);
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) a.links.isend((v + mask + a.peer) % p, a.tag, data)->wait(a.deadline);
}

}  // namespace collcheck
