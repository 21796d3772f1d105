// The one interface over where a run's ranks live. Two worlds implement it:
//   - ThreadWorld (thread_world.h): p ranks as threads of this process, over
//     the in-process transport; every rank is local and the process is the root;
//   - MpiWorld (mpi_world.h): one rank per process under mpirun, over MPI;
//     this process holds one rank, and rank 0's process is the root.
// The scenario runner, the sweep and the CLI's commands are written once over
// this interface; nothing above world/ asks which world it runs in.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "impl/links.h"

namespace collcheck {

// Where ranks live: threads of one process, one MPI process each, or fibers
// of one thread in virtual time (what an implementation can run in:
// Implementation::unsupported_world).
enum class WorldKind : uint8_t { Threads, Mpi, Sim };
// What a library that moves bytes on threads of its own (Gloo, NCCL) says of
// the simulated world.
inline constexpr const char* kNeedsOwnThreads =
    "moves its bytes on threads of its own, which the simulated world's fibers cannot schedule: use --world threads";

class CallGuard;  // harness/check/guard.h

// What one rank's body gets to work with.
class RankContext {
 public:
  virtual ~RankContext() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Links& links() = 0;
  // All ranks meet here; throws std::runtime_error naming the missing ranks if
  // they have not all arrived by `deadline`.
  virtual void barrier(Deadline deadline) = 0;
  // A rank that stops on purpose (a stalled rank in a scenario) waits here
  // until another rank fails or says its body is over (announce_end), or
  // `deadline`. Never throws.
  virtual void wait_for_others(Deadline deadline) = 0;
  // This rank's body is over: a rank waiting in wait_for_others may go. Only
  // runs with a rank that stalls on purpose need it (threads: a failure
  // already releases the waiter, so this does nothing).
  virtual void announce_end() = 0;
};

struct RankOutcome {
  bool returned = false;  // the body returned (normally or by throwing)
  bool ok = false;        // ...and did not throw
  std::string error;      // what() of the exception, if any
};

struct WorldRun {
  std::vector<RankOutcome> ranks;
  bool hung = false;  // some rank did not return within the limit
  bool ok() const;
  // One line per failed rank, or "" when everything passed.
  std::string failures() const;
};

class World {
 public:
  using RankFn = std::function<void(RankContext&)>;
  virtual ~World() = default;

  // "threads" or "mpi", as a scenario's world.kind says it.
  virtual std::string_view kind() const = 0;
  // How the ranks run, for headers: "as threads", "as MPI processes".
  virtual std::string_view how() const = 0;
  virtual int size() const = 0;
  // Whether rank `r`'s body runs in this process.
  virtual bool holds(int r) const = 0;
  // Whether this process holds rank 0, which gathers and judges.
  virtual bool root() const = 0;

  // The run's time origin, the same instant on every rank (MPI: every
  // process meets first, with a deadline, and takes rank 0's origin: exactly
  // on one host, to within a measured bound elsewhere; harness/world/mpi_clock.h).
  virtual Clock::time_point start() = 0;
  // How the last start put this process's clock on the origin: `aligned` is
  // empty where every rank reads one clock in one process.
  struct ClockNote {
    std::string aligned;
    double uncertainty_s = 0;
  };
  virtual ClockNote clock_note() const { return {}; }
  // The simulated world's scheduler (its virtual time), or nullptr: the
  // steady clock is the world's.
  virtual const FiberHost* fiber_host() const { return nullptr; }
  // The simulated world's schedule for the next runs comes from `seed` (mixed
  // with the world's own): a case's seed decides its interleaving, whatever
  // ran in this world before. Other worlds have no schedule to set.
  virtual void set_schedule_seed(uint64_t /*seed*/) {}
  // The world's time: virtual in the simulated world.
  Clock::time_point now() const { return fiber_host() != nullptr ? fiber_host()->now() : Clock::now(); }
  // Runs fn on every rank this process holds and returns when they have
  // returned, or when `limit` has passed (then hung). The root gets every
  // rank's outcome; another process learns only whether all of them succeeded.
  // Ranks that fail release the others: their transfers and barriers fail fast.
  // `ranks` (0: all) runs the first `ranks` ranks only, as a world of that
  // size (links, barrier); every process calls run all the same, and one that
  // holds none of them returns at once with no outcomes. A ThreadWorld runs
  // the first `ranks` on the same OS threads as ever (rank r on thread r),
  // the others sitting the run out.
  virtual WorldRun run(const RankFn& fn, std::chrono::milliseconds limit, int ranks = 0) = 0;

  // The root's `text` to every process, for a process that waits to be told
  // what to run next: the root passes it and gets it back; another process
  // gets the root's text, or nullopt if nothing came by `deadline`.
  // Collective, between runs: drops what a failed run left in flight, so no
  // later run can receive it (the MPI world; threads leave nothing behind).
  virtual void drain(Deadline /*deadline*/) {}
  virtual std::optional<std::string> broadcast(const std::string& text, Deadline deadline) = 0;

  // Each rank's text to the root: `local[r]` is read for the ranks this process
  // holds. The root gets every rank's text (nullopt for a rank whose text did
  // not come by `deadline`); another process gets an empty vector.
  virtual std::vector<std::optional<std::string>> gather(const std::vector<std::string>& local, Deadline deadline) = 0;
  // Rank r's `bytes` bytes at buffers[r] are copied to the root's buffers[r].
  virtual void gather_bytes(const std::vector<std::byte*>& buffers, size_t bytes) = 0;

  // Guarded mode: the check of every rank's call fingerprint before the call,
  // the same verdict on every rank (harness/check/guard.h).
  virtual std::unique_ptr<CallGuard> call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) = 0;
};

// The worlds a job makes for itself, of any size (a verify case, a scenario's
// replay): one kind per session, chosen once where the session is made
// (threads today; the simulated world of issue 33 plugs in here).
struct WorldSpec {
  int ranks = 1;
  // A size mismatch is what NCCL makes of it (a hang or wrong data), not an
  // error at the transfer: unguarded replays (InProcFabric::set_sizes_as_nccl).
  bool sizes_as_nccl = false;
};
using WorldFactory = std::function<std::unique_ptr<World>(const WorldSpec&)>;
// Ranks as threads of this process (thread_world.cc).
WorldFactory thread_worlds();

}  // namespace collcheck
