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

#include "harness/world/mpi_clock.h"
#include "harness/world/watched.h"
#include "harness/world/world.h"
#include "impl/mpi_links.h"

namespace collcheck {

// Every tag of the control channel (MpiWorld::send and recv) in one table: a
// tag shared by two protocols would let one read the other's messages.
namespace control_tag {
inline constexpr int kExitCode = 20;     // the exit code every rank agrees on
inline constexpr int kRunOutcome = 31;   // World::run: each rank's outcome to rank 0
inline constexpr int kRunVerdict = 32;   // ... rank 0's verdict back
inline constexpr int kGatherBytes = 33;  // World::gather_bytes: each rank's bytes to rank 0
inline constexpr int kGatherText = 34;   // World::gather: each rank's text to rank 0, run number first
inline constexpr int kBroadcast = 35;    // World::broadcast: rank 0's text to every rank, broadcast number first
inline constexpr int kClockSync = 36;    // World::start: a clock's ping-pongs with rank 0 (harness/world/mpi_clock.h)
// 1000 + (run number % 1000): the end of a rank's body in a run, which
// releases a rank that stalls on purpose (a later run cannot take an earlier
// run's message).
inline constexpr int kRunOverBase = 1000;
}  // namespace control_tag

// Whether this process runs in an MPI world (MPI initialized, not finalized):
// what a peer library asks before it reads MPI's own settings.
bool mpi_running();

// Polls a non-blocking MPI request until it completes: false at `by`.
bool complete_by(MPI_Request& req, Deadline by);

class MpiWorld final : public World {
 public:
  // MPI_Init_thread (MPI_THREAD_MULTIPLE: the async engine and the watchdog
  // call MPI from their own threads). Throws std::runtime_error if MPI gives less.
  static MpiWorld& init(int* argc, char*** argv);
  // The world, or nullptr outside it (--world threads). For harness/world
  // only: every other room is handed the world (the session makes it).
  static MpiWorld* get();

  int rank() const { return rank_; }

  // ---- World: a run of every process, one rank each ----
  std::string_view kind() const override { return "mpi"; }
  std::string_view how() const override { return "as MPI processes"; }
  int size() const override { return size_; }
  bool holds(int r) const override { return r == rank_; }
  bool root() const override { return rank_ == 0; }
  // Every process meets (two minutes at most) and takes rank 0's time
  // origin, in its own clock (harness/world/mpi_clock.h).
  Clock::time_point start() override;
  // How the last start aligned this process's clock with rank 0's:
  // "shared clock" (one host's CLOCK_MONOTONIC: exact) or "ping-pong" (an
  // estimate, off by at most its uncertainty).
  ClockNote clock_note() const override {
    return {clock_.shared ? "shared clock" : "ping-pong", static_cast<double>(clock_.offset.uncertainty_ns) * 1e-9};
  }
  // Each run gets the next run number, which keeps its transfers and control
  // messages apart from an earlier run's late ones. The root gathers every
  // rank's outcome and sends back whether all succeeded.
  // A run of the first `ranks` ranks uses links(ranks) and comm(ranks); the
  // other processes count the run too (so run numbers stay the same on every
  // rank) and return at once.
  WorldRun run(const RankFn& fn, std::chrono::milliseconds limit, int ranks = 0) override;
  std::optional<std::string> broadcast(const std::string& text, Deadline deadline) override;
  std::vector<std::optional<std::string>> gather(const std::vector<std::string>& local, Deadline deadline) override;
  void gather_bytes(const std::vector<std::byte*>& buffers, size_t bytes) override;
  // Before each call every rank sends its fingerprint to every other rank (on
  // a communicator of its own) and judges them all with a local
  // FingerprintGuard, so every rank reaches the same classification.
  std::unique_ptr<CallGuard> call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) override;

  std::string host() const { return host_; }
  // Each world rank's node (the lowest world rank sharing its memory, from
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), as the links' node_of gives it.
  const std::vector<int>& nodes() const { return nodes_; }
  // For ranks < p only.
  MpiLinks& links(int p);
  MPI_Comm comm(int p) const;
  MPI_Comm control() const { return control_; }

  // Point-to-point on the control communicator, with deadlines.
  void send(int to, int tag, const std::string& bytes, Deadline deadline);
  // nullopt when nothing arrived by the deadline.
  std::optional<std::string> recv(int from, int tag, Deadline deadline);

  // Collectives of every process (all alive: at start-up, before any run).
  // How many processes on this node pass `counts`; whether any process passes `mine`.
  int processes_on_node(bool counts);
  bool any_process(bool mine);

  // Collective: drops every message a failed run left in flight on the links
  // (a rank that sent what no one received), so that no later run can match
  // it: its tags' epoch has 8 bits and comes round again after 256 runs.
  // Two rounds of a barrier on the control channel: each process drains
  // through the first and after it, never during or after the second (which
  // lets the next run begin); returns the messages this process dropped.
  size_t drain_links(Deadline deadline);
  void drain(Deadline deadline) override { (void)drain_links(deadline); }

  // Every rank returns rank 0's `code` (rank 0 sends it; the others wait for
  // it, at most two minutes, and return 1 if it never comes).
  int agree_exit_code(int code);

  // Ends the job: every process exits with `code` (MPI_Abort).
  [[noreturn]] void abort(int code);
  void finalize();

 private:
  MpiWorld() = default;
  int rank_ = 0, size_ = 1;
  uint64_t runs_ = 0;  // World::run calls so far, the same count on every rank
  uint64_t casts_ = 0;  // World::broadcast calls so far, likewise
  bool broken_ = false;  // a body did not return within its run's limit
  WatchedThread* body_thread_ = new WatchedThread();  // never freed: a stuck body may hold it
  std::string host_;
  std::vector<int> nodes_;
  CommonEpoch clock_;
  MPI_Comm control_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> links_comm_, coll_comm_;  // [p-1]
  std::vector<std::unique_ptr<MpiLinks>> links_;  // [p-1]
};

}  // namespace collcheck
