// The MPI world: one rank per process, under mpirun or srun, on any number of
// nodes. Each case of p <= world-size ranks runs on ranks 0..p-1, over
// communicators made once at start-up:
//   - links(p): MpiLinks for the reference algorithms, plugins and nemeses;
//   - comm(p):  a separate communicator for MPI_Allreduce and NCCL's set-up;
//   - control:  rank 0's commands and the ranks' results.
// Every wait has a deadline; MPI itself has none, so waits poll.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "impl/mpi_links.h"

namespace collcheck {

class MpiWorld {
 public:
  // MPI_Init_thread (MPI_THREAD_MULTIPLE: the async engine and the watchdog
  // call MPI from their own threads). Throws std::runtime_error if MPI gives less.
  static MpiWorld& init(int* argc, char*** argv);
  // The world, or nullptr outside it (--world threads).
  static MpiWorld* get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string host() const { return host_; }
  // For ranks < p only.
  MpiLinks& links(int p);
  MPI_Comm comm(int p) const;
  MPI_Comm control() const { return control_; }

  // Point-to-point on the control communicator, with deadlines.
  void send(int to, int tag, const std::string& bytes, Deadline deadline);
  // nullopt when nothing arrived by the deadline.
  std::optional<std::string> recv(int from, int tag, Deadline deadline);

  // Every rank returns rank 0's `code` (rank 0 sends it; the others wait for
  // it, at most two minutes, and return 1 if it never comes).
  int agree_exit_code(int code);

  // Ends the job: every process exits with `code` (MPI_Abort).
  [[noreturn]] void abort(int code);
  void finalize();

 private:
  MpiWorld() = default;
  int rank_ = 0, size_ = 1;
  std::string host_;
  MPI_Comm control_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> links_comm_, coll_comm_;  // [p-1]
  std::vector<std::unique_ptr<MpiLinks>> links_;  // [p-1]
};

}  // namespace collcheck
