// The links interface over MPI: MPI_Isend/MPI_Irecv of bytes on a communicator
// of its own, so that the reference algorithms (and plugins, and the link
// nemeses) run one rank per process, on any number of nodes. MPI has no wait
// with a deadline, so every wait polls MPI_Test until the deadline. Receives
// are matched by probe (MPI_Improbe, then MPI_Imrecv of exactly the message's
// size), so a message longer than expected fails with its size and is never
// written past a buffer.
#pragma once

#include <mpi.h>

#include <deque>
#include <vector>

#include "impl/links.h"

namespace collcheck {

class MpiRequest;

class MpiLinks final : public Links {
 public:
  // `comm` is owned by the caller and must outlive the links. Its error
  // handler is set to MPI_ERRORS_RETURN. `nodes[r]`: the node of rank r of
  // `comm` (node_of); empty: every rank on one node.
  // `collectives`: the communicator of the same ranks that peer libraries
  // run their collectives on (MPI_Allreduce, NCCL's id exchange), apart from
  // the links' point-to-point traffic; MPI_COMM_NULL: none.
  explicit MpiLinks(MPI_Comm comm, std::vector<int> nodes = {}, MPI_Comm collectives = MPI_COMM_NULL);
  MpiLinks* mpi() override { return this; }
  MPI_Comm collectives() const { return collectives_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override;
  int node_of(int peer) const override {
    return peer >= 0 && static_cast<size_t>(peer) < nodes_.size() ? nodes_[static_cast<size_t>(peer)] : 0;
  }
  // Mixed into every MPI tag, so that a transfer left over from an earlier,
  // failed case can never match one of a later case (whose call sequence
  // numbers start again at 1).
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  // The MPI tag a link tag travels under.
  int mpi_tag(Tag tag) const;
  MPI_Comm comm() const { return comm_; }
  // Matches every receive not yet matched, oldest first (each test or wait
  // on any request calls it).
  void progress();
  void forget(MpiRequest* r);  // a receive destroyed before it matched
  // Receives and drops every message that has arrived for this process on
  // these links (what an earlier, failed run left behind); returns how many.
  size_t drain();

 private:
  MPI_Comm comm_;
  MPI_Comm collectives_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  uint64_t epoch_ = 0;
  std::vector<int> nodes_;
  std::deque<MpiRequest*> pending_;  // receives not yet matched, in posting order
};

// The message of an MPI error code.
std::string mpi_error_string(int code);

}  // namespace collcheck
