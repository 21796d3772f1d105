// The links interface: tagged, non-blocking point-to-point transfers of byte
// spans between the ranks of one world. Algorithms see nothing else of the
// world, so the same algorithm runs over threads, MPI, or a fault-injecting
// wrapper. Every wait takes a deadline; there is no unbounded wait.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "impl/sched.h"

namespace collcheck {

using Tag = uint64_t;

enum class LinkDirection : uint8_t { Send, Recv };

// Any failure of a transfer. Names who was waiting, on whom, and for which tag.
class LinkError : public std::runtime_error {
 public:
  LinkError(const std::string& what, int rank, int peer, Tag tag, LinkDirection dir)
      : std::runtime_error(what), rank_(rank), peer_(peer), tag_(tag), dir_(dir) {}
  int rank() const { return rank_; }
  int peer() const { return peer_; }
  Tag tag() const { return tag_; }
  LinkDirection direction() const { return dir_; }

 private:
  int rank_;
  int peer_;
  Tag tag_;
  LinkDirection dir_;
};

// The deadline of a wait expired before the peer matched the transfer.
class LinkTimeout : public LinkError {
 public:
  using LinkError::LinkError;
};

// The world was aborted (another rank failed) while this transfer was pending.
class LinkAborted : public LinkError {
 public:
  using LinkError::LinkError;
};

// One posted send or recv. Destroying a request that has not completed cancels
// it, so the transport never touches its buffer afterwards.
class LinkRequest {
 public:
  virtual ~LinkRequest() = default;
  // True once the transfer completed. Throws the transfer's LinkError if it failed.
  virtual bool test() = 0;
  // Blocks until the transfer completes or `deadline` passes (LinkTimeout).
  virtual void wait(Deadline deadline) = 0;
  // Once completed: payload_checksum (impl/checksum.h) of the bytes the
  // transfer moved, where the links computed it as they moved them (the
  // in-process links), so that a recorder need not read them again; nullopt
  // elsewhere. A decorator that changes the bytes (a nemesis) must not pass
  // its inner request's on, so the default is nullopt.
  virtual std::optional<uint64_t> moved_checksum() const { return std::nullopt; }
};
using RequestPtr = std::unique_ptr<LinkRequest>;

class MpiLinks;

class Links {
 public:
  virtual ~Links() = default;
  // The MPI links underneath, when these links are a whole MPI world's (a
  // decorator passes it through; a process group's subset has none): a peer
  // library reaches its communicator here, not through a global.
  virtual MpiLinks* mpi() { return nullptr; }
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The buffer must stay valid until the request completes or is destroyed.
  // A send matches the oldest recv posted by `peer` with the same tag (FIFO per
  // (source, destination, tag)); sizes must agree exactly.
  virtual RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) = 0;
  virtual RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) = 0;
  // The node (host) rank `peer` runs on, as an id shared by exactly the ranks
  // of that node: the topology a hierarchical algorithm follows. Threads of one
  // process are one node (0) unless node_links() says otherwise; the MPI links
  // take it from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
  virtual int node_of(int /*peer*/) const { return 0; }
};

// A wrapper of another Links (the flight recorder, the schedule perturber, a
// nemesis): everything it does not override goes to `inner_` unchanged.
class LinksDecorator : public Links {
 public:
  explicit LinksDecorator(Links& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override { return inner_.isend(peer, tag, data); }
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override { return inner_.irecv(peer, tag, data); }
  int node_of(int peer) const override { return inner_.node_of(peer); }
  MpiLinks* mpi() override { return inner_.mpi(); }

 protected:
  Links& inner_;
};

// The tag layout: bits 48-63 the communicator's process group (0: the whole
// world), bits 8-47 the call's sequence number in that group, the low 8 bits the
// algorithm's channel. Point-to-point calls number their own sequence per peer
// and direction, with kP2pCall set, so they never meet a collective's tag.
inline constexpr uint64_t kCallMask = (uint64_t{1} << 40) - 1;
inline constexpr uint64_t kP2pCall = uint64_t{1} << 39;
constexpr Tag call_tag(uint64_t seq, uint64_t group = 0) { return (group << 48) | ((seq & kCallMask) << 8); }
constexpr uint64_t call_of_tag(Tag tag) { return (tag >> 8) & kCallMask; }
constexpr uint64_t group_of_tag(Tag tag) { return tag >> 48; }
constexpr unsigned channel_of_tag(Tag tag) { return static_cast<unsigned>(tag & 0xff); }

std::string describe_tag(Tag tag);

// The links of a subset of the world's ranks (a process group): the group's
// rank i is world rank members[i] (ascending), and inner's rank must be one of
// them. Tags pass unchanged: the communicator puts its group in them.
std::unique_ptr<Links> subset_links(Links& inner, std::vector<int> members);

// `inner` seen as nodes of `ranks_per_node` consecutive ranks: rank r is on
// node r / ranks_per_node (the last node may hold fewer). Simulated nodes, for
// the thread world (--ranks-per-node); transfers pass unchanged.
std::unique_ptr<Links> node_links(Links& inner, int ranks_per_node);

// Each rank's node as node_of gives it, numbered 0, 1, ... in order of each
// node's lowest rank (the same numbers for the same grouping, whatever ids the
// links use).
std::vector<int> node_map(const Links& links);
// The same numbering of a list of node ids, one per rank.
std::vector<int> number_nodes(std::span<const int> ids);

// Waits for every request in order; the first failure is thrown and the
// remaining requests are cancelled when the caller drops them.
void wait_all(std::vector<RequestPtr>& requests, Deadline deadline);

}  // namespace collcheck
