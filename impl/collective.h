// The collectives besides all-reduce, and point-to-point: what each one moves,
// written down once (buffer sizes, which rank sends what), and a small
// reference implementation of each over the links (one per file under
// impl/collectives/). Scenarios use them to say what users' programs do
// (broadcast_object_list, all_gather, all_to_all, barrier, send/recv); the
// all-reduce itself stays with the implementation under test (impl/algorithm.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "impl/links.h"
#include "impl/semantics.h"

namespace collcheck {

enum class Collective : uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter, AllToAll, Barrier, Send, Recv };

std::string_view collective_name(Collective c);  // "all_reduce", "broadcast", ...
std::optional<Collective> parse_collective(std::string_view name);
std::string collective_choices();

// Point-to-point: one peer, not every rank of the group.
constexpr bool is_p2p(Collective c) { return c == Collective::Send || c == Collective::Recv; }
// Whether the call reduces (op and scalar matter).
constexpr bool reduces(Collective c) { return c == Collective::AllReduce || c == Collective::ReduceScatter; }
// Whether the call names a root (broadcast) or a peer (send, recv).
constexpr bool has_peer(Collective c) { return c == Collective::Broadcast || is_p2p(c); }

// The elements of each buffer of a call of `count` on p ranks. `count` is what
// torch.distributed calls the tensor's size on each rank:
//   all_reduce, broadcast: count in, count out;
//   all_gather:            count in, p * count out;
//   reduce_scatter:        p * count in, count out (NCCL's recvcount);
//   all_to_all:            count in, count out, count / p to and from each rank
//                          (count must be a multiple of p, as all_to_all_single needs);
//   barrier:               nothing;
//   send / recv:           count out / count in.
size_t send_elements(Collective c, size_t count, int p);
size_t recv_elements(Collective c, size_t count, int p);
// Why `count` does not fit the collective on p ranks ("" when it does).
std::string count_fits(Collective c, size_t count, int p);

struct CollectiveArgs {
  Collective kind = Collective::Broadcast;
  const void* send;  // send_elements(kind, count, p) elements
  void* recv;        // recv_elements(kind, count, p) elements
  size_t count;
  const Reduction& red;  // its dtype is the elements' dtype; the op matters for reduce_scatter
  int peer;              // broadcast: the root; send/recv: the other rank; else unused
  Links& links;
  Tag tag;            // base tag of this call; implementations add a channel in the low 8 bits
  Deadline deadline;  // every wait of the call ends by then
};

// Runs one collective other than all-reduce (throws std::invalid_argument for
// AllReduce: that is the implementation's).
void run_collective(const CollectiveArgs& a);

// The reference implementations (one file each).
void broadcast_binomial(const CollectiveArgs& a);     // collectives/broadcast.cc
void all_gather_ring(const CollectiveArgs& a);        // collectives/all_gather.cc
void reduce_scatter_ring(const CollectiveArgs& a);    // collectives/reduce_scatter.cc
void all_to_all_pairwise(const CollectiveArgs& a);    // collectives/all_to_all.cc
void barrier_dissemination(const CollectiveArgs& a);  // collectives/barrier.cc
void send_recv_direct(const CollectiveArgs& a);       // collectives/send_recv.cc

}  // namespace collcheck
