// The flight recorder: every rank records every call in a bounded ring buffer
// (sequence number, fingerprint, state, timestamps, and the transfer it is
// blocked on), and every transfer it makes (who, how many bytes, when, and a
// checksum of the bytes). It dumps one JSON file per rank, on a deadline, on a
// crash or on request; `collcheck analyze` reaches its diagnosis from those
// files alone (harness/diagnosis.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "harness/history/stall_meter.h"
#include "impl/checksum.h"
#include "impl/collective.h"
#include "impl/links.h"
#include "impl/semantics.h"

namespace collcheck {

enum class CallState : uint8_t { Scheduled, Started, Completed, Waited, Failed };
std::string_view call_state_name(CallState s);

struct CallRecord {
  uint64_t seq = 0;
  Collective coll = Collective::AllReduce;
  int peer = -1;  // broadcast: the root; send/recv: the other rank (global ranks in a dump)
  std::string tag;
  size_t count = 0;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  bool async = false;
  // MPI's matching rule (a group's `matching: mpi`): a blocking call never
  // matches a non-blocking one, so `async` is part of what ranks must agree on.
  bool blocking_matters = false;
  std::string impl;
  CallState state = CallState::Scheduled;
  double t_scheduled = -1, t_started = -1, t_completed = -1, t_waited = -1;  // seconds since the epoch
  double t_read = -1;  // the program read the output before the wait (async calls)
  double t_written = -1;  // the program wrote the call's buffer before the wait (async calls)
  std::string error;
};

// What a rank is blocked on right now (a wait inside a call).
struct BlockedOn {
  bool blocked = false;
  int peer = -1;
  bool send = false;
  Tag tag = 0;
  double since = -1;
};

struct TransferRecord {
  int src = -1, dst = -1;
  Tag tag = 0;
  uint64_t ordinal = 0;  // n-th transfer with this (src, dst, tag), from 0
  size_t bytes = 0;
  double t_posted = -1;     // the sender posted (src's record) or the receiver posted (dst's record)
  double t_completed = -1;  // completed on this side
  uint64_t checksum = 0;    // payload_checksum of the bytes, when completed
  bool send = false;        // recorded by the sender (true) or the receiver (false)
};

// A time when this rank was not running: its process was stopped, or one of
// its threads waited in the run queue (harness/history/stall_meter.h). On an
// oversubscribed node or under a sanitizer, a rank that is not running delays
// the transfers it is part of; the slow-link analysis leaves those times out.
struct Stall {
  double begin = -1, end = -1;  // seconds since the recorder's epoch
};

// The crash that made a dump: the rank whose thread died (-1: a thread that
// is not a rank's, such as a library's own), and the signal ("SEGV").
struct CrashNote {
  int rank = -1;
  std::string signal;
};

struct RankDump;  // below: one rank's dump, read back

class FlightRecorder {
 public:
  // Every live recorder is registered, so a crash can dump them all
  // (dump_live_recorders, harness/crash_handler.h).
  // `capacity` calls are kept, and `transfer_capacity` transfers (0: four per call).
  // `host`: the simulated world's scheduler, whose virtual time the records
  // take (no host stalls are measured then: none can change a verdict).
  FlightRecorder(int rank, int size, Clock::time_point epoch, size_t capacity = 4096, size_t transfer_capacity = 0,
                 const FiberHost* host = nullptr);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  int rank() const { return rank_; }
  double now() const;
  // Which run this is, the same on every rank: a run id (one per run, chosen
  // by the root) and what ran (a hash of the scenario). analyze refuses a set
  // of dumps from more than one run.
  void set_run(std::string id, std::string what);
  // How this rank's times were put on the run's time origin (World::clock_note).
  void set_clock(std::string aligned, double uncertainty_s);
  // Which communicator this recorder serves: a process group ("" for the
  // world), its world ranks, and whether it records the group's point-to-point
  // calls (numbered apart from its collectives, as PyTorch does).
  // caller_progress: the group's async calls move only inside its rank's calls
  // (GroupSpec::caller_progress), so a scheduled call may never have started.
  void set_group(std::string name, std::vector<int> members, bool p2p, bool caller_progress = false);

  void scheduled(const CallRecord& r);  // r.seq, fingerprint fields; state Scheduled
  void started(uint64_t seq);
  void completed(uint64_t seq, const std::string& error = "");
  void waited(uint64_t seq);
  void read_output(uint64_t seq);  // the program reads the call's output now
  void wrote_buffer(uint64_t seq);  // the program writes the call's buffer now (an in-place call's input and output)
  void blocked(int peer, bool send, Tag tag);
  void unblocked();
  // A wait that blocked() announced ended in an error: the record stays
  // blocked (the dump shows on what), the thread no longer waits.
  void wait_failed();
  void transfer(const TransferRecord& t);
  // When the rank's program ended (a failed call ends it): the calls it would
  // have issued next in this communicator, recorded but never run, at most
  // kNotRunKept of them (`more`: others followed). After a mismatch they let
  // the analysis align the ranks' call sequences: an extra call on one rank,
  // or calls another skipped. NCCL's host thread goes on enqueueing work
  // after a stuck call too; a Flight Recorder dump shows it as scheduled.
  void ended(std::vector<CallRecord> not_run, bool more);

