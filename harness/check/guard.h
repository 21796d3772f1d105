// Guarded mode: before each collective, every rank's call fingerprint is
// checked against the other ranks'. In the thread world the table is shared
// memory: the rank that arrives second at a mismatching call sees it at once,
// without waiting for any timeout. (The MPI world does the same with a small
// extra exchange; see the peers issue.)
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "harness/history/fingerprint.h"
#include "harness/check/diagnosis.h"

namespace collcheck {

class GuardViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The guard as the scenario runner uses it; each world makes its own
// (World::call_guard): shared memory between threads, an exchange over MPI.
class CallGuard {
 public:
  virtual ~CallGuard() = default;
  // Before rank's call: returns when every rank's fingerprint of this call
  // agrees with it; throws GuardViolation naming the mismatch otherwise.
  virtual void check(int rank, const CallFingerprint& fp) = 0;
  // The first mismatch found, and when (seconds from the run's epoch).
  virtual std::optional<Diagnosis> violation() const = 0;
  virtual double violation_time() const = 0;
};

class FingerprintGuard final : public CallGuard {
 public:
  // `settle`: how long a rank that sees a mismatch may wait for more ranks'
  // fingerprints of that call, so that the odd ones out can be told apart.
  FingerprintGuard(int nranks, Clock::time_point epoch, std::chrono::milliseconds settle);
  // Records rank's fingerprint and compares it with every other rank's
  // fingerprint of the same sequence number. Returns at once when they agree.
  // On a mismatch it waits until a strict majority of the world agrees on one
  // fingerprint, or every rank has posted, or `settle` passes (the mismatching
  // ranks are already known then; only who is the odd one out may still be
  // open), and throws GuardViolation naming it.
  void check(int rank, const CallFingerprint& fp) override;
  // The first mismatch found, as a diagnosis over every fingerprint posted for
  // that call by now (after the run: every rank that reached it), and when it
  // was first seen (seconds from the epoch).
  std::optional<Diagnosis> violation() const override;
  double violation_time() const override;

 private:
  int nranks_;
  Clock::time_point epoch_;
  std::chrono::milliseconds settle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::map<int, CallFingerprint>> table_;
  std::optional<Diagnosis> classify(uint64_t seq) const;  // mu_ held
  std::optional<Diagnosis> violation_;
  double when_ = -1;
};

}  // namespace collcheck
