// All-to-all, pairwise: block j of rank r's input (count / p elements) goes to
// rank j, and lands at block r of j's output. Every receive and send is posted
// at once, then waited; the transport matches them.
#include <cstring>
#include <vector>

#include "impl/algorithm.h"
#include "impl/collective.h"

namespace collcheck {

void all_to_all_pairwise(const CollectiveArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  const DType t = a.red.dtype;
  const size_t n = a.count / static_cast<size_t>(p);
  auto out = [&](int j) { return elem_span(a.recv, t, static_cast<size_t>(j) * n, n); };
  auto in = [&](int j) {
    return elem_span(const_cast<void*>(a.send), t, static_cast<size_t>(j) * n, n);
  };
  if (n) std::memmove(out(r).data(), in(r).data(), out(r).size());
  std::vector<RequestPtr> reqs;
  for (int k = 1; k < p; ++k) reqs.push_back(a.links.irecv((r + p - k) % p, a.tag, out((r + p - k) % p)));
  for (int k = 1; k < p; ++k) {
    const auto block = in((r + k) % p);
    reqs.push_back(a.links.isend((r + k) % p, a.tag, std::span<const std::byte>(block.data(), block.size())));
  }
  wait_all(reqs, a.deadline);
}

}  // namespace collcheck
