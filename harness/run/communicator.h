// The per-rank communicator API, shaped like torch.distributed / NCCL: a sync
// all_reduce, and an async one that returns a Work to wait() on or test().
//
// Calls execute in the order they were issued on this rank, like kernels on one
// CUDA stream: async calls run on the communicator's worker thread, and a sync
// call first waits for the async calls before it. A Work destroyed without a
// successful wait() is recorded (see unwaited()), never silently dropped.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "harness/history/fingerprint.h"
#include "harness/history/flight_recorder.h"
#include "harness/peers/implementation.h"
#include "impl/algorithm.h"
#include "impl/dtype.h"
#include "impl/links.h"
#include "impl/semantics.h"

namespace collcheck {


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

  // Every Work dropped without a successful wait(), in the order they were dropped.
  std::vector<UnwaitedWork> unwaited() const;
  uint64_t calls_issued() const;

  struct Engine;

 private:
  Links& links_;
  CommOptions options_;
  ImplPtr impl_;
  uint64_t seq_ = 0;
  std::shared_ptr<Work::Log> log_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace collcheck
