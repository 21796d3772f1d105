// The per-rank communicator API, shaped like torch.distributed / NCCL: every
// collective and point-to-point call (impl/collective.h), sync, or async with a
// Work to wait() on or test(). The all-reduce runs on the implementation under
// test; the other collectives on their reference implementations.
//
// Calls execute in the order they were issued on this rank, like kernels on one
// CUDA stream: async calls run on the stream's worker thread, and a sync call
// first waits for the async calls before it. The communicators of one rank's
// process groups may share one stream (CommOptions::stream), as a device runs
// the kernels of every communicator: a call of one group then waits for the
// calls issued before it in another, which is how opposite orders across groups
// deadlock. A Work destroyed without a successful wait() is recorded (see
// unwaited()), never silently dropped.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "harness/history/fingerprint.h"
#include "harness/history/flight_recorder.h"
#include "harness/peers/implementation.h"
#include "impl/algorithm.h"
#include "impl/collective.h"
#include "impl/dtype.h"
#include "impl/links.h"
#include "impl/semantics.h"

namespace collcheck {


// A rank's device: executes async calls in the order they were issued, on its
// own thread. Shared by the communicators of a rank's process groups.
class Stream;
std::shared_ptr<Stream> make_stream(int rank);
// The async calls of a caller-progress communicator that have not moved yet.
struct Deferred;
// Waits until every call issued on the stream so far has finished (a device
// synchronize); false when the deadline passed first.
bool synchronize(Stream& s, Deadline deadline);

struct CommOptions {
  // What executes each call: `impl` when set, else the implementation named by
  // `algorithm` (see make_implementation).
  std::string algorithm = "ring";
  // Every call must finish within this time from when it was issued; each wait
  // inside it uses the resulting deadline.
  std::chrono::milliseconds timeout{30000};
  ImplPtr impl;

  // Records every call (flight recorder), when set; not owned.
  FlightRecorder* recorder = nullptr;
  // Called with each call's fingerprint before the call starts (guarded mode:
  // cross-rank fingerprint checks). Throwing fails the call.
  std::function<void(const CallFingerprint&)> before_call;
  // Async calls compute into a staging buffer and the output holds a poison
  // pattern until wait(): a read before the wait then always shows up.
  bool poison_async = false;

  // The number of the process group this communicator serves, in transfer
  // tags (links.h); 0 for the whole world.
  uint64_t group_id = 0;
  // Where async calls execute; a stream of its own when null.
  std::shared_ptr<Stream> stream;
  // Records the point-to-point calls (their own sequence), when set; not owned.
  FlightRecorder* p2p_recorder = nullptr;
  // The progress rule of a host library without a progress thread (MPI): an
  // async call does not move until the rank next enters this communicator (a
  // call, or a wait or test of one of its calls); then its collectives run in
  // order on the communicator's own thread and its point-to-point calls post
  // at once. `stream` is not used: the device does not run these calls, and a
  // sync point-to-point call does not wait for the async ones before it.
  bool caller_progress = false;
  // MPI's matching rule: a blocking call never matches a non-blocking one
  // (GroupSpec::mpi_matching), so the fingerprint holds which it is.
  bool mpi_matching = false;

  CommOptions(std::string algo = "ring", std::chrono::milliseconds t = std::chrono::milliseconds(30000),
              ImplPtr i = nullptr)
      : algorithm(std::move(algo)), timeout(t), impl(std::move(i)) {}
};

// A call's fingerprint as a flight-recorder record (state Scheduled).

// The byte pattern of a poisoned output (see CommOptions::poison_async).
inline constexpr std::byte kPoisonByte{0xEB};

struct UnwaitedWork {
  CallFingerprint call;
  bool completed = false;  // whether the operation itself had finished when the Work was dropped
};

class Work {
 public:
  struct State;
  struct Log;
  Work(std::shared_ptr<State> state, std::shared_ptr<Log> log);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // True when the call has completed; throws its error if it failed. Does not
  // count as a wait.
  bool test();
  // Blocks until the call completes, at most until its deadline; throws the
  // call's error, or std::runtime_error when the deadline passes first.
  void wait();
  const CallFingerprint& call() const;

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Log> log_;
  bool waited_ = false;
};

// What one call does, besides its buffers.
struct CallSpec {
  Collective coll = Collective::AllReduce;
  size_t count = 0;  // per rank, as impl/collective.h defines for each collective
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  double scalar = 1.0;
  int peer = -1;     // broadcast: the root; send/recv: the other rank (ranks of this communicator)
  std::string_view tag;
};

class Communicator {
 public:
  // Throws ImplementationError for an unknown algorithm.
  Communicator(Links& links, CommOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, RedOp op, double scalar = 1.0,
                  std::string_view tag = {});
  std::unique_ptr<Work> all_reduce_async(const void* send, void* recv, size_t count, DType dtype, RedOp op,
                                         double scalar = 1.0, std::string_view tag = {});

  // Any call: send holds send_elements(), recv recv_elements() of the call
  // (impl/collective.h). Throws std::invalid_argument for a peer out of range.
  void call(const CallSpec& c, const void* send, void* recv);
  std::unique_ptr<Work> call_async(const CallSpec& c, const void* send, void* recv);

  // caller_progress: the rank enters the library once more (MPI_Finalize):
  // its async calls that have not moved yet start. A communicator destroyed
  // without it (the program failed) never runs them: their Works fail.
  void finish();

  // Every Work dropped without a successful wait(), in the order they were dropped.
  std::vector<UnwaitedWork> unwaited() const;
  // Collective calls issued (the sequence number of the last one); point-to-point
  // calls are numbered apart (p2p_calls_issued).
  uint64_t calls_issued() const;
  uint64_t p2p_calls_issued() const;

 private:
  CallFingerprint fingerprint(const CallSpec& c, bool async);
  Tag tag_of(const CallFingerprint& fp);
  FlightRecorder* recorder_of(const CallFingerprint& fp) const;
  // Guarded mode's check before a collective (options_.before_call); a rank
  // the check gave up waiting for is recorded as what `rec` was blocked on.
  void guard(const CallFingerprint& fp, FlightRecorder* rec, Tag tag);
  Links& links_;
  CommOptions options_;
  ImplPtr impl_;
  uint64_t seq_ = 0, p2p_seq_ = 0;
  std::map<std::pair<int, bool>, uint64_t> p2p_ordinal_;  // (peer, send) -> calls so far
  std::shared_ptr<Work::Log> log_;
  std::shared_ptr<Stream> stream_;
  std::shared_ptr<Deferred> deferred_;  // caller_progress: the calls that have not moved yet
};

}  // namespace collcheck