  std::vector<CallRecord> calls() const;
  std::vector<TransferRecord> transfers() const;
  BlockedOn blocked_on() const;
  // The stalls of this process, and of the threads that recorded for this
  // rank, since the epoch (the meter runs while any recorder on the wall
  // clock lives), sorted, without overlaps.
  std::vector<Stall> stalls() const;

  // The dump as a struct (what analyze reads), and as JSON (what a file holds:
  // rank_dump_to_json of it).
  RankDump to_dump(const std::string& reason, const CrashNote* crash = nullptr) const;
  nlohmann::json to_json(const std::string& reason, const CrashNote* crash = nullptr) const;
  // Writes <dir>/rank-<r>.json atomically (a temporary file, then rename).
  void dump(const std::string& dir, const std::string& reason, const CrashNote* crash = nullptr) const;

 private:
  CallRecord* find(uint64_t seq);
  // The calling thread works for this rank: the stall meter watches it.
  void note_thread();
  int rank_, size_;
  uint64_t serial_;  // this recorder among all of the process's, ever
  Clock::time_point epoch_;
  const FiberHost* host_ = nullptr;
  size_t capacity_, transfer_capacity_;
  mutable std::mutex mu_;
  std::deque<CallRecord> calls_;
  std::deque<TransferRecord> transfers_;
  BlockedOn blocked_;
  uint64_t dropped_calls_ = 0;
  std::string run_id_, run_what_;
  std::string clock_aligned_;
  double clock_uncertainty_s_ = 0;
  std::string group_;
  std::vector<int> members_;
  bool p2p_ = false, caller_progress_ = false;
  bool ended_ = false, not_run_more_ = false;
  std::vector<CallRecord> not_run_;
  // note_thread's, watched by the stall meter, with their state there.
  std::vector<std::pair<pid_t, StallMeter::Thread*>> threads_;
  void set_polling(bool polling);
};
inline constexpr size_t kNotRunKept = 16;

// Where a recorder's dump goes in a dump directory: rank-<r>.json for the
// world's collectives, rank-<r>.p2p.json for its point-to-point calls,
// rank-<r>.<group>.json and rank-<r>.<group>.p2p.json for a process group's.
std::string dump_file_name(int rank, const std::string& group, bool p2p);

// One rank's dump, read back (for analyze).
struct RankDump {
  int rank = -1, size = 0;
  std::string reason;
  std::vector<CallRecord> calls;
  std::vector<TransferRecord> transfers;
  std::vector<Stall> stalls;  // absent in older dumps: none
  BlockedOn blocked_on;
  std::optional<CrashNote> crash;  // dumped by the crash handler
  std::string run_id, run_what;    // FlightRecorder::set_run; empty in older dumps
  // How this rank's times were put on rank 0's time origin, and how far off
  // they may be ("clock" in the file): empty when every rank ran in one process.
  std::string clock_aligned;
  double clock_uncertainty_s = 0;
  std::string group;               // FlightRecorder::set_group: "" for the world
  std::vector<int> members;        // the group's world ranks; empty for the world
  bool p2p = false;                // the point-to-point calls of the group
  bool caller_progress = false;    // the group's async calls move only inside its rank's calls ("progress": "caller")
  // FlightRecorder::ended: the calls the program would have issued next
  // (never run), and whether that list is the whole rest of the program:
  // false in a dump written before the program ended (a crash, older dumps)
  // or when more than kNotRunKept calls followed.
  std::vector<CallRecord> not_run;
  bool rest_known = false;
  bool ended = false;         // the program ended (not_run is present in the file)
  double dumped_at = -1;      // seconds from the epoch when the dump was taken
  uint64_t dropped_calls = 0;  // calls older than the recorder's capacity, not kept
};
RankDump rank_dump_from_json(const nlohmann::json& j);
nlohmann::json rank_dump_to_json(const RankDump& d);

// fnv1a and payload_checksum (a transfer's or a result's checksum): impl/checksum.h.

// Dumps every live recorder of this process into `dir` (rank-<r>.json each);
// returns how many were written.
int dump_live_recorders(const std::string& dir, const std::string& reason, const CrashNote* crash = nullptr);

// Links that record every transfer and every blocking wait into a recorder.
// The fault injectors' link wrappers sit below it, so it sees what the
// application posted and what the application received.
std::unique_ptr<Links> recording_links(Links& inner, FlightRecorder& rec);

}  // namespace collcheck
