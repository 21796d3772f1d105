// The session (issue 32): the one place where a command's world is made, and
// the one protocol every process of it keeps.
//
// - The world is made once, in main: threads (every rank in this process:
//   each job makes thread worlds of the sizes it runs, through world(p)) or
//   MPI (MPI_Init under mpirun: every process a rank of one world).
// - Rank 0 judges and reports; the others serve it (root(), from_root()).
// - Every process exits with one code, rank 0's (agree_exit_code).
// Rooms above the world are handed this, never a global: peers reach the MPI
// communicator through their links (Links::mpi()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/world/mpi_world.h"
#include "harness/world/sim_world.h"
#include "harness/world/world.h"

namespace collcheck {

// The largest world of ranks as threads that a command makes.
inline constexpr int kMaxThreadRanks = 512;

// A world for one run: one the session made for it (threads), or the MPI
// world itself, which outlives it.
class WorldLease {
 public:
  WorldLease(std::unique_ptr<World> owned, World* shared) : owned_(std::move(owned)), w_(owned_ ? owned_.get() : shared) {}
  World& operator*() const { return *w_; }
  World* operator->() const { return w_; }
  World* get() const { return w_; }

 private:
  std::unique_ptr<World> owned_;
  World* w_;
};

// The world a command asked for, as written: --world, and --world sim's
// schedule and link model.
struct WorldRequest {
  std::string world;            // sim, threads, mpi, or "": the command's default
  bool sim_by_default = false;  // the default is the simulated world (verify, replay, faults), else threads
  std::string schedule = "random", schedule_seed = "1", link_model;
};

class Session {
 public:
  // The thread world: nothing to start.
  Session() = default;
  // The simulated world (--world sim): every world a job makes is ranks as
  // fibers in virtual time, with these options.
  // `by_default`: no --world was given; a job whose implementation runs as
  // threads by default (Implementation::threads_by_default) makes thread
  // worlds instead, and the replay line needs no --world.
  static Session simulated(SimOptions opts, bool by_default);
  // The thread world asked for by name (--world threads): replay lines repeat it.
  static Session threads_asked();
  bool sim_by_default() const { return sim_ && sim_by_default_; }
  // Starts the MPI world (MPI_Init_thread). Throws std::runtime_error when MPI
  // cannot start, or when this process was not started by a launcher and
  // would be a world of 1 (a CI job that forgot mpirun tests nothing); a
  // world of 1 under `mpirun -np 1` sets `warning`.
  static Session start_mpi(int* argc, char*** argv, std::string& warning);
  // The session a request names, made once: checked (UsageError names --world,
  // the schedule or the link model), the simulated world (the default falls
  // back to threads in a build without fibers; naming sim there is refused),
  // MPI (start_mpi; its warning in `warning`), or threads.
  static Session open(const WorldRequest& w, int* argc, char*** argv, std::string& warning);

  WorldKind kind() const { return mpi_ ? WorldKind::Mpi : sim_ ? WorldKind::Sim : WorldKind::Threads; }
  bool is_mpi() const { return mpi_ != nullptr; }
  // "threads" or "mpi", as --world and a scenario's world.kind say it.
  std::string name() const { return mpi_ ? "mpi" : sim_ ? "sim" : "threads"; }
  bool is_sim() const { return sim_.has_value(); }
  const SimOptions* sim_options() const { return sim_ ? &*sim_ : nullptr; }
  // "as threads" or "as MPI processes", for headers.
  std::string how() const { return mpi_ ? "as MPI processes" : sim_ ? "as fibers in virtual time" : "as threads"; }
  // Whether this process judges and reports: rank 0, or the only process.
  bool root() const { return !mpi_ || mpi_->root(); }
  int rank() const { return mpi_ ? mpi_->rank() : 0; }
  // Processes in the job: the MPI world's size, 1 for threads.
  int processes() const { return mpi_ ? mpi_->size() : 1; }
  // Ranks this process holds in a world of p: p as threads, 1 under MPI.
  int ranks_here(int p) const { return mpi_ ? 1 : p; }
  // The largest world a job may ask for: the MPI world's size, or `threads`.
  int max_ranks(int threads) const { return mpi_ ? mpi_->size() : threads; }
  // What a printed replay line needs in front ("mpirun -np N ") and after the
  // command (" --world mpi"); empty for threads.
  std::string launcher() const;
  // (" --world sim" with its schedule and link model when not the defaults.)
  std::string world_flag() const;
  // Each rank's node id (MPI: from MPI_Comm_split_type); empty for threads.
  std::vector<int> nodes() const { return mpi_ ? mpi_->nodes() : std::vector<int>{}; }

  // A world of p ranks for one run: a new thread world, or the MPI world
  // (whose size mpirun fixed: p must be it).
  WorldLease world(int p) const;
  // How this session's jobs make worlds of their own sizes (a verify case, a
  // scenario's replay): the one factory of its kind. Under MPI these are
  // still thread worlds, for what runs in one process (the fault table).
  WorldFactory worlds() const;

  // Rank 0's text on every process (threads: `text`); nullopt if it did not
  // come by `deadline`.
  std::optional<std::string> from_root(const std::string& text, Deadline deadline) const;
  // Whether any process says yes (threads: `mine`). Collective.
  bool any_process(bool mine) const { return mpi_ ? mpi_->any_process(mine) : mine; }
  // Processes on this node that count (threads: 1). Collective.
  int processes_on_node(bool counts) const { return mpi_ ? mpi_->processes_on_node(counts) : 1; }
  // The code every process exits with: rank 0's. Collective.
  int agree_exit_code(int code) const { return mpi_ ? mpi_->agree_exit_code(code) : code; }
  // Ends the job at once with `code` (MPI_Abort; threads: std::exit).
  [[noreturn]] void abort(int code) const;
  // MPI_Finalize (threads: nothing).
  void finish() const;

  // The MPI world itself, for the executors that serve it (nullptr: threads).
  MpiWorld* mpi() const { return mpi_; }

 private:
  explicit Session(MpiWorld& w) : mpi_(&w) {}
  MpiWorld* mpi_ = nullptr;
  std::optional<SimOptions> sim_;
  bool sim_by_default_ = false;
  bool threads_asked_ = false;
};

// The up-front memory check of every job (issue 13): refuses with a
// UsageError, before any work, when this process needs `need` bytes and its
// node has less available. `why(have)` is the message, naming what would fit.
// In the MPI world `need` is one process's, every process on a node counts,
// and all agree: when any node is short, every process refuses.
void refuse_unless_fits(const Session& session, uint64_t need, const std::function<std::string(uint64_t have)>& why);

}  // namespace collcheck
