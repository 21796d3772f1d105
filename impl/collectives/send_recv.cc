// Point-to-point: a send to one peer, or a receive from one. The caller's tag
// pairs the n-th send from a to b with the n-th receive at b from a (the
// communicator numbers them per pair and direction, as NCCL and MPI match
// point-to-point operations in order).
#include "impl/collective.h"
#include "impl/dtype.h"

namespace collcheck {

void send_recv_direct(const CollectiveArgs& a) {
  const size_t bytes = a.count * dtype_size(a.red.dtype);
  if (a.kind == Collective::Send)
    a.links.isend(a.peer, a.tag, std::span<const std::byte>(static_cast<const std::byte*>(a.send), bytes))
        ->wait(a.deadline);
  else
    a.links.irecv(a.peer, a.tag, std::span<std::byte>(static_cast<std::byte*>(a.recv), bytes))->wait(a.deadline);
}

}  // namespace collcheck
