// Ring all-reduce: reduce-scatter, then all-gather, 2(p-1) steps.
//
// The buffer is cut into p balanced chunks (count % p != 0 and count < p give
// some empty or one-larger chunks). In reduce-scatter step s, rank r sends chunk
// (r - s) mod p to its right neighbour and folds chunk (r - s - 1) mod p, arriving
// from the left, into its own copy. After p-1 steps rank r holds the full
// reduction of chunk (r + 1) mod p; it applies the post step there, and the
// all-gather passes the finished chunks around the ring for p-1 more steps.
//
// The input is read where it lies: the first step sends this rank's own chunk
// from the send buffer, and each fold writes (own input) (op) (incoming) into
// the receive buffer, so no chunk is copied before it is reduced. The order of
// the operands is the one the declared order gives (the partial so far is the
// left operand, as in a copy followed by an in-place fold). Reductions that
// pre-multiply (avg on floats, premulsum) first scale the input into the
// receive buffer, as before.

#include "impl/algorithm.h"
#include "impl/kernels.h"

namespace collcheck {

void ring_all_reduce(const AllReduceArgs& a) {
  const int p = a.links.size();
  const int r = a.links.rank();
  const DType t = a.red.dtype;
  // Where this rank's contribution is read from: the send buffer as it is, or
  // the receive buffer once scaled there (or when there is nothing to reduce).
  const void* own = a.send;
  if (a.red.premul || p == 1 || a.count == 0) {
    if (begin_all_reduce(a)) return;
    own = a.recv;
  }
  const int right = (r + 1) % p;
  const int left = (r + p - 1) % p;
  auto chunk = [&](int i) { return balanced_chunk(a.count, p, ((i % p) + p) % p); };
  std::byte* incoming = scratch_buffer(chunk(0).count * dtype_size(t));  // chunk 0 is the largest
  auto own_span = [&](const Chunk& c) {
    return std::span<const std::byte>(elem_span(const_cast<void*>(own), t, c.offset, c.count));
  };

  for (int s = 0; s < p - 1; ++s) {
    const Chunk out = chunk(r - s);
    const Chunk in = chunk(r - s - 1);
    auto in_bytes = std::span<std::byte>(incoming, in.count * dtype_size(t));
    // Step 0 sends this rank's own chunk as it is; later steps send a partial.
    const std::span<const std::byte> out_bytes = s == 0 ? own_span(out) : elem_span(a.recv, t, out.offset, out.count);
    send_recv(a.links, right, out_bytes, left, in_bytes, a.tag, a.deadline);
    combine(elem_span(a.recv, t, in.offset, in.count).data(), own_span(in).data(), in_bytes.data(), in.count, t,
            a.red.combine);
  }
  const Chunk owned = chunk(r + 1);
  apply_post(a.red, elem_span(a.recv, t, owned.offset, owned.count).data(), owned.count);

  for (int s = 0; s < p - 1; ++s) {
    const Chunk out = chunk(r + 1 - s);
    const Chunk in = chunk(r - s);
    send_recv(a.links, right, elem_span(a.recv, t, out.offset, out.count), left,
              elem_span(a.recv, t, in.offset, in.count), a.tag, a.deadline);
  }
}

// Chunk c is folded along the ring from rank c: rank c+1 combines it with its
// own, then c+2, ..., ending at c-1 (which owns the result).
void ring_reduction_order(int p, size_t count, size_t index, std::span<const int>, std::vector<int>& postfix) {
  const int c = chunk_of(count, p, index);
  postfix.push_back(c);
  for (int k = 1; k < p; ++k) {
    postfix.push_back((c + k) % p);
    postfix.push_back(-1);
  }
}

}  // namespace collcheck
